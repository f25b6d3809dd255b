"""Entry point: global options, one sub-parser per command group, errors to exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

# Before anything can import litellm: no network fetch of the cost map at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

GROUPS = (
    "ask",
    "chat",
    "plan",
    "tools",
    "threads",
    "shapes",
    "mcp",
    "init",
    "requests",
    "warm",
    "models",
    "completion",
    "workbench",
    "config",
)
ALIASES = {"wb": "workbench"}


class _Parser(argparse.ArgumentParser):
    """argparse, whose "invalid choice" (a misspelt command) names the close ones."""

    def error(self, message: str) -> NoReturn:
        import re

        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:
            # command dispatch: `--help` and a group's parser import only what they use
            from graphchat.errors import did_you_mean

            guess = did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2)))
            if guess:
                message = f"{message}; {guess}"
        super().error(message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; `only`: the one command group the arguments name (the others are not
    imported: a warm `ask` starts in tens of milliseconds, and ten groups cost twenty)."""
    from importlib import import_module

    # command dispatch: `--help` and a group's parser import only what they use
    from graphchat import __version__

    parser = _Parser(
        prog="graphchat",
        description="A terminal chat agent over MCP tools and YAML plans.",
    )
    parser.add_argument(
        "--home", metavar="DIR", help="workspace folder (default: $GRAPHCHAT_HOME or nearest graphchat.yaml)"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="show tracebacks on errors, and logs on stderr: -v info, -vv debug, -vvv trace (filter: $GRAPHCHAT_LOG)",
    )
    parser.add_argument("--version", action="version", version=f"graphchat {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in (only,) if only else GROUPS:
        import_module(f"graphchat.cli.parsers.{group}").register(sub)
    _global_options_everywhere(parser)
    return parser


def _global_options_everywhere(parser: argparse.ArgumentParser) -> None:
    """`--home` and `-v` work after the sub-command too (`graphchat tools list -v`).

    Each sub-parser gets them with a suppressed default, so a value given before the
    sub-command is not overwritten by the sub-parser's absent one.
    """
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for child in {id(p): p for p in action.choices.values()}.values():
            known = {opt for a in child._actions for opt in a.option_strings}
            if "--home" not in known:
                child.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            if "-v" not in known and "--verbose" not in known:
                child.add_argument(
                    "-v", "--verbose", action="count", default=argparse.SUPPRESS, help=argparse.SUPPRESS
                )
            _global_options_everywhere(child)


def _command_group(argv: list[str]) -> str | None:
    """The command group `argv` names, when it is plain (`[--home D] [-v] GROUP ...`); None
    when anything else comes first (`--help`, `--version`, a typo): the full parser decides."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--home":
            i += 2
            continue
        if arg.startswith("--home=") or arg in ("-v", "-vv", "-vvv", "--verbose"):
            i += 1
            continue
        arg = ALIASES.get(arg, arg)
        return arg if arg in GROUPS else None
    return None


def main(argv: list[str] | None = None) -> int:
    # command dispatch: `--help` and a group's parser import only what they use
    from graphchat import interrupts
    from graphchat.cli.output import report_error
    from graphchat.errors import EXIT_USAGE, GraphchatError

    interrupts.install()  # SIGTERM and SIGHUP: like Ctrl-C (cancel, record, stop servers)
    if "_ARGCOMPLETE" in os.environ:  # the shell asks what Tab completes (`graphchat completion`)
        # command dispatch: `--help` and a group's parser import only what they use
        from graphchat.cli.completion import complete

        complete()
    parser = build_parser(_command_group(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        if args.command:
            # a group given without its sub-command: that group's help, on stderr, exit 2
            import contextlib

            with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(SystemExit):
                parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "--help"])
            return EXIT_USAGE
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    debug = bool(args.verbose) or os.environ.get("GRAPHCHAT_DEBUG") == "1"
    try:
        # command dispatch: `--help` and a group's parser import only what they use
        from graphchat.logs import configure

        configure(int(args.verbose or 0))  # -v/-vv/-vvv and $GRAPHCHAT_LOG: logs on stderr
        code = int(func(args) or 0)
        return interrupts.exit_code() if interrupts.received() else code  # ended by SIGTERM/SIGHUP
    except GraphchatError as exc:
        report_error(exc.message, exc.hint)
        _annotate(args, exc.message)
        if debug:
            import traceback

            traceback.print_exc()
        return exc.exit_code
    except KeyboardInterrupt:
        said = "" if interrupts.reason() == "Ctrl-C" else f" ({interrupts.reason()})"
        try:
            sys.stderr.write(f"\ninterrupted{said}\n")
        except OSError:  # SIGHUP: the terminal is gone
            pass
        return interrupts.exit_code()
    except BrokenPipeError:
        # stdout closed early (e.g. `| head`): not an error worth a traceback
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return 0
    except Exception as exc:
        # command dispatch: `--help` and a group's parser import only what they use
        from graphchat.fsutil import describe_failure, is_failed_write

        if interrupts.received():  # ending on SIGTERM/SIGHUP: a failure on the way out (its
            return interrupts.exit_code()  # terminal gone: EIO) does not change why it ended
        if is_failed_write(exc):  # a read-only or full disk: the path and the errno's words
            report_error(describe_failure(exc))
            if debug:
                import traceback

                traceback.print_exc()
            return 1
        if debug:
            import traceback

            traceback.print_exc()
        report_error(
            f"internal error: {type(exc).__name__}: {exc}",
            "run with -v (or GRAPHCHAT_DEBUG=1) for the traceback",
        )
        _annotate(args, f"internal error: {type(exc).__name__}: {exc}")
        return 1


def _annotate(args: argparse.Namespace, message: str) -> None:
    """A failed command under GRAPHCHAT_EVENTS=github: one `::error::` line (graphchat.ci)."""
    # command dispatch: `--help` and a group's parser import only what they use
    from graphchat.ci import annotate

    annotate("error", message, json=bool(getattr(args, "json", False)))


def entry() -> None:
    """Console-script entry: run, flush, and leave at once.

    Everything worth keeping is written before main returns (threads append per event, shape
    recordings are drained and servers shut down when the catalog closes). Skipping the
    interpreter's teardown saves seconds once litellm's ~3,000 modules are loaded, and a
    worker thread still blocked reading a terminal answer (Ctrl-C at a question) cannot
    hold the exit hostage.
    """
    code = main()
    if "logging" in sys.modules:  # log files say their last lines (counts of repeated complaints)
        try:
            sys.modules["logging"].shutdown()
        except Exception:  # noqa: BLE001 - leaving must not fail
            pass
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    try:
        sys.stderr.flush()
    except (ValueError, OSError):
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
