"""`graphchat requests`, `answer`, `permit`, `deny`, `decline`, `resume`: what waits for a
person, and answering it — which resumes the parked run in this process (issue 9)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphchat.asks import Question, StderrLineReader, ask_by_lines, terminal_available
from graphchat.cli.front import TerminalFront
from graphchat.cli.output import note, print_json
from graphchat.cli.parsers.requests import RUNS_SHOWN
from graphchat.display import safe
from graphchat.errors import EXIT_FAILURE, EXIT_USAGE, GraphchatError
from graphchat.host import load_settings
from graphchat.requests_text import answer_command as answer_line
from graphchat.requests_text import answer_help, approval_lines
from graphchat.runs.answers import settle, still_waiting
from graphchat.runs.parked import RunRecord, all_runs
from graphchat.runs.requests import AlreadySettled, RequestStore, read_answer
from graphchat.runs.resume import cancel, resume_run, run_known
from graphchat.runs.resume import resume as resume_request
from graphchat.runs.retention import prune
from graphchat.workspace import find_workspace


def _store(args: argparse.Namespace) -> Any:
    return RequestStore(find_workspace(args.home))


# --- listing -----------------------------------------------------------------------------------


def list_command(args: argparse.Namespace) -> int:
    store = _store(args)
    found = store.all(finished=args.all)
    if getattr(args, "run", None):
        found = [r for r in found if args.run in (r.run, r.source.get("thread"))]
        if not found and not run_known(store, args.run):
            raise GraphchatError(
                f"no run or thread {args.run!r} has requests",
                hint="`graphchat requests --all` lists them all",
            )
    if args.json:
        print_json({"requests": [r.public() for r in found], "count": len(found)})
        return 0
    if not found:
        note("no requests wait" if not args.all else "no requests")
        return 0
    home = getattr(args, "home", None)
    for request in found:
        where = request.source.get("plan") or request.source.get("thread") or ""
        step = request.source.get("step") or request.source.get("tool") or ""
        origin = f"{where} {step}".strip()
        state = "" if request.state == "open" else f" [{request.state}]"
        sys.stdout.write(safe(f"{request.id}  {request.mode:<8} {origin}{state}: {request.question}") + "\n")
        public = request.public()
        if request.hint:
            sys.stdout.write(safe(f"    {request.hint}") + "\n")
        for line in approval_lines(public):  # an approval shows what would run, in full
            sys.stdout.write(f"    {line}\n")
        for i, option in enumerate(request.options or [], 1):
            sys.stdout.write(safe(f"    {i}. {option}", newlines=False) + "\n")
        if request.state == "open":
            sys.stdout.write(f"    answer it: {answer_line(public, home)}\n")
            for line in answer_help(public, home):
                sys.stdout.write(safe(f"      {line}") + "\n")
    return 0


def prune_command(args: argparse.Namespace) -> int:
    removed = _store(args).prune(args.older_than)
    note(f"removed {removed} finished request{'s' if removed != 1 else ''}")
    return 0


# --- answering -----------------------------------------------------------------------------------


def _open_request(store: Any, request_id: str, *, approval: bool) -> Any:
    """The request, checked to be of the kind this command answers (exit 2 naming the right one)."""
    request = store.get(request_id)
    if approval and request.kind != "approval":
        raise GraphchatError(
            f"request {request_id} is a question, not an approval",
            EXIT_USAGE,
            hint=f"answer it with `graphchat answer {request_id} VALUE` (or `graphchat decline {request_id}`)",
        )
    if not approval and request.kind == "approval":
        raise GraphchatError(
            f"request {request_id} is an approval",
            EXIT_USAGE,
            hint=f"use `graphchat permit {request_id}` or `graphchat deny {request_id}`",
        )
    if request.state != "open":
        raise AlreadySettled(f"request {request_id} was already {request.state}")
    return request


def answer_command(args: argparse.Namespace) -> int:
    store = _store(args)
    request = _open_request(store, args.id, approval=False)
    if args.value is None:
        value = _ask_on_terminal(request)
        if value is None:
            raise GraphchatError(f"request {args.id} was not answered (it stays open)")
    else:
        try:
            value = read_answer(request, args.value)
        except ValueError as exc:
            raise GraphchatError(
                f"answer refused: {exc} (request {args.id} stays open)", EXIT_FAILURE
            ) from None
    return _settle(store, args, "answered", value)


def _settle(store: Any, args: argparse.Namespace, state: str, value: Any, reason: str | None = None) -> int:
    """Record the answer (through `runs.answers.settle`, as every answer), then resume."""
    settle(store, args.id, state, value, reason, resumable=not getattr(args, "no_resume", False))
    return _after(store, args.id, args)


def _ask_on_terminal(request: Any) -> Any:
    """No VALUE: ask on the terminal with the usual prompt (a form field by field)."""
    import asyncio

    if not terminal_available():
        raise GraphchatError(f"give the answer: graphchat answer {request.id} VALUE", EXIT_USAGE)
    question = Question(request.question, schema=request.schema, options=request.options, hint=request.hint)
    answer = asyncio.run(ask_by_lines(question, StderrLineReader()))
    return answer.value if answer.answered else None


def permit_command(args: argparse.Namespace) -> int:
    store = _store(args)
    _open_request(store, args.id, approval=True)
    return _settle(store, args, "answered", {"approved": True, "always": bool(args.always)})


def deny_command(args: argparse.Namespace) -> int:
    store = _store(args)
    _open_request(store, args.id, approval=True)
    return _settle(store, args, "declined", {"approved": False}, args.reason or "denied")


def decline_command(args: argparse.Namespace) -> int:
    store = _store(args)
    _open_request(store, args.id, approval=False)
    return _settle(store, args, "declined", None, args.reason or "declined")


def _after(store: Any, request_id: str, args: argparse.Namespace) -> int:
    """The answer is recorded: resume the run now, unless --no-resume or others still wait."""
    request = store.get(request_id)
    waiting = still_waiting(store, request)
    if waiting:
        note(f"✓ request {request_id} {request.state}; {len(waiting)} more still wait: {', '.join(waiting)}")
        return 0
    if getattr(args, "no_resume", False):
        note(f"✓ request {request_id} {request.state}; resume the run with `graphchat resume {request_id}`")
        return 0
    note(f"✓ request {request_id} {request.state}; resuming the run")
    return resume(store, request)


def resume_command(args: argparse.Namespace) -> int:
    store = _store(args)
    if store.find(args.id) is None:  # not a request: a run id (`graphchat runs`)
        if RunRecord.load(store, args.id) is not None:
            return resume_run(store, args.id, TerminalFront())
    store.get(args.id)  # an unknown id: exit 1 naming it
    request = store.recover(args.id)  # an answer whose claimer died before writing it: finished now
    if request.state == "open":
        raise GraphchatError(
            f"request {args.id} is still open",
            hint=f"answer it: {'graphchat permit' if request.kind == 'approval' else 'graphchat answer'} {args.id}",
        )

    waiting = still_waiting(store, request)
    if waiting:
        raise GraphchatError(f"the run of request {args.id} still waits on: {', '.join(waiting)}")
    return resume(store, request)


def resume(store: Any, request: Any) -> int:
    """Resume the parked run `request` belongs to, in this process, on this terminal."""
    return resume_request(store, request, TerminalFront())


def runs_command(args: argparse.Namespace) -> int:
    """`graphchat runs [--json] [--state S] [--all]`: every journaled run, most recent first
    (issue 19)."""
    store = _store(args)
    found = [record.summary(store) for record in reversed(all_runs(store))]
    if args.state:
        found = [run for run in found if run["state"] == args.state]
    if args.json:
        print_json({"runs": found, "count": len(found)})
        return 0
    if not found:
        note(f"no {args.state} runs" if args.state else "no runs")
        return 0
    shown = found if args.all else found[:RUNS_SHOWN]
    for run in shown:
        what = f"plan {run['plan']}" if run["plan"] else f"thread {run['thread']}"
        last = f"  after {run['last_step']}" if run["last_step"] else ""
        line = f"{run['id']}  {run['state']:<11} {what}  started {run['started']}{last}"
        if run["ended"]:
            line += f"  ended {run['ended']} exit {run['exit']}"
        if run["error"]:
            line += f": {run['error']}"
        sys.stdout.write(safe(line, newlines=False) + "\n")
    if len(found) > len(shown):
        sys.stdout.write(f"… {len(found) - len(shown)} more, --all\n")
    return 0


def runs_prune_command(args: argparse.Namespace) -> int:
    """`graphchat runs prune [--older-than DAYS]` (runs.retention)."""
    store = _store(args)
    # settings.keep_runs by default: a bad value is the one-line configuration error (exit 2)
    days = args.older_than if args.older_than is not None else load_settings(args.home).keep_runs
    removed = prune(store, days)
    for record in removed:
        summary = record.summary(store)
        what = f"plan {summary['plan']}" if summary["plan"] else f"thread {summary['thread']}"
        sys.stdout.write(
            safe(f"removed {record.id}  {summary['state']:<8} {what}  ended {summary['ended']}") + "\n"
        )
    note(f"removed {len(removed)} ended run{'s' if len(removed) != 1 else ''} (older than {days:g} days)")
    return 0


# --- cancelling ------------------------------------------------------------------------------------


def cancel_command(args: argparse.Namespace) -> int:
    """`graphchat cancel ID` (runs.resume.cancel)."""
    record, cancelled = cancel(_store(args), args.id)
    thread_id = record.data.get("thread")
    what = (
        f"plan '{record.data.get('plan', {}).get('identifier')}'" if record.data.get("plan") else "ask turn"
    )
    if thread_id:
        what += f" of thread {thread_id}"
    shown = ", ".join(cancelled) if cancelled else "none open"
    note(f"✓ cancelled the parked run {record.id} ({what}); requests cancelled: {shown}")
    return 0
