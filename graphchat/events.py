"""Events of a run (tool calls, rounds, model calls, plan steps, questions) and where they go.

Every layer reports through an EventSink; the host picks the sink: a terminal one (human
lines on stderr), the JSONL one (`GRAPHCHAT_EVENTS=jsonl`), the chat UI's, or none.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

from graphchat.ci import jsonl_events
from graphchat.display import safe


class EventSink:
    """Base sink: named helpers all funnel into `emit`. Silent by default."""

    # A person reads this sink's output (terminal lines, the chat): per-item noise is trimmed.
    human = False

    def emit(self, event: str, **fields: Any) -> None:
        pass

    def tool_started(self, tool: str, args: Any, call: str | None = None) -> None:
        self.emit("tool_started", tool=tool, args=args, call=call)

    def tool_finished(
        self, tool: str, ms: float, is_error: bool, message: str | None = None, call: str | None = None
    ) -> None:
        self.emit("tool_finished", tool=tool, ms=round(ms, 1), is_error=is_error, message=message, call=call)

    def agent_round(self, n: int) -> None:
        self.emit("agent_round", n=n)

    def llm_call(
        self,
        site: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        ms: float,
        role: str | None = None,
        cache: dict[str, int] | None = None,
        failed: bool = False,
        cost_usd: float | None = None,
    ) -> None:
        """`cache`: the cache tokens the provider reported (cache_read_input_tokens,
        cache_creation_input_tokens), when any. `failed`: a call to a model with fallbacks that
        failed (no tokens counted; the next model was tried). `cost_usd`: the call's price, when known."""
        self.emit(
            "llm_call",
            site=site,
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            ms=round(ms, 1),
            role=role,
            **(cache or {}),
            **({"failed": True} if failed else {}),
            **({"cost_usd": cost_usd} if cost_usd is not None else {}),
        )

    def waiting(self, what: str | None) -> None:
        """graphchat waits on something a person would like to see move (a model answer);
        None: the wait is over. A display hint: sinks that show nothing live ignore it."""

    def step_started(self, step: str, tool: str) -> None:
        self.emit("step_started", step=step, tool=tool)

    def step_finished(self, step: str, tool: str, ms: float = 0.0, is_error: bool = False) -> None:
        self.emit("step_finished", step=step, tool=tool, ms=round(ms, 1), is_error=is_error)

    def progress(self, step: str, done: int, total: int) -> None:
        self.emit("progress", step=step, done=done, total=total)

    def tool_progress(
        self, tool: str, call: str, progress: float, total: float | None, message: str | None = None
    ) -> None:
        """An MCP server's progress notification for a call in flight."""
        self.emit("tool_progress", tool=tool, call=call, progress=progress, total=total, message=message)

    def ask(self, prompt: str, answered: bool, reason: str | None = None) -> None:
        fields: dict[str, Any] = {"prompt": prompt, "answered": answered}
        if reason:
            fields["reason"] = reason
        self.emit("ask", **fields)

    def usage_summary(self, usage: dict[str, Any]) -> None:
        self.emit("usage_summary", usage=usage)

    def planned(self, plan: str, steps: list[dict[str, Any]], attempt: int) -> None:
        """The planner's plan about to run (attempt 1, then one per replan): `steps` are
        `{id, tool, reused}` in order (`reused`: its result is kept from the previous run)."""
        self.emit("planned", plan=plan, steps=steps, attempt=attempt)

    def replan(self, step: str, error: str, attempt: int, budget: int) -> None:
        """A planner's plan failed at `step`: replan `attempt` of `budget` starts."""
        self.emit("replan", step=step, error=error, attempt=attempt, budget=budget)

    def warning(self, message: str) -> None:
        self.emit("warning", message=message)

    def info(self, message: str) -> None:
        self.emit("info", message=message)


def sampling_server(fields: dict[str, Any]) -> str | None:
    """The MCP server an `llm_call` served (its sampling request: site `sampling:SERVER`), or None."""
    site = fields.get("site")
    return site.removeprefix("sampling:") if isinstance(site, str) and site.startswith("sampling:") else None


class RoleUsage(EventSink):
    """Forwards every event to `inner` and adds up the model usage per model role (the
    `llm_call` events' `role`, else their site): `{role: {calls, input_tokens, output_tokens}}`;
    the calls that served an MCP server's sampling also per server (`servers`, usage `by_server`),
    and every call per model (`models`, usage `by_model`; `failed` counts a fallback's failures)."""

    def __init__(self, inner: EventSink | None) -> None:
        self.inner = inner
        self.human = bool(inner is not None and inner.human)
        self.roles: dict[str, dict[str, int]] = {}
        self.servers: dict[str, dict[str, int]] = {}
        self.models: dict[str, dict[str, int]] = {}

    def emit(self, event: str, **fields: Any) -> None:
        if event == "llm_call":
            role = str(fields.get("role") or fields.get("site") or "model")
            server = sampling_server(fields)
            model = str(fields.get("model") or "")
            for counts, key in ((self.roles, role), (self.servers, server), (self.models, model)):
                if key is None:
                    continue
                spent = counts.setdefault(key, {"calls": 0, "input_tokens": 0, "output_tokens": 0})
                spent["calls"] += 1
                spent["input_tokens"] += int(fields.get("input_tokens") or 0)
                spent["output_tokens"] += int(fields.get("output_tokens") or 0)
                if fields.get("failed"):
                    spent["failed"] = spent.get("failed", 0) + 1
        if self.inner is not None:
            self.inner.emit(event, **fields)

    def waiting(self, what: str | None) -> None:
        if self.inner is not None:
            self.inner.waiting(what)

    def _counts(self, servers: bool, models: bool) -> dict[str, dict[str, int]]:
        return self.models if models else self.servers if servers else self.roles

    def snapshot(self, *, servers: bool = False, models: bool = False) -> dict[str, dict[str, int]]:
        return {key: dict(spent) for key, spent in self._counts(servers, models).items()}

    def since(
        self, before: dict[str, dict[str, int]], *, servers: bool = False, models: bool = False
    ) -> dict[str, dict[str, int]]:
        """The usage per role (per MCP server with `servers`, per model with `models`) since
        `before` (a snapshot), those without calls left out."""
        out: dict[str, dict[str, int]] = {}
        for role, spent in sorted(self._counts(servers, models).items()):
            old = before.get(role, {})
            diff = {k: v - int(old.get(k, 0)) for k, v in spent.items()}
            if diff["calls"]:
                out[role] = {k: v for k, v in diff.items() if v or k != "failed"}
        return out

    def total(self) -> dict[str, Any] | None:
        """`{calls, input_tokens, output_tokens, by_role}` of everything counted, or None."""
        if not self.roles:
            return None
        keys = ("calls", "input_tokens", "output_tokens")
        total: dict[str, Any] = {k: sum(r[k] for r in self.roles.values()) for k in keys}
        total["by_role"] = self.since({})
        if self.servers:
            total["by_server"] = self.since({}, servers=True)
        return total


def by_model_rows(models: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """`{model: counts}` as graph's usage `by_model`: `[{provider, model, calls, ...}]`, the most
    tokens first."""
    rows = [
        {"provider": model.split("/", 1)[0] if "/" in model else "", "model": model, **counts}
        for model, counts in models.items()
    ]
    return sorted(rows, key=lambda r: -(r["input_tokens"] + r["output_tokens"]))


class JsonlSink(EventSink):
    """`GRAPHCHAT_EVENTS=jsonl`: one JSON object a line on stderr."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        import orjson

        # on `ask`'s path before it hands the turn to a warm helper: imported when used
        from graphchat.threads.redact import scrub_answered

        line = orjson.dumps(
            {"event": event, **{k: v for k, v in fields.items() if v is not None}}, default=str
        )

        with self._lock:
            self.stream.write(scrub_answered(line.decode()) + "\n")
            self.stream.flush()


def _short(value: Any, limit: int = 80) -> str:
    import orjson

    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return safe(text, newlines=False)  # one line a person reads: no control character acts


def progress_text(f: dict[str, Any]) -> str:
    """A `tool_progress` event as the spinner shows it: `3/5 message` (or `3 message` without a
    total), escaped, on one line, at most 60 characters."""
    total = f.get("total")
    done = f"{f['progress']:g}/{total:g}" if isinstance(total, int | float) else f"{f['progress']:g}"
    if f.get("message"):
        done += f" {f['message']}"
    return safe(done, newlines=False)[:60]


class CallLabels:
    """How a person tells parallel calls of one tool apart: the first is `t__slow`, a second
    one started while it runs is `t__slow#2`, and so on; the finished line uses the same label."""

    def __init__(self) -> None:
        self.running: dict[str, list[str]] = {}  # tool -> call ids running
        self.labels: dict[str, str] = {}  # call id -> label

    def started(self, tool: str, call: str | None) -> str:
        if call is None:
            return tool
        running = self.running.setdefault(tool, [])
        running.append(call)
        label = tool if len(running) == 1 else f"{tool}#{len(running)}"
        self.labels[call] = label
        return label

    def label(self, tool: str, call: str | None) -> str:
        """The label of a call still running (what its started line said)."""
        return self.labels.get(call, tool) if call is not None else tool

    def finished(self, tool: str, call: str | None) -> str:
        if call is None:
            return tool
        running = self.running.get(tool, [])
        if call in running:
            running.remove(call)
        if not running:
            self.running.pop(tool, None)
        return self.labels.pop(call, tool)


SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Spinner:
    """One status line at the bottom of a terminal that shows what graphchat waits on, with the
    time it has waited: the model (`⠹ thinking 2.4s`) or the tools still running. Lines written
    through `line()` go above it. Off the terminal it does nothing at all."""

    TICK_S = 0.1

    def __init__(self, stream: TextIO, lock: threading.Lock) -> None:
        import time

        self.stream = stream
        self.lock = lock
        self.clock = time.monotonic
        self.model: tuple[str, float] | None = None
        self.tools: dict[str, float] = {}
        self.progress: dict[str, str] = {}  # a running tool's last progress report (`3/5`)
        self.shown = False
        self.frame = 0
        self.held = 0  # a person is typing an answer below: no status line meanwhile
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def _text(self) -> str | None:
        now = self.clock()
        if self.model is not None:
            what, since = self.model
            return f"{what} {now - since:.1f}s"
        if self.tools:
            names = list(self.tools)
            oldest = min(self.tools.values())
            if len(names) == 1:
                done = self.progress.get(names[0])
                label = f"{names[0]} {done} ·" if done else names[0]
            else:
                label = f"{len(names)} tools ({', '.join(names[:3])}…)"
            return f"{label} {now - oldest:.1f}s"
        return None

    def clear(self) -> None:
        """Erase the status line (caller holds the lock)."""
        if self.shown:
            self.stream.write("\r\033[2K")
            self.shown = False

    def draw(self) -> None:
        """Redraw the status line (caller holds the lock)."""
        if self.held:
            return
        text = self._text()
        if text is None:
            self.clear()
            self.stream.flush()
            return
        self.frame = (self.frame + 1) % len(SPINNER_FRAMES)
        width = self._width()
        line = f"{SPINNER_FRAMES[self.frame]} {text}"[: max(width - 1, 10)]
        self.stream.write(f"\r\033[2K\033[2m{line}\033[0m")
        self.stream.flush()
        self.shown = True

    def _width(self) -> int:
        import shutil

        return shutil.get_terminal_size((80, 24)).columns

    def changed(self) -> None:
        """Something started or ended (caller holds the lock): redraw now, run the ticker."""
        self.draw()
        active = self.model is not None or bool(self.tools)
        if active and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="graphchat-spinner", daemon=True)
            self._thread.start()
        elif not active and self._thread is not None:
            self._stop.set()
            self._thread = None

    def _run(self) -> None:
        stop = self._stop
        while not stop.wait(self.TICK_S):
            with self.lock:
                if stop.is_set():
                    return
                self.draw()


class TerminalSink(EventSink):
    """Human-readable activity lines on stderr: `→ tool {args}`, `✓ tool 0.8s`, `✗ tool msg`,
    `– tool 0.1s not answered (declined)`;
    on a terminal, a spinner line with the elapsed time while graphchat waits."""

    human = True

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        color: bool | None = None,
        quiet: bool = False,
        spinner: bool | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        tty = self.stream.isatty()
        if color is None:
            color = tty and "NO_COLOR" not in os.environ
        self.color = color
        self.quiet = quiet
        self.error_details = True  # `✗ tool 0.3s <message>`; off when the command prints the error itself
        self._lock = threading.Lock()
        if spinner is None:
            spinner = tty and not quiet and os.environ.get("TERM") != "dumb"
        self.spinner = Spinner(self.stream, self._lock) if spinner else None
        self.labels = CallLabels()

    def _paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def _line(self, text: str) -> None:
        from graphchat.threads.redact import scrub_answered  # orjson: not on the warm client's path

        text = scrub_answered(text)  # a secret answer never shows in an activity line
        with self._lock:
            if self.spinner is not None:
                self.spinner.clear()
            self.stream.write(text + "\n")
            if self.spinner is not None:
                self.spinner.draw()
            self.stream.flush()

    @contextlib.contextmanager
    def spinner_held(self) -> Iterator[None]:
        """No spinner line while a question is asked on the terminal: it would redraw over the
        prompt and what the person types."""
        spinner = self.spinner
        if spinner is None:
            yield
            return
        with self._lock:
            spinner.clear()
            spinner.held += 1
            self.stream.flush()
        try:
            yield
        finally:
            with self._lock:
                spinner.held -= 1
                spinner.draw()

    def waiting(self, what: str | None) -> None:
        spinner = self.spinner
        if spinner is None:
            return
        with self._lock:
            spinner.model = None if what is None else (what, spinner.clock())
            spinner.changed()

    def _tools_changed(self, tool: str, running: bool) -> None:
        spinner = self.spinner
        if spinner is None:
            return
        with self._lock:
            if running:
                spinner.tools.setdefault(safe(tool, newlines=False), spinner.clock())
            else:
                spinner.tools.pop(safe(tool, newlines=False), None)
                spinner.progress.pop(safe(tool, newlines=False), None)
            spinner.changed()

    def _tool_progress(self, f: dict[str, Any]) -> None:
        spinner = self.spinner
        if spinner is None:
            return
        label = self.labels.label(f["tool"], f.get("call"))
        with self._lock:
            spinner.progress[safe(label, newlines=False)] = progress_text(f)
            spinner.draw()

    def emit(self, event: str, **f: Any) -> None:
        # Names, messages and steps come from models, servers and plans: escaped, on one line
        # (a name's newline could fake an activity line); warnings and infos keep their lines.
        keep_lines = event in ("warning", "info")
        f = {k: safe(v, newlines=keep_lines) if isinstance(v, str) else v for k, v in f.items()}
        if event == "tool_started":
            label = self.labels.started(f["tool"], f.get("call"))
            self._tools_changed(label, True)
        elif event == "tool_finished":
            label = self.labels.finished(f["tool"], f.get("call"))
            self._tools_changed(label, False)
        if event == "tool_started" and not self.quiet:
            self._line(self._paint(f"→ {label} {_short(f.get('args') or {})}", "2"))
        elif event == "tool_finished" and not self.quiet:
            secs = f"{f['ms'] / 1000:.1f}s"
            if f.get("is_error"):
                detail = f" {_short(f.get('message') or 'failed', 160)}" if self.error_details else ""
                self._line(self._paint(f"✗ {label} {secs}{detail}", "31"))
            elif f.get("message"):  # done but not a success (a question nobody answered)
                self._line(self._paint(f"– {label} {secs} {_short(f['message'], 160)}", "33"))
            else:
                self._line(self._paint(f"✓ {label} {secs}", "32"))
        elif event == "tool_progress":
            self._tool_progress(f)
        elif event == "step_started" and not self.quiet:
            self._line(self._paint(f"▸ step {f['step']} ({f['tool']})", "2"))
        elif event == "progress" and not self.quiet:
            self._line(self._paint(f"  {f['step']}: {f['done']}/{f['total']}", "2"))
        elif event == "warning":
            self._line(self._paint(f"warning: {f['message']}", "33"))
        elif event == "replan":
            self._line(self._paint(replan_line(f), "33"))
        elif event == "planned" and not self.quiet:
            self._line(self._paint(planned_line(f), "2"))
        elif event == "info" and not self.quiet:
            self._line(f["message"])
        elif event == "usage_summary" and not self.quiet and self.stream.isatty():
            usage = f.get("usage") or {}
            if usage.get("calls"):  # one dim line after the answer, for a person only
                self._line(self._paint(usage_text(usage), "2"))


def replan_line(f: dict[str, Any]) -> str:
    """`replanning after E2: <error> (replan 1 of 2)`."""
    return f"replanning after {f['step']}: {_short(f.get('error') or '', 200)} (replan {f['attempt']} of {f['budget']})"


def planned_line(f: dict[str, Any]) -> str:
    """`plan p: E0 t__x ✓ (kept) · E1 t__y` — the planner's plan as it starts."""
    parts = [f"{s['id']} {s['tool']}" + (" (kept)" if s.get("reused") else "") for s in f.get("steps") or []]
    return f"plan {f['plan']}: " + " · ".join(parts)


def format_cost(usd: float) -> str:
    """Dollars with enough digits to mean something: `$0.0012`, `$0.0000135`, `$1.25`."""
    if usd == 0:
        return "$0"
    if abs(usd) >= 0.01:
        return f"${usd:,.4f}".rstrip("0").rstrip(".") if abs(usd) < 1 else f"${usd:,.2f}"
    return f"${usd:.3g}" if "e" not in f"{usd:.3g}" else "$" + f"{usd:.12f}".rstrip("0")


def usage_text(usage: Any) -> str:
    """`calls 3 · input 1,234 tokens · output 56 tokens · $0.0012` from a dict or a Usage object."""
    if usage is None:
        return "no model calls yet"
    data = usage if isinstance(usage, dict) else getattr(usage, "__dict__", {})
    if hasattr(usage, "to_json"):
        data = usage.to_json()
    parts = [
        f"calls {int(data.get('calls') or 0):,}",
        f"input {int(data.get('input_tokens') or 0):,} tokens",
        f"output {int(data.get('output_tokens') or 0):,} tokens",
    ]
    if data.get("cost_usd") is not None:
        parts.append(format_cost(float(data["cost_usd"])))
    roles = data.get("by_role")
    if isinstance(roles, dict) and roles:
        parts.append(
            "by role: "
            + ", ".join(
                f"{role} {int(r.get('calls') or 0)} call{'s' if r.get('calls') != 1 else ''}"
                for role, r in roles.items()
            )
        )
    models = data.get("by_model")
    if isinstance(models, list) and models:
        parts.append("by model: " + ", ".join(_model_spent(row) for row in models))
    return " · ".join(parts)


def _model_spent(row: dict[str, Any]) -> str:
    """`openai/backup 1 call` / `openai/primary 1 call (1 failed)`: a `by_model` row."""
    calls = int(row.get("calls") or 0)
    text = f"{row.get('model')} {calls} call{'s' if calls != 1 else ''}"
    failed = int(row.get("failed") or 0)
    return text + (f" ({failed} failed)" if failed else "")


def sink_for_environment(*, quiet: bool = False) -> EventSink:
    """JSONL when GRAPHCHAT_EVENTS=jsonl (or graph's GRAPH_EVENTS), else terminal lines on stderr."""
    if jsonl_events():
        return JsonlSink()
    return TerminalSink(quiet=quiet)
