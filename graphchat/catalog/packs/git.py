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
from graphchat.catalog.packs import pack_specs

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
        return pack_specs(SPECS, "git")

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        from graphchat.catalog.user_tools import apply_defaults

        handler = getattr(self, "_" + spec.name.removeprefix("builtin__"), None)
        if handler is None:
            return ToolResult.error(f"unknown git pack tool {spec.name}")
        try:
            return ToolResult(await handler(apply_defaults(spec.input_schema, arguments)))
        except (GitFailed, UnsafeArgument) as exc:
            return ToolResult.error(str(exc))

    async def git(self, *args: str, ok_codes: tuple[int, ...] = (0,)) -> tuple[int, bytes]:
        from graphchat.catalog.process import TimedOut, run_program

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
        from graphchat.catalog.process import run_dir

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


SPECS = """\
- name: git_changed_files
  description: 'Files changed between two git refs (merge-base diff), filtered to a path prefix ("" for
    all). `files`/`count` list the paths; `changes` carries one {path, status, old_path, additions, deletions,
    binary} object per file — status is added|modified|deleted|renamed|copied|type_changed, and old_path
    is set for renamed/copied. A deleted file''s path is listed but does not exist at the head ref: before
    mapping git_file over the result, `filter` the changes with where {value: "{{item.status}}", op: ne,
    to: deleted} and read {{item.path}}. No changes is {files: [], count: 0, changes: []}, not an error.

    '
  read_only: true
  input_schema:
    type: object
    required:
    - base
    - head
    - prefix
    properties:
      base:
        type: string
        description: Base ref or commit sha
      head:
        type: string
        description: Head ref or commit sha
      prefix:
        type: string
        description: Path prefix filter; "" matches every file
  output_schema:
    type: object
    properties:
      files:
        type: array
        items:
          type: string
      count:
        type: integer
      changes:
        type: array
        items:
          type: object
          properties:
            path:
              type: string
            status:
              type: string
              enum:
              - added
              - modified
              - deleted
              - renamed
              - copied
              - type_changed
            old_path:
              type:
              - string
              - 'null'
              description: Previous path
              for renamed/copied entries: null
            additions:
              type: integer
              description: Lines added (0 for binary)
            deletions:
              type: integer
              description: Lines deleted (0 for binary)
            binary:
              type: boolean
- name: git_diff
  description: 'Unified diff between two git refs (merge-base three-dot diff), optionally scoped to paths,
    with excludes, truncated to a byte budget for LLM consumption. A truncated diff ends with a "[diff
    truncated: showing X of Y bytes]" marker line; its absence means the diff is complete.

    '
  read_only: true
  input_schema:
    type: object
    required:
    - base
    - head
    - paths
    - exclude
    - max_bytes
    properties:
      base:
        type: string
        description: Base ref or commit sha
      head:
        type: string
        description: Head ref or commit sha
      paths:
        type: string
        description: Space-separated pathspecs; "." for everything
      exclude:
        type: string
        description: Space-separated paths to exclude; "" for none
      max_bytes:
        type: integer
        description: Truncate the diff to this many bytes (a marker line flags truncation)
- name: git_file
  description: 'Contents of a file at a git ref (git show), truncated to a byte budget for LLM consumption.
    A truncated file ends with a "[file truncated: showing X of Y bytes]" marker line; its absence means
    the content is complete. Use to read a file as it exists at the PR head rather than whatever is checked
    out.

    '
  read_only: true
  input_schema:
    type: object
    required:
    - ref
    - path
    properties:
      ref:
        type: string
        description: Ref or commit sha (e.g. the PR head sha)
      path:
        type: string
        description: File path within the repository
      max_bytes:
        type: integer
        default: 200000
        description: Truncate the content to this many bytes (a marker line flags truncation)
- name: git_grep
  description: 'Search tracked file contents at a git ref (git grep, POSIX extended regex), optionally
    scoped to pathspecs. Returns {matches, count, truncated} with every field always present — matches
    are {path, line, text} objects, capped at max_matches with truncated flagging the cut, and no match
    at all is {matches: [], count: 0}, not an error. Use to check code at the PR head rather than whatever
    is checked out.

    '
  read_only: true
  input_schema:
    type: object
    required:
    - pattern
    properties:
      pattern:
        type: string
        description: POSIX extended regex to search for
      ref:
        type: string
        default: HEAD
        description: Ref or commit sha to search at
      paths:
        type: string
        default: ''
        description: Space-separated pathspecs scoping the search; "" for everything
      max_matches:
        type: integer
        default: 200
        description: Cap on returned matches (truncated flags the cut)
  output_schema:
    type: object
    properties:
      matches:
        type: array
        items:
          type: object
          properties:
            path:
              type: string
            line:
              type: integer
            text:
              type: string
      count:
        type: integer
      truncated:
        type: boolean
- name: git_log
  description: 'Commits between two git refs (base..head — what landed since base), newest first. Returns
    {commits, count, total, truncated}; each commit is {sha, short_sha, subject, author, date, pr}, where
    pr is the pull request number parsed from a trailing "(#123)" in the subject, or null. Merge commits
    are excluded by default. The right input for changelog and release-summary steps — subjects carry
    the intent a diff makes an LLM infer. No commits in the range is {count: 0}, not an error.

    '
  read_only: true
  input_schema:
    type: object
    required:
    - base
    properties:
      base:
        type: string
        description: 'Ref or sha the range starts after (exclusive) — e.g. the previous release tag from
          gh_release''s previous_tag.

          '
      head:
        type: string
        default: HEAD
        description: Ref or sha the range ends at (inclusive); e.g. the release tag
      paths:
        type: string
        default: ''
        description: Space-separated pathspecs scoping the log; "" for everything
      max_commits:
        type: integer
        default: 200
        description: Cap on returned commits (truncated flags the cut; total always counts the whole range)
      include_merges:
        type: boolean
        default: false
        description: 'Keep merge commits. Default false — on a squash-merge history merges are noise,
          and on a merge-commit history the merge subject duplicates the branch it brought in.

          '
  output_schema:
    type: object
    properties:
      commits:
        type: array
        description: Newest first
        items:
          type: object
          properties:
            sha:
              type: string
              description: Full commit sha
            short_sha:
              type: string
              description: Abbreviated sha
            author:
              type: string
              description: Author name
            date:
              type: string
              description: Author date
              ISO 8601: null
            subject:
              type: string
              description: First line of the commit message
            pr:
              type:
              - integer
              - 'null'
              description: PR number from a trailing "(#123)"
              or null: null
      count:
        type: integer
        description: Commits returned
        ready for eq/gt gates: null
      total:
        type: integer
        description: Commits in the whole range
        before max_commits: null
      truncated:
        type: boolean
        description: true when max_commits cut the list
"""
