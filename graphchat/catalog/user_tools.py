"""User tools: YAML files in `tools/` of the workspace (and the user's tools folder) become
`user__<name>` tools, in graph's format (tylerdavis/graph `user_tools.rs`, v0.12).

Three kinds:

- `exec`: `command` + `args` (templates over `{{input.*}}`), `env` (`${VAR}` from the parent
  environment), `cwd` (relative to the workspace), `timeout_secs` (default 60), `output: json`
  (stdout parsed, graph's default) or `text` (`{text}`); run without a shell. A non-zero exit,
  stdout that is not JSON and a timeout are tool errors.
- `prompt`: `prompt` (a template), optional `system`, `model` (a role, default `chat`, or a
  model string), `output_schema` (structured reply with one repair pass; else `{text}`).
- `reshape`: a `shape` tree of templates rendered over the input, or `caller_shape: true`
  (the call's `shape` returned as given). Pure and read-only.

Shared fields: `name` (`[a-zA-Z0-9_-]+`), `description`, `input_schema`, `output_schema`,
`read_only`. A template reading anything but `input` is a load error. A broken file is a
warning naming it; the other tools and every command keep working. The approval family is
`read` when `read_only` is true (prompt and reshape tools are read-only unless they say
`read_only: false`), otherwise `write`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.catalog.argv import UnsafeArgument, exec_argv
from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.process import TimedOut, run_dir, run_program, turn_environ
from graphchat.errors import ConfigError, GraphchatError
from graphchat.llm.client import LLM
from graphchat.template import TemplateError, references, render_text, render_value
from graphchat.yamlfile import load_yaml_file

if TYPE_CHECKING:
    from graphchat.workspace import Settings

PREFIX = "user__"
KINDS = ("exec", "prompt", "reshape")
DEFAULT_TIMEOUT_SECS = 60
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
_ENV_REF = re.compile(r"\$\{([^}]*)\}")


class ToolFileError(Exception):
    """A tool file that cannot be used: one line naming the file and what is wrong."""


@dataclass
class ToolDoc:
    name: str
    description: str
    kind: str
    path: Path | None = None
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    read_only: bool | None = None
    # exec
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout_secs: float = DEFAULT_TIMEOUT_SECS
    output: str = "json"
    options_allowed: list[str] = field(default_factory=list)
    # prompt
    prompt: str = ""
    system: str | None = None
    model: str | None = None
    caller_output_schema: bool = False
    caller_model: bool = False
    # reshape
    shape: Any = None
    caller_shape: bool = False

    @property
    def is_read_only(self) -> bool:
        if self.read_only is not None:
            return self.read_only
        return self.kind in ("prompt", "reshape")

    def spec(self, prefix: str, source: str) -> ToolSpec:
        return ToolSpec(
            name=f"{prefix}{self.name}",
            description=self.description,
            input_schema=self.input_schema or {"type": "object", "properties": {}},
            source=source,
            family="read" if self.is_read_only else "write",
            output_schema=self.output_schema,
            meta={"path": str(self.path)} if self.path else {},
        )


# --- loading ---------------------------------------------------------------------------------


def tool_dirs(settings: Settings) -> list[Path]:
    """The workspace's `tools/`, the folders of `tools.paths`, then the user's
    (`$XDG_CONFIG_HOME/graphchat/tools`)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    folders = [settings.workspace / "tools", *settings.tool_paths, Path(base) / "graphchat" / "tools"]
    return list(dict.fromkeys(folders))


def load_tool_file(path: Path) -> ToolDoc:
    """One tool file; raises ToolFileError (`<file>[:<line>]: <problem>`)."""
    try:
        doc = load_yaml_file(path)
    except ConfigError as exc:
        raise ToolFileError(exc.message) from None
    try:
        return parse_tool(doc.data, path)
    except _Problem as problem:
        raise ToolFileError(f"{doc.where(problem.keys)}: {problem.message}") from None


class _Problem(Exception):
    def __init__(self, keys: tuple[str | int, ...], message: str) -> None:
        self.keys = keys
        self.message = message


def parse_tool(data: Any, path: Path | None = None) -> ToolDoc:
    """A tool document (graph's schema) → ToolDoc; raises _Problem."""
    if not isinstance(data, dict):
        raise _Problem((), "a tool file must be a mapping with name, description and kind")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _Problem(("name",), f"tool name {name!r} must be non-empty and use only [a-zA-Z0-9_-]")
    description = data.get("description")
    if not isinstance(description, str):
        raise _Problem(("description",), "`description` is required (a string)")
    kind = data.get("kind")
    if kind not in KINDS:
        raise _Problem(("kind",), f"`kind` must be one of {', '.join(KINDS)}, got {kind!r}")
    tool = ToolDoc(name=name, description=description, kind=kind, path=path)
    for key in ("input_schema", "output_schema"):
        value = data.get(key)
        if value is not None and not isinstance(value, dict):
            raise _Problem((key,), f"`{key}` must be a JSON Schema object")
        setattr(tool, key, value)
    read_only = data.get("read_only")
    if read_only is not None and not isinstance(read_only, bool):
        raise _Problem(("read_only",), "`read_only` must be true or false")
    tool.read_only = read_only
    if kind == "exec":
        _parse_exec(tool, data)
    elif kind == "prompt":
        _parse_prompt(tool, data)
    else:
        _parse_reshape(tool, data)
    return tool


def _parse_exec(tool: ToolDoc, data: dict[str, Any]) -> None:
    command = data.get("command")
    if not isinstance(command, str) or not command:
        raise _Problem(("command",), "exec tool needs a command")
    tool.command = command
    args = data.get("args") or []
    if not isinstance(args, list):
        raise _Problem(("args",), "`args` must be a list of strings")
    for index, arg in enumerate(args):
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise _Problem(("args", index), "`args` must be a list of strings")
        _check_templates(str(arg), ("args", index), "args")
    tool.args = [str(a) for a in args]
    env = data.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) for v in env.values()):
        raise _Problem(("env",), "`env` must map names to strings")
    tool.env = {str(k): str(v) for k, v in env.items()}
    cwd = data.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise _Problem(("cwd",), "`cwd` must be a path")
    tool.cwd = cwd
    timeout = data.get("timeout_secs", DEFAULT_TIMEOUT_SECS)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
        raise _Problem(("timeout_secs",), "`timeout_secs` must be a whole number of seconds")
    tool.timeout_secs = timeout
    output = data.get("output", "json")
    if output not in ("json", "text"):
        raise _Problem(("output",), f"`output` must be json or text, got {output!r}")
    tool.output = output
    allowed = data.get("options_allowed") or []
    if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
        raise _Problem(("options_allowed",), "`options_allowed` must be a list of input names")
    declared = (tool.input_schema or {}).get("properties") or {}
    for index, name in enumerate(allowed):
        if name not in declared:
            raise _Problem(
                ("options_allowed", index), f"`options_allowed` names {name!r}, not an input of the tool"
            )
    tool.options_allowed = list(allowed)


def _parse_prompt(tool: ToolDoc, data: dict[str, Any]) -> None:
    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        raise _Problem(("prompt",), "prompt tool needs a `prompt` (a template)")
    _check_templates(prompt, ("prompt",), "prompt")
    tool.prompt = prompt
    for key in ("system", "model"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise _Problem((key,), f"`{key}` must be a string")
        setattr(tool, key, value)
    tool.caller_output_schema = data.get("caller_output_schema") is True
    tool.caller_model = data.get("caller_model") is True


def _parse_reshape(tool: ToolDoc, data: dict[str, Any]) -> None:
    shape = data.get("shape")
    tool.caller_shape = data.get("caller_shape") is True
    if shape is None and not tool.caller_shape:
        raise _Problem(("shape",), "reshape tool needs a `shape` or `caller_shape: true`")
    if shape is not None:
        _check_templates(shape, ("shape",), "shape")
    tool.shape = shape


def _check_templates(value: Any, keys: tuple[str | int, ...], what: str) -> None:
    """Templates in a tool may read only `input` (steps do not exist inside a tool)."""
    try:
        roots = references(value)
    except TemplateError as err:
        raise _Problem(keys, f"{what}: {err}") from None
    for root in sorted(roots):
        if root != "input":
            raise _Problem(
                keys,
                f"{what}: templates in user tools may only reference {{{{input.*}}}}, found {{{{{root}}}}}",
            )


# --- running -----------------------------------------------------------------------------------


def apply_defaults(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """Top-level `default`s of the input schema filled in (as graph does before templating)."""
    props = (schema or {}).get("properties")
    if not isinstance(props, dict):
        return arguments
    out = dict(arguments)
    for key, prop in props.items():
        if key not in out and isinstance(prop, dict) and "default" in prop:
            out[key] = prop["default"]
    return out


def expand_env(value: str) -> str:
    """`${VAR}` from the turn's environment; an unset variable is an error (ValueError)."""
    environ = turn_environ()

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ValueError(f"environment variable {name} referenced by tool env is not set")
        return environ[name]

    if "${" in value and "}" not in value[value.index("${") :]:
        raise ValueError(f"unterminated ${{...}} in env value: {value!r}")
    return _ENV_REF.sub(sub, value)


class ToolRunner:
    """Runs tool documents (user tools and graph-format pack tools) for one workspace."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def run(self, tool: ToolDoc, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        arguments = apply_defaults(tool.input_schema, arguments)
        if tool.kind == "exec":
            return await self.run_exec(tool, arguments)
        if tool.kind == "prompt":
            return await self.run_prompt(tool, arguments, ctx)
        return self.run_reshape(tool, arguments)

    def run_reshape(self, tool: ToolDoc, arguments: dict[str, Any]) -> ToolResult:
        if tool.caller_shape:
            # The calling step's own render already resolved the shape: returned verbatim, so
            # text holding `{{ }}` is never read as a template again.
            return ToolResult(arguments.get("shape"))

        try:
            return ToolResult(render_value(tool.shape, {"input": arguments}))
        except TemplateError as err:
            return ToolResult.error(f"reshape failed: {err}")

    async def run_exec(self, tool: ToolDoc, arguments: dict[str, Any]) -> ToolResult:
        import orjson

        scope = {"input": arguments}
        try:
            rendered = [render_text(arg, scope) for arg in tool.args]
        except TemplateError as err:
            return ToolResult.error(f"{PREFIX}{tool.name}: cannot render args: {err}")
        try:
            argv = exec_argv(f"{PREFIX}{tool.name}", tool.command, tool.args, rendered, tool.options_allowed)
        except UnsafeArgument as err:
            return ToolResult.error(str(err))
        try:
            env = {key: expand_env(value) for key, value in tool.env.items()}
        except ValueError as err:
            return ToolResult.error(f"{PREFIX}{tool.name}: {err}")
        base = run_dir(self.settings)
        cwd = base / tool.cwd if tool.cwd else base
        try:
            done = await run_program(argv, cwd=cwd, timeout=tool.timeout_secs, env=env)
        except TimedOut:
            return ToolResult.error(f"command timed out after {tool.timeout_secs:g}s")
        except OSError as exc:
            return ToolResult.error(f"failed to run '{tool.command}': {exc.strerror or exc}")
        stdout = done.out_text().strip()
        stderr = done.err_text()
        if not done.ok:
            return ToolResult.error(
                f"'{tool.command}' exited with exit status: {done.code}", stderr=stderr, stdout=stdout
            )
        if tool.output == "text":
            return ToolResult({"text": stdout})
        try:
            return ToolResult(orjson.loads(stdout))
        except orjson.JSONDecodeError as exc:
            return ToolResult.error(f"stdout is not valid JSON: {exc}", stdout=stdout)

    async def run_prompt(self, tool: ToolDoc, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        schema = tool.output_schema
        if schema is None and tool.caller_output_schema and isinstance(arguments.get("output_schema"), dict):
            schema = arguments["output_schema"]
        if schema is not None and "type" not in schema and "properties" in schema:
            schema = {**schema, "type": "object"}
        model = arguments.get("model") if tool.caller_model else None
        model = model if isinstance(model, str) and model else tool.model
        try:
            text = render_text(tool.prompt, {"input": arguments})
        except TemplateError as err:
            return ToolResult.error(f"{PREFIX}{tool.name}: cannot render prompt: {err}")
        try:
            config = self._model(model)
        except GraphchatError as exc:
            return ToolResult.error(exc.message)
        llm = LLM(config, events=ctx.events)
        messages: list[dict[str, Any]] = []
        if tool.system:
            messages.append({"role": "system", "content": tool.system})
        messages.append({"role": "user", "content": text})
        site = f"{PREFIX}{tool.name}"
        try:
            if schema:
                value: Any = await llm.structured(messages, schema, site=site, name=tool.name)
            else:
                value = {"text": (await llm.complete(messages, site=site)).content}
        except GraphchatError as exc:
            return ToolResult.error(exc.message)
        finally:
            if ctx.on_usage is not None:
                ctx.on_usage(llm.usage)
        return ToolResult(value)

    def _model(self, name: str | None) -> Any:
        """graph's `model`: a role (default `chat`, falling back to default), a named model or
        a litellm model string."""
        return self.settings.step_model(name, "chat")


class UserToolSource(ToolSource):
    """`user__<name>` for every tool file of the workspace's and the user's tools folders."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runner = ToolRunner(settings)
        self._tools: dict[str, ToolDoc] | None = None
        self._warnings: list[str] = []

    def _load(self) -> dict[str, ToolDoc]:
        if self._tools is None:
            tools: dict[str, ToolDoc] = {}
            warnings: list[str] = []
            for folder in tool_dirs(self.settings):
                if not folder.is_dir():
                    continue
                for path in sorted(folder.iterdir()):
                    if path.suffix not in (".yaml", ".yml") or not path.is_file():
                        continue
                    try:
                        tool = load_tool_file(path)
                    except ToolFileError as exc:
                        warnings.append(f"user tool skipped: {exc}")
                        continue
                    if tool.name in tools:
                        first = tools[tool.name].path
                        warnings.append(
                            f"user tool skipped: {path}: duplicate tool name '{tool.name}' (kept {first})"
                        )
                        continue
                    tools[tool.name] = tool
            self._tools, self._warnings = tools, warnings
        return self._tools

    def specs(self) -> list[ToolSpec]:
        return [tool.spec(PREFIX, "user") for tool in self._load().values()]

    def warnings(self) -> list[str]:
        self._load()
        return list(self._warnings)

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        tool = self._load().get(spec.name[len(PREFIX) :])
        if tool is None:
            return ToolResult.error(f"unknown user tool {spec.name}")
        return await self.runner.run(tool, arguments, ctx)
