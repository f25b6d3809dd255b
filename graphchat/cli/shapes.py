"""`graphchat shapes list|show NAME`: what each tool was seen to return (the shape cache)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphchat.cli.output import print_json
from graphchat.errors import GraphchatError
from graphchat.shapes import ShapeStore
from graphchat.workspace import find_workspace


def _store(args: argparse.Namespace) -> Any:
    return ShapeStore(find_workspace(getattr(args, "home", None)) / "catalog" / "shapes")


def run_list(args: argparse.Namespace) -> int:
    store = _store(args)
    rows = store.list()
    empty = "no shapes recorded yet (they are learned from successful tool calls)"
    if args.json:
        # graph's {shapes: [{tool, seen_count, schema, example}], count} (its shapes_cmd.rs);
        # graphchat's updated_at and source beside; a note when empty
        shapes = []
        for row in rows:
            doc = store.get(str(row["tool"])) or {}
            shapes.append(
                {
                    "tool": row["tool"],
                    "seen_count": row["seen_count"],
                    "schema": doc.get("schema"),
                    "example": doc.get("example"),
                    "updated_at": row["updated_at"],
                    "source": row["source"],
                }
            )
        envelope: dict[str, Any] = {"shapes": shapes, "count": len(shapes)}
        if not shapes:
            envelope["note"] = empty
        print_json(envelope)
        return 0
    if not rows:
        print(empty, file=sys.stderr)
        return 0
    width = max(len(str(r["tool"])) for r in rows)
    lines = [
        f"{r['tool']:<{width}}  {r['source']:<8}  seen {r['seen_count']:>4}x  {r['updated_at'] or ''}"
        for r in rows
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def run_show(args: argparse.Namespace) -> int:
    import json

    doc = _store(args).get(args.name)
    if doc is None:
        raise GraphchatError(
            f"no shape recorded for {args.name}",
            1,
            hint=f"call it once (graphchat tools call {args.name} …) or see `graphchat shapes list`",
        )
    if args.json:
        print_json(doc)
        return 0
    out = [
        f"{doc.get('tool', args.name)}  ({doc.get('source', 'observed')}, seen {doc.get('seen_count', 0)}x, "
        f"updated {doc.get('updated_at')})",
        "",
        "schema:",
        json.dumps(doc.get("schema", {}), indent=2, ensure_ascii=False),
    ]
    if doc.get("observed_schema") is not None:
        out += ["", "observed schema:", json.dumps(doc["observed_schema"], indent=2, ensure_ascii=False)]
    out += ["", "example:", json.dumps(doc.get("example"), indent=2, ensure_ascii=False)]
    sys.stdout.write("\n".join(out) + "\n")
    return 0
