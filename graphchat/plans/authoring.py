"""Plan authoring: one edit at a time to a plan file, accepted only if it adds no problem.

The one core under `graphchat plan new/set/unset/step …` (and the workbench and `mcp serve`
after it). A plan file is read as round-trip YAML (ruamel.yaml), so its comments and key order
survive an edit; the edit is applied to that document; the plan's static problems — what the
loader reports: structure, templates, references, control steps, not the catalog — are taken
before and after, and the edit is written back (atomically) only if it adds none. Problems the
plan already had never block an edit: they come back as `pre_existing`. Problems are compared
by their text without the file name, with a renamed step's old id read as its new one, so
inserting a step never makes an old problem look new.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from graphchat.errors import GraphchatError
from graphchat.fsutil import write_atomic
from graphchat.plans.discovery import _looks_like_path, discover
from graphchat.plans.loader import PLAN_FIELDS, load_plan, load_plan_data
from graphchat.plans.model import PlanLoadError
from graphchat.plans.validate import known_servers, validate_against_catalog

PLAN_ATTRIBUTES = (
    "name",
    "description",
    "identifier",
    "exemplars",
    "requires_servers",
    "input_schema",
    "solver",
    "output",
)
STEP_ATTRIBUTES = ("tool", "input", "reasoning")
JSON_ATTRIBUTES = ("input_schema", "solver", "output")
LIST_ATTRIBUTES = ("exemplars", "requires_servers")
REQUIRED_ATTRIBUTES = ("identifier", "name", "description")
BODY_KEYS = ("then", "else", "do")
_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IDENTIFIER = re.compile(r"^[a-zA-Z0-9_-]+$")


class AuthoringError(Exception):
    """A usage mistake (unknown attribute, bad value, missing file): exit 2, file untouched."""


class EditRefused(Exception):
    """An edit that cannot apply (unknown step, last step, a file holding another plan): exit 1."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class EditRejected(Exception):
    """The edit would add validation problems; the file is unchanged."""

    def __init__(self, introduced: list[str], pre_existing: list[str]) -> None:
        super().__init__("edit rejected — it would introduce new validation problems (the file is unchanged)")
        self.introduced = introduced
        self.pre_existing = pre_existing


@dataclass
class Edited:
    """An accepted edit: where it was written, what it did, what is still wrong."""

    path: Path
    summary: dict[str, Any]
    pre_existing: list[str] = field(default_factory=list)
    renamed_from: Path | None = None


# --- the document -------------------------------------------------------------------------------


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long line of the author's
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def read_document(path: Path) -> CommentedMap:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AuthoringError(f"no plan file {path}") from None
    except OSError as exc:
        raise AuthoringError(f"cannot read {path}: {exc.strerror}") from None
    return parse_document(text, str(path))


def parse_document(text: str, source: str) -> CommentedMap:
    """A plan document's text as the editable round-trip mapping; `source` names it in errors."""
    try:
        data = _yaml().load(text)
    except Exception as exc:  # ruamel's errors carry the line; one line is enough here
        raise EditRefused(
            f"{source}: not valid YAML, so it cannot be edited: {str(exc).splitlines()[0]}"
        ) from None
    if not isinstance(data, CommentedMap):
        raise EditRefused(f"{source}: not a plan (a mapping with identifier, name, description, steps)")
    return data


def dump_document(data: CommentedMap) -> str:
    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue()


def plain(value: Any) -> Any:
    """Round-trip data as plain JSON-like values (what the loader expects)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def static_problems(data: Any, source: str = "<plan>") -> list[str]:
    """The loader's problems of this document, without the file name."""
    try:
        load_plan_data(plain(data), source)
    except PlanLoadError as err:
        prefix = f"{source}: "
        return [p.removeprefix(prefix) for p in err.problems]
    return []


# --- finding steps -------------------------------------------------------------------------------


def _steps(data: CommentedMap) -> list[Any]:
    steps = data.get("steps")
    if steps is None:
        steps = CommentedSeq()
        data["steps"] = steps
    if not isinstance(steps, list):
        raise EditRefused("`steps` is not a list; fix the file by hand first")
    return steps


def _tool_key(step: Any) -> str:
    return "toolName" if "toolName" in step and "tool_name" not in step else "tool_name"


def _walk(steps: Any) -> list[tuple[Any, int, Any]]:
    """(containing list, index, step) for every step with bodies included, in file order."""
    out: list[tuple[Any, int, Any]] = []
    if not isinstance(steps, list):
        return out
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        out.append((steps, index, step))
        inputs = step.get("input")
        if isinstance(inputs, dict):
            for key in BODY_KEYS:
                body = inputs.get(key)
                if isinstance(body, list):
                    out.extend(_walk(body))
    return out


def all_steps(data: CommentedMap) -> list[Any]:
    """Every step of the document, bodies included, in file order."""
    return [step for _, _, step in _walk(data.get("steps"))]


def step_ids(data: CommentedMap) -> list[str]:
    return [str(step["id"]) for _, _, step in _walk(data.get("steps")) if step.get("id") is not None]


def _find(data: CommentedMap, step_id: str) -> tuple[Any, int, Any]:
    for found in _walk(data.get("steps")):
        if str(found[2].get("id")) == step_id:
            return found
    available = step_ids(data)
    raise EditRefused(
        f"no step {step_id!r} in this plan (steps: {', '.join(available) or 'none'})",
        availableSteps=available,
    )


# --- renaming references -------------------------------------------------------------------------


def _reference(old: str) -> re.Pattern[str]:
    """`{{old.x}}`, `{{ old }}`, `{{#old.items}}`, `{{/old.items}}`, `{{^old}}`, `{{&old}}`."""
    return re.compile(r"(\{\{[#^/&]?\s*)" + re.escape(old) + r"(?=[.\s}|\[])")


def _rewrite(value: Any, pattern: re.Pattern[str], new: str) -> Any:
    if isinstance(value, str):
        changed = pattern.sub(lambda m: m.group(1) + new, value)
        if changed == value:
            return value
        return type(value)(changed) if type(value) is not str and _same_kind(value) else changed
    if isinstance(value, dict):
        for key in list(value.keys()):
            value[key] = _rewrite(value[key], pattern, new)
        return value
    if isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = _rewrite(item, pattern, new)
        return value
    return value


def _same_kind(value: str) -> bool:
    try:
        type(value)(value)
    except Exception:
        return False
    return True


# --- edits ---------------------------------------------------------------------------------------


def _json_value(attribute: str, value: Any) -> Any:
    if attribute in ("input_schema", "solver", "output", "input") and not isinstance(value, dict):
        raise AuthoringError(f"{attribute} must be a JSON object")
    return value


def set_attribute(data: CommentedMap, attribute: str, values: list[Any]) -> dict[str, Any]:
    if attribute not in PLAN_ATTRIBUTES:
        raise AuthoringError(f"unknown plan attribute {attribute!r} (one of: {', '.join(PLAN_ATTRIBUTES)})")
    if attribute in LIST_ATTRIBUTES:
        if not values or not all(isinstance(v, str) for v in values):
            raise AuthoringError(f"{attribute} takes one or more strings")
        _put(data, attribute, CommentedSeq(values))
    elif attribute in JSON_ATTRIBUTES:
        if len(values) != 1:
            raise AuthoringError(f"{attribute} takes one JSON value (inline, @file or -)")
        _put(data, attribute, _json_value(attribute, values[0]))
        other = {"solver": "output", "output": "solver"}.get(attribute)
        if other and other in data:
            del data[other]  # the two finishes exclude each other
    else:
        if len(values) != 1 or not isinstance(values[0], str):
            raise AuthoringError(f"{attribute} takes one string")
        _put(data, attribute, values[0])
    return {"attribute": attribute}


CANONICAL = PLAN_FIELDS  # a new key goes where graph's files keep it (the loader's order)


def _put(data: CommentedMap, key: str, value: Any) -> None:
    """Set `key`; a new key goes where graph's files keep it (after the keys that precede it)."""
    if key in data or key not in CANONICAL:
        data[key] = value
        return
    earlier = set(CANONICAL[: CANONICAL.index(key)])
    position = 0
    for index, existing in enumerate(data.keys()):
        if existing in earlier:
            position = index + 1
    data.insert(position, key, value)


def unset_attribute(data: CommentedMap, attribute: str) -> dict[str, Any]:
    if attribute not in PLAN_ATTRIBUTES:
        raise AuthoringError(f"unknown plan attribute {attribute!r} (one of: {', '.join(PLAN_ATTRIBUTES)})")
    if attribute in REQUIRED_ATTRIBUTES:
        raise AuthoringError(f"{attribute} is required; change it with `plan set` instead")
    data.pop(attribute, None)
    return {"attribute": attribute}


def add_step(
    data: CommentedMap,
    step_id: str,
    tool: str,
    inputs: Any,
    *,
    reasoning: str | None = None,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    steps = _steps(data)
    step = CommentedMap()
    step["id"] = step_id
    step["tool_name"] = tool
    step["input"] = _json_value("input", inputs)
    if reasoning is not None:
        step["reasoning"] = reasoning
    if before is not None or after is not None:
        anchor = before if before is not None else after
        assert anchor is not None
        container, index, _ = _find(data, anchor)
        where = index if before is not None else index + 1
        container.insert(where, step)
        top = container is steps
        return {"id": step_id, "index": where if top else None, "steps": len(steps)}
    steps.append(step)
    return {"id": step_id, "index": len(steps) - 1, "steps": len(steps)}


def update_step(data: CommentedMap, step_id: str, attribute: str, value: Any) -> dict[str, Any]:
    if attribute not in STEP_ATTRIBUTES:
        raise AuthoringError(f"unknown step attribute {attribute!r} (one of: {', '.join(STEP_ATTRIBUTES)})")
    _, _, step = _find(data, step_id)
    if attribute == "tool":
        if not isinstance(value, str) or not value:
            raise AuthoringError("tool takes one tool name")
        step[_tool_key(step)] = value
    elif attribute == "input":
        step["input"] = _json_value("input", value)
    else:
        if not isinstance(value, str):
            raise AuthoringError("reasoning takes one string")
        step["reasoning"] = value
    return {"id": step_id, "attribute": attribute}


def unset_step(data: CommentedMap, step_id: str, attribute: str) -> dict[str, Any]:
    if attribute not in STEP_ATTRIBUTES:
        raise AuthoringError(f"unknown step attribute {attribute!r} (one of: {', '.join(STEP_ATTRIBUTES)})")
    if attribute in ("tool", "input"):
        raise AuthoringError(f"a step's {attribute} is required; change it with `plan step update` instead")
    _, _, step = _find(data, step_id)
    step.pop("reasoning", None)
    return {"id": step_id, "attribute": attribute}


def rename_step(data: CommentedMap, step_id: str, new_id: str) -> dict[str, Any]:
    if not _ID.match(new_id):
        raise AuthoringError(f"step id {new_id!r} must be letters, digits and _, not starting with a digit")
    _, _, step = _find(data, step_id)
    step["id"] = new_id
    pattern = _reference(step_id)
    for key in ("steps", "solver", "output"):
        if key in data:
            data[key] = _rewrite(data[key], pattern, new_id)
    return {"id": new_id, "renamedFrom": step_id}


def remove_step(data: CommentedMap, step_id: str) -> dict[str, Any]:
    container, index, _ = _find(data, step_id)
    if container is _steps(data) and len(container) == 1:
        raise EditRefused(f"step {step_id!r} is the plan's last step; a plan needs at least one")
    del container[index]
    return {"id": step_id, "steps": len(_steps(data))}


# --- applying ------------------------------------------------------------------------------------


def _renamed(problem: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        problem = re.sub(rf"\b{re.escape(old)}\b", new, problem)
    return problem


def edit_document(
    data: CommentedMap,
    edit: Callable[[CommentedMap], dict[str, Any]],
    *,
    renames: dict[str, str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Apply `edit` to `data` in place and return (its summary, the problems still there), or
    raise EditRejected when it adds a static problem. `data` may be half-edited after a
    rejection or a refusal: a caller that keeps the document works on a copy (`edited`)."""
    before = static_problems(data)
    summary = edit(data)
    after = static_problems(data)
    known = {_renamed(p, renames or {}) for p in before}
    introduced = [p for p in after if p not in known]
    if introduced:
        raise EditRejected(introduced, before)
    return summary, after


def edited(
    data: CommentedMap,
    edit: Callable[[CommentedMap], dict[str, Any]],
    *,
    renames: dict[str, str] | None = None,
) -> tuple[CommentedMap, dict[str, Any], list[str]]:
    """The in-memory form of `apply_edit` (the workbench's draft): a new document with `edit`
    applied, its summary and the problems still there; `data` itself is never changed."""
    import copy

    draft = copy.deepcopy(data)
    summary, after = edit_document(draft, edit, renames=renames)
    summary.setdefault("steps", len(draft.get("steps") or []))
    return draft, summary, after


def apply_edit(
    path: Path,
    edit: Callable[[CommentedMap], dict[str, Any]],
    *,
    renames: dict[str, str] | None = None,
) -> Edited:
    """Read `path`, apply `edit`, write it back if it adds no static problem (else EditRejected)."""
    data = read_document(path)
    old_identifier = data.get("identifier")
    summary, after = edit_document(data, edit, renames=renames)
    target, renamed_from = path, None
    identifier = data.get("identifier")
    if identifier != old_identifier and isinstance(identifier, str) and _IDENTIFIER.match(identifier):
        target = path.with_name(f"{identifier}{path.suffix or '.yaml'}")
        if target.exists():
            raise EditRefused(f"{target} already exists; the identifier {identifier!r} is taken")
        renamed_from = path
    write_atomic(target, dump_document(data), keep_mode=True)
    summary.setdefault("steps", len(data.get("steps") or []))
    return Edited(target, summary, after, renamed_from)


def locate(plans_dir: Path, target: str) -> Path:
    """NAME (a plan of the workspace, loading or not) or PATH → the file to edit."""
    if _looks_like_path(target):
        path = Path(target).expanduser()
        if not path.is_file():
            raise AuthoringError(f"no plan file {target}")
        return path
    index = discover(plans_dir)
    found = index.plans[target].path if target in index.plans else None
    if found is not None:
        return Path(found)
    for path in index.errors:
        if path.stem == target or index.raw_ids.get(path) == target:
            return Path(path)
    try:
        index.get(target)  # "unknown plan" with the close names
    except GraphchatError as exc:
        raise AuthoringError(exc.message) from None
    raise AuthoringError(f"unknown plan {target!r}")


def envelope(done: Edited, notes: list[str] | None = None) -> dict[str, Any]:
    """graph's envelope of an accepted edit."""
    out: dict[str, Any] = {"ok": True, **done.summary, "savedTo": str(done.path)}
    if done.renamed_from is not None:
        out["renamedFrom"] = str(done.renamed_from)
    if done.pre_existing:
        out["preExistingProblems"] = done.pre_existing
        out["note"] = "edit applied; the plan is still invalid, but only from pre-existing problems"
    if notes:
        out["notes"] = notes
    return out


def rejection(exc: EditRejected) -> dict[str, Any]:
    out: dict[str, Any] = {"ok": False, "error": str(exc), "problemsIntroduced": exc.introduced}
    if exc.pre_existing:
        out["preExistingProblems"] = exc.pre_existing
    return out


def catalog_notes(path: Path, catalog: Any, settings: Any) -> list[str]:
    """What the catalog says of an edited plan (an unknown tool…): reported, never a rejection."""
    try:
        plan = load_plan(path)
    except PlanLoadError:
        return []
    try:
        servers = known_servers(catalog, settings.catalog_dir / "servers.yaml")
        return validate_against_catalog(
            plan,
            catalog,
            servers=servers,
            plans=discover(settings.plans_dir).plans,
            soft_required_servers=True,
        )
    except Exception:  # the catalog's own problems are its commands' to report
        return []


def new_plan(path: Path, identifier: str, name: str | None, description: str | None) -> Edited:
    """A new plan file holding only its header (no steps yet: a problem it may start with)."""
    if not _IDENTIFIER.match(identifier):
        raise AuthoringError(f"identifier {identifier!r} must use only [a-zA-Z0-9_-]")
    if path.exists():
        raise EditRefused(
            f"{path} already exists; edit it with `plan set` / `plan step`, or choose another id"
        )
    data = CommentedMap()
    data["identifier"] = identifier
    data["name"] = name or identifier.replace("_", " ").replace("-", " ").capitalize()
    data["description"] = description or f"{data['name']}."
    data["steps"] = CommentedSeq()
    write_atomic(path, dump_document(data))
    return Edited(path, {"id": identifier, "steps": 0}, static_problems(data))
