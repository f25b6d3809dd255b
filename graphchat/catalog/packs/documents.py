"""A pack's tool documents: `<pack>.yaml` beside the pack modules (package data), graph's own
documents (name, description, schemas, read_only), read into the ToolSpecs every pack offers."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import yaml

from graphchat.catalog.base import ToolSpec
from graphchat.yamlfile import yaml12_loader

PREFIX = "builtin__"


@cache
def _parsed(pack: str) -> list[dict[str, Any]]:
    """The pack's tool documents: `<pack>.yaml` beside this module, shipped as package data."""
    text = (files("graphchat.catalog.packs") / f"{pack}.yaml").read_text(encoding="utf-8")
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
