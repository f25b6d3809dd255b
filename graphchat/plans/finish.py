"""The three finishes: solver (one model call writing a report), output (a rendered JSON map,
no model), silent (nothing to deliver).

The solver's payload is graph's (pipeline/mod.rs `solve`): the rendered `data`, or every step's
result when there is none; a key that does not render is `"(unavailable: <why>)"` and the run
still answers; the payload is pretty JSON with sorted keys, sent whole up to 400,000
characters and shrunk past that (and the cut is said); `system_prompt` is sent verbatim."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from graphchat.plans.model import Plan
from graphchat.template import EmptyData, MissingStep, TemplateError, render_text, render_value
from graphchat.workspace import builtin_prompt

if TYPE_CHECKING:
    from graphchat.plans.runtime import StepRunner as Runner

DATA_LIMIT_CHARS = 400_000  # graph's budget_payload MAX_CHARS
SHRINK_STRING, SHRINK_ITEMS = 500, 25  # graph's shrink(value, 500, 25) past the budget
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


def _unavailable(err: TemplateError) -> str:
    return f"(unavailable: {_message(err)})"


def render_solver_data(
    data: Any, scope: Mapping[str, Any], skipped: frozenset[str] = frozenset()
) -> tuple[Any, list[str]]:
    """Render the solver's data. As graph, a key that does not render becomes the string
    `"(unavailable: <why>)"` and the run goes on; one whose data ran out (or whose step was
    skipped) is also reported, so the solver can say what was not found."""
    if not isinstance(data, Mapping):
        try:
            return render_value(data, scope, step="solver"), []
        except TemplateError as err:
            missing = _not_found(err, skipped)
            return _unavailable(err), [missing] if missing else []
    out: dict[str, Any] = {}
    found: list[str] = []
    for key, value in data.items():
        try:
            out[key] = render_value(value, scope, step="solver")
        except TemplateError as err:
            out[key] = _unavailable(err)
            missing = _not_found(err, skipped)
            if missing is not None:
                found.append(f"{key}: {missing}")
    return out, found


def _shrink(value: Any, max_str: int, max_items: int) -> Any:
    """graph's `shrink`: strings cut to `max_str` characters (…), arrays to `max_items` items."""
    if isinstance(value, str):
        return value if len(value) <= max_str else value[:max_str] + "…"
    if isinstance(value, list):
        return [_shrink(v, max_str, max_items) for v in value[:max_items]]
    if isinstance(value, Mapping):
        return {k: _shrink(v, max_str, max_items) for k, v in value.items()}
    return value


def cut_data(data: Any, limit: int = DATA_LIMIT_CHARS) -> tuple[str, str | None]:
    """The payload as graph sends it (pretty JSON, sorted keys): whole while its compact JSON
    is within `limit` characters, else shrunk as graph's `budget_payload`; (text, note saying
    what was cut or None)."""
    import orjson

    pretty = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    if len(orjson.dumps(data, default=str)) <= limit:
        return orjson.dumps(data, option=pretty, default=str).decode(), None
    shrunk = _shrink(data, SHRINK_STRING, SHRINK_ITEMS)
    note = (
        f"The data was too large and was cut to fit: strings longer than {SHRINK_STRING} characters "
        f"were cut (marked with …) and arrays keep their first {SHRINK_ITEMS} items."
    )
    return orjson.dumps(shrunk, option=pretty, default=str).decode(), note


def solver_messages(
    query: str, data_text: str, *, system_prompt: str | None, notes: list[str], base: str = SOLVER_SYSTEM
) -> list[dict[str, Any]]:
    """`base`: the solver's system prompt (SOLVER_SYSTEM, or `prompts.solver`); a step's own
    `system_prompt` follows it."""
    system = base + (f"\n\n{system_prompt}" if system_prompt else "")
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
    if not solver.query_to_answer:  # graph asks its run's own query then
        query = f"Run the '{runner.plan.name or runner.plan.identifier}' plan"
    else:
        try:
            query = render_text(solver.query_to_answer, scope, step="solver")
        except TemplateError as err:  # graph sends the template as written
            query = solver.query_to_answer
            missing = _not_found(err, skipped)
            if missing is not None:
                notes.append(f"not found: {missing}")
    if solver.data is None:
        data: Any = {}
    else:
        data, missing_data = render_solver_data(solver.data, scope, skipped)
        notes.extend(f"not found: {m}" for m in missing_data)
    if data == {}:  # no data (or an empty map): every step's result, as graph
        data = {s.id: scope[s.id] for s in runner.plan.steps if s.id is not None and s.id in scope}
    data_text, cut = cut_data(data)
    if cut:
        notes.append(cut)
        runner.events.warning(
            f"plan '{runner.plan.identifier}': solver data over {DATA_LIMIT_CHARS} characters, shrunk"
        )
    llm = runner.llm("solver", None)
    # `system_prompt` is sent verbatim: graph does not render it.

    base = builtin_prompt(runner.settings, "solver", SOLVER_SYSTEM)
    messages = solver_messages(
        query, data_text, system_prompt=solver.system_prompt or None, notes=notes, base=base
    )
    completion = await llm.complete(messages, on_text=on_text, site="solver")
    return completion.content
