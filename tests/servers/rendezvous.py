"""Start barrier for test servers: GRAPHCHAT_TEST_RENDEZVOUS=<file>:<n> holds a server before it
answers anything until n servers are starting. Servers started one after another never all
meet: the first gives up after 15 s and exits, so its start fails (no timing asserted)."""

from __future__ import annotations

import os
import sys
import time


def wait_for_peers() -> None:
    spec = os.environ.get("GRAPHCHAT_TEST_RENDEZVOUS")
    if not spec:
        return
    path, count = spec.rsplit(":", 1)
    with open(path, "a") as handle:
        handle.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + 15
    while True:
        with open(path) as handle:
            if len(handle.read().split()) >= int(count):
                return
        if time.monotonic() > deadline:
            sys.stderr.write("rendezvous: the other servers never started\n")
            sys.exit(3)
        time.sleep(0.02)
