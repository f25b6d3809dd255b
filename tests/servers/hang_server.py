"""A "server" that starts and never answers: it ignores stdin (EOF included) and stays alive.

Env: GRAPHCHAT_TEST_CALLED=<fifo> gets this process's pid once it runs (the test blocks on it).
"""

from __future__ import annotations

import os
import time

called = os.environ.get("GRAPHCHAT_TEST_CALLED")
if called:
    with open(called, "w") as handle:
        handle.write(f"{os.getpid()}\n")
time.sleep(600)
