"""The `git` pack: graph's `builtin__git_*` tools over the local repository.

`git` runs as a subprocess (no shell) in the folder tools run in (see `process.run_dir`).
Results match graph's pack (its bash + jq scripts) field for field; an unresolvable ref or a
missing file is a tool error, never an empty result a gate would misread.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.catalog.argv import UnsafeArgument, as_data, inside
from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.packs.documents import pack_specs
from graphchat.catalog.process import TimedOut, run_dir, run_program
from graphchat.catalog.user_tools import apply_defaults

if TYPE_CHECKING:
    from graphchat.workspace import Settings

TIMEOUT_SECS = 30
_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type_changed"}
_GREP_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>[0-9]+):(?P<text>.*)$", re.DOTALL)
_PR_NUMBER = re.compile(r"\(#(?P<n>[0-9]+)\)\s*$")


class GitFailed(Exception):
    """git exited non-zero (or could not run): the tool error's message."""


class GitPackSource(ToolSource):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def specs(self) -> list[ToolSpec]:
        return pack_specs("git")

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        handler = getattr(self, "_" + spec.name.removeprefix("builtin__"), None)
        if handler is None:
            return ToolResult.error(f"unknown git pack tool {spec.name}")
        try:
            return ToolResult(await handler(apply_defaults(spec.input_schema, arguments)))
        except (GitFailed, UnsafeArgument) as exc:
            return ToolResult.error(str(exc))

    async def git(self, *args: str, ok_codes: tuple[int, ...] = (0,)) -> tuple[int, bytes]:
        try:
            done = await run_program(["git", *args], cwd=self.cwd(), timeout=TIMEOUT_SECS)
        except TimedOut:
            raise GitFailed(f"git {args[0]}: timed out after {TIMEOUT_SECS}s") from None
        except OSError as exc:
            raise GitFailed(f"failed to run 'git': {exc.strerror or exc}") from None
        if done.code not in ok_codes:
            detail = done.err_text() or f"exit status {done.code}"
            raise GitFailed(f"git {args[0]} failed: {detail}")
        return done.code, done.stdout

    def cwd(self) -> Path:
        return run_dir(self.settings)

    # --- chosen values, held to the argument rule (graphchat.catalog.argv) ---------------------

    async def ref(self, tool: str, name: str, value: Any) -> str:
        """A ref argument: never an option, and it must name a commit here (`HEAD~3`, `v1.0`)."""
        text = as_data(str(value), f"{tool}: argument '{name}'")
        code, _ = await self.git(
            "rev-parse", "--verify", "-q", "--end-of-options", f"{text}^{{commit}}", ok_codes=(0, 1)
        )
        if code != 0:
            raise GitFailed(
                f"{tool}: argument '{name}' is {text!r}, which is not a commit in this repository"
            )
        return text

    async def paths(self, tool: str, name: str, value: Any) -> list[str]:
        """Space-separated pathspecs (graph's lists); each plain path stays inside the repository."""
        words = _words(value)
        if not words:
            return words
        plain = [w for w in words if not w.startswith(":")]  # `:(exclude)…`, `:/` are git's magic
        if plain:
            _, top = await self.git("rev-parse", "--show-toplevel")
            root = Path(_text(top).strip())
            for word in plain:
                inside(root, self.cwd(), word, f"{tool}: argument '{name}'")
        return words

    async def path(self, tool: str, name: str, value: Any) -> str:
        """A file path inside the repository (relative to its top level, as in `REF:PATH`)."""
        text = str(value)
        _, top = await self.git("rev-parse", "--show-toplevel")
        root = Path(_text(top).strip())
        base = root if not text.startswith(("./", "../")) else self.cwd()
        return inside(root, base, text, f"{tool}: argument '{name}'")

    # --- the tools ------------------------------------------------------------------------------

    async def _git_changed_files(self, a: dict[str, Any]) -> dict[str, Any]:
        base = await self.ref("git_changed_files", "base", a["base"])
        head = await self.ref("git_changed_files", "head", a["head"])
        rng = f"{base}...{head}"
        _, names = await self.git("diff", "--name-status", "-M", "--end-of-options", rng, "--")
        _, nums = await self.git("diff", "--numstat", "-M", "--end-of-options", rng, "--")
        status_lines = [line for line in _text(names).split("\n") if line]
        numstat_lines = [line for line in _text(nums).split("\n") if line]
        changes = []
        for index, line in enumerate(status_lines):
            parts = line.split("\t")
            code = parts[0]
            moved = code[:1] in ("R", "C")
            counts = numstat_lines[index].split("\t") if index < len(numstat_lines) else []
            added = counts[0] if counts else "-"
            deleted = counts[1] if len(counts) > 1 else "-"
            if code in _STATUS:
                status = _STATUS[code]
            elif code.startswith("R"):
                status = "renamed"
            elif code.startswith("C"):
                status = "copied"
            else:
                status = code
            changes.append(
                {
                    "path": parts[2] if moved and len(parts) > 2 else (parts[1] if len(parts) > 1 else None),
                    "status": status,
                    "old_path": parts[1] if moved and len(parts) > 1 else None,
                    "additions": 0 if added == "-" else int(added),
                    "deletions": 0 if deleted == "-" else int(deleted),
                    "binary": added == "-",
                }
            )
        prefix = str(a.get("prefix") or "")
        changes = [c for c in changes if isinstance(c["path"], str) and c["path"].startswith(prefix)]
        return {"files": [c["path"] for c in changes], "count": len(changes), "changes": changes}

    async def _git_diff(self, a: dict[str, Any]) -> dict[str, Any]:
        base = await self.ref("git_diff", "base", a["base"])
        head = await self.ref("git_diff", "head", a["head"])
        paths = await self.paths("git_diff", "paths", a.get("paths"))
        exclude = await self.paths("git_diff", "exclude", a.get("exclude"))
        spec = [*paths, *(f":(exclude){e}" for e in exclude)]
        _, out = await self.git("diff", "--end-of-options", f"{base}...{head}", "--", *spec)
        return {"text": _truncated(out, int(a["max_bytes"]), "diff")}

    async def _git_file(self, a: dict[str, Any]) -> dict[str, Any]:
        ref = await self.ref("git_file", "ref", a["ref"])
        path = await self.path("git_file", "path", a["path"])
        _, out = await self.git("show", "--end-of-options", f"{ref}:{path}")
        return {"text": _truncated(out, int(a.get("max_bytes", 200000)), "file")}

    async def _git_grep(self, a: dict[str, Any]) -> dict[str, Any]:
        ref = await self.ref("git_grep", "ref", a.get("ref") or "HEAD")
        spec = await self.paths("git_grep", "paths", a.get("paths"))
        # the pattern follows -e; the ref is checked above (git grep has no --end-of-options)
        args = ["grep", "-nIE", "-e", str(a["pattern"]), ref, "--", *spec]
        _, out = await self.git(*args, ok_codes=(0, 1))
        limit = int(a.get("max_matches", 200))
        lines = [line for line in _text(out).split("\n") if line]
        matches = []
        for line in lines[:limit]:
            if line.startswith(ref + ":"):
                line = line[len(ref) + 1 :]
            found = _GREP_LINE.match(line)
            if found:
                matches.append({"path": found["path"], "line": int(found["line"]), "text": found["text"]})
        return {"matches": matches, "count": len(matches), "truncated": len(lines) > limit}

    async def _git_log(self, a: dict[str, Any]) -> dict[str, Any]:
        base = await self.ref("git_log", "base", a["base"])
        head = await self.ref("git_log", "head", a.get("head") or "HEAD")
        rng = f"{base}..{head}"
        filters = [] if a.get("include_merges") is True else ["--no-merges"]
        spec = ["--", *await self.paths("git_log", "paths", a.get("paths"))]
        limit = int(a.get("max_commits", 200))
        _, counted = await self.git("rev-list", "--count", *filters, "--end-of-options", rng, *spec)
        total = int(_text(counted).strip() or 0)
        _, out = await self.git(
            "log",
            *filters,
            f"--max-count={limit}",
            "--pretty=format:%H%x1f%h%x1f%an%x1f%aI%x1f%s%x1e",
            "--end-of-options",
            rng,
            *spec,
        )
        commits = []
        for record in _text(out).split("\x1e"):
            record = record.removeprefix("\n")
            if not record:
                continue
            fields = record.split("\x1f") + [""] * 5
            pr = _PR_NUMBER.search(fields[4])
            commits.append(
                {
                    "sha": fields[0],
                    "short_sha": fields[1],
                    "author": fields[2],
                    "date": fields[3],
                    "subject": fields[4],
                    "pr": int(pr["n"]) if pr else None,
                }
            )
        return {"commits": commits, "count": len(commits), "total": total, "truncated": total > limit}


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _words(value: Any) -> list[str]:
    """graph's space-separated pathspec lists (`for p in $paths`)."""
    return str(value or "").split()


def _truncated(data: bytes, limit: int, what: str) -> str:
    """The first `limit` bytes, with graph's marker line when cut; trimmed as graph's exec output."""
    text = _text(data[: max(limit, 0)])
    if len(data) > limit:
        text += f"\n\n[{what} truncated: showing {limit} of {len(data)} bytes]\n"
    return text.strip()
