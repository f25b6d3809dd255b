"""How long an ended run is kept (issue 19): a finished or failed run's record and journal stay
in `requests/runs/` for `settings.keep_runs` days after it ended, listed by `graphchat runs`.
`graphchat runs prune [--older-than DAYS]` removes those older; a run that ends prunes too, at
most once a day (the mtime of `requests/runs/.pruned` says when it last did). A running, parked
or interrupted run is never pruned: only an ended one."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from graphchat.errors import GraphchatError
from graphchat.host import load_settings
from graphchat.workspace import KEEP_RUNS_DAYS

if TYPE_CHECKING:
    from graphchat.runs.parked import RunRecord
    from graphchat.runs.requests import RequestStore

DAY = 86400.0


def prune(store: RequestStore, older_than_days: float) -> list[RunRecord]:
    """Remove the ended runs that ended more than `older_than_days` ago; the runs removed."""
    # a cycle: graphchat.runs.parked imports this module
    from graphchat.runs.parked import all_runs

    limit = time.time() - older_than_days * DAY
    removed = []
    for record in all_runs(store):
        if record.ended() and float(record.data.get("ended") or 0) <= limit:
            record.delete()
            removed.append(record)
    return removed


def prune_now_and_then(store: RequestStore) -> None:
    """At the end of a run: prune the runs older than `settings.keep_runs`, if that was not done
    in the last day. Best effort: a workspace that cannot be read or written is left as is."""
    stamp = store.dir / "runs" / ".pruned"
    try:
        if time.time() - stamp.stat().st_mtime < DAY:
            return
    except OSError:
        pass  # never pruned here yet
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        prune(store, keep_runs(store))
    except OSError:
        return


def keep_runs(store: RequestStore) -> float:
    """The workspace's `settings.keep_runs` (its default when the settings cannot be read)."""
    try:
        return float(load_settings(str(store.dir.parent)).keep_runs)
    except GraphchatError:
        return KEEP_RUNS_DAYS
