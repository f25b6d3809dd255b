"""Find the workspace's plans: every *.yaml/*.yml in plans/ (not its subfolders), sorted, then
in each folder of `plans.paths` (graphchat.yaml; registered by load_settings in graphchat.workspace), first
identifier wins.

A file that does not load is skipped with a one-line warning, and asking for it by name
prints its whole load error. Parsed plans are cached per process by (path, mtime, size).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from graphchat.errors import GraphchatError, did_you_mean
from graphchat.plans.loader import load_plan
from graphchat.plans.model import Plan, PlanLoadError, plan_identifier
from graphchat.workspace import more_plan_folders

Warn = Callable[[str], None]

_cache: dict[Path, tuple[tuple[int, int], Plan | PlanLoadError]] = {}


def load_cached(path: Path) -> Plan:
    """`load_plan` with a per-process cache keyed by (path, mtime, size)."""
    try:
        st = path.stat()
        key = (st.st_mtime_ns, st.st_size)
    except OSError:
        return load_plan(path)
    hit = _cache.get(path)
    if hit is not None and hit[0] == key:
        if isinstance(hit[1], PlanLoadError):
            raise hit[1]
        return hit[1]
    try:
        plan = load_plan(path)
    except PlanLoadError as err:
        _cache[path] = (key, err)
        raise
    _cache[path] = (key, plan)
    return plan


def plan_files(plans_dir: Path) -> list[Path]:
    """Every *.yaml / *.yml file in the folder, in sorted order, then those of its plans.paths
    folders; hidden ones skipped. Subfolders are not searched, as graph's `load_plan_docs`
    (pipeline/doc.rs) reads one directory."""
    files: list[Path] = []
    for folder in (plans_dir, *more_plan_folders(plans_dir)):
        if not folder.is_dir():
            continue
        files += sorted(
            path
            for path in folder.iterdir()
            if path.name.endswith((".yaml", ".yml")) and not path.name.startswith(".") and path.is_file()
        )
    return files


def summary(err: PlanLoadError) -> str:
    """One line for a load error: its first problem and how many more."""
    first = err.problems[0] if err.problems else str(err)
    more = len(err.problems) - 1
    return first + (f" (+{more} more problem{'s' if more > 1 else ''})" if more > 0 else "")


def relative_problems(err: PlanLoadError) -> list[str]:
    """The problems without their `<file>: ` prefix: `step <id>: <field>: <what>`."""
    prefix = f"{err.source}: "
    return [p[len(prefix) :] if p.startswith(prefix) else p for p in err.problems]


def located_problems(err: PlanLoadError) -> list[str]:
    """The problems as `<file>:<line>: step <id>: <field>: <what>` where the line is known."""
    out = []
    for problem, line in zip(relative_problems(err), err.lines, strict=False):
        out.append(f"{err.source}:{line}: {problem}" if line else problem)
    return out + relative_problems(err)[len(out) :]


def load_error_message(what: str, err: PlanLoadError) -> str:
    lines = [f"{what} does not load ({err.source}):"]
    lines += [f"  {p}" for p in located_problems(err)]
    return "\n".join(lines)


@dataclass
class PlanIndex:
    """The plans of a workspace: loaded ones by identifier, failed files with their errors."""

    plans_dir: Path
    plans: dict[str, Plan] = field(default_factory=dict)
    errors: dict[Path, PlanLoadError] = field(default_factory=dict)
    duplicates: dict[Path, str] = field(default_factory=dict)  # skipped file -> identifier
    raw_ids: dict[Path, str] = field(default_factory=dict)  # failed file -> identifier it declares

    def get(self, name: str) -> Plan:
        """A plan by identifier, `plan__<identifier>`, or file path. GraphchatError (exit 1) if none."""
        if _looks_like_path(name):
            path = Path(name).expanduser()
            if not path.is_file():
                raise GraphchatError(f"no plan file {name}")
            try:
                return load_cached(path)
            except PlanLoadError as err:
                raise GraphchatError(load_error_message("plan file", err)) from None
        ident = name if name in self.plans else plan_identifier(name) or name
        plan = self.plans.get(ident)
        if plan is not None:
            return plan
        for path, failure in self.errors.items():
            if path.stem == ident or self.raw_ids.get(path) == ident:
                raise GraphchatError(load_error_message(f"plan '{ident}'", failure))

        known = ", ".join(sorted(self.plans)) or "none"
        guess = did_you_mean(ident, self.plans)
        raise GraphchatError(
            f"unknown plan '{ident}' ({guess + ' ' if guess else ''}known plans: {known})",
            hint=f"plans are the *.yaml files under {self.plans_dir}",
        )


def discover(plans_dir: Path, *, warn: Warn | None = None) -> PlanIndex:
    """Load every plan under `plans_dir`; failures and duplicates are warned about and skipped."""
    index = PlanIndex(plans_dir=plans_dir)
    where: dict[str, Path] = {}
    for path in plan_files(plans_dir):
        try:
            plan = load_cached(path)
        except PlanLoadError as err:
            index.errors[path] = err
            ident = _declared_identifier(path)
            if ident:
                index.raw_ids[path] = ident
            if warn:
                warn(f"skipping plan {summary(err)}")
            continue
        if plan.identifier in index.plans:
            index.duplicates[path] = plan.identifier
            if warn:
                warn(
                    f"skipping plan {path}: duplicate identifier '{plan.identifier}' "
                    f"(first defined in {where[plan.identifier]})"
                )
            continue
        index.plans[plan.identifier] = plan
        where[plan.identifier] = path
    return index


def find_plan(name_or_path: str, plans_dir: Path, *, warn: Warn | None = None) -> Plan:
    """One plan by name or path; a plan that does not load raises its whole load error."""
    if _looks_like_path(name_or_path):
        return PlanIndex(plans_dir=plans_dir).get(name_or_path)
    return discover(plans_dir, warn=warn).get(name_or_path)


def _looks_like_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or os.sep in name or "/" in name


def _declared_identifier(path: Path) -> str | None:
    """The `identifier:` a broken file declares, found cheaply (the file may not even parse)."""
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("identifier:"):
                    value = line.split(":", 1)[1].split("#", 1)[0].strip().strip("'\"")
                    return value or None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def identifier_taken(plans_dir: Path, identifier: str, force: bool) -> str | None:
    """Why plans/<identifier>.yaml cannot be written, or None. --force replaces that file, never
    another file's plan of the same identifier (two plans of one identifier: one is skipped)."""
    path = plans_dir / f"{identifier}.yaml"
    if path.exists() and not force:
        return f"{path} already exists"
    other = discover(plans_dir).plans.get(identifier)
    if other is not None and other.path is not None and other.path.resolve() != path.resolve():
        return f"plan '{identifier}' already exists in {other.path}"
    return None
