"""Importing litellm: lazily, offline, silently, and (when a call is certain) in the background.

litellm costs ~2.4 s and ~200 MB to import, fetches its cost map from the network unless told
not to, prints banners to stdout and logs warnings to stderr. Everything that touches it goes
through `litellm_module()` so those traps are handled in one place.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_module: ModuleType | None = None
_preload: threading.Thread | None = None

_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")


def _prepare_environment() -> None:
    # Must happen before the import: the cost map is fetched (and logged about) at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    # pydantic warns about litellm's typing at import; nothing a user can act on.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"pydantic\..*")
    warnings.filterwarnings("ignore", message=r".*ReadOnly.*")


def _silence(litellm: Any) -> None:
    litellm.suppress_debug_info = True  # else "Give Feedback / Get Help" banners go to stdout
    litellm.set_verbose = False
    for name in _LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False


def litellm_module() -> ModuleType:
    """The litellm module, imported once (blocks while a background import finishes)."""
    global _module
    if _module is not None:
        return _module
    with _lock:
        if _module is None:
            _prepare_environment()
            import litellm

            _silence(litellm)
            _module = litellm
    return _module


async def alitellm_module() -> ModuleType:
    """Like `litellm_module()` but never blocks the event loop while the import runs.

    The wait happens on a daemon thread, not the loop's default executor: `asyncio.run` joins
    that executor on the way out, so Ctrl-C during the import would wait seconds for it.
    """
    if _module is not None:
        return _module
    import asyncio

    loop = asyncio.get_running_loop()
    done: asyncio.Future[ModuleType] = loop.create_future()

    def settle(module: ModuleType | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(module)  # type: ignore[arg-type]

    def run() -> None:
        try:
            module = litellm_module()
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, module, None)

    threading.Thread(target=run, name="graphchat-await-litellm", daemon=True).start()
    return await done


def preload_in_background() -> None:
    """Start importing litellm in a daemon thread, so it overlaps with other start-up work."""
    global _preload
    if _module is not None or _preload is not None:
        return

    def run() -> None:
        try:
            litellm_module()
        except Exception:  # the foreground import will raise it again, with context
            pass

    _preload = threading.Thread(target=run, name="graphchat-import-litellm", daemon=True)
    _preload.start()


def is_loaded() -> bool:
    return _module is not None
