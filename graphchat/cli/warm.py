"""`graphchat warm`: start, show and stop this workspace's warm helper (graphchat.warm)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphchat.cli.output import note, print_json
from graphchat.errors import EXIT_USAGE, ConfigError, GraphchatError
from graphchat.host import load_settings
from graphchat.warm import control
from graphchat.warm import identity as ident


def run(args: argparse.Namespace) -> int:
    if args.json and not args.status:
        raise GraphchatError("--json goes with --status", EXIT_USAGE)
    home = getattr(args, "home", None)
    try:
        if args.status:
            return _status(ident.find(home), json=args.json)
        if args.stop:
            return _stop(ident.find(home))
        return _start(home)
    except ident.UnsafeDirectory as exc:
        raise GraphchatError(f"the warm helper's directory is not safe to use: {exc}") from None


def _start(home: str | None) -> int:
    if ident.disabled():
        raise GraphchatError(
            "GRAPHCHAT_WARM=0 turns the warm helper off", EXIT_USAGE, hint="unset GRAPHCHAT_WARM to use it"
        )
    settings = load_settings(home)
    if settings.warm == "off":
        where = settings.config_path or settings.workspace / "graphchat.yaml"
        raise ConfigError(f"settings.warm is off in {where}: no warm helper for this workspace")
    settings.model_for("chat")  # no model: exit 2 now, as ask would
    identity = ident.identify(settings.workspace)
    paths = ident.paths(identity)  # an unsafe directory: `run` says so
    running = control.status(paths)
    if running is not None:
        print(running["pid"])
        _note(f"the warm helper was already running ({_summary(running)})")
        return 0
    reply = control.spawn(identity.workspace, paths, wait=True)
    if reply.get("busy"):  # another `warm` or `ask` started it a moment ago: wait for it
        import time

        deadline = time.monotonic() + control.READY_TIMEOUT_S
        while running is None and time.monotonic() < deadline:
            time.sleep(0.1)
            running = control.status(paths)
        if running is None:
            raise GraphchatError(f"the warm helper did not become ready (see {paths.log})")
        print(running["pid"])
        _note(f"the warm helper is ready ({_summary(running)})")
        return 0
    if not reply.get("ok"):
        message = str(reply.get("message") or "the warm helper did not start")
        raise GraphchatError(message, int(reply.get("code") or 1), hint=reply.get("hint"))
    print(reply["pid"])
    running = control.status(paths) or {"servers": reply.get("servers") or [], "idle_s": settings.warm_idle}
    _note(f"the warm helper is ready ({_summary(running)})")
    return 0


def _status(identity: Any, *, json: bool) -> int:
    paths = ident.paths(identity, ident.runtime_dir(create=False))
    running = control.status(paths)
    older = [
        {"pid": data.get("pid"), "started": data.get("started")}
        for other, data in control.others(identity.workspace, keep=identity.key)
        if control.status(other) is not None
    ]
    if json:
        print_json(
            running
            if running is not None
            else {"running": False, "workspace": str(identity.workspace), "older": older}
        )
        return 0 if running is not None else 1
    if running is None:
        print(f"not running for {identity.workspace}")
        for helper in older:
            print(
                f"  helper {helper['pid']} runs the configuration before its last change; it leaves when idle"
            )
        return 1
    print(f"pid {running['pid']}")
    print(f"workspace {running['workspace']}")
    print(f"uptime {_duration(running['uptime_s'])}")
    print(f"idle time left {_duration(running['idle_left_s'])} (of {_duration(running['idle_s'])})")
    print(f"turns running {running['turns_running']}")
    servers = running.get("servers") or []
    print("servers " + (", ".join(_server(s) for s in servers) if servers else "none"))
    print(f"log {running['log']}")
    return 0


def _stop(identity: Any) -> int:
    candidates = [ident.paths(identity, ident.runtime_dir(create=False))]
    candidates += [other for other, _ in control.others(identity.workspace, keep=identity.key)]
    stopped = [pid for paths in candidates if (pid := control.stop(paths)) is not None]
    if not stopped:
        _note(f"no warm helper runs for {identity.workspace}")
    for pid in stopped:
        _note(f"stopped the warm helper (pid {pid})")
    return 0


def _server(server: dict[str, Any]) -> str:
    state = server.get("state")
    return (
        f"{server['name']} ({state}: {server.get('error')})"
        if state == "failed"
        else f"{server['name']} ({state})"
    )


def _summary(status: dict[str, Any]) -> str:
    servers = status.get("servers") or []
    names = ", ".join(_server(s) for s in servers) if servers else "no MCP servers"
    return f"{names}; leaves after {_duration(status.get('idle_s') or 0)} idle"


def _duration(seconds: float) -> str:
    seconds = int(round(float(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def _note(message: str) -> None:
    note(f"graphchat warm: {message}")
    sys.stderr.flush()
