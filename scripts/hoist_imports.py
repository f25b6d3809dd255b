#!/usr/bin/env python3
"""Hoist function-level `graphchat.*` imports to the top of their module (issue 20, step 6).

Usage: python scripts/hoist_imports.py [REPO]      (REPO defaults to the current folder; it holds graphchat/)
       python scripts/hoist_imports.py REPO --dry  (print what would move and why the rest stays)

An import inside a function moves to the module's top when all of these hold:

- its module is not one of the lazy edges kept for start-up speed (KEEP_LAZY: command dispatch
  in cli/main.py, `python -m graphchat`, the warm client);
- it is not inside `if TYPE_CHECKING:`, nor in the body of a `try:` that catches ImportError (an
  optional import), and not the only statement of its block;
- the new top-level edge makes no import cycle at import time: the graph of top-level imports
  between graphchat modules (a module also imports its parent packages) stays acyclic where it
  is acyclic today;
- no graphchat module starts importing a heavy third-party library (HEAVY: litellm, mcp, rich,
  prompt_toolkit, textual, …) at import time that did not already: start-up paths stay light;
- the name it binds means nothing else at module level, and is not assigned in the function;
- the name is not monkeypatched by the tests (a from-import bound at import time would no longer
  see the patch).

Candidates are taken in a fixed order (file path, then line), each accepted one adds its edge
before the next is judged, and every rule only gets stricter as edges are added: a second run
changes nothing (idempotent), and two runs over the same tree give the same result
(deterministic). After editing, `ruff check --fix --select I` sorts the touched files' imports and
`ruff format` formats them (the ruff beside this Python, else on PATH).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# third-party libraries slow to import (measured with `python -X importtime`): a module that
# did not import one at import time must not start to
HEAVY = (
    "litellm",
    "openai",
    "mcp",
    "mcp_types",
    "httpx",
    "httpx2",
    "anyio",
    "pydantic",
    "rich",
    "prompt_toolkit",
    "textual",
    "jsonschema",
    "jsonschema_specifications",
    "pathspec",
    "yaml",  # tests/warm/test_wire_json.py: the warm client imports neither yaml nor orjson
    "orjson",
    "ruamel",
)
# what a command's own module (graphchat/cli/, off every start-up path: `--help` imports only
# cli/parsers/) may import at its top although HEAVY lists it: the budgets of `tools list`,
# `threads list` and `plan validate` name litellm and the MCP SDK, and these cost milliseconds
COMMAND_MAY_IMPORT = ("orjson", "yaml", "ruamel", "rich")
# modules whose function-level imports stay lazy: they exist for start-up speed
KEEP_LAZY = ("graphchat.cli.main", "graphchat.__main__", "graphchat.warm.client")
# What start-up imports: `graphchat --help` imports cli/main and every command group's parser
# (`GROUPS` in cli/main.py: cli/parsers/<group>.py, which name the commands' code without
# importing it), and the roots below their own (asked of Python: Tree.started_modules). Their
# import must not pull in one more module: an import in a module of that set moves only when
# everything it imports is imported there already (the rest stays lazy, said so).
# `ask` imports these before it hands its turn to a warm helper (cli/ask.py: run): they stay light
STARTUP_ROOTS = (
    "graphchat.__main__",
    "graphchat.cli.main",
    "graphchat.cli.ask",  # `ask`'s command module: what it imports before the hand-over
    "graphchat.cli.completion",  # Tab: the parser and the completers, nothing more
    "graphchat.warm.client",
    "graphchat.host",
    "graphchat.cli.front",
    "graphchat.runs.turn",
    "graphchat.catalog.mcp.features",
)


@dataclass
class Candidate:
    path: Path
    module: str
    node: ast.Import | ast.ImportFrom
    function: ast.FunctionDef | ast.AsyncFunctionDef
    targets: list[str]  # graphchat modules it imports
    names: list[str]  # names it binds


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class Tree:
    """The graphchat package: its modules, their top-level imports, and the function-level ones."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, Path] = {}
        self.trees: dict[str, ast.Module] = {}
        for path in sorted((root / "graphchat").rglob("*.py")):
            name = module_name(root, path)
            self.paths[name] = path
            self.trees[name] = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.edges: dict[str, set[str]] = {m: set() for m in self.paths}
        self.heavy: dict[str, set[str]] = {m: set() for m in self.paths}  # direct heavy imports
        for module, tree in self.trees.items():
            parent = module.rpartition(".")[0]
            if parent in self.paths:
                self.edges[module].add(parent)
            for node in self.top_imports(tree):
                for target in self.targets(module, node):
                    self.edges[module].add(target)
                for lib in self.heavy_of(node):
                    self.heavy[module].add(lib)
        # one set a start-up path: what it imports (a hoisted import may not add to any of them)
        self.startup: list[set[str]] = []
        for started in self.started_modules():
            path_set: set[str] = set()
            for module in started:
                if module in self.paths:
                    path_set |= self.closure(module)
            self.startup.append(path_set)

    def started_modules(self) -> list[list[str]]:
        """The graphchat modules each start-up path imports, asked of Python: `--help`'s parser
        (every command group's, from cli/parsers/), and each of STARTUP_ROOTS."""
        paths = [
            "import contextlib, io\nfrom graphchat.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['--help'])\n",
            *(f"import {root}\n" for root in STARTUP_ROOTS if root != "graphchat.__main__"),
        ]
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        out = []
        for code in paths:
            code = "import sys\n" + code + "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('graphchat'))))\n"
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            out.append(done.stdout.split())
        return out

    def closure(self, start: str) -> set[str]:
        seen = {start}
        todo = [start]
        while todo:
            for nxt in self.edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    @staticmethod
    def top_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
        """Imports run when the module is imported (not under TYPE_CHECKING, not in functions)."""
        found: list[ast.Import | ast.ImportFrom] = []

        def walk(body: list[ast.stmt]) -> None:
            for node in body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found.append(node)
                elif isinstance(node, ast.If):
                    if not is_type_checking(node.test):
                        walk(node.body)
                    walk(node.orelse)
                elif isinstance(node, ast.Try):
                    walk(node.body)
                    for handler in node.handlers:
                        walk(handler.body)
                    walk(node.orelse)
                    walk(node.finalbody)
                elif isinstance(node, ast.ClassDef):
                    walk(node.body)

        walk(tree.body)
        return found

    def resolve(self, module: str, node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        base = module.split(".")
        if not self.paths[module].name == "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def targets(self, module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
        """The graphchat modules an import statement runs."""
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = self.resolve(module, node)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        out = []
        for name in names:
            while name and name not in self.paths:
                name = name.rpartition(".")[0]
            if name.startswith("graphchat") and name in self.paths:
                out.append(name)
        return sorted(set(out))

    @staticmethod
    def heavy_of(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            heads = [alias.name.split(".")[0] for alias in node.names]
        else:
            heads = [(node.module or "").split(".")[0]] if node.level == 0 else []
        return [h for h in heads if h in HEAVY]

    def reaches(self, start: str, goal: str) -> bool:
        seen = {start}
        todo = [start]
        while todo:
            current = todo.pop()
            if current == goal:
                return True
            for nxt in self.edges[current]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    def heavy_closure(self, start: str) -> set[str]:
        seen = {start}
        todo = [start]
        libs: set[str] = set()
        while todo:
            current = todo.pop()
            libs |= self.heavy[current]
            for nxt in self.edges[current]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return libs

    def importers(self, target: str) -> set[str]:
        """Every module whose import runs `target` (itself included)."""
        out = {target}
        changed = True
        while changed:
            changed = False
            for module, targets in self.edges.items():
                if module not in out and targets & out:
                    out.add(module)
                    changed = True
        return out


def bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.asname or alias.name.split(".")[0] for alias in node.names]
    return [alias.asname or alias.name for alias in node.names]


def import_key(node: ast.Import | ast.ImportFrom, module: str, tree: Tree) -> set[tuple[str, str, str]]:
    """(from-module, name, bound name) of each name, to compare two imports."""
    if isinstance(node, ast.Import):
        return {("", alias.name, alias.asname or alias.name.split(".")[0]) for alias in node.names}
    base = tree.resolve(module, node)
    return {(base, alias.name, alias.asname or alias.name) for alias in node.names}


def module_bindings(tree: ast.Module, module: str, t: Tree) -> dict[str, set[tuple[str, str, str]] | None]:
    """Names bound at module level: an import's keys, or None for anything else (def, class, =)."""
    bindings: dict[str, set[tuple[str, str, str]] | None] = {}

    def bind(name: str, key: set[tuple[str, str, str]] | None) -> None:
        if key is None or (name in bindings and bindings[name] is None):
            bindings[name] = None
        else:
            bindings[name] = (bindings.get(name) or set()) | key

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                keys = import_key(node, module, t)
                for key in keys:
                    bind(key[2], {key})
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bind(node.name, None)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(node, field, []) or [])
                for handler in getattr(node, "handlers", []):
                    walk(handler.body)
                if isinstance(node, ast.For):
                    for n in ast.walk(node.target):
                        if isinstance(n, ast.Name):
                            bind(n.id, None)
            else:
                for n in ast.walk(node):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        bind(n.id, None)

    walk(tree.body)
    return bindings


def assigned_in(function: ast.AST, skip: ast.AST) -> set[str]:
    """Names the function binds other than through `skip` (parameters, =, for, with, imports)."""
    names: set[str] = set()
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = function.args
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None:
                names.add(a.arg)
    for node in ast.walk(function):
        if node is skip:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and node is not skip:
            names.update(bound_names(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not function:
            names.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def patched_names(root: Path) -> set[str]:
    """Attribute names the tests monkeypatch or mock.patch (`setattr(x, "name", …)`, `"a.b.name"`)."""
    names: set[str] = set()
    pattern = re.compile(r"""(?:setattr|patch(?:\.object)?)\(\s*(?:[\w.\[\]"']+\s*,\s*)?["']([\w.]+)["']""")
    tests = root / "tests"
    for path in sorted(tests.rglob("*.py")) if tests.is_dir() else []:
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            names.add(match.group(1).rpartition(".")[2])
    return names


def candidates(t: Tree) -> list[Candidate]:
    found: list[Candidate] = []
    for module in sorted(t.paths, key=lambda m: str(t.paths[m])):
        tree = t.trees[module]

        def walk(node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None, module: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and is_type_checking(child.test):
                    for sub in child.orelse:
                        walk(sub, function, module)
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)) and function is not None:
                    targets = t.targets(module, child)
                    if targets:
                        found.append(Candidate(t.paths[module], module, child, function, targets, bound_names(child)))
                    continue
                inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
                walk(child, inner, module)

        walk(tree, None, module)
    found.sort(key=lambda c: (str(c.path), c.node.lineno))
    return found


def parents_of(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    out: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[child] = node
    return out


def judge(t: Tree, c: Candidate, patched: set[str], parents: dict[ast.AST, ast.AST]) -> str | None:
    """None when the import may move; else why it stays."""
    if c.module in KEEP_LAZY:
        return "start-up edge (kept lazy)"
    node: ast.AST = c.node
    while node is not c.function:
        parent = parents[node]
        if isinstance(parent, ast.Try) and node in parent.body and _catches_import_error(parent):
            return "an optional import (try … except ImportError)"
        node = parent
    parent = parents[c.node]
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and c.node in block and len(block) == 1:
            return "only statement of its block"
    if isinstance(c.node, ast.ImportFrom) and any(alias.name == "*" for alias in c.node.names):
        return "star import"
    if isinstance(c.node, ast.ImportFrom) and any(alias.name in patched for alias in c.node.names):
        return "a name the tests patch"
    bindings = module_bindings(t.trees[c.module], c.module, t)
    keys = import_key(c.node, c.module, t)
    for key in keys:
        existing = bindings.get(key[2], set())
        if existing is None or (existing and existing != {key}):
            return f"`{key[2]}` means something else at module level"
    if set(c.names) & assigned_in(c.function, c.node):
        return "the function binds the same name"
    for target in c.targets:
        if target == c.module:
            continue
        if t.reaches(target, c.module):
            return f"import cycle through {target}"
    pulled: set[str] = set()
    for target in c.targets:
        pulled |= t.closure(target)
    if any(c.module in started and not pulled <= started for started in t.startup):
        return "command dispatch (start-up would import more)"
    gained: set[str] = set()
    for target in c.targets:
        gained |= t.heavy_closure(target)
    if gained:
        for importer in sorted(t.importers(c.module)):
            allowed = t.heavy_closure(importer)
            if importer.startswith("graphchat.cli.") and not any(importer in s for s in t.startup):
                allowed |= set(COMMAND_MAY_IMPORT)
            if not gained <= allowed:
                return f"would make {importer} import {', '.join(sorted(gained - allowed))}"
    return None


def _catches_import_error(node: ast.Try) -> bool:
    """A `try:` whose handlers catch a failed import (ImportError or its subclass, or bare)."""
    for handler in node.handlers:
        caught = handler.type
        names = [caught] if not isinstance(caught, ast.Tuple) else list(caught.elts)
        if caught is None or any(
            isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
            for n in names
        ):
            return True
    return False


def insertion_line(tree: ast.Module) -> int:
    """The line (1-based) after which a new top-level import goes: after the last top-level
    import, else after the docstring and `from __future__`."""
    last = 0
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last = node.end_lineno or node.lineno
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and last == 0:
            last = node.end_lineno or node.lineno
        else:
            break
    return last


def apply(root: Path, dry: bool) -> tuple[int, int, dict[str, int]]:
    t = Tree(root)
    patched = patched_names(root)
    moved: dict[Path, list[Candidate]] = {}
    kept: dict[str, int] = {}
    parents_cache: dict[str, dict[ast.AST, ast.AST]] = {}
    for c in candidates(t):
        parents = parents_cache.setdefault(c.module, parents_of(t.trees[c.module]))
        why = judge(t, c, patched, parents)
        if why is None:
            moved.setdefault(c.path, []).append(c)
            t.edges[c.module].update(x for x in c.targets if x != c.module)
            # the name is now bound at module level: later candidates see it
            t.trees[c.module].body.insert(0, c.node)  # for module_bindings only
            if dry:
                print(f"move  {c.path.relative_to(root)}:{c.node.lineno}  {ast.unparse(c.node)}")
        else:
            reason = re.sub(r"`[^`]*`", "a name", why.split(" through ")[0])
            reason = re.sub(r"would make \S+ import .*", "would import a heavy library", reason)
            kept[reason] = kept.get(reason, 0) + 1
            if dry:
                print(f"keep  {c.path.relative_to(root)}:{c.node.lineno}  {ast.unparse(c.node)}  ({why})")
    if not dry:
        for path, moving in moved.items():
            rewrite(path, moving)
        touched = [str(p) for p in sorted(moved)]
        if touched:
            ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff") or "ruff"
            subprocess.run([ruff, "check", "--fix", "--select", "I,D202", "-q", *touched], check=False)
            subprocess.run([ruff, "format", "-q", *touched], check=True)
    return sum(len(v) for v in moved.values()), sum(kept.values()), kept


def rewrite(path: Path, moving: list[Candidate]) -> None:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    at = insertion_line(tree)
    new_top: list[str] = []
    seen: set[str] = set()
    for c in moving:
        statement = ast.unparse(c.node)
        if statement not in seen:
            seen.add(statement)
            new_top.append(statement + "\n")
    drop = set()
    for c in moving:
        for line in range(c.node.lineno, (c.node.end_lineno or c.node.lineno) + 1):
            drop.add(line)
    # a blank line after an import that opened its block goes with it
    for c in moving:
        after = (c.node.end_lineno or c.node.lineno) + 1
        before = c.node.lineno - 1
        while before in drop:
            before -= 1
        opens_block = before >= 1 and lines[before - 1].rstrip().endswith(":")
        if opens_block and after <= len(lines) and not lines[after - 1].strip():
            drop.add(after)
    out: list[str] = []
    for number, line in enumerate(lines, start=1):
        if number in drop:
            continue
        out.append(line)
        if number == at:
            out.extend(new_top)
    if at == 0:
        out = new_top + out
    path.write_text("".join(out), encoding="utf-8")


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    dry = "--dry" in sys.argv
    root = Path(args[0] if args else ".").resolve()
    if not (root / "graphchat").is_dir():
        print(f"hoist.py: {root} holds no graphchat/ folder", file=sys.stderr)
        return 2
    moved, kept, why = apply(root, dry)
    print(f"hoist.py: {moved} import(s) moved to their module's top, {kept} kept inside functions")
    for reason, count in sorted(why.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  kept {count:4d}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
