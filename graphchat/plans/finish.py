"""The three finishes: solver (one model call writing a report), output (a rendered JSON map,
no model), silent (nothing to deliver). Oversized solver data is cut, and the cut is said."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from graphchat.plans.model import Plan
from graphchat.plans.template import EmptyData, MissingStep, TemplateError, render_text, render_value

if TYPE_CHECKING:
    from graphchat.plans.runtime import StepRunner as Runner

DATA_LIMIT_CHARS = 60_000
SOLVER_SYSTEM = (
    "You write the final answer of a workflow that has already gathered its data. Answer the "
    "request using only the data provided; when something is missing or was cut, say so plainly "
    "instead of guessing. Write for a person reading a terminal: clear, direct, no preamble."
)


class FinishFailed(Exception):
    def __init__(self, where: str, message: str, *, empty_data: bool = False) -> None:
        super().__init__(message)
        self.where = where
        self.message = message
        self.empty_data = empty_data


def _message(err: TemplateError) -> str:
    return ("{{" + err.path + "}}: " + err.detail) if err.path is not None else err.detail


def render_output(plan: Plan, scope: Mapping[str, Any]) -> Any:
    """The `output` map rendered; any template error (EmptyData included) fails the run."""
    try:
        return render_value(plan.output, scope, step="output")
    except TemplateError as err:
        raise FinishFailed("output", _message(err), empty_data=isinstance(err, EmptyData)) from None


def _not_found(err: TemplateError, skipped: frozenset[str]) -> str | None:
    """What was not found, when `err` means "no data" rather than a plan defect: the data ran
    out, or the path reads a step that never ran because EmptyData stopped the steps early."""
    if isinstance(err, EmptyData):
        return _message(err)
    if isinstance(err, MissingStep) and err.root in skipped:
        return "{{" + str(err.path) + "}}: step " + str(err.root) + " did not run (the steps stopped early)"
    return None


def render_solver_data(
    data: Any, scope: Mapping[str, Any], skipped: frozenset[str] = frozenset()
) -> tuple[Any, list[str]]:
    """Render the solver's data; a key whose data ran out (or whose step was skipped) becomes
    null and is reported, so the solver can say what was not found. Other template errors are
    plan defects."""
    try:
        return render_value(data, scope, step="solver"), []
    except TemplateError as err:
        missing = _not_found(err, skipped)
        if missing is None:
            raise FinishFailed("solver", _message(err)) from None
        if not isinstance(data, Mapping):
            return None, [missing]
    out: dict[str, Any] = {}
    found: list[str] = []
    for key, value in data.items():
        try:
            out[key] = render_value(value, scope, step="solver")
        except TemplateError as err:
            missing = _not_found(err, skipped)
            if missing is None:
                raise FinishFailed("solver", _message(err)) from None
            out[key] = None
            found.append(f"{key}: {missing}")
    return out, found


def _shorten(value: Any, max_str: int, max_items: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= max_str else value[:max_str] + f"…[{len(value) - max_str} chars cut]"
    if isinstance(value, list):
        head = [_shorten(v, max_str, max_items) for v in value[:max_items]]
        if len(value) > max_items:
            head.append(f"…[{len(value) - max_items} more items cut]")
        return head
    if isinstance(value, Mapping):
        return {k: _shorten(v, max_str, max_items) for k, v in value.items()}
    return value


def cut_data(data: Any, limit: int = DATA_LIMIT_CHARS) -> tuple[str, str | None]:
    """The data as JSON text within `limit` chars: (text, note saying what was cut or None)."""
    import orjson

    text = orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str).decode()
    if len(text) <= limit:
        return text, None
    max_str, max_items = 4000, 200
    while True:
        shortened = _shorten(data, max_str, max_items)
        text = orjson.dumps(shortened, option=orjson.OPT_INDENT_2, default=str).decode()
        if len(text) <= limit or (max_str <= 40 and max_items <= 2):
            break
        max_str, max_items = max(40, max_str // 2), max(2, max_items // 2)
    note = (
        f"The data was too large and was cut to fit: strings longer than {max_str} characters and "
        f"arrays longer than {max_items} items were shortened (marked with …)."
    )
    if len(text) > limit:
        text = text[:limit] + "\n…[cut]"
    return text, note


def solver_messages(
    query: str, data_text: str, *, system_prompt: str | None, notes: list[str]
) -> list[dict[str, Any]]:
    system = SOLVER_SYSTEM + (f"\n\n{system_prompt}" if system_prompt else "")
    user = f"Request:\n{query}\n\nData:\n{data_text}"
    if notes:
        user += "\n\nNotes:\n" + "\n".join(f"- {n}" for n in notes)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


async def solve(
    runner: Runner,
    scope: Mapping[str, Any],
    *,
    not_found: str | None = None,
    on_text: Callable[[str], None] | None = None,
) -> str:
    """One call to the `solver` role with the rendered data; the report (streamed to `on_text`)."""
    solver = runner.plan.solver
    assert solver is not None
    notes: list[str] = []
    if not_found:
        notes.append(
            f"The workflow stopped early because data ran out ({not_found}); say what was not found."
        )
    # Steps after an EmptyData stop never ran: reading them is "not found", not a defect.
    skipped = frozenset(
        s.id for s in runner.plan.steps if not_found and s.id is not None and s.id not in scope
    )
    try:
        query = render_text(solver.query_to_answer, scope, step="solver")
    except TemplateError as err:
        missing = _not_found(err, skipped)
        if missing is None:
            raise FinishFailed("solver", _message(err)) from None
        query = solver.query_to_answer
        notes.append(f"not found: {missing}")
    data, missing_data = render_solver_data(solver.data, scope, skipped)
    notes.extend(f"not found: {m}" for m in missing_data)
    limit = DATA_LIMIT_CHARS
    settings = runner.settings
    if settings is not None and settings.max_tool_result_chars:
        limit = max(limit, settings.max_tool_result_chars * 3)
    data_text, cut = cut_data(data, limit)
    if cut:
        notes.append(cut)
        runner.events.warning(f"plan '{runner.plan.identifier}': solver data cut to {limit} characters")
    system_prompt = None
    if solver.system_prompt:
        try:
            system_prompt = render_text(solver.system_prompt, scope, step="solver")
        except TemplateError:
            system_prompt = solver.system_prompt
    llm = runner.llm("solver", None)
    messages = solver_messages(query, data_text, system_prompt=system_prompt, notes=notes)
    completion = await llm.complete(messages, on_text=on_text, site="solver")
    return completion.content
