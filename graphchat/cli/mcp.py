"""`graphchat mcp` (placeholder until its owner lands it)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("mcp", help="(not yet available)")
