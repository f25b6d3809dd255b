"""The model layer: the only place that imports litellm (lazily, offline, silenced).

Importing this package is cheap; litellm is imported on the first call (or in the background
after `preload_in_background()`). The package itself re-exports nothing: `llm.client` (LLM,
context_window, count_tokens), `llm.runtime` (the import of litellm), `llm.types` (Completion,
ToolCall, Usage), `llm.keys`, `llm.errors`, `llm.budget`, `llm.stream`, `llm.jsonreply`.
"""
