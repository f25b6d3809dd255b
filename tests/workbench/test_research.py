"""The workbench's research tools (`workbench__read_file`, `grep`, `glob`), called through the
agent's catalog as the model's calls are: they stay inside the launch directory, honour every
.gitignore, cap what they return, and are never plan tools."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from graphchat.catalog.base import CallContext, ToolResult

SECRET = "the-secret-outside-the-project"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project beside a secret: ignored files at two levels, symlinks in and out, a binary."""
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    root = tmp_path / "project"
    (root / "plans").mkdir(parents=True)
    (root / "plans" / "greet.yaml").write_text("identifier: greet\nname: Greet\n")
    (root / "notes.md").write_text("# notes\nThe greet plan says hello.\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n.env\n")
    (root / "app.log").write_text("hello from a log\n")
    (root / ".env").write_text("TOKEN=hello-token\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("hello from build\n")
    (root / "sub").mkdir()
    (root / "sub" / ".gitignore").write_text("private.txt\n")
    (root / "sub" / "private.txt").write_text("hello private\n")
    (root / "sub" / "public.txt").write_text("hello public\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("hello from git\n")
    (root / "blob.bin").write_bytes(b"hello\0binary")
    os.symlink(tmp_path / "secret.txt", root / "leak.txt")
    os.symlink(tmp_path, root / "outside")
    os.symlink(root / "notes.md", root / "inside-link.md")
    return root


@pytest.fixture
async def bench(workspace: Path, project: Path) -> AsyncIterator[Any]:
    from graphchat.host import load_settings
    from graphchat.sources import build_catalog
    from graphchat.workbench.bench import Bench

    settings = load_settings(str(workspace))
    catalog = build_catalog(settings, include_mcp=False)
    try:
        yield Bench(settings, catalog, project=project)
    finally:
        await catalog.aclose()


async def _call(bench: Any, name: str, **arguments: Any) -> ToolResult:
    result: ToolResult = await bench.agent_catalog.call(f"workbench__{name}", arguments, CallContext())
    return result


async def test_read_file_reads_inside_and_refuses_every_way_out(bench: Any, project: Path) -> None:
    done = await _call(bench, "read_file", path="notes.md")
    assert not done.is_error and done.value["content"] == "# notes\nThe greet plan says hello.\n"
    assert done.value["totalLines"] == 2 and not done.value["truncated"]
    assert (await _call(bench, "read_file", path=str(project / "plans" / "greet.yaml"))).value[
        "path"
    ] == "plans/greet.yaml"  # an absolute path inside is fine
    assert not (await _call(bench, "read_file", path="inside-link.md")).is_error  # a link that stays in

    for path in (
        "../secret.txt",
        "plans/../../secret.txt",
        str(project.parent / "secret.txt"),
        "/etc/passwd",
        "leak.txt",  # a symlink pointing out
        "outside/secret.txt",  # through a symlinked directory
        "../nowhere.txt",
    ):
        refused = await _call(bench, "read_file", path=path)
        assert refused.is_error, path
        assert "outside the project directory" in refused.error_message, (path, refused.error_message)
        assert SECRET not in str(refused.value)

    for path in ("app.log", ".env", "build/out.txt", "sub/private.txt", ".git/config"):
        refused = await _call(bench, "read_file", path=path)
        assert refused.is_error and "ignored by the project's .gitignore" in refused.error_message, path
    assert "binary" in (await _call(bench, "read_file", path="blob.bin")).error_message
    assert "not found" in (await _call(bench, "read_file", path="plans/nope.yaml")).error_message
    assert "directory" in (await _call(bench, "read_file", path="plans")).error_message


async def test_read_file_pages_and_caps_long_files(bench: Any, project: Path) -> None:
    from graphchat.workbench import research

    (project / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 3001)))
    first = (await _call(bench, "read_file", path="long.txt")).value
    assert first["linesReturned"] == research.READ_DEFAULT_LINES and first["truncated"]
    assert first["totalLines"] == 3000 and first["content"].startswith("line 1\n")
    page = (await _call(bench, "read_file", path="long.txt", offset=2990, limit=50)).value
    assert page["content"] == "".join(f"line {n}\n" for n in range(2990, 3001)) and not page["truncated"]
    most = (await _call(bench, "read_file", path="long.txt", limit=100_000)).value
    assert most["linesReturned"] == research.READ_MAX_LINES
    (project / "wide.txt").write_text(("x" * 5000 + "\n") * 100)
    wide = (await _call(bench, "read_file", path="wide.txt")).value
    assert len(wide["content"]) <= research.READ_MAX_BYTES and wide["truncated"]
    assert all(len(line) == research.READ_MAX_LINE_CHARS for line in wide["content"].splitlines())


async def test_grep_and_glob_skip_ignored_binary_git_and_what_links_out(bench: Any) -> None:
    found = await _call(bench, "grep", pattern="hel+o")
    assert not found.is_error, found.error_message
    where = {(m["path"], m["line"]) for m in found.value["matches"]}
    assert where == {("notes.md", 2), ("sub/public.txt", 1)}, found.value
    assert not found.value["truncated"]

    files = (await _call(bench, "glob", pattern="**/*")).value["files"]
    assert files == [
        ".gitignore",
        "blob.bin",
        "notes.md",
        "plans/greet.yaml",
        "sub/.gitignore",
        "sub/public.txt",
    ]
    assert (await _call(bench, "glob", pattern="*.yaml")).value["files"] == ["plans/greet.yaml"]
    assert (await _call(bench, "glob", pattern="*.txt", dir="sub")).value["files"] == ["sub/public.txt"]
    assert "outside the project" in (await _call(bench, "glob", pattern="*", dir="..")).error_message

    only = await _call(bench, "grep", pattern="HELLO", case_insensitive=True, glob="sub/**")
    assert [m["path"] for m in only.value["matches"]] == ["sub/public.txt"]
    assert "outside the project" in (await _call(bench, "grep", pattern="x", path="outside")).error_message


async def test_grep_patterns_are_re2_capped_and_a_bad_one_is_told(bench: Any, project: Path) -> None:
    bad = await _call(bench, "grep", pattern="(unclosed")
    assert bad.is_error and "invalid pattern" in bad.error_message
    backreference = await _call(bench, "grep", pattern=r"(a)\1")  # not RE2: refused, not run
    assert backreference.is_error and "RE2" in backreference.error_message
    (project / "many.txt").write_text("match\n" * 2000)
    capped = (await _call(bench, "grep", pattern="^match$")).value
    assert capped["matchCount"] == 100 and capped["truncated"]
    assert (await _call(bench, "grep", pattern="^match$", max_matches=9999)).value["matchCount"] == 500
    # the classic catastrophic pattern for a backtracking engine finishes at once on RE2
    (project / "evil.txt").write_text("a" * 100_000 + "!\n")
    evil = await _call(bench, "grep", pattern="^(a+)+$", path="evil.txt")
    assert not evil.is_error and evil.value["matchCount"] == 0
    from graphchat.workbench import research

    (project / "huge.txt").write_bytes(b"match\n" * (research.GREP_MAX_FILE_BYTES // 6 + 1))
    big = (await _call(bench, "grep", pattern="nothing-here")).value
    assert big["truncated"] and big["skipped"]["over the size cap"] == ["huge.txt"]


async def test_research_tools_are_the_agents_only(bench: Any) -> None:
    for name in ("read_file", "grep", "glob"):
        assert bench.agent_catalog.get(f"workbench__{name}") is not None
        assert bench.catalog.get(f"workbench__{name}") is None
    assert not [t for t in bench.catalog.model_tools() if t["function"]["name"].startswith("workbench__")]
    step = {"id": "E9", "tool": "workbench__read_file", "input": {"path": "notes.md"}}
    added = await _call(bench, "add_step", **step)
    assert added.is_error and "draft is unchanged" in added.value["error"]
    assert any("workbench__" in problem for problem in added.value["problemsIntroduced"])


def test_a_plan_that_names_a_research_tool_does_not_run(graphchat: Any, workspace: Path) -> None:
    (workspace / "plans" / "peek.yaml").write_text(
        "identifier: peek\nname: Peek\ndescription: Reads a file.\nsteps:\n"
        "  - id: E0\n    tool_name: workbench__read_file\n    input: {path: graphchat.yaml}\n"
    )
    done = graphchat("plan", "run", "peek")
    assert done.returncode != 0 and done.stdout == ""
    assert "workbench__* tools do not exist in plans" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


async def test_a_grep_over_its_time_limit_stops_and_says_how_to_narrow_it(
    bench: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.workbench import research

    for n in range(300):
        (project / f"f{n}.txt").write_text("needle\n" * 200)
    # A limit of 0 s is over before the search thread can start: deterministic on any machine
    # (0.001 s was not: a fast machine found its 500 matches inside it).
    monkeypatch.setattr(research, "GREP_SECONDS", 0)
    slow = await _call(bench, "grep", pattern="needle", max_matches=500)
    assert slow.is_error and "took more than 0 s; narrow it with 'path' or 'glob'" in slow.error_message
