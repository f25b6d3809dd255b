"""The model layer: the only place that imports litellm (lazily, offline, silenced).

Importing this package is cheap; litellm is imported on the first call (or in the background
after `preload_in_background()`).
"""

from graphchat.llm.client import LLM, context_window, count_tokens
from graphchat.llm.runtime import preload_in_background
from graphchat.llm.types import Completion, ToolCall, Usage

__all__ = [
    "LLM",
    "Completion",
    "ToolCall",
    "Usage",
    "context_window",
    "count_tokens",
    "preload_in_background",
]
