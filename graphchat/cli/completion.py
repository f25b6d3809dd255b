"""`graphchat completion bash|zsh|fish`: shell completion, generated from the parser.

The script a shell loads is argcomplete's: on Tab it runs `graphchat` with `_ARGCOMPLETE` set,
and `main` hands the parser to `complete()` here before anything else happens. Commands and
flags come from the parser itself; the values below come from the workspace the command line
names (`--home`, else the usual search), read from its files: plan identifiers from `plans/`,
thread ids (with titles) from `threads/`, tool names from the catalog as `tools list` builds it
without starting a server (cached tool lists), request ids from `requests/`, model names from
litellm's model map file. Neither litellm nor the MCP SDK is imported, nothing is started, and
a completer that fails offers nothing rather than breaking the shell.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphchat.cli.main import build_parser
from graphchat.cli.models import chat_models, model_string

Completer = Callable[..., Any]


def run_completion(args: argparse.Namespace) -> int:
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["graphchat"], shell=args.shell))
    return 0


def complete() -> None:
    """Answer the shell's completion request (`_ARGCOMPLETE` is set) and leave the process."""
    import argcomplete

    parser = build_parser()
    attach_completers(parser)
    argcomplete.autocomplete(parser, always_complete_options=False)
    sys.exit(0)  # not reached when argcomplete answered; a request it could not read ends here


# --- which argument completes from what --------------------------------------------------------


def _plans(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    # Tab completion: only what the completed word needs
    from graphchat.plans.discovery import _declared_identifier, plan_files

    folder = _workspace(parsed_args) / "plans"
    if not folder.is_dir():
        return []
    names = (_declared_identifier(path) for path in plan_files(folder))
    return sorted({name for name in names if name and name.startswith(prefix)})


def _threads(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> dict[str, str]:
    """Thread ids, the most recent first, each with its title (shown by zsh and fish)."""
    import orjson

    folder = _workspace(parsed_args) / "threads"
    found: list[tuple[str, str, str]] = []
    for path in folder.iterdir() if folder.is_dir() else ():
        if not path.name.startswith(prefix) or path.name.startswith(".") or not path.is_dir():
            continue
        try:
            meta = orjson.loads((path / "meta.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            meta = {}
        meta = meta if isinstance(meta, dict) else {}
        found.append((str(meta.get("updated_at") or ""), path.name, str(meta.get("title") or "")))
    found.sort(reverse=True)
    return {thread_id: title for _, thread_id, title in found}


def _tools(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    # Tab completion: only what the completed word needs
    from graphchat.sources import build_catalog
    from graphchat.workspace import load_settings

    settings = load_settings(str(_workspace(parsed_args)))
    catalog = build_catalog(settings)
    return sorted(spec.name for spec in catalog.list() if spec.name.startswith(prefix))


def _requests(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> dict[str, str]:
    # Tab completion: only what the completed word needs
    from graphchat.runs.requests import RequestStore

    found = RequestStore(_workspace(parsed_args)).all()
    return {r.id: str(r.question) for r in found if r.id.startswith(prefix)}


def _models(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    strings = {model_string(name, entry["litellm_provider"]) for name, entry in chat_models()}
    names = sorted(strings | {name for name, _ in chat_models()})
    typed = [n for n in names if n.startswith(prefix)]
    if "/" not in prefix:  # providers first, so that Tab narrows as a path does
        heads = sorted({n.split("/", 1)[0] + "/" for n in typed if "/" in n})
        return heads + [n for n in typed if "/" not in n]
    return typed


def _providers(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    return sorted(
        {e["litellm_provider"] for _, e in chat_models() if e["litellm_provider"].startswith(prefix)}
    )


# (command path, destination) → completer; `*` matches any command that has the destination.
COMPLETERS: dict[tuple[tuple[str, ...], str], Completer] = {
    (("plan", "run"), "plan"): _plans,
    (("plan", "show"), "plan"): _plans,
    (("plan", "validate"), "plan"): _plans,
    (("workbench", "plan"), "target"): _plans,
    (("plan", "draft"), "from_plan"): _plans,
    (("plan", "draft"), "redraft"): _plans,
    (("ask",), "thread"): _threads,
    (("chat",), "thread"): _threads,
    (("plan", "draft"), "from_thread"): _threads,
    (("plan", "freeze"), "thread"): _threads,
    (("threads", "show"), "id"): _threads,
    (("threads", "rm"), "id"): _threads,
    (("threads", "export"), "id"): _threads,
    (("tools", "show"), "name"): _tools,
    (("tools", "call"), "name"): _tools,
    (("tools", "test"), "name"): _tools,
    (("shapes", "show"), "name"): _tools,
    (("answer",), "id"): _requests,
    (("permit",), "id"): _requests,
    (("deny",), "id"): _requests,
    (("decline",), "id"): _requests,
    (("resume",), "id"): _requests,
    (("*",), "model"): _models,
    (("models",), "provider"): _providers,
}


def attach_completers(parser: argparse.ArgumentParser) -> list[tuple[tuple[str, ...], str]]:
    """Give each argument of COMPLETERS its completer; returns what was attached (a test holds
    it to the table, so a renamed argument is noticed)."""
    attached: list[tuple[tuple[str, ...], str]] = []
    for path, child in _commands(parser, ()):
        for action in child._actions:
            completer = COMPLETERS.get((path, action.dest)) or COMPLETERS.get((("*",), action.dest))
            if completer is not None:
                action.completer = _quiet(completer)  # type: ignore[attr-defined]
                attached.append((path, action.dest))
    return attached


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Any:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:  # an alias names the same parser
                    seen.add(id(child))
                    yield from _commands(child, (*path, name))


def _quiet(completer: Completer) -> Completer:
    def safe(prefix: str, parsed_args: argparse.Namespace, **kwargs: Any) -> Any:
        try:
            return completer(prefix, parsed_args, **kwargs)
        except Exception:  # noqa: BLE001 - a completion must never break the shell
            return []

    return safe


def _workspace(parsed_args: argparse.Namespace) -> Path:
    """The workspace the command line being completed names (its `--home`), else the usual
    search; never created by completing."""
    # Tab completion: only what the completed word needs
    from graphchat.workspace import CONFIG_NAME, user_data_dir

    home = getattr(parsed_args, "home", None) or os.environ.get("GRAPHCHAT_HOME")
    if home:
        return Path(home).expanduser()
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder
    return user_data_dir()
