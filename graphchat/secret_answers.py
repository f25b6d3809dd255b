"""Secret answers of a parked run (issue 19, build 8): a form field marked `secret: true`.

The value reaches the step as typed. Everything graphchat writes holds `[redacted]` instead
(`threads.redact.hold_answered`: threads, events, shapes, and the parked run's record), except
the request the person answered: its 0600 file keeps the value until the run ends, so that
`answer --no-resume` then `resume` works. A resumed run takes the value back from there
(`restore`), and when the run ends the request's copy is redacted too (`seal`).
"""

from __future__ import annotations

from typing import Any

from graphchat.asks import secret_fields
from graphchat.threads.redact import REDACTED, hold_answered, holds_answers, scrub_answered


def _secrets(request: Any) -> dict[str, str]:
    """field → value of the secret fields `request` was answered with."""
    if request.state != "answered" or not isinstance(request.answer, dict):
        return {}
    return {
        name: str(request.answer[name])
        for name in secret_fields(request.schema)
        if isinstance(request.answer.get(name), str)
    }


def held_by(request: Any) -> None:
    """A stored answer about to be given to its step: its secrets are not written again."""
    hold_answered(_secrets(request).values())


def scrub(data: bytes) -> bytes:
    """A record about to be written, with every held secret answer redacted (as it is when
    none is held: a run's record with a 100,000-item scope is not decoded for nothing)."""
    if not holds_answers():
        return data
    return scrub_answered(data.decode()).encode()


def restore(scope: dict[str, Any], requests: list[Any]) -> None:
    """A resumed run's scope: the secret fields of the steps answered before it parked (their
    record holds `[redacted]`) get their values back from the run's answered requests."""
    for request in requests:
        secrets = _secrets(request)
        result = scope.get(request.key or "")
        if not secrets or not isinstance(result, dict) or not isinstance(result.get("answer"), dict):
            continue
        hold_answered(secrets.values())
        answer = dict(result["answer"])
        for name, value in secrets.items():
            if answer.get(name) == REDACTED:
                answer[name] = value
        scope[request.key or ""] = {**result, "answer": answer}


def seal(store: Any, run_id: str) -> None:
    """The run ended: its requests' copies of secret answers become `[redacted]` (best effort:
    a file that cannot be rewritten keeps its 0600 copy)."""
    for request in store.all(finished=True):
        if request.run != run_id:
            continue
        secrets = _secrets(request)
        if not secrets:
            continue
        hold_answered(secrets.values())
        request.answer = {**request.answer, **dict.fromkeys(secrets, REDACTED)}
        try:
            store.save(request)
            claim = store.dir / f"{request.id}.claim"
            if claim.exists():
                claim.write_bytes(scrub(claim.read_bytes()))
        except OSError:
            continue
