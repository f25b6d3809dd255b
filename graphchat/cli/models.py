"""`graphchat models [--provider P]`: the chat models litellm knows, and whether this environment
holds the key each one's provider needs; the same key check serves `where`.

Nothing here imports litellm (~3 s): its model map is the JSON file the package ships (what
`litellm.model_cost` is with LITELLM_LOCAL_MODEL_COST_MAP=True), and which variables a
provider needs is read from the source of litellm's own `validate_environment` — its chain of
`custom_llm_provider == "…"` branches, each testing `"VAR" in os.environ` — parsed, not run.
A test holds this reading to litellm's answers.
"""

from __future__ import annotations

import argparse
import ast
import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphchat.cli.output import note, print_json
from graphchat.errors import EXIT_USAGE, GraphchatError

MODEL_MAP_FILE = "model_prices_and_context_window_backup.json"
CHAT_MODES = frozenset({"chat"})


# --- litellm's files, read without importing it --------------------------------------------------


def litellm_dir() -> Path | None:
    """The installed litellm package's folder (found, not imported)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def model_map() -> dict[str, dict[str, Any]]:
    """litellm's local model map: model name → its entry (provider, mode, limits, prices)."""
    import orjson

    folder = litellm_dir()
    if folder is None:
        return {}
    try:
        data = orjson.loads((folder / MODEL_MAP_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict) and k != "sample_spec"}


def chat_models(provider: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The chat models of the map, by provider then name; only `provider`'s when given."""
    rows = [
        (name, entry)
        for name, entry in model_map().items()
        if entry.get("mode") in CHAT_MODES and isinstance(entry.get("litellm_provider"), str)
    ]
    if provider:
        rows = [(n, e) for n, e in rows if _provider_matches(e["litellm_provider"], provider)]
    return sorted(rows, key=lambda row: (row[1]["litellm_provider"], row[0]))


def model_string(name: str, provider: str) -> str:
    """The map's name as a model string that names its provider: `gpt-4o-mini` →
    `openai/gpt-4o-mini` (the map's own name when it has a prefix, or its provider is not one
    litellm takes as a prefix, such as `vertex_ai-language-models`)."""
    if "/" in name or "-" in provider:
        return name
    return f"{provider}/{name}"


def _provider_matches(listed: str, wanted: str) -> bool:
    return listed == wanted or listed.startswith(wanted + "-")


# --- which keys a provider needs ---------------------------------------------------------------


@dataclass(frozen=True)
class Needs:
    """What litellm's `validate_environment` tests for one provider: `condition` (an `ast`
    expression over `"VAR" in os.environ`), and `missing`, the variables it names when the
    condition fails."""

    condition: Any
    missing: tuple[str, ...]
    variables: tuple[str, ...] = field(default=())  # every variable the condition reads


@dataclass(frozen=True)
class KeyStatus:
    ok: bool  # what litellm's `keys_in_environment` would say
    set: tuple[str, ...]  # the variables it reads that are set
    missing: tuple[str, ...]  # what litellm would name as missing
    needed: bool  # False: the provider needs no variable (or litellm does not check it)


@functools.lru_cache(maxsize=1)
def provider_needs() -> dict[str, Needs]:
    """provider → what it needs, from the source of `litellm.utils.validate_environment`."""
    folder = litellm_dir()
    if folder is None:
        return {}
    try:
        source = (folder / "utils.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    start = source.find("\ndef validate_environment(")
    if start < 0:
        return {}
    end = source.find("\ndef ", start + 1)
    try:
        tree = ast.parse(source[start : end if end > 0 else None])
    except SyntaxError:
        return {}
    function = tree.body[0]
    if not isinstance(function, ast.FunctionDef):
        return {}
    chain = next(
        (
            node.body[0]
            for node in ast.walk(function)
            if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "custom_llm_provider"
            and node.body
            and isinstance(node.body[0], ast.If)
        ),
        None,
    )
    table: dict[str, Needs] = {}
    branch: Any = chain
    while isinstance(branch, ast.If):
        providers = _providers_of(branch.test)
        needs = _needs_of(branch.body)
        if needs is not None:
            for provider in providers:
                table.setdefault(provider, needs)  # the first branch wins, as in an elif chain
        branch = branch.orelse[0] if len(branch.orelse) == 1 else None
    return table


def _providers_of(test: ast.expr) -> list[str]:
    """The providers a branch's test names: `== "x"`, `in ["x", "y"]`, joined with `or`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return [p for value in test.values for p in _providers_of(value)]
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "custom_llm_provider"
        and len(test.ops) == 1
    ):
        right = test.comparators[0]
        if (
            isinstance(test.ops[0], ast.Eq)
            and isinstance(right, ast.Constant)
            and isinstance(right.value, str)
        ):
            return [right.value]
        if isinstance(test.ops[0], ast.In) and isinstance(right, ast.List | ast.Tuple | ast.Set):
            return [e.value for e in right.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _needs_of(body: list[ast.stmt]) -> Needs | None:
    check = next((s for s in body if isinstance(s, ast.If)), None)
    if check is None or _variables(check.test) is None:
        return None
    missing: list[str] = []
    for statement in check.orelse:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.args):
            continue
        if call.func.attr == "append" and isinstance(call.args[0], ast.Constant):
            missing.append(str(call.args[0].value))
        elif call.func.attr == "extend" and isinstance(call.args[0], ast.List):
            missing += [str(e.value) for e in call.args[0].elts if isinstance(e, ast.Constant)]
    return Needs(check.test, tuple(missing), tuple(_variables(check.test) or ()))


def _variables(test: ast.expr) -> list[str] | None:
    """The variables a condition reads, or None when it is not made of `"VAR" in os.environ`,
    `and`, `or`."""
    if isinstance(test, ast.BoolOp):
        found: list[str] = []
        for value in test.values:
            inner = _variables(value)
            if inner is None:
                return None
            found += inner
        return found
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and isinstance(test.left, ast.Constant)
        and isinstance(test.left.value, str)
        and ast.unparse(test.comparators[0]) == "os.environ"
    ):
        return [test.left.value]
    return None


def _holds(test: ast.expr, environ: Mapping[str, str]) -> bool:
    if isinstance(test, ast.BoolOp):
        results = [_holds(value, environ) for value in test.values]
        return all(results) if isinstance(test.op, ast.And) else any(results)
    assert isinstance(test, ast.Compare) and isinstance(test.left, ast.Constant)
    return str(test.left.value) in environ


def needs_for(provider: str) -> Needs | None:
    table = provider_needs()
    if provider in table:
        return table[provider]
    head = provider.split("-", 1)[0]  # the map's `vertex_ai-language-models` is `vertex_ai`
    return table.get(head)


def key_status(
    provider: str,
    environ: Mapping[str, str] | None = None,
    *,
    api_key: str | None = None,
    api_base: str | None = None,
) -> KeyStatus:
    """Whether `provider`'s variables are set, as litellm's `validate_environment` decides
    (a configured `api_key` or `api_base` drops the variables named after it)."""
    env = os.environ if environ is None else environ
    needs = needs_for(provider)
    if needs is None:
        return KeyStatus(ok=True, set=(), missing=(), needed=False)
    present = tuple(v for v in dict.fromkeys(needs.variables) if v in env)
    missing: tuple[str, ...] = () if _holds(needs.condition, env) else needs.missing
    if api_key is not None:
        missing = tuple(k for k in missing if "api_key" not in k.lower())
    if api_base is not None:
        missing = tuple(k for k in missing if "api_base" not in k.lower())
    return KeyStatus(ok=not missing, set=present, missing=missing, needed=True)


def provider_of(model: str) -> str:
    """The provider serving a litellm model string: its prefix, else the model map's entry
    (`gpt-4o-mini` → openai, `claude-…` → anthropic), else openai."""
    if "/" in model:
        return model.split("/", 1)[0]
    entry = model_map().get(model)
    if entry and isinstance(entry.get("litellm_provider"), str):
        return str(entry["litellm_provider"])
    # Tab completion imports this module: imported when used
    from graphchat.llm.keys import provider_of as guess

    return guess(model)


# --- the command -----------------------------------------------------------------------------


def run_models(args: argparse.Namespace) -> int:
    if litellm_dir() is None:
        raise GraphchatError("litellm is not installed here: no model map to read", 1)
    rows = chat_models(args.provider)
    if args.provider and not rows:
        import difflib

        providers = sorted({e["litellm_provider"] for _, e in chat_models()})
        close = difflib.get_close_matches(args.provider, providers, n=3, cutoff=0.6)
        raise GraphchatError(
            f"no chat models of provider {args.provider!r} in litellm's model map",
            EXIT_USAGE,
            hint=f"did you mean: {', '.join(close)}?" if close else f"providers: {', '.join(providers)}",
        )
    statuses: dict[str, KeyStatus] = {}
    for _, entry in rows:
        provider = entry["litellm_provider"]
        if provider not in statuses:
            statuses[provider] = key_status(provider)
    if args.json:
        models = []
        for name, entry in rows:
            status = statuses[entry["litellm_provider"]]
            mark = _mark(entry["litellm_provider"], status)
            item: dict[str, Any] = {
                "model": model_string(name, entry["litellm_provider"]),
                "provider": entry["litellm_provider"],
                "key_set": mark == "✓" if mark != "?" else None,  # None: litellm does not check
            }
            if status.missing:
                item["keys_missing"] = list(status.missing)
            for key in (
                "max_input_tokens",
                "max_output_tokens",
                "input_cost_per_token",
                "output_cost_per_token",
            ):
                if entry.get(key) is not None:
                    item[key] = entry[key]
            models.append(item)
        print_json({"models": models, "count": len(models)})
        return 0
    rows = [(model_string(name, entry["litellm_provider"]), entry) for name, entry in rows]
    marks = {provider: _mark(provider, status) for provider, status in statuses.items()}
    width = max((len(name) for name, _ in rows), default=0)
    lines = []
    for name, entry in rows:
        mark = marks[entry["litellm_provider"]]
        window = entry.get("max_input_tokens")
        context = f"{_tokens(window)} in" if isinstance(window, int) else ""
        lines.append(f"{mark} {name:<{width}}  {entry['litellm_provider']:<16} {context}".rstrip())
    sys.stdout.write("\n".join(lines) + ("\n" if lines else ""))
    usable = sorted(p for p, m in marks.items() if m == "✓")
    count = {m: sum(1 for _, e in rows if marks[e["litellm_provider"]] == m) for m in ("✓", "?")}

    note(
        f"{len(rows)} chat models; ✓ {count['✓']} whose provider's key is set here"
        + (f" ({', '.join(usable)})" if usable else "")
        + (f"; ? {count['?']} whose provider's key litellm does not check" if count["?"] else "")
        + ". Use one with -m/--model or GRAPHCHAT_MODEL."
    )
    return 0


def _mark(provider: str, status: KeyStatus) -> str:
    """✓ the key is set, blank it is not, ? litellm does not say which variable the provider
    needs (✓ all the same when its conventional `<PROVIDER>_API_KEY` is set)."""
    if status.needed:
        return "✓" if status.ok else " "
    return "✓" if os.environ.get(f"{provider.upper()}_API_KEY") else "?"


def _tokens(count: int) -> str:
    if count >= 1_000_000 and count % 1_000_000 == 0:
        return f"{count // 1_000_000}M"
    if count >= 1000:
        return f"{count // 1000}k"
    return str(count)
