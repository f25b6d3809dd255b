"""The `data` pack (always on): `builtin__reshape`, graph's generic reshape tool.

The calling step's own input render resolves the `shape` (its leaves are templates over the
step's data), so the tool returns it verbatim: text holding `{{ }}` in the data is never read as
a template again. Called by an agent (inputs not rendered by a plan) it returns the shape given.
"""

from __future__ import annotations

from typing import Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.packs import pack_specs

SPECS = """\
- name: reshape
  description: 'Build a value in a target JSON shape without an LLM or a shell — the deterministic way
    to remap keys, pick a subset, nest or flatten, and interpolate strings. Pass a `shape`: a JSON object
    whose keys are literal and whose leaf strings are templates over the surrounding step''s data, referenced
    the same way any step input is (an earlier result as {{Ex.field}}, the current map element as {{item}},
    a plan input as {{input.x}}). The result is that shape with every template resolved. A leaf that is
    exactly one tag keeps the source type (numbers stay numbers, arrays stay arrays); mixed text like
    "PR #{{item.number}}" renders to a string. Example: over a raw PR {"baseRefOid":"abc","number":12},
    shape {"base_sha":"{{item.baseRefOid}}","pr":"{{item.number}}"} yields {"base_sha":"abc","pr":12}.
    It only moves data — it cannot compute derived values (sums, casing, conditionals); wrap those in
    a user `exec` tool. To reshape every element of a list, call this inside a `map` body over the list
    and reference {{item}} in the shape. The shape is resolved by the plan step''s own input render, once,
    so this is a plan-step tool: called directly by an agent (whose inputs are not plan-rendered) it just
    returns the shape unchanged.

    '
  input_schema:
    type: object
    required:
    - shape
    properties:
      shape:
        type: object
        description: 'The output shape. Keys are literal; each leaf string is a template over the step''s
          data (earlier results as {{Ex.field}}, the current map element as {{item}}, plan inputs as {{input.x}}),
          e.g. {"pr":"{{item.number}}","label":"issue-{{item.number}}"}.

          '
"""


class DataPackSource(ToolSource):
    def specs(self) -> list[ToolSpec]:
        return pack_specs(SPECS, "data")

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        if spec.name == "builtin__reshape":
            return ToolResult(arguments.get("shape"))
        return ToolResult.error(f"unknown data pack tool {spec.name}")
