"""`graphchat plan`: the arguments of its sub-commands (their code: `cli/plan.py` for `run`,
`cli/plan_inspect.py`, `cli/plan_draft.py`, `cli/plan_go.py`, `cli/plan_freeze.py` and
`cli/plan_edit.py`, imported when a command runs)."""

from __future__ import annotations

import argparse
import sys

from graphchat.cli.parsers import Command
from graphchat.errors import EXIT_USAGE, GraphchatError

VALUE_HELP = "inline JSON, @file or - (stdin)"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("plan", help="list, show, validate and run plans")
    plan_sub = parser.add_subparsers(dest="plan_command", metavar="SUBCOMMAND")
    run = plan_sub.add_parser(
        "run",
        help="run a plan",
        description="Run a plan by name (from the workspace's plans/) or by file path.",
    )
    run.add_argument("plan", metavar="NAME|PATH")
    run.add_argument("document", nargs="?", metavar="JSON|@file|-", help="the input object")
    run.add_argument(
        "--input", action="append", metavar="k=v", help="one input (v parsed as JSON when it parses)"
    )
    run.add_argument("--json", action="store_true", help="print the {answer, output, plan, …} envelope")
    run.add_argument(
        "--answers",
        metavar="FILE",
        help="answers to questions (YAML/JSON: step id or prompt → answer); others are asked on the terminal",
    )
    run.add_argument("--yes", action="store_true", help="approve every sensitive tool call of this run")
    run.add_argument("-m", "--model", metavar="M", help="use this model instead of the configured ones")
    run.add_argument(
        "--tree",
        action="store_true",
        help="when the run ends, draw the step tree with each step's status and time",
    )
    run.add_argument(
        "--no-park",
        action="store_true",
        help="a question nobody here can answer fails the run (as in graph) instead of parking it (exit 5)",
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="an input the plan never reads is an error (exit 3), not a warning",
    )
    run.set_defaults(func=Command("graphchat.cli.plan:run_command"))

    register_draft(plan_sub)

    register_freeze(plan_sub)

    register_go(plan_sub)

    register_inspect(plan_sub)

    register_edit(plan_sub)


def register_draft(plan_sub: argparse._SubParsersAction) -> None:
    p = plan_sub.add_parser(
        "draft",
        help="have the planner model write a plan for a goal",
        description="The `planner` model role writes a plan for GOAL over the catalog; every draft is "
        "validated like `plan validate` and the problems are sent back (3 attempts). The plan is "
        "saved to plans/<ID>.yaml and its path printed.",
    )
    p.add_argument("goal", metavar="GOAL", help="what the plan should do")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-thread", metavar="ID", help="start from this thread's exchange")
    start.add_argument("--from-plan", metavar="NAME", help="start from this plan (name or path)")
    start.add_argument(
        "--from",
        dest="redraft",
        metavar="PLAN",
        help="redraft into this plan's identity (identifier, name, description, input_schema; "
        "every step replaced) and write it where that plan is (as graph's --from)",
    )
    p.add_argument("--name", metavar="ID", help="the plan's identifier (and file name)")
    p.add_argument("--output", metavar="PATH", help="write the plan here instead of plans/<ID>.yaml")
    p.add_argument("--stdout", action="store_true", help="print the plan's YAML; write nothing")
    p.add_argument(
        "--salvage",
        action="store_true",
        help="when no draft validates, write the valid first steps of the last one (graph's salvage)",
    )
    p.add_argument("--json", action="store_true", help="print {ok, plan, path, attempts, problems}")
    p.add_argument("--force", action="store_true", help="overwrite an existing plan file")
    p.add_argument("-m", "--model", metavar="M", help="use this model instead of the planner role's")
    p.set_defaults(func=Command("graphchat.cli.plan_draft:run_draft"))


def register_edit(plan_sub: argparse._SubParsersAction) -> None:
    """Add new/set/unset/step to the `plan` group's sub-parsers."""

    def json_flag(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print graph's envelope on stdout")

    new = plan_sub.add_parser("new", help="start a plan file with its header and no steps")
    new.add_argument("id", metavar="ID", help="the plan's identifier ([a-zA-Z0-9_-])")
    new.add_argument("--name", help="display name (default: from the id)")
    new.add_argument("--description", help="what the plan does (it routes the model to the plan)")
    new.add_argument("--output", metavar="PATH", help="where to write (default: plans/ID.yaml)")
    json_flag(new)
    new.set_defaults(func=Command("graphchat.cli.plan_edit:run_new"))

    set_ = plan_sub.add_parser("set", help="set one plan attribute")
    set_.add_argument("target", metavar="NAME|PATH")
    set_.add_argument("attribute", help="name, description, identifier, exemplars, requires_servers, "
                      "input_schema, solver or output")  # fmt: skip
    set_.add_argument(
        "values",
        nargs="+",
        metavar="VALUE",
        help=f"a string (several for lists); JSON attributes take {VALUE_HELP}",
    )
    json_flag(set_)
    set_.set_defaults(func=Command("graphchat.cli.plan_edit:run_set"))

    unset = plan_sub.add_parser("unset", help="remove one optional plan attribute")
    unset.add_argument("target", metavar="NAME|PATH")
    unset.add_argument("attribute")
    json_flag(unset)
    unset.set_defaults(func=Command("graphchat.cli.plan_edit:run_unset"))

    step = plan_sub.add_parser("step", help="add, update, rename, unset or remove one step")
    step_sub = step.add_subparsers(dest="step_command", metavar="SUBCOMMAND")
    add = step_sub.add_parser("add", help="add a step (appended, or --before/--after a step)")
    add.add_argument("target", metavar="NAME|PATH")
    add.add_argument("id", metavar="ID")
    add.add_argument("tool", metavar="TOOL")
    add.add_argument("input", metavar="INPUT", help=f"the step's input object: {VALUE_HELP}")
    add.add_argument("--reasoning")
    where = add.add_mutually_exclusive_group()
    where.add_argument("--before", metavar="ID")
    where.add_argument("--after", metavar="ID")
    json_flag(add)
    add.set_defaults(func=Command("graphchat.cli.plan_edit:run_step_add"))

    update = step_sub.add_parser("update", help="set a step's tool, input or reasoning")
    update.add_argument("target", metavar="NAME|PATH")
    update.add_argument("id", metavar="ID")
    update.add_argument("attribute", choices=["tool", "input", "reasoning"])
    update.add_argument("value", metavar="VALUE", help=f"input takes {VALUE_HELP}")
    json_flag(update)
    update.set_defaults(func=Command("graphchat.cli.plan_edit:run_step_update"))

    rename = step_sub.add_parser("rename", help="rename a step and every reference to it")
    rename.add_argument("target", metavar="NAME|PATH")
    rename.add_argument("id", metavar="ID")
    rename.add_argument("new_id", metavar="NEW_ID")
    json_flag(rename)
    rename.set_defaults(func=Command("graphchat.cli.plan_edit:run_step_rename"))

    unset_step = step_sub.add_parser("unset", help="remove a step's optional attribute (reasoning)")
    unset_step.add_argument("target", metavar="NAME|PATH")
    unset_step.add_argument("id", metavar="ID")
    unset_step.add_argument("attribute")
    json_flag(unset_step)
    unset_step.set_defaults(func=Command("graphchat.cli.plan_edit:run_step_unset"))

    rm = step_sub.add_parser("rm", help="remove a step (refused while a later step reads it)")
    rm.add_argument("target", metavar="NAME|PATH")
    rm.add_argument("id", metavar="ID")
    json_flag(rm)
    rm.set_defaults(func=Command("graphchat.cli.plan_edit:run_step_rm"))

    def no_step_verb(args: argparse.Namespace) -> int:
        step.print_usage(sys.stderr)
        raise GraphchatError("plan step: choose one of add, update, rename, unset, rm", EXIT_USAGE)

    step.set_defaults(func=no_step_verb)


def register_freeze(plan_sub: argparse._SubParsersAction) -> None:
    p = plan_sub.add_parser(
        "freeze",
        help="turn a thread's successful tool calls into a plan",
        description=(
            "Freeze the successful tool calls of a thread (the latest one when none is named) into "
            "plans/<ID>.yaml: values from earlier results become references, values you typed become "
            "inputs, a round of calls over an earlier array becomes a map. Prints the file's path."
        ),
    )
    p.add_argument("thread", nargs="?", metavar="THREAD", help="thread id (or a unique prefix)")
    p.add_argument("--name", metavar="ID", help="the plan's identifier (default: from the first message)")
    p.add_argument("--turns", metavar="A..B", help="freeze only these turns (1-based, inclusive)")
    p.add_argument(
        "--finish",
        choices=("solver", "output", "silent"),
        help="how the plan ends (default: solver when the chat ended in a written answer, else output)",
    )
    p.add_argument("--stdout", action="store_true", help="print the plan's YAML and write nothing")
    p.add_argument("--force", action="store_true", help="overwrite an existing plans/<ID>.yaml")
    p.set_defaults(func=Command("graphchat.cli.plan_freeze:run_freeze"))


def register_go(plan_sub: argparse._SubParsersAction) -> None:
    p = plan_sub.add_parser(
        "go",
        help="have the planner write a plan for a goal and run it",
        description="The `planner` model role drafts a plan for GOAL over the catalog and it runs "
        "at once; a step that breaks (a bad reference, a tool error) is repaired by the planner, "
        "keeping the steps that already ran (settings.planning_attempts replans).",
    )
    p.add_argument("goal", metavar="GOAL", help="what to do")
    p.add_argument("--json", action="store_true", help="print {answer, degraded, steps_executed, plan, …}")
    p.add_argument(
        "--answers", metavar="FILE", help="answers to ask steps (YAML/JSON: step id or prompt → answer)"
    )
    p.add_argument("--save", metavar="ID", help="write the final plan to plans/<ID>.yaml")
    p.add_argument("--force", action="store_true", help="with --save: overwrite an existing plan file")
    p.add_argument("--yes", action="store_true", help="approve every sensitive tool call of this run")
    p.add_argument("-m", "--model", metavar="M", help="use this model instead of the configured ones")
    p.set_defaults(func=Command("graphchat.cli.plan_go:run_go"))


def register_inspect(plan_sub: argparse._SubParsersAction) -> None:
    """Add list/show/validate to the `plan` group's sub-parsers."""
    p_list = plan_sub.add_parser(
        "list", help="list the workspace's plans", description="List the plans under plans/."
    )
    p_list.add_argument("--json", action="store_true", help="machine-readable output")
    p_list.set_defaults(func=Command("graphchat.cli.plan_inspect:run_list"))

    p_show = plan_sub.add_parser(
        "show",
        help="show a plan as loaded",
        description="Show a plan, normalised, with its tool name and schema.",
    )
    p_show.add_argument("plan", metavar="NAME|PATH")
    p_show.add_argument("--json", action="store_true", help="machine-readable output")
    picture = p_show.add_mutually_exclusive_group()
    picture.add_argument("--tree", action="store_true", help="draw the step tree (what each step reads)")
    picture.add_argument("--mermaid", action="store_true", help="print a Mermaid flowchart of the data flow")
    p_show.set_defaults(func=Command("graphchat.cli.plan_inspect:run_show"))

    p_val = plan_sub.add_parser(
        "validate",
        help="check plans without running them",
        description="Check structure, templates, gates, bodies, ask schemas and that every tool resolves. "
        "Without NAME, every plan of the workspace is checked.",
    )
    p_val.add_argument("plan", nargs="?", metavar="NAME|PATH")
    p_val.add_argument("--json", action="store_true", help="machine-readable output")
    p_val.add_argument(
        "--offline",
        action="store_true",
        help="start no MCP server: tools of servers whose tool list was never cached go unchecked (said in a note)",
    )
    p_val.add_argument(
        "--strict",
        action="store_true",
        help="the checker's notes are problems (exit 1): a tool name that could not be checked, a "
        "field a learned shape never saw, an argument an open input schema does not name",
    )
    p_val.set_defaults(func=Command("graphchat.cli.plan_inspect:run_validate"))
