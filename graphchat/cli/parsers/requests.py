"""`graphchat requests`: its arguments (its code: `cli/requests.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command

RUN_STATES = ("running", "interrupted", "parked", "finished", "failed")
RUNS_SHOWN = 20  # the text list of `graphchat runs` without --all


def _days(text: str) -> float:
    """`--older-than DAYS`: a number of days, 0 or more."""
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not days >= 0 or days == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of days (0 or more), got {text!r}")
    return days


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "requests",
        help="questions and approvals waiting for a person",
        description="List the requests parked runs wait on (exit 5 of plan run and ask).",
    )
    parser.add_argument("--all", action="store_true", help="also answered, declined, expired ones")
    parser.add_argument("--json", action="store_true", help="print {requests: [...], count}")
    parser.add_argument("--run", metavar="ID", help="only the requests of one run (a run id or a thread id)")
    parser.set_defaults(func=Command("graphchat.cli.requests:list_command"))
    req_sub = parser.add_subparsers(dest="requests_command", metavar="SUBCOMMAND")
    prune = req_sub.add_parser("prune", help="remove finished requests older than DAYS")
    prune.add_argument("--older-than", type=float, default=30, metavar="DAYS", help="default 30")
    prune.set_defaults(func=Command("graphchat.cli.requests:prune_command"))

    answer = sub.add_parser(
        "answer",
        help="answer a question a parked run waits on, and resume it",
        description="Answer a request. A form takes a JSON object (or, with one field, its bare "
        "value); an options request takes an option's exact text, its number, or a free answer; "
        "a text request takes the text as typed. Without VALUE it is asked on the terminal.",
    )
    answer.add_argument("id", metavar="ID")
    answer.add_argument("value", nargs="?", metavar="VALUE")
    answer.add_argument("--no-resume", action="store_true", help="only record the answer")
    answer.set_defaults(func=Command("graphchat.cli.requests:answer_command"))

    permit = sub.add_parser("permit", help="approve a tool call a parked run waits on, and resume it")
    permit.add_argument("id", metavar="ID")
    permit.add_argument("--always", action="store_true", help="and remember the approval for this tool")
    permit.add_argument("--no-resume", action="store_true", help="only record the approval")
    permit.set_defaults(func=Command("graphchat.cli.requests:permit_command"))

    deny = sub.add_parser("deny", help="refuse a tool call a parked run waits on, and resume it")
    deny.add_argument("id", metavar="ID")
    deny.add_argument("--reason", metavar="R", help="passed on as the refusal's reason")
    deny.add_argument("--no-resume", action="store_true", help="only record the refusal")
    deny.set_defaults(func=Command("graphchat.cli.requests:deny_command"))

    decline = sub.add_parser("decline", help="decline a question a parked run waits on, and resume it")
    decline.add_argument("id", metavar="ID")
    decline.add_argument("--reason", metavar="R")
    decline.add_argument("--no-resume", action="store_true", help="only record the decline")
    decline.set_defaults(func=Command("graphchat.cli.requests:decline_command"))

    cancel = sub.add_parser(
        "cancel",
        help="cancel a parked run: its requests become cancelled, its record goes",
        description="Cancel a parked run (ID: its run id, the id of one of its requests, or its "
        "thread's id). Its open requests become cancelled, its record is removed, and a parked "
        "ask turn's thread records the cancellation.",
    )
    cancel.add_argument("id", metavar="ID")
    cancel.set_defaults(func=Command("graphchat.cli.requests:cancel_command"))

    resume = sub.add_parser("resume", help="resume an interrupted run, or the run of an answered request")
    resume.add_argument("id", metavar="ID", help="a run id (`graphchat runs`) or a request id")
    resume.set_defaults(func=Command("graphchat.cli.requests:resume_command"))

    runs = sub.add_parser(
        "runs",
        help="the journaled runs: running, interrupted, parked, and ended ones until pruned",
        description="List the workspace's runs, most recent first: running, interrupted, parked, "
        "finished and failed (an ended run is kept for settings.keep_runs days).",
    )
    runs.add_argument("--json", action="store_true", help="print {runs: [...], count}")
    runs.add_argument("--state", choices=RUN_STATES, help="only the runs in this state")
    runs.add_argument("--all", action="store_true", help=f"all of them (text: the {RUNS_SHOWN} most recent)")
    runs.set_defaults(func=Command("graphchat.cli.requests:runs_command"))
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="SUBCOMMAND")
    runs_prune = runs_sub.add_parser(
        "prune",
        help="remove the finished and failed runs that ended more than DAYS ago",
        description="Remove the record and journal of each finished or failed run that ended more "
        "than DAYS ago (default: settings.keep_runs). A running, parked or interrupted run is "
        "never removed.",
    )
    runs_prune.add_argument("--older-than", type=_days, metavar="DAYS", help="default settings.keep_runs")
    runs_prune.set_defaults(func=Command("graphchat.cli.requests:runs_prune_command"))
