"""Approvals: which tool calls may run without asking, and asking when they may not.

Every tool has an action family (read | write | destructive). The workspace policy
(`approvals: {mode, allow, deny}` in graphchat.yaml) plus `--yes` decide; in `ask` mode a
non-read call not covered by `allow` is asked about through the one asker (once / always /
refuse). "always" is written to the workspace config's `approvals.allow` (unless the asker's
answers do not last: an `mcp serve` client's "always" holds for that session). When nobody can
answer the call is refused — never run silently, never waiting forever.

An MCP server's sampling request (it asks to use the person's model) is an approval of family
`sampling` with stricter rules: only --yes, a person's answer, or the exact entry
`sampling:SERVER` approves it (`decide_sampling`).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.asks import Question
from graphchat.catalog.base import CURRENT_CALL
from graphchat.display import safe
from graphchat.fsutil import write_atomic
from graphchat.workspace import CONFIG_NAME
from graphchat.yamlfile import yaml12_dumper, yaml12_loader

if TYPE_CHECKING:
    import asyncio

    from graphchat.asks import Answer, Asker, Question
    from graphchat.catalog.base import Approver, CallContext, ToolSpec
    from graphchat.workspace import Settings

OPTIONS = ["once", "always", "refuse"]


def family_from_annotations(annotations: dict[str, Any] | None, override: str | None = None) -> str:
    """read when read-only; destructive when destructive or the server says nothing; else write.

    Accepts snake_case (SDK) and camelCase (wire) keys. MCP's own default for an unstated
    destructiveHint is true, so only an explicit `destructive_hint: false` makes a tool `write`.
    """
    if override:
        return override
    ann = annotations or {}

    def hint(snake: str, camel: str) -> Any:
        return ann.get(snake, ann.get(camel))

    if hint("read_only_hint", "readOnlyHint") is True:
        return "read"
    if hint("destructive_hint", "destructiveHint") is False:
        return "write"
    return "destructive"


def _match(names: tuple[str, ...], patterns: Any) -> str | None:
    for pattern in patterns:
        if any(fnmatchcase(name, pattern) for name in names):
            return pattern
    return None


def rule_names(spec: ToolSpec, arguments: dict[str, Any] | None = None) -> tuple[str, ...]:
    """The names allow/deny rules are matched against: the catalog name, and for an MCP tool
    the real `<server>__<tool>` pair too, since long or odd names are sanitized and shortened
    with a hash in the catalog (a rule written for the real name must still catch it). A tool
    that reaches the server named by its `server` argument (`builtin__read_resource`) is also
    `<server>__<rule_as>`, so `deny: ["secrets__*"]` covers it."""
    rule_as = spec.meta.get("rule_as")
    if isinstance(rule_as, str):
        named = (arguments or {}).get("server")
        return (spec.name, f"{named}__{rule_as}") if isinstance(named, str) else (spec.name,)
    server, tool = spec.meta.get("server"), spec.meta.get("tool")
    if isinstance(server, str) and isinstance(tool, str):
        real = f"{server}__{tool}"
        if real != spec.name:
            return (spec.name, real)
    return (spec.name,)


# Arguments longer than this are not put to a person (nobody reads 100,000 characters to
# approve them): the call is refused, with a way to allow it that does not need reading.
MAX_SHOWN_ARGUMENTS = 100_000


def argument_text(arguments: dict[str, Any]) -> str:
    """Every argument, in full: indented JSON with control characters escaped (never cut —
    an approval must show what it approves; `ask_by_lines` wraps and pages it)."""
    import orjson

    text = orjson.dumps(arguments, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    return safe(text)


class PolicyApprover:
    """The approval hook of one command (see module doc); callable as a Catalog `Approver`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.policy = settings.approvals
        self.session_allow: set[str] = set()  # "always" answers of this run (also persisted)
        self._lock: asyncio.Lock | None = None

    def _refusal(self, spec: ToolSpec, why: str, ctx: CallContext | None = None) -> str:
        if ctx is not None and ctx.surface == "cli":  # `tools call`: a person reads it, not a model
            return f"{spec.name} was not run: {why} ({spec.family} tool)"
        return (
            f"{spec.name} was not run: {why}. It is a {spec.family} tool; "
            "do not retry it, continue without it or tell the user what you wanted to do."
        )

    def decide_without_asking(
        self, spec: ToolSpec, ctx: CallContext, arguments: dict[str, Any] | None = None
    ) -> tuple[bool, str | None]:
        """(decided, refusal): decided=False means the person must be asked."""
        names = rule_names(spec, arguments) if self.policy.deny or spec.family != "read" else ()
        pattern = _match(names, self.policy.deny)  # deny wins when any of the names matches
        if pattern is not None:
            return True, self._refusal(spec, f"the approvals policy denies it (deny: {pattern!r})", ctx)
        if spec.family == "read":
            return True, None
        if ctx.assume_yes or ctx.permitted == spec.name or self.policy.mode == "auto":
            return True, None
        if spec.name in self.session_allow or _match(names, self.policy.allow) is not None:
            return True, None
        if self.policy.mode == "deny":
            return True, self._refusal(spec, "approvals.mode is deny (only read tools run)", ctx)
        return False, None

    async def __call__(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> str | None:
        import asyncio

        decided, refusal = self.decide_without_asking(spec, ctx, arguments)
        if decided:
            return refusal
        asker = ctx.asker
        if asker is not None and not asker.can_answer:
            stored = asker.park(self._question(spec, arguments))  # a host that can wait parks the call
            if stored is not None:  # a resumed run: the person's permit or deny
                return self._given(spec, stored, asker, ctx)
        if asker is None or not asker.can_answer:
            return self._refusal(
                spec,
                "it needs the user's approval and nobody can answer here "
                "(the user can rerun with --yes or add it to approvals.allow in graphchat.yaml)",
                ctx,
            )
        if self._lock is None:
            self._lock = asyncio.Lock()
        # One approval question at a time, re-checking after the wait: an "always" given to
        # the first of 8 parallel calls answers the 7 others.
        async with self._lock:
            decided, refusal = self.decide_without_asking(spec, ctx, arguments)
            if decided:
                return refusal
            shown = argument_text(arguments)
            if len(shown) > MAX_SHOWN_ARGUMENTS:  # never ask to approve what nobody can read
                return self._refusal(
                    spec,
                    f"its arguments are too long to show for approval ({len(shown):,} characters; "
                    "the user can rerun with --yes or add it to approvals.allow in graphchat.yaml)",
                    ctx,
                )
            question = self._question(spec, arguments)
            try:
                answer = await asker.ask(question)
            except Exception as exc:  # a broken asker must refuse, not run the tool
                return self._refusal(spec, f"the approval question failed ({exc})", ctx)
            if not answer.answered and answer.reason == "unavailable":
                stored = asker.park(question)
                if stored is not None:
                    return self._given(spec, stored, asker, ctx)
            if not answer.answered:
                reason = "the user declined" if answer.reason == "declined" else "nobody could answer"
                return self._refusal(spec, f"approval was not given ({reason})", ctx)
            choice = str(answer.value).strip().lower()
            if choice in ("always", "a"):
                self._always(spec.name, asker, ctx)
                return None
            if choice in ("once", "o", "yes", "y"):
                return None
            return self._refusal(spec, "the user refused it", ctx)

    def _given(self, spec: ToolSpec, answer: Answer, asker: Asker, ctx: CallContext) -> str | None:
        """A settled approval request (`graphchat permit` / `deny --reason R`): None runs the
        call; else the refusal, with the person's reason."""
        value = answer.value if isinstance(answer.value, dict) else {}
        if answer.answered and value.get("approved"):
            if value.get("always"):
                self._always(spec.name, asker, ctx)
            return None
        why = f" ({answer.note})" if answer.note and answer.note != "denied" else ""
        return self._refusal(spec, f"the user refused it{why}", ctx)

    def _always(self, entry: str, asker: Asker, ctx: CallContext) -> None:
        """An "always" answer: `entry` is allowed for this run and written to approvals.allow
        (for this session only when the asker's answers do not last)."""
        self.session_allow.add(entry)
        if not asker.lasting_answers:  # e.g. an `mcp serve` client: this session only
            if ctx.events is not None:
                ctx.events.info(f"{entry} is allowed until this session ends")
            return
        try:
            path = remember_allow(self.settings, entry)
        except Exception as exc:  # approved all the same; say why it is not remembered
            if ctx.events is not None:
                ctx.events.warning(f"could not save approval of {entry}: {exc}")
        else:
            if ctx.events is not None:
                ctx.events.info(f"{entry} is now always allowed ({path})")

    # sampling: a server asks to use the person's model ----------------------------------------

    def decide_sampling(self, server: str, ctx: CallContext) -> tuple[bool, str | None]:
        """(decided, refusal) for a sampling request of `server`, like `decide_without_asking`.
        Only a person's yes runs it: --yes, or the exact entry `sampling:SERVER` in
        approvals.allow (what "always" writes). Wildcard allow entries and `mode: auto` do not
        cover it; a deny pattern matching `sampling:SERVER` wins over everything."""
        entry = sampling_entry(server)
        pattern = _match((entry,), self.policy.deny)
        if pattern is not None:
            return True, f"the approvals policy denies {entry} (deny: {pattern!r})"
        if ctx.assume_yes or entry in self.session_allow or entry in self.policy.allow:
            return True, None
        if self.policy.mode == "deny":
            return True, f"{entry} was not allowed: approvals.mode is deny"
        return False, None

    async def approve_sampling(
        self, server: str, prompt: str, max_tokens: int, ctx: CallContext
    ) -> str | None:
        """None when MCP server `server` may have its sampling request (`prompt`, at most
        `max_tokens` tokens) served by the person's model; else why not (sent to the server).
        Asked once / always / refuse; with nobody to answer, a host whose runs can wait parks
        the call (`Asker.park`, key `sampling:SERVER`) and its resumed run gets the person's
        permit or deny; any other host refuses."""
        import asyncio

        decided, refusal = self.decide_sampling(server, ctx)
        if decided:
            return refusal
        entry = sampling_entry(server)
        asker = ctx.asker
        question = self._sampling_question(server, prompt, max_tokens)
        if asker is not None and not asker.can_answer:
            stored = asker.park(question)
            if stored is not None:  # a resumed run: the person's permit or deny
                return self._sampling_given(entry, stored, asker, ctx)
        if asker is None or not asker.can_answer:
            return (
                f"sampling needs the user's approval and nobody can answer here (the user can rerun "
                f"with --yes or add {entry!r} to approvals.allow in graphchat.yaml)"
            )
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            decided, refusal = self.decide_sampling(server, ctx)
            if decided:
                return refusal
            try:
                answer = await asker.ask(question)
            except Exception as exc:  # a broken asker must refuse, not spend the budget
                return f"the sampling approval question failed ({exc})"
            if not answer.answered:
                reason = "the user declined" if answer.reason == "declined" else "nobody could answer"
                return f"sampling was not approved ({reason})"
            choice = str(answer.value).strip().lower()
            if choice in ("always", "a"):
                self._always(entry, asker, ctx)
                return None
            if choice in ("once", "o", "yes", "y"):
                return None
            return "the user refused the sampling request"

    def _sampling_given(self, entry: str, answer: Answer, asker: Asker, ctx: CallContext) -> str | None:
        """A settled sampling request (`graphchat permit` / `deny --reason R`), as `_given`."""
        value = answer.value if isinstance(answer.value, dict) else {}
        if answer.answered and value.get("approved"):
            if value.get("always"):
                self._always(entry, asker, ctx)
            return None
        why = f" ({answer.note})" if answer.note and answer.note != "denied" else ""
        return f"the user refused the sampling request{why}"

    @staticmethod
    def _sampling_question(server: str, prompt: str, max_tokens: int) -> Question:
        current = CURRENT_CALL.get()  # the tool call the request belongs to (its context)
        return Question(
            prompt=f"Allow MCP server {safe(server, newlines=False)} to use your model "
            f"(sampling, at most {max_tokens:,} tokens) with this prompt?",
            detail=safe(prompt),
            options=list(OPTIONS),
            kind="approval",
            context={
                "family": "sampling",
                "server": server,
                "max_tokens": max_tokens,
                "prompt": prompt,
                "park_as": sampling_entry(server),
                **({"tool": current[0]} if current is not None else {}),
            },
        )

    @staticmethod
    def _question(spec: ToolSpec, arguments: dict[str, Any]) -> Question:
        return Question(
            prompt=f"Allow {safe(spec.name, newlines=False)} ({spec.family}) with these arguments?",
            detail=argument_text(arguments),
            options=list(OPTIONS),
            kind="approval",
            context={"tool": spec.name, "family": spec.family, "arguments": arguments},
        )


def sampling_entry(server: str) -> str:
    """The approvals entry that allows (or denies) `server`'s sampling requests."""
    return f"sampling:{server}"


def make_approver(settings: Settings) -> Approver:
    """The approval hook for a command's catalog."""
    return PolicyApprover(settings)


# --- persisting "always" ------------------------------------------------------------------------


def remember_allow(settings: Settings, tool: str) -> Path:
    """Add `tool` to `approvals.allow` of the workspace graphchat.yaml, keeping everything else
    (comments, order, formatting) as it is. Creates the file when there is none."""
    path = settings.config_path or (settings.workspace / CONFIG_NAME)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    new_text = add_allow_entry(text, tool)
    if new_text != text:
        write_atomic(path, new_text, keep_mode=True)
    return path


def _scalar(value: str) -> str:
    import json

    return json.dumps(value)  # a JSON string is a valid YAML scalar, quoted as needed


def add_allow_entry(text: str, tool: str) -> str:
    """`text` (a graphchat.yaml) with `tool` added to approvals.allow; a pure text edit.

    Edits only the smallest span (the allow list, or inserts one line) so the user's comments
    and layout survive; falls back to a full re-dump only for layouts it cannot edit in place.
    """
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml12_loader()) if text.strip() else None
        data = yaml.load(text, Loader=yaml12_loader()) if text.strip() else None  # noqa: S506
    except yaml.YAMLError:
        raise ValueError("graphchat.yaml is not valid YAML; not editing it") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("graphchat.yaml is not a mapping; not editing it")
    approvals = data.get("approvals")
    if isinstance(approvals, dict) and tool in (approvals.get("allow") or []):
        return text
    edited = _edit_in_place(text, node, tool)
    if edited is not None:
        try:
            check = yaml.load(edited, Loader=yaml12_loader())  # noqa: S506
            allow = (check.get("approvals") or {}).get("allow") or []
            rest_same = {k: v for k, v in check.items() if k != "approvals"} == {
                k: v for k, v in data.items() if k != "approvals"
            }
            if tool in allow and rest_same:
                return edited
        except yaml.YAMLError:
            pass
    # Fallback: structured re-dump (loses comments, keeps data).
    approvals = dict(approvals) if isinstance(approvals, dict) else {}
    approvals["allow"] = [*(approvals.get("allow") or []), tool]
    data = {**data, "approvals": approvals}
    return str(yaml.dump(data, Dumper=yaml12_dumper(), sort_keys=False, allow_unicode=True))


def _last_entry(mapping: Any, name: str) -> tuple[Any, Any] | None:
    """The (key, value) nodes of `name:` in a YAML mapping node; the last one when it repeats."""
    found = None
    for key, value in mapping.value:
        if key.value == name:
            found = (key, value)
    return found


def _flow_append(text: str, node: Any, piece: str) -> str:
    """`text` with `piece` added as the last entry of the flow collection `node` (`[…]`/`{…}`):
    inserted right after the last entry (before any comment, trailing comma or closing bracket),
    or right after the opening bracket when it is empty; nothing else moves."""
    if not node.value:
        at = node.start_mark.index + 1
        return f"{text[:at]}{piece}{text[at:]}"
    last = node.value[-1]
    last_end = last[1].end_mark.index if isinstance(last, tuple) else last.end_mark.index
    return f"{text[:last_end]}, {piece}{text[last_end:]}"


def _is_null(node: Any) -> bool:
    import yaml

    return isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")


def _replace_null(text: str, key: Any, value: Any, replacement: str) -> str:
    """`text` with the null `value` of `key:` replaced by `replacement` (written after the colon
    when the value is empty)."""
    if value.start_mark.index == value.end_mark.index:  # `key:` then nothing
        colon = text.index(":", key.end_mark.index) + 1
        return f"{text[:colon]} {replacement}{text[colon:]}"
    return f"{text[: value.start_mark.index]}{replacement}{text[value.end_mark.index :]}"


def _edit_in_place(text: str, root: Any, tool: str) -> str | None:
    import yaml

    entry = _scalar(tool)
    if root is None:  # empty file, or comments only
        sep = "\n" if text and not text.endswith("\n") else ""
        return f"{text}{sep}approvals:\n  allow:\n    - {entry}\n"
    if not isinstance(root, yaml.MappingNode):
        return None
    approvals = _last_entry(root, "approvals")
    if root.flow_style:  # `{models: …, approvals: {…}}`: edit it as flow text throughout
        if approvals is None:
            return _flow_append(text, root, f"approvals: {{allow: [{entry}]}}")
        if _is_null(approvals[1]):
            return _replace_null(text, *approvals, f"{{allow: [{entry}]}}")
    if approvals is None:
        sep = "" if text.endswith("\n") else "\n"
        return f"{text}{sep}approvals:\n  allow:\n    - {entry}\n"
    approvals_key, approvals_node = approvals
    if isinstance(approvals_node, yaml.ScalarNode) and approvals_node.value in ("", "~", "null"):
        # `approvals:` with nothing under it
        line_end = text.find("\n", approvals_key.end_mark.index)
        line_end = len(text) if line_end == -1 else line_end
        line = text[:line_end]
        indent = approvals_key.start_mark.column
        return f"{line}\n{' ' * (indent + 2)}allow:\n{' ' * (indent + 4)}- {entry}{text[line_end:]}"
    if not isinstance(approvals_node, yaml.MappingNode):
        return None
    allow = _last_entry(approvals_node, "allow")
    if approvals_node.flow_style:  # `approvals: {mode: ask, …}`
        if allow is None:
            return _flow_append(text, approvals_node, f"allow: [{entry}]")
        if _is_null(allow[1]):
            return _replace_null(text, *allow, f"[{entry}]")
    if allow is None:
        first_key = approvals_node.value[0][0]
        col = first_key.start_mark.column
        start = first_key.start_mark.index - col  # start of that line
        return f"{text[:start]}{' ' * col}allow:\n{' ' * (col + 2)}- {entry}\n{text[start:]}"
    allow_key, allow_node = allow
    if isinstance(allow_node, yaml.ScalarNode) and allow_node.value in ("", "~", "null"):
        if allow_node.start_mark.index == allow_node.end_mark.index:  # `allow:` then nothing
            pos = allow_key.end_mark.index
            colon = text.index(":", pos) + 1
            return f"{text[:colon]} [{entry}]{text[colon:]}"
        return f"{text[: allow_node.start_mark.index]}[{entry}]{text[allow_node.end_mark.index :]}"
    if not isinstance(allow_node, yaml.SequenceNode):
        return None
    if allow_node.flow_style:  # `allow: [a, b]`, on one line or several, comments and all
        return _flow_append(text, allow_node, entry)
    if not allow_node.value:
        return None
    first = allow_node.value[0]
    line_start = text.rfind("\n", 0, first.start_mark.index) + 1
    prefix = text[line_start : first.start_mark.index]  # e.g. "    - "
    if prefix.strip() != "-":
        return None
    last = allow_node.value[-1]
    end = text.find("\n", last.end_mark.index)
    if end == -1:
        return f"{text}\n{prefix}{entry}\n"
    return f"{text[: end + 1]}{prefix}{entry}\n{text[end + 1 :]}"
