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
_warm_lock = threading.Lock()
_warmed: set[str] = set()

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
            import gc

            # The import builds a few million objects that live as long as the process: the
            # cyclic collector's full passes over them while it runs are pure cost (0.2-0.9 s
            # of a cold ask on this machine). Off meanwhile; then what was built is frozen, so
            # later full passes skip it too.
            collecting = gc.isenabled()
            gc.disable()
            try:
                import litellm
            finally:
                gc.freeze()
                if collecting:
                    gc.enable()

            _silence(litellm)
            _module = litellm
    return _module


# What litellm builds lazily inside the first call (pydantic models defined with deferred
# schemas, modules imported on first use): (module, [class names]) — built here instead.
_FIRST_CALL_MODELS = (
    ("litellm.types.router", ("GenericLiteLLMParams", "LiteLLM_Params")),
    (
        "litellm.types.utils",
        (
            "Message",
            "Choices",
            "ModelResponse",
            "Usage",
            "Delta",
            "StreamingChoices",
            "ModelResponseStream",
            "ChatCompletionDeltaToolCall",
            "ChatCompletionMessageToolCall",
            "Function",
            "PromptTokensDetailsWrapper",
        ),
    ),
    ("litellm.types.services", ("ServiceLoggerPayload",)),
    ("openai.types.chat.chat_completion_chunk", ("ChoiceDelta", "Choice", "ChatCompletionChunk")),
    ("openai.types.completion_usage", ("CompletionUsage",)),
    ("litellm.litellm_core_utils.streaming_handler", ()),
    ("litellm._service_logger", ()),
    ("litellm.llms.github_copilot.per_user_auth", ()),  # reached by provider resolution
    ("litellm.llms.litellm_proxy.chat.transformation", ()),
    ("anyio._backends._asyncio", ()),  # httpx's async transport
    # imported by every call's message preparation (file ids), in the loop's executor: ~90 ms
    # of CPU the first request waits for
    ("litellm.proxy.openai_files_endpoints.common_utils", ()),
)


def warm_up(model: str) -> None:
    """Do litellm's one-time lazy set-up for `model` now, off the event loop (once per model).

    Left to itself, litellm does it inside the first call, on the event loop: after the reply's
    headers arrive it prices the stream by counting the request's tokens, which first loads the
    model's tokenizer (0.13-0.4 s of CPU: tiktoken's cl100k, o200k...), and it builds
    lazily-defined pydantic models and imports modules as the request is made and the stream is
    read. Nothing here reaches the network. Best effort: should a step fail (another litellm
    version), the first call simply pays for it as before.
    """
    if model in _warmed:
        return
    with _warm_lock:
        if model in _warmed:
            return
        litellm = litellm_module()
        try:
            litellm.token_counter(model=model, messages=[{"role": "user", "content": "hi"}])
        except Exception:
            pass
        import importlib

        for module_name, names in _FIRST_CALL_MODELS:
            try:
                module = importlib.import_module(module_name)
                for name in names:
                    getattr(module, name).model_rebuild()
            except Exception:
                pass
        _warmed.add(model)  # only now: a caller that sees it warmed must not race the warm-up


async def alitellm_module(warm: str | None = None) -> ModuleType:
    """Like `litellm_module()` but never blocks the event loop while the import runs; with
    `warm`, also `warm_up(warm)` before returning (a model call follows).

    The wait happens on a daemon thread, not the loop's default executor: `asyncio.run` joins
    that executor on the way out, so Ctrl-C during the import would wait seconds for it.
    """
    if _module is not None and (warm is None or warm in _warmed):
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
            if warm is not None:
                warm_up(warm)
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
