"""The screens in docs/workbench.md are text captures of the real app: this test drives it on
textual's pilot against the scripted model and checks each `<!-- screen: NAME -->` block of the
page against what the screen shows. `GRAPHCHAT_WRITE_SCREENS=1` writes the blocks instead
(after a change to the app: run it, read the diff, commit the page)."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_server import ScriptedModelServer
from tests.workbench.test_workbench import GREET, _say, _settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "workbench.md"
SIZE = (118, 30)
BLOCK = re.compile(r"(<!-- screen: (?P<name>[a-z-]+) -->\n```text\n)(?P<body>.*?)(```)", re.S)


def capture(app: Any, home: Path) -> str:
    """The whole screen as text, as textual's own screenshot renders it (without the colours);
    the test's temporary folder shown as `~/project`, padded so the borders stay put."""
    from rich.console import Console

    console = Console(
        width=app.size.width,
        height=app.size.height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    text = console.export_text(styles=False)
    short = "~/project"

    def shorten(match: re.Match[str]) -> str:
        return short + match.group(1) + " " * (len(str(home)) - len(short))

    lines = [re.sub(re.escape(str(home)) + r"(\S*)", shorten, line).rstrip() for line in text.splitlines()]
    return "\n".join(lines).rstrip() + "\n"


def _stable(text: str) -> str:
    """What may differ between two runs of the same screen: a call's duration, token counts."""
    return re.sub(r"_tokens\": \d+", '_tokens": 0', re.sub(r"\d+\.\ds\b", "0.0s", text))


async def _settle(pilot: Any) -> None:
    """Until the screen is drawn as it now is (a tab switch slides its underline)."""
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.3)


async def test_the_documented_screens_are_the_apps(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import tempfile

    from textual.widgets import OptionList, TabbedContent

    from graphchat.sources import build_catalog
    from graphchat.workbench.app import WorkbenchApp
    from graphchat.workbench.bench import Bench

    short = Path(tempfile.mkdtemp(prefix="wb"))
    shutil.copytree(workspace, short / "ws")
    workspace = short / "ws"
    (workspace / "plans" / "greet.yaml").write_text(GREET)
    settings = _settings(workspace, model_server, monkeypatch)
    catalog = build_catalog(settings, include_mcp=False)
    bench = Bench(settings, catalog, project=workspace)
    bench.draft.load("greet")
    model_server.push(
        {
            "tool_calls": [
                {
                    "name": "workbench__add_step",
                    "arguments": {
                        "id": "E2",
                        "tool": "builtin__reshape",
                        "input": {"shape": {"twice": "{{E1.loud}} {{E1.loud}}"}},
                    },
                }
            ]
        },
        {"text": "Added E2: it says E1 twice."},
        {"tool_calls": [{"name": "workbench__delete_step", "arguments": {"id": "E1"}}]},
        {"text": "E1 stays: E2 and the output read it."},
    )
    screens: dict[str, str] = {}
    app = WorkbenchApp(bench)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await _say(app, pilot, "add a step E2 that says E1 twice")
            await _say(app, pilot, "now delete E1")
            await pilot.press("tab", "down", "down", "down")  # the plan's rows: E2 selected
            await pilot.pause()
            assert app.selected == "E2", [app.query_one("#steps", OptionList).highlighted]
            await _settle(pilot)
            screens["plan"] = capture(app, workspace)
            await pilot.press("r")  # from the plan tree: the run tab shows at once
            await app.workers.wait_for_complete()
            await _settle(pilot)
            assert app.query_one("#tabs", TabbedContent).active == "run"
            screens["run"] = capture(app, workspace)

    finally:
        await catalog.aclose()
        shutil.rmtree(short, ignore_errors=True)

    page = PAGE.read_text(encoding="utf-8")
    if os.environ.get("GRAPHCHAT_WRITE_SCREENS"):
        PAGE.write_text(
            BLOCK.sub(lambda m: m.group(1) + screens[m.group("name")] + m.group(4), page), encoding="utf-8"
        )
        return
    documented = {m.group("name"): m.group("body") for m in BLOCK.finditer(page)}
    assert set(documented) == set(screens), "docs/workbench.md names other screens"
    for name, shown in screens.items():
        assert _stable(documented[name]) == _stable(shown), (
            f"docs/workbench.md's {name!r} screen is not what the app shows now; "
            "GRAPHCHAT_WRITE_SCREENS=1 rewrites it"
        )
