"""Issue 18 point 6: `requests prune` removes request files only — settled, older than N days,
whose run has ended. It never removes an answered request whose run has not resumed (was:
removed, so the run could not resume) and never removes a run record."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from tests.adversarial.test_disks import ASK_PLAN
from tests.conftest import GraphchatRunner, run_states


def test_prune_keeps_an_answered_request_whose_run_has_not_resumed_and_every_run_record(
    workspace: Path, cli: GraphchatRunner
) -> None:
    (workspace / "plans" / "ship.yaml").write_text(ASK_PLAN)
    parked = cli("plan", "run", "ship")
    assert parked.returncode == 5, parked.stderr
    match = re.search(r"request ([0-9a-f]{6,}): ", parked.stderr)
    assert match, parked.stderr
    request_id = match.group(1)
    assert cli("answer", request_id, "beta", "--no-resume").returncode == 0
    path = workspace / "requests" / f"{request_id}.json"
    data = json.loads(path.read_text())
    data["settled_at"] = time.time() - 90 * 86400
    path.write_text(json.dumps(data))
    runs = sorted((workspace / "requests" / "runs").iterdir())
    assert runs

    pruned = cli("requests", "prune", "--older-than", "1")
    assert pruned.returncode == 0 and "removed 0" in pruned.stderr
    assert path.exists() and sorted((workspace / "requests" / "runs").iterdir()) == runs

    resumed = cli("resume", request_id)  # the answer is still there to resume with
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"channel": "beta"}
    assert run_states(workspace) == ["finished"]  # the run ended (kept until `runs prune`)
    data = json.loads(path.read_text())
    data["settled_at"] = time.time() - 90 * 86400
    path.write_text(json.dumps(data))
    pruned = cli("requests", "prune", "--older-than", "1")
    assert pruned.returncode == 0 and "removed 1" in pruned.stderr
    assert not path.exists()
