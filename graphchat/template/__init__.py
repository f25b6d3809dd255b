"""The plan template language: `{{path}}` values, sections, typed splice, typed errors.

Pure functions over JSON values; see `parser` for the grammar and `renderer` for resolution.
"""

from graphchat.template.errors import (
    BadPath,
    EmptyData,
    MissingStep,
    TemplateError,
    TemplateSyntaxError,
)
from graphchat.template.parser import Path, Section, Template, parse
from graphchat.template.renderer import (
    check_syntax,
    json_kind,
    references,
    render_string,
    render_text,
    render_value,
    section_references,
    to_text,
)

__all__ = [
    "BadPath",
    "EmptyData",
    "MissingStep",
    "Path",
    "Section",
    "Template",
    "json_kind",
    "TemplateError",
    "TemplateSyntaxError",
    "check_syntax",
    "parse",
    "references",
    "render_string",
    "render_text",
    "render_value",
    "section_references",
    "to_text",
]
