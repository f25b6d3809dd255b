"""Running unattended (CI): the environment's event mode and storage, and CI annotations.

- `GRAPHCHAT_EVENTS`: `jsonl` (one JSON object a line on stderr, graphchat.events) or `github`
  (terminal lines as usual, plus a GitHub Actions workflow command on stdout for each failure).
- `GRAPHCHAT_STORAGE`: `file` (the default) or `memory`: nothing of a run is kept (no threads,
  shape files, server caches or logs, run records); a question nobody can answer fails as
  `--no-park` does.

graph's names (`GRAPH_EVENTS`, `GRAPH_STORAGE`) are accepted as aliases, so a workflow written
for graph keeps working; when both are set, graphchat's own wins.

Annotations follow graph (graph-cli output.rs `annotate_failure`): they go to stdout — the one
exception to "stdout is the deliverable" — only on failure paths, where a non-zero exit already
tells automation that stdout is no clean deliverable, and never under `--json` (the envelope
must still parse). Data is escaped per GitHub's rules (`%`, `\\r`, `\\n`); properties also
escape `:` and `,`.
"""

from __future__ import annotations

import os
import sys

from graphchat.errors import EXIT_USAGE, GraphchatError

EVENT_MODES = ("jsonl", "github")
STORAGE_MODES = ("file", "memory")
LEVELS = ("error", "warning", "notice")


def setting(name: str) -> tuple[str, str] | None:
    """`(variable, value)` of `GRAPHCHAT_<name>`, else of graph's `GRAPH_<name>`; None when
    neither is set (an empty value counts as unset)."""
    for var in (f"GRAPHCHAT_{name}", f"GRAPH_{name}"):
        value = os.environ.get(var, "").strip()
        if value:
            return var, value
    return None


def events_mode() -> str:
    """`jsonl`, `github`, or "" (terminal lines). An unknown value is ignored, as before."""
    found = setting("EVENTS")
    mode = found[1].lower() if found else ""
    return mode if mode in EVENT_MODES else ""


def jsonl_events() -> bool:
    """stderr is the machine feed (one JSON object a line): nothing else may be written there."""
    return events_mode() == "jsonl"


def memory_storage() -> bool:
    """`GRAPHCHAT_STORAGE=memory` (or graph's `GRAPH_STORAGE`). Another value than file or memory
    is a usage error naming the variable."""
    found = setting("STORAGE")
    if found is None:
        return False
    var, value = found
    if value.lower() not in STORAGE_MODES:
        raise GraphchatError(f"{var} must be 'file' or 'memory', got {value!r}", EXIT_USAGE)
    return value.lower() == "memory"


def escape_data(message: str) -> str:
    """Workflow-command data: `%`, `\\r`, `\\n` escaped, or the runner cuts the line short."""
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A workflow-command property value: the data escapes plus `:` and `,`."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, **properties: str | int | None) -> str:
    """`::error file=a.yaml,line=3::message` — one workflow command line."""
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v is not None)
    return f"::{level}{' ' + props if props else ''}::{escape_data(message)}"


def annotate(level: str, message: str, *, json: bool = False, **properties: str | int | None) -> None:
    """Tell the CI system about a failure (`GRAPHCHAT_EVENTS=github`), else nothing. Callers
    report every failure through this; `json`: the command prints a JSON envelope on stdout,
    which an annotation would corrupt."""
    if json or events_mode() != "github":
        return

    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.threads.redact import Redactor, environment_secrets

    message = Redactor(environment_secrets(None)).text(message)  # as report_error: no key leaks
    try:
        sys.stdout.write(command(level, message, **properties) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # stdout gone: the exit code still says it failed
        pass
