"""The packs' tool documents are YAML files beside their modules (`graphchat/catalog/packs/*.yaml`),
shipped as package data: a non-editable install has them, and every pack's tools load from them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphchat.catalog.packs.documents import pack_specs

REPO = Path(__file__).resolve().parents[2]
PACKS = ("data", "git", "github", "slack")


@pytest.mark.parametrize("pack", PACKS)
def test_each_pack_reads_its_tools_from_its_yaml_document(pack: str) -> None:
    specs = pack_specs(pack)
    assert specs, pack
    assert all(spec.name.startswith("builtin__") and spec.description for spec in specs)
    assert {spec.source for spec in specs} == {f"builtin:{pack}"}


def test_a_built_package_ships_the_pack_documents(tmp_path: Path) -> None:
    """What a wheel would hold: setuptools' build_py over a copy of the project."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "graphchat", project / "graphchat", ignore=shutil.ignore_patterns("__pycache__"))
    built = tmp_path / "build"
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from setuptools import setup; setup()",
            "-q",
            "build_py",
            "--build-lib",
            str(built),
        ],
        cwd=project,
        check=True,
        capture_output=True,
        timeout=60,
    )
    shipped = sorted(p.name for p in (built / "graphchat" / "catalog" / "packs").glob("*.yaml"))
    assert shipped == sorted(f"{pack}.yaml" for pack in PACKS)
