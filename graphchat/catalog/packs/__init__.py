"""Builtin tool packs (graph's `builtin__` namespace): which ones a workspace has on.

`data` (builtin__reshape) is always on (`builtin__infer`, graph's `llm` pack, is a native tool);
`git`, `github` and `slack` are enabled with `tools: {packs: [...]}` in graphchat.yaml. As in graph,
whose `github` pack carries the git tools too, enabling `github` also enables `git`.
Each pack describes its tools in `<pack>.yaml` beside its module (package data), graph's own
pack documents (name, description, schemas, read_only), so plans and planners see the same
contract (`documents.py` reads them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphchat.catalog.base import ToolSource
from graphchat.catalog.packs.data import DataPackSource
from graphchat.catalog.packs.git import GitPackSource
from graphchat.catalog.packs.github import GithubPackSource
from graphchat.catalog.packs.slack import SlackPackSource

if TYPE_CHECKING:
    from graphchat.workspace import Settings


def enabled_packs(settings: Settings) -> list[str]:
    packs = list(getattr(settings, "packs", ()) or ())
    if "github" in packs and "git" not in packs:
        packs.insert(packs.index("github"), "git")
    return packs


def pack_sources(settings: Settings) -> list[ToolSource]:
    """The sources of the always-on pack and of every enabled one, in that order."""
    sources: list[ToolSource] = [DataPackSource()]
    packs = enabled_packs(settings)
    if "git" in packs:
        sources.append(GitPackSource(settings))
    if "github" in packs:
        sources.append(GithubPackSource(settings))
    if "slack" in packs:
        sources.append(SlackPackSource())
    return sources
