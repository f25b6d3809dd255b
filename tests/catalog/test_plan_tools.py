"""Plans as tools: `plan__<identifier>` specs (schema, description, family, hidden when servers
are missing) and their results through the catalog's one call path (asker passed through)."""

from __future__ import annotations

from pathlib import Path

from graphchat.asks import Answer, Asker, Question
from graphchat.catalog.base import CallContext, Catalog
from graphchat.plans.plan_tools import PlanSource
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.plan_support import FakeTools, plan_from_yaml

OUTPUT = """identifier: doubler
name: Doubler
description: Doubles a number.
exemplars: ["double 21", "what is twice 4?"]
input_schema:
  type: object
  required: [n]
  properties: {n: {type: integer}}
steps:
  - id: E0
    tool_name: t__double
    input: {n: "{{input.n}}"}
  - id: E1
    tool_name: exit
    input:
      when: {value: "{{E0.value}}", op: gt, to: 100}
      status: error
      message: "too big: {{E0.value}}"
  - id: E2
    tool_name: exit
    input:
      when: {value: "{{E0.value}}", op: eq, to: 0}
      status: success
      message: zero
      output: {zero: true}
output:
  doubled: "{{E0.value}}"
"""

WRITER = """identifier: writer
name: Writer
description: Writes something.
steps:
  - id: E0
    tool_name: t__fail
    input: {}
"""

COMPOSED = """identifier: composed
name: Composed
description: Calls the doubler.
steps:
  - id: E0
    tool_name: plan__doubler
    input: {n: 2}
output:
  r: "{{E0}}"
"""

NEEDS_TIME = """identifier: clock
name: Clock
description: Needs the time server.
requires_servers: [time]
steps:
  - id: E0
    tool_name: time__get_current_time
    input: {timezone: UTC}
"""

ASKS = """identifier: asks
name: Asks
description: Asks a question.
steps:
  - id: Q
    tool_name: ask
    input:
      prompt: "Proceed with {{input.what}}?"
      output_schema: {type: object, required: [ok], properties: {ok: {type: boolean}}}
output:
  q: "{{Q}}"
"""

AGENT = """identifier: roams
name: Roams
description: An agent over the whole catalog.
steps:
  - id: E0
    tool_name: agent
    input: {prompt: go, output_schema: {type: object}}
"""


def catalog_of(*texts: str, servers: set[str] | None = None) -> Catalog:
    catalog = Catalog([FakeTools()])
    plans = [plan_from_yaml(t) for t in texts]
    catalog.add_source(PlanSource(None, catalog, plans=plans, servers=servers or set()))
    return catalog


def test_specs_schema_description_and_family() -> None:
    catalog = catalog_of(OUTPUT, WRITER, COMPOSED, NEEDS_TIME, ASKS, AGENT)
    spec = catalog.get("plan__doubler")
    assert spec is not None and spec.source == "plan"
    assert spec.input_schema == {
        "type": "object",
        "required": ["n"],
        "properties": {"n": {"type": "integer"}},
    }
    assert spec.description.startswith("Doubles a number.")
    assert "- double 21" in spec.description and "- what is twice 4?" in spec.description
    assert spec.family == "read"
    assert catalog.get("plan__writer").family == "write"  # type: ignore[union-attr]
    assert catalog.get("plan__composed").family == "read"  # type: ignore[union-attr]
    assert catalog.get("plan__asks").family == "read"  # type: ignore[union-attr]
    assert catalog.get("plan__asks").input_schema == {"type": "object", "properties": {}}  # type: ignore[union-attr]
    assert catalog.get("plan__roams").family == "write"  # type: ignore[union-attr]  # can reach t__fail
    assert catalog.get("plan__clock") is None  # `time` is not configured: hidden
    assert catalog_of(NEEDS_TIME, servers={"time"}).get("plan__clock") is not None


def test_family_of_an_agent_follows_its_tools() -> None:
    """An agent reaches only what its `tools` name (names and `*` globs, as its step module
    declares): the whole catalog without `tools`."""
    limited = AGENT.replace("roams", "reads").replace(
        "output_schema: {type: object}}", "output_schema: {type: object}, tools: [t__echo, t__d*]}"
    )
    globbed = AGENT.replace("roams", "globs").replace(
        "output_schema: {type: object}}", "output_schema: {type: object}, tools: [t__f*]}"
    )
    catalog = catalog_of(AGENT, limited, globbed)
    assert catalog.get("plan__reads").family == "read"  # type: ignore[union-attr]
    assert catalog.get("plan__globs").family == "write"  # type: ignore[union-attr]  # t__fail
    assert catalog.get("plan__roams").family == "write"  # type: ignore[union-attr]


def test_family_follows_sub_plans() -> None:
    composed = COMPOSED.replace("plan__doubler", "plan__writer")
    catalog = catalog_of(WRITER, composed)
    assert catalog.get("plan__composed").family == "write"  # type: ignore[union-attr]


async def test_results_output_exit_and_errors() -> None:
    catalog = catalog_of(OUTPUT, COMPOSED)
    ctx = CallContext()
    result = await catalog.call("plan__doubler", {"n": 21}, ctx)
    assert not result.is_error and result.value == {"doubled": 42}
    result = await catalog.call("plan__doubler", {"n": 0}, ctx)
    assert result.value == {"exited": True, "status": "success", "message": "zero", "output": {"zero": True}}
    result = await catalog.call("plan__doubler", {"n": 60}, ctx)
    assert result.is_error and "too big: 120" in result.error_message
    result = await catalog.call("plan__doubler", {}, ctx)
    assert result.is_error and "'n' is a required property" in result.error_message
    result = await catalog.call("plan__composed", {}, ctx)
    assert result.value == {"r": {"doubled": 4}}


async def test_a_failing_step_comes_back_as_an_error_result() -> None:
    catalog = catalog_of(WRITER)
    result = await catalog.call("plan__writer", {}, CallContext())
    assert result.is_error
    assert result.error_message == "plan failed at step E0 (t__fail): boom"


async def test_the_callers_asker_answers_the_plans_question() -> None:
    class Recording(Asker):
        def __init__(self) -> None:
            super().__init__()
            self.questions: list[Question] = []

        async def _ask(self, question: Question) -> Answer:
            self.questions.append(question)
            return Answer(True, {"ok": True})

    asker = Recording()
    catalog = catalog_of(ASKS)
    result = await catalog.call("plan__asks", {"what": "deploy"}, CallContext(asker=asker, chain=("outer",)))
    assert result.value == {"q": {"answer": {"ok": True}, "answered": True}}
    assert [q.prompt for q in asker.questions] == ["Proceed with deploy?"]
    assert asker.questions[0].key == "Q"
    result = await catalog.call("plan__asks", {"what": "deploy"}, CallContext())
    assert result.is_error and "not answered (unavailable)" in result.error_message


def test_workspace_plans_become_tools(workspace: Path) -> None:
    (workspace / "plans" / "doubler.yaml").write_text(OUTPUT)
    (workspace / "plans" / "clock.yaml").write_text(NEEDS_TIME)
    (workspace / "plans" / "broken.yaml").write_text("identifier: broken\nsteps: 3\n")
    settings = load_settings(workspace)
    catalog = build_catalog(settings, record_shapes=False)
    names = {spec.name for spec in catalog.list() if spec.source == "plan"}
    assert names == {"plan__doubler"}
    (workspace / "catalog" / "servers.yaml").write_text("mcpServers:\n  time:\n    command: nothing-here\n")
    catalog = build_catalog(load_settings(workspace), record_shapes=False)
    names = {spec.name for spec in catalog.list() if spec.source == "plan"}
    assert names == {"plan__doubler", "plan__clock"}
