"""Whether a model accepts images: the model mapping's `vision:`, else litellm's supports_vision."""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphchat.llm.runtime import litellm_module

if TYPE_CHECKING:
    from graphchat.workspace import ModelConfig


def accepts_images(config: ModelConfig) -> bool:
    """`vision: true/false` in the model's mapping decides; else litellm's model list (an
    unknown model: no)."""
    if config.vision is not None:
        return config.vision
    try:
        return bool(litellm_module().supports_vision(model=config.model))
    except Exception:  # an unmapped model
        return False
