"""A disk that says no, for real: the `graphchat` command runs in a private mount namespace
(`unshare -rm`) where one folder of the workspace is a read-only bind mount of itself, or a
small tmpfs that is full (or nearly). The mounts vanish with the process; nothing leaks to the
machine or to other tests.

Where user namespaces are not allowed, a read-only workspace falls back to `chmod` (which
blocks writes unless the tests run as root); a full disk then has no stand-in and the test is
skipped with a reason that says so (`pytest -rs` lists it) — never silently passed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import clean_env

# mode dir size after listing cmd...: mount, run, then copy what the folder holds to `after`
# (the mount is gone once the namespace ends) and list it with sizes.
WRAPPER = r"""
mode=$1; dir=$2; size=$3; after=$4; shift 4
if [ "$mode" = ro ]; then
  mount --bind "$dir" "$dir" && mount -o remount,bind,ro "$dir" || exit 97
else
  keep=$(mktemp -d) && cp -a "$dir/." "$keep/" || exit 97
  mount -t tmpfs -o "size=$size" tmpfs "$dir" || exit 97
  cp -a "$keep/." "$dir/" || exit 97
  rm -rf "$keep"
  if [ "$mode" = full ]; then
    # the tmpfs is filled to its last byte: every new block fails with ENOSPC
    dd if=/dev/zero of="$dir/.filler" bs=4096 count=100000 2>/dev/null
    dd if=/dev/zero of="$dir/.filler2" bs=1 count=100000 2>/dev/null
  fi
fi
"$@"
rc=$?
mkdir -p "$after" && cp -a "$dir/." "$after/"
exit $rc
"""


@functools.cache
def namespaces() -> bool:
    """Whether this machine lets us mount in a private mount namespace."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            'd=$(mktemp -d) && mount -t tmpfs -o size=8k tmpfs "$d" && umount "$d"',
        ],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    after: Path  # what the folder held when the command ended

    def files(self) -> dict[str, int]:
        """Every file left in the folder (relative path → size), fillers aside."""
        out = {}
        for path in self.after.rglob("*"):
            if path.is_file() and not path.name.startswith(".filler"):
                out[str(path.relative_to(self.after))] = path.stat().st_size
        return out


def run_on(
    mode: str,
    folder: Path,
    workspace: Path,
    *args: str,
    env: dict[str, str] | None = None,
    size: str = "64k",
    timeout: float = 120,
) -> Outcome:
    """Run `graphchat --home workspace args…` with `folder` read-only (`ro`), a full tmpfs
    (`full`) or a tmpfs of `size` with room left (`small`)."""
    after = workspace.parent / f"after-{mode}-{len(list(workspace.parent.glob('after-*')))}"
    command = [sys.executable, "-m", "graphchat", "--home", str(workspace), *args]
    environment = clean_env(env, workspace.parent)
    if namespaces():
        argv = ["unshare", "-rm", "sh", "-c", WRAPPER, "sh", mode, str(folder), size, str(after), *command]
        done = subprocess.run(
            argv, env=environment, capture_output=True, text=True, timeout=timeout, cwd=str(workspace), stdin=subprocess.DEVNULL
        )  # fmt: skip
        assert done.returncode != 97, f"could not set up the mount: {done.stderr}"
        return Outcome(done.returncode, done.stdout, done.stderr, after)
    if mode == "ro" and os.geteuid() != 0:
        folders = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
        for path in folders:
            path.chmod(0o555)
        try:
            done = subprocess.run(
                command, env=environment, capture_output=True, text=True, timeout=timeout, cwd=str(workspace), stdin=subprocess.DEVNULL
            )  # fmt: skip
        finally:
            for path in folders:
                path.chmod(0o755)
        shutil.copytree(folder, after)
        return Outcome(done.returncode, done.stdout, done.stderr, after)
    pytest.skip(
        f"no private mount namespace here (unshare -rm failed) and no stand-in for a {mode} disk "
        f"as uid {os.geteuid()}: this case was NOT tried"
    )
