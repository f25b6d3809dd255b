"""Configuration mistakes about the model are exit 2 at once, naming what to fix (nothing is sent)."""

from __future__ import annotations

from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer


def test_no_api_key_is_exit_2_at_once_naming_the_variable(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    env = model_server.env()
    del env["GRAPHCHAT_API_KEY"]  # and the test environment carries no OPENAI_API_KEY
    done = cli("ask", "hi", env=env)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    first = done.stderr.splitlines()[0]
    assert first.startswith("error: ") and "OPENAI_API_KEY" in first and "GRAPHCHAT_API_KEY" in first
    assert "retr" not in done.stderr and "Traceback" not in done.stderr
    assert model_server.requests == []  # nothing was sent, so nothing was retried


def test_a_key_in_the_provider_variable_is_enough(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    env = model_server.env()
    env["OPENAI_API_KEY"] = env.pop("GRAPHCHAT_API_KEY")
    model_server.push({"text": "fine"})
    done = cli("ask", "hi", env=env)
    assert (done.returncode, done.stdout) == (0, "fine\n"), done.stderr


def test_a_misspelt_model_is_exit_2_with_close_matches(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    done = cli("ask", "hi", env={"GRAPHCHAT_MODEL": "gpt-4o-mni", "OPENAI_API_KEY": "sk-x"})
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: ") and "gpt-4o-mni" in lines[0]
    assert "gpt-4o-mini" in done.stderr  # the close match from litellm's model list
    assert "Traceback" not in done.stderr and "Provider List" not in done.stderr


def test_a_rejected_key_is_asked_once_and_is_exit_2(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    model_server.push({"error": 401}, {"error": 401}, {"error": 401})
    done = cli("ask", "hi", env=model_server.env())
    assert done.returncode == 2, done.stderr
    assert "GRAPHCHAT_API_KEY" in done.stderr
    assert len(model_server.requests) == 1  # no retry of a configuration mistake
