"""Builtin tool packs (graph's `builtin__` namespace): which ones a workspace has on.

`data` (builtin__reshape) is always on (`builtin__infer`, graph's `llm` pack, is a native tool);
`git`, `github` and `slack` are enabled with `tools: {packs: [...]}` in graphchat.yaml. As in graph,
whose `github` pack carries the git tools too, enabling `github` also enables `git`.
Each pack describes its tools in `<pack>.yaml` beside its module (package data), graph's own
pack documents (name, description, schemas, read_only), so plans and planners see the same
contract.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import ToolSource, ToolSpec
from graphchat.yamlfile import yaml12_loader

if TYPE_CHECKING:
    from graphchat.workspace import Settings

PREFIX = "builtin__"


def enabled_packs(settings: Settings) -> list[str]:
    packs = list(getattr(settings, "packs", ()) or ())
    if "github" in packs and "git" not in packs:
        packs.insert(packs.index("github"), "git")
    return packs


def pack_sources(settings: Settings) -> list[ToolSource]:
    """The sources of the always-on pack and of every enabled one, in that order."""
    # a cycle: graphchat.catalog.packs.data imports this module
    from graphchat.catalog.packs.data import DataPackSource

    sources: list[ToolSource] = [DataPackSource()]
    packs = enabled_packs(settings)
    if "git" in packs:
        # a cycle: graphchat.catalog.packs.git imports this module
        from graphchat.catalog.packs.git import GitPackSource

        sources.append(GitPackSource(settings))
    if "github" in packs:
        # a cycle: graphchat.catalog.packs.github imports this module
        from graphchat.catalog.packs.github import GithubPackSource

        sources.append(GithubPackSource(settings))
    if "slack" in packs:
        # a cycle: graphchat.catalog.packs.slack imports this module
        from graphchat.catalog.packs.slack import SlackPackSource

        sources.append(SlackPackSource())
    return sources


@cache
def _parsed(pack: str) -> list[dict[str, Any]]:
    """The pack's tool documents: `<pack>.yaml` beside this module, shipped as package data."""
    from importlib.resources import files

    import yaml

    text = (files(__name__) / f"{pack}.yaml").read_text(encoding="utf-8")
    return list(yaml.load(text, Loader=yaml12_loader()))  # noqa: S506 - a safe loader class


def pack_specs(pack: str) -> list[ToolSpec]:
    """ToolSpecs of a pack from its documents (`<pack>.yaml`: a YAML list of {name, description, ...})."""
    specs = []
    for doc in _parsed(pack):
        specs.append(
            ToolSpec(
                name=PREFIX + doc["name"],
                description=str(doc.get("description", "")).strip(),
                input_schema=doc.get("input_schema") or {"type": "object", "properties": {}},
                source=f"builtin:{pack}",
                family="read" if doc.get("read_only", True) else "write",
                output_schema=doc.get("output_schema"),
            )
        )
    return specs
