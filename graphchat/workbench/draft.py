"""The workbench's draft: one plan document in memory, edited only through the authoring core.

Every edit goes through `authoring.edited` (a copy is edited and kept only when it adds no
static problem), so the draft on screen is always what an accepted edit left. One level of
undo: each change keeps the document it replaced; undoing swaps the two (again: redo). Saving
writes back to the file the draft was loaded from, or to `<plans dir>/<identifier>.yaml` for a
new draft, and never over a file holding another plan.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from graphchat.fsutil import write_atomic
from graphchat.plans import authoring
from graphchat.plans.loader import load_plan_data
from graphchat.plans.model import PlanLoadError

if TYPE_CHECKING:
    from graphchat.plans.model import Plan


class DraftError(Exception):
    """A workbench action that cannot happen now (unsaved changes, nothing to undo…); `details`
    go into the tool's error result beside the message."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


def blank(identifier: str = "new_plan") -> CommentedMap:
    data = CommentedMap()
    data["identifier"] = identifier
    data["name"] = identifier.replace("_", " ").capitalize()
    data["description"] = f"{data['name']}."
    data["steps"] = CommentedSeq()
    return data


class Draft:
    """The plan being edited. `on_change` callbacks are told after every change."""

    def __init__(self, plans_dir: Path) -> None:
        self.plans_dir = plans_dir
        self.data: CommentedMap = blank()
        self.path: Path | None = None  # the file it was loaded from (its save target)
        self._saved: str | None = None  # the text last loaded or saved
        self._snapshot: tuple[CommentedMap, Path | None] | None = None
        self.problems: list[str] = authoring.static_problems(self.data)
        self.on_change: list[Callable[[], None]] = []

    # -- state --------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        return authoring.dump_document(self.data)

    @property
    def dirty(self) -> bool:
        """Changes not saved: since the last load or save; for a new draft, anything in it."""
        if self._saved is None:
            return self.text != authoring.dump_document(blank())
        return self.text != self._saved

    @property
    def identifier(self) -> str:
        return str(self.data.get("identifier") or "")

    def plan(self) -> Plan | None:
        """The draft as a loaded plan, or None while it has static problems."""
        try:
            return load_plan_data(authoring.plain(self.data), str(self.path or "<draft>"))
        except PlanLoadError:
            return None

    def _replace(self, data: CommentedMap, path: Path | None) -> None:
        self._snapshot = (self.data, self.path)
        if data.get("identifier") != self.data.get("identifier") and path is self.path:
            path = None  # a new identity is a new file, never the old plan's
        self.data, self.path = data, path
        self.problems = authoring.static_problems(data)
        self._changed()

    def _changed(self) -> None:
        for listener in list(self.on_change):
            listener()

    # -- loading ------------------------------------------------------------------------------

    def load(self, target: str, *, overwrite: bool = False) -> Path:
        """Replace the draft with plan `target` (a name or a path); refused while unsaved."""
        if self.dirty and not overwrite:
            raise DraftError(
                "the draft has unsaved changes; loading would drop them. Ask the person, then call "
                "load_plan again with overwrite_draft: true (or save_plan first)"
            )
        path = authoring.locate(self.plans_dir, target)
        data = authoring.read_document(path)
        self._replace(data, path)
        self.path = path
        self._saved = self.text
        return path

    def start(self, text: str, source: str, *, overwrite: bool = False) -> None:
        """Replace the draft with a new, unsaved plan document (a frozen chat): it has no file
        yet, and saving it writes `<plans dir>/<identifier>.yaml`."""
        if self.dirty and not overwrite:
            raise DraftError("the draft has unsaved changes; opening another plan would drop them")
        self._replace(authoring.parse_document(text, source), None)
        self.path = None
        self._saved = None

    def guard(self, overwrite: bool) -> None:
        """`workbench__draft_plan`'s protection, checked before the planner is asked: the same
        as `load`'s."""
        if self.dirty and not overwrite:
            raise DraftError(
                "the draft has unsaved changes; drafting would replace them. Ask the person, then "
                "call draft_plan again with overwrite_draft: true (or save_plan first)"
            )

    def replace(self, text: str, source: str, *, overwrite: bool = False) -> None:
        """Replace the whole draft with a drafted plan document (`workbench__draft_plan`): refused
        while unsaved like `load`; it keeps the file only when the identifier stays, and what
        was last saved (so undoing it gives back a clean draft). One level of undo covers it."""
        self.guard(overwrite)
        self._replace(authoring.parse_document(text, source), self.path)

    @property
    def empty(self) -> bool:
        """Nothing in it yet: the empty draft a bare `workbench plan` opens."""
        return self.text == authoring.dump_document(blank())

    # -- edits --------------------------------------------------------------------------------

    def edit(
        self, edit: Callable[[CommentedMap], dict[str, Any]], *, renames: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Apply an authoring edit; raises authoring's EditRejected / EditRefused / AuthoringError
        with the draft untouched. Returns graph's envelope (without a file: nothing is saved)."""
        data, summary, remaining = authoring.edited(self.data, edit, renames=renames)
        self._replace(data, self.path)
        out: dict[str, Any] = {"ok": True, **summary, "unsaved": True}
        if remaining:
            out["preExistingProblems"] = remaining
            out["note"] = "edit applied; the plan is still invalid, but only from pre-existing problems"
        return out

    def undo(self) -> None:
        """Swap the draft with the one the last change replaced (again: redo)."""
        if self._snapshot is None:
            raise DraftError("nothing to undo: the draft has not changed in this workbench")
        data, path = self._snapshot
        self._snapshot = (self.data, self.path)
        self.data, self.path = data, path
        self.problems = authoring.static_problems(data)
        self._changed()

    # -- saving -------------------------------------------------------------------------------

    def target(self) -> Path:
        if self.path is not None:
            return self.path
        identifier = self.identifier
        if not identifier:
            raise DraftError("the draft has no identifier; set one with update_metadata first")
        return self.plans_dir / f"{identifier}.yaml"

    def save(self) -> Path:
        path = self.target()
        if path.exists():
            if self.path is None:
                raise DraftError(f"{path} already exists and was not loaded here; change the identifier")
            try:
                on_disk = authoring.read_document(path).get("identifier")
            except (authoring.AuthoringError, authoring.EditRefused):
                on_disk = None
            if on_disk is not None and on_disk != self.data.get("identifier"):
                raise DraftError(f"{path} holds plan {on_disk!r}, not {self.identifier!r}; not overwritten")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, self.text, keep_mode=path.exists())
        self.path = path
        self._saved = self.text
        self._changed()
        return path
