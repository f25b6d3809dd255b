"""Issue 18, break 5: what a model can spend. One planner reply mapping `builtin__infer` over
150 items made 150 paid calls; a model streaming varied text for ever was never cut off; a
stalled stream waited for ever. Now every turn and plan run has budgets it cannot pass —
`settings.max_model_calls`, `max_cost_usd`, `max_run_seconds` — every answer has
`max_output_tokens` and a watchdog (`model_timeout`), and a `map` takes at most
`max_map_items` items. A budget hit is one error line naming the setting, exit 1; the plan
stops there and the thread keeps what was done.

Everything runs through the real command against the scripted model server (litellm's real
HTTP path, on loopback)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from graphchat.errors import ConfigError
from graphchat.workspace import load_settings
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer

ITEMS = [f"item {n}" for n in range(150)]


def configure(workspace: Path, settings: dict[str, Any], models: dict[str, Any] | None = None) -> None:
    doc: dict[str, Any] = {"settings": settings}
    if models:
        doc["models"] = models
    (workspace / "graphchat.yaml").write_text(yaml.safe_dump(doc))


def infer_map(identifier: str = "infer_many", items: list[Any] | None = None) -> dict[str, Any]:
    """A plan mapping builtin__infer over `items` (150 by default)."""
    return {
        "identifier": identifier,
        "name": "Infer many",
        "description": "One model call per item.",
        "input_schema": {
            "type": "object",
            "properties": {"items": {"type": "array", "default": ITEMS if items is None else items}},
        },
        "steps": [
            {
                "id": "E0",
                "tool_name": "map",
                "input": {
                    "over": "{{input.items}}",
                    "concurrency": 4,
                    "do": {"tool_name": "builtin__infer", "input": {"instruction": "Say {{item}}"}},
                },
            }
        ],
        "output": {"count": "{{E0.count}}"},
    }


def write_plan(workspace: Path, plan: dict[str, Any]) -> None:
    (workspace / "plans" / f"{plan['identifier']}.yaml").write_text(yaml.safe_dump(plan))


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def thread_events(workspace: Path) -> list[dict[str, Any]]:
    (folder,) = list((workspace / "threads").iterdir())
    return [json.loads(line) for line in (folder / "messages.jsonl").read_text().splitlines()]


# --- max_model_calls -------------------------------------------------------------------------


def test_a_plan_mapping_infer_over_150_items_stops_at_max_model_calls(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    configure(workspace, {"max_model_calls": 100})
    write_plan(workspace, infer_map())
    done = cli("plan", "run", "infer_many", env=model_server.env(), timeout=120)
    assert done.returncode == 1, done.stderr
    line = error_line(done.stderr)
    assert "settings.max_model_calls (100 model calls)" in line, line
    assert line.startswith("error: plan failed at step E0 (map)"), line
    assert "Traceback" not in done.stderr
    assert len(model_server.requests) == 100  # not one more
    assert done.stdout == ""


def test_a_planner_reply_mapping_infer_over_150_items_stops_at_max_model_calls(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    # The planner's own call counts too: 1 planner request + 99 infer requests.
    configure(workspace, {"max_model_calls": 100})
    model_server.push({"json": infer_map()})
    done = cli("plan", "go", "say each of these things", env=model_server.env(), timeout=120)
    assert done.returncode == 1, done.stderr
    assert "settings.max_model_calls (100 model calls)" in error_line(done.stderr)
    assert len(model_server.requests) == 100


def test_a_turn_of_150_infer_calls_stops_at_max_model_calls_and_keeps_what_was_done(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    # One model reply asks for 150 builtin__infer calls at once: the chat call and 99 of them
    # are made, the others fail without a request, and the turn's next model call is refused.
    configure(workspace, {"max_model_calls": 100})
    calls = [{"name": "builtin__infer", "arguments": {"instruction": f"Say {item}"}} for item in ITEMS]
    model_server.push({"tool_calls": calls})
    done = cli("ask", "say all of these", "--yes", env=model_server.env(), timeout=120)
    assert done.returncode == 1, done.stderr
    assert "the turn reached settings.max_model_calls (100 model calls)" in error_line(done.stderr)
    assert len(model_server.requests) == 100
    events = thread_events(workspace)
    results = [e for e in events if e["kind"] == "tool_result"]
    assert len(results) == 150  # every call of the round is recorded
    assert sum(1 for r in results if not r.get("is_error")) == 99
    assert events[-1]["kind"] == "turn_failed"
    assert "settings.max_model_calls" in events[-1]["error"]


# --- the stream watchdog: max_output_tokens and model_timeout ----------------------------------


def test_an_endless_stream_is_cut_off_at_max_output_tokens(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    configure(workspace, {"max_output_tokens": 2000})
    model_server.push({"endless": True})
    started = time.monotonic()
    done = cli("ask", "tell me everything", env=model_server.env(), timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    line = error_line(done.stderr)
    assert "passed settings.max_output_tokens (2,000 tokens)" in line, line
    assert len(model_server.requests) == 1  # ended, not retried
    assert elapsed < 60
    last = thread_events(workspace)[-1]
    assert last["kind"] == "turn_failed" and "settings.max_output_tokens" in last["error"]


def test_a_stalled_stream_ends_after_model_timeout(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    configure(workspace, {"model_timeout": 1})
    model_server.push({"text": "Let me think", "stall": 30})
    started = time.monotonic()
    done = cli("ask", "think hard", env=model_server.env(), timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    line = error_line(done.stderr)
    assert "sent nothing for 1 s (settings.model_timeout)" in line, line
    assert elapsed < 25  # not the server's 30 s
    assert len(model_server.requests) == 1


def test_a_reply_that_never_starts_ends_after_model_timeout(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    configure(workspace, {"model_timeout": "1s"})
    model_server.push({"text": "late", "delay": 30})
    done = cli("ask", "hello", env=model_server.env(), timeout=60)
    assert done.returncode == 1, done.stderr
    assert "settings.model_timeout" in error_line(done.stderr)


# --- max_map_items, max_cost_usd, max_run_seconds ----------------------------------------------


def test_a_map_over_more_than_max_map_items_fails_at_the_step(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    configure(workspace, {"max_map_items": 100})
    write_plan(workspace, infer_map())
    done = cli("plan", "run", "infer_many", env=model_server.env())
    assert done.returncode == 1, done.stderr
    line = error_line(done.stderr)
    assert "step E0 (map): `over` has 150 items, more than settings.max_map_items (100)" in line, line
    assert model_server.requests == []  # no item was run


def test_max_cost_usd_stops_a_run_once_the_known_price_is_spent(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    # Each call: 1,000 input tokens at $0.000001 = $0.001; the budget holds 10 of them.
    model = {"model": "openai/scripted", "input_cost_per_token": 0.000001, "output_cost_per_token": 0.0}
    configure(workspace, {"max_cost_usd": 0.01}, {"default": model})
    model_server.default = {"text": "ok", "usage": {"prompt_tokens": 1000, "completion_tokens": 0}}
    write_plan(workspace, infer_map())
    env = {"GRAPHCHAT_API_BASE": model_server.url, "GRAPHCHAT_API_KEY": "sk-test"}
    done = cli("plan", "run", "infer_many", env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    line = error_line(done.stderr)
    # the cost of a request is known only once it is answered: the items in flight (4) may
    # finish past the cap, so the line says $0.0100 to $0.0130
    assert re.search(r"settings\.max_cost_usd \(\$0\.01[0-3]0 spent of \$0\.01\)", line), line
    assert 10 <= len(model_server.requests) <= 13  # the 4 items in flight may finish


def test_max_run_seconds_ends_a_turn_and_the_thread_says_why(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    configure(workspace, {"max_run_seconds": 1})
    model_server.push({"text": "slow", "delay": 20})
    started = time.monotonic()
    done = cli("ask", "hello", env=model_server.env(), timeout=60)
    assert time.monotonic() - started < 15
    assert done.returncode == 1, done.stderr
    assert "the turn reached settings.max_run_seconds (1 s)" in error_line(done.stderr)
    last = thread_events(workspace)[-1]
    assert last["kind"] == "turn_failed" and "settings.max_run_seconds" in last["error"]
    assert not last.get("interrupted")


def test_max_run_seconds_cancels_a_running_tool_and_the_thread_says_why(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    # The turn's clock starts with the message (the model library's import counts): 20 s leave
    # room for it on a loaded machine, and the tool would sleep far longer.
    configure(workspace, {"max_run_seconds": 20})
    model_server.push({"tool_calls": [{"name": "debug__sleep", "arguments": {"seconds": 300}}]})
    env = {**model_server.env(), "GRAPHCHAT_TEST_TOOLS": "1"}
    done = cli("ask", "wait", "--yes", env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "the turn reached settings.max_run_seconds (20 s)" in error_line(done.stderr)
    events = thread_events(workspace)
    (result,) = [e for e in events if e["kind"] == "tool_result"]
    assert result["is_error"] and "settings.max_run_seconds" in result["content"]
    assert events[-1]["kind"] == "turn_failed"


def test_max_run_seconds_ends_a_plan_run(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    configure(workspace, {"max_run_seconds": 1})
    model_server.default = {"text": "slow", "delay": 20}
    write_plan(workspace, infer_map(items=["a", "b"]))
    done = cli("plan", "run", "infer_many", env=model_server.env(), timeout=60)
    assert done.returncode == 1, done.stderr
    line = error_line(done.stderr)
    assert line.startswith("error: plan failed at step E0 (map): the run reached settings.max_run_seconds"), (
        line
    )


# --- the settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("max_model_calls", 0, "settings.max_model_calls: expected a positive integer, got 0"),
        ("max_map_items", "lots", "settings.max_map_items: expected a positive integer, got 'lots'"),
        ("max_output_tokens", 1.5, "settings.max_output_tokens: expected a positive integer, got 1.5"),
        ("max_cost_usd", -1, "settings.max_cost_usd: expected a positive number of dollars or off, got -1"),
        (
            "max_cost_usd",
            True,
            "settings.max_cost_usd: expected a positive number of dollars or off, got True",
        ),
        (
            "model_timeout",
            "soon",
            "settings.model_timeout: expected seconds or a duration like 15m, got 'soon'",
        ),
        (
            "model_timeout",
            "off",
            "settings.model_timeout: expected seconds or a duration like 15m, got 'off'",
        ),
        (
            "max_run_seconds",
            0,
            "settings.max_run_seconds: expected seconds or a duration like 15m or off, got 0",
        ),
    ],
)
def test_a_bad_budget_setting_is_one_line_naming_it(
    tmp_path: Path, setting: str, value: Any, message: str
) -> None:
    (tmp_path / "graphchat.yaml").write_text(yaml.safe_dump({"settings": {setting: value}}))
    with pytest.raises(ConfigError) as raised:
        load_settings(workspace=tmp_path)
    assert raised.value.exit_code == 2
    assert raised.value.message.endswith(message), raised.value.message
    assert "\n" not in raised.value.message


def test_budget_settings_defaults_and_values(tmp_path: Path) -> None:
    defaults = load_settings(workspace=tmp_path)
    assert (defaults.max_model_calls, defaults.max_map_items, defaults.max_output_tokens) == (
        1000,
        100_000,
        100_000,
    )
    assert (defaults.model_timeout, defaults.max_cost_usd, defaults.max_run_seconds) == (120.0, None, None)
    doc = {
        "models": {"default": "openai/x", "planner": {"model": "openai/y", "model_timeout": "10m"}},
        "settings": {
            "max_model_calls": 5,
            "max_cost_usd": 2,
            "model_timeout": "90s",
            "max_output_tokens": 4096,
            "max_map_items": 10,
            "max_run_seconds": "2m",
        },
    }
    (tmp_path / "graphchat.yaml").write_text(yaml.safe_dump(doc))
    settings = load_settings(workspace=tmp_path)
    assert (settings.max_model_calls, settings.max_cost_usd, settings.max_run_seconds) == (5, 2.0, 120)
    assert (settings.model_timeout, settings.max_output_tokens, settings.max_map_items) == (90.0, 4096, 10)
    # Every model call carries the per-answer limits; a role may set its own.
    chat = settings.model_for("chat")
    assert (chat.model_timeout, chat.max_output_tokens) == (90.0, 4096)
    assert settings.model_for("planner").model_timeout == 600
    doc["settings"] = {"max_cost_usd": "off", "max_run_seconds": None}
    (tmp_path / "graphchat.yaml").write_text(yaml.safe_dump(doc))
    off = load_settings(workspace=tmp_path)
    assert off.max_cost_usd is None and off.max_run_seconds is None
