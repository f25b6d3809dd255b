"""Workspace discovery and settings: order of precedence, roles, env overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphchat.errors import ConfigError
from graphchat.workspace import find_workspace, load_settings


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("GRAPHCHAT_HOME", "GRAPHCHAT_MODEL", "GRAPHCHAT_API_BASE", "GRAPHCHAT_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def test_precedence_home_env_nearest_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "sub" / "deeper").mkdir(parents=True)
    (project / "graphchat.yaml").write_text("{}\n")
    monkeypatch.chdir(project / "sub" / "deeper")
    assert find_workspace() == project
    monkeypatch.setenv("GRAPHCHAT_HOME", str(tmp_path / "envhome"))
    with pytest.raises(ConfigError) as info:  # held to the rule of --home: not a workspace
        find_workspace()
    assert "GRAPHCHAT_HOME" in info.value.message and "graphchat init" in (info.value.hint or "")
    (tmp_path / "envhome" / "threads").mkdir(parents=True)
    assert find_workspace() == tmp_path / "envhome"
    (tmp_path / "flag" / "plans").mkdir(parents=True)
    assert find_workspace(str(tmp_path / "flag")) == tmp_path / "flag"
    with pytest.raises(ConfigError) as info:  # --home of a folder that is no workspace: use init
        find_workspace(str(tmp_path / "flga"))
    assert "graphchat init" in (info.value.hint or "")
    monkeypatch.delenv("GRAPHCHAT_HOME")
    monkeypatch.chdir(tmp_path)
    user = find_workspace()
    assert user == tmp_path / "xdg" / "graphchat" and user.is_dir()


def test_roles_fall_back_to_default_and_model_flag_overrides(tmp_path: Path) -> None:
    (tmp_path / "graphchat.yaml").write_text(
        "models:\n  default: openai/gpt-4o-mini\n  solver: {model: anthropic/claude-sonnet-4-5, temperature: 0.2}\n"
    )
    settings = load_settings(tmp_path)
    assert settings.model_for("chat").model == "openai/gpt-4o-mini"
    assert settings.model_for("solver").model == "anthropic/claude-sonnet-4-5"
    assert settings.model_for("solver").temperature == 0.2
    assert settings.model_for("chat", override="openai/other").model == "openai/other"
    assert load_settings(tmp_path, model_override="x/y").model_for("judge").model == "x/y"
    assert settings.model_for("sampling").model == "openai/gpt-4o-mini"  # MCP sampling: default too


def test_env_overrides_default_role(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "graphchat.yaml").write_text("models:\n  default: openai/a\n")
    monkeypatch.setenv("GRAPHCHAT_MODEL", "openai/b")
    monkeypatch.setenv("GRAPHCHAT_API_BASE", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("GRAPHCHAT_API_KEY", "k")
    model = load_settings(tmp_path).model_for("chat")
    assert (model.model, model.api_base, model.api_key) == ("openai/b", "http://127.0.0.1:9/v1", "k")


def test_no_model_names_what_to_set(tmp_path: Path) -> None:
    (tmp_path / "threads").mkdir()
    settings = load_settings(tmp_path)
    with pytest.raises(ConfigError) as info:
        settings.model_for("chat")
    assert info.value.exit_code == 2
    assert "GRAPHCHAT_MODEL" in (info.value.hint or "") and "graphchat.yaml" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("models:\n  default: [unclosed\n", 2, "invalid YAML"),
        ("models:\n  default: openai/x\n  boss: openai/y\n", 3, "models.boss: unknown role"),
        ("settings:\n  max_agent_iterations: -1\n", 2, "positive integer"),
        ("approvals:\n  mode: maybe\n", 2, "approvals.mode"),
        ("colour: blue\n", 1, "unknown key `colour`"),
        ("models:\n  solver: {temperature: 1}\n", 2, "`model` is required"),
        (
            "models:\n  default: {model: openai/x, vision: maybe}\n",
            2,
            "models.default.vision: expected true or false",
        ),
    ],
)
def test_bad_config_is_one_line_with_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    (tmp_path / "graphchat.yaml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path)
    message = info.value.message
    assert message.startswith(f"{tmp_path / 'graphchat.yaml'}:{line}: "), message
    assert fragment in message and "\n" not in message
    assert info.value.exit_code == 2


def test_warm_settings_and_their_errors(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    config = ws / "graphchat.yaml"
    config.write_text("")
    assert (load_settings(ws).warm, load_settings(ws).warm_idle) == (
        "auto",
        900,
    )  # auto unless GRAPHCHAT_WARM=manual (the suite's subprocesses)
    config.write_text("settings:\n  warm: auto\n  warm_idle: 90s\n")
    assert (load_settings(ws).warm, load_settings(ws).warm_idle) == ("auto", 90)
    config.write_text("settings:\n  warm_idle: 2h\n")
    assert load_settings(ws).warm_idle == 7200
    config.write_text("settings:\n  warm_idle: 30\n")
    assert load_settings(ws).warm_idle == 30
    config.write_text("settings:\n  warm: sometimes\n")
    with pytest.raises(
        ConfigError, match=r"graphchat.yaml:2.*settings.warm: expected one of manual, auto, off"
    ):
        load_settings(ws)
    config.write_text("settings:\n  warm_idle: soon\n")
    with pytest.raises(ConfigError, match=r"settings.warm_idle: expected seconds or a duration like 15m"):
        load_settings(ws)
