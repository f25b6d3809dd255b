"""Which warm helper a command may use, and where it listens.

One helper per workspace, graphchat install and configuration: its identity is a hash of the
workspace path, the graphchat version and install, the bytes of the files a turn is built from
(graphchat.yaml, catalog/servers.yaml, the tool files), and the values of the environment
variables a turn depends on (those the files reference as `${VAR}`, credentials, model and
proxy settings, PATH). Any change means another identity, so another helper: identity decides
which helper a command reuses. Correctness does not depend on it: each request carries the
asking process's whole environment, the helper runs the turn in it (packs, exec tools and git
read it, never the helper's own), and the helper itself checks the variables it depends on
(what its MCP servers were started with, its model, credentials: the identity set, computed
again from the request's environment) and refuses a request whose values differ.

The socket lives in a directory only its owner can enter (0700, owned by this user, not a
symlink); a directory that is not so is never used. Standard library only: the thin client of
`ask` reads this before deciding whether to import anything heavier.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import graphchat

# Environment variables read on the turn's path besides the ones the files reference.
_EXACT = frozenset(
    {
        "PATH",
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "PYTHONPATH",
        "VIRTUAL_ENV",
    }
)
# Model providers' settings (keys, bases, regions, projects) and graphchat's own.
_PREFIXES = (
    "GRAPHCHAT_",
    "LITELLM_",
    "OPENAI_",
    "ANTHROPIC_",
    "AZURE_",
    "AWS_",
    "GOOGLE_",
    "GEMINI_",
    "VERTEX",
    "MISTRAL_",
    "GROQ_",
    "OLLAMA_",
    "OPENROUTER_",
    "DEEPSEEK_",
    "XAI_",
    "COHERE_",
    "TOGETHER",
    "HF_",
    "HUGGINGFACE",
)
# Read by the asking side only (rendering, discovery, the helper switch): not part of a turn.
# (and the two graphchat sets itself before litellm imports, whoever imported it first).
_CLIENT_ONLY = frozenset(
    {
        "GRAPHCHAT_WARM",
        "GRAPHCHAT_EVENTS",
        "GRAPH_EVENTS",
        "GRAPHCHAT_DEBUG",
        "GRAPHCHAT_HOME",
        "LITELLM_LOCAL_MODEL_COST_MAP",
        "LITELLM_LOG",
    }
)
# The shell's own bookkeeping: never part of a turn, even where a file references one.
VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "TERM_SESSION_ID", "WINDOWID"})
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)(?:$|_)", re.IGNORECASE
)
_VAR_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes


class UnsafeDirectory(Exception):
    """The socket directory is not this user's alone: no helper is used or started."""


@dataclass(frozen=True)
class Identity:
    workspace: Path
    key: str  # hex digest
    env: dict[str, str]  # the variables a turn depends on, name -> value (the identity set)

    @property
    def name(self) -> str:
        return self.key[:20]


def config_files(workspace: Path, environ: Mapping[str, str]) -> list[Path]:
    """The files a turn is built from and a running helper would not read again."""
    files = [workspace / "graphchat.yaml", workspace / "catalog" / "servers.yaml"]
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".config"
    )
    files.append(Path(base) / "graphchat" / "config.yaml")  # the user's configuration layer
    for folder in (workspace / "tools", Path(base) / "graphchat" / "tools"):
        try:
            files.extend(sorted(p for p in folder.iterdir() if p.is_file()))
        except OSError:
            pass
    return files


def turn_environment(texts: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a turn depends on, with their values (unset ones left out)."""
    referenced = {name for text in texts for name in _VAR_REFERENCE.findall(text)}
    out: dict[str, str] = {}
    for name, value in environ.items():
        if name in _CLIENT_ONLY or name in VOLATILE:
            continue
        if name in referenced or name in _EXACT or name.startswith(_PREFIXES) or _SECRET_NAME.search(name):
            out[name] = value
    return dict(sorted(out.items()))


def differences(mine: Mapping[str, str], theirs: Mapping[str, str]) -> list[str]:
    """The names of the variables whose values differ between two identity sets (set in one
    only counts), sorted: what a refusal names (never the values)."""
    return sorted(name for name in {*mine, *theirs} if mine.get(name) != theirs.get(name))


def identify(workspace: Path, environ: Mapping[str, str] | None = None) -> Identity:
    """The identity of a helper for `workspace` under `environ` (default: this process's)."""
    env = os.environ if environ is None else environ
    digest = hashlib.sha256()
    for part in (
        "graphchat-warm/1",
        graphchat.__version__,
        sys.executable,
        str(Path(graphchat.__file__).resolve().parent),
        str(os.getuid()),
        str(workspace),
    ):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    texts: list[str] = []
    for path in config_files(workspace, env):
        try:
            data = path.read_bytes()
        except OSError:
            data = b"\0absent"
        digest.update(str(path).encode("utf-8", "surrogateescape") + b"\0" + data + b"\0")
        texts.append(data.decode("utf-8", "replace"))
    turn_env = turn_environment(texts, env)
    for name, value in turn_env.items():
        digest.update(f"{name}={value}".encode("utf-8", "surrogateescape") + b"\0")
    return Identity(workspace, digest.hexdigest(), turn_env)


def find(home: str | None = None, environ: Mapping[str, str] | None = None) -> Identity:
    """The identity for the workspace a command would use (same discovery as every command)."""
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.workspace import find_workspace

    return identify(find_workspace(home), environ)


def runtime_dir(create: bool = True) -> Path:
    """This user's directory of helper sockets: $XDG_RUNTIME_DIR/graphchat, else
    <tmp>/graphchat-<uid>. Raises UnsafeDirectory when it is not this user's alone."""
    uid = os.getuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(runtime) / "graphchat" if runtime and os.path.isabs(runtime) else None
    if folder is None or len(str(folder)) + 26 > _SOCKET_PATH_MAX:
        import tempfile  # only here: its import (random, hashlib, shutil) is ms of a client's start

        folder = Path(tempfile.gettempdir()) / f"graphchat-{uid}"
        if len(str(folder)) + 26 > _SOCKET_PATH_MAX:
            folder = Path("/tmp") / f"graphchat-{uid}"
    if create:
        try:
            folder.mkdir(mode=0o700, parents=False, exist_ok=True)
        except FileNotFoundError:
            folder.parent.mkdir(parents=True, exist_ok=True)
            folder.mkdir(mode=0o700, exist_ok=True)
    check_private(folder)
    return folder


def check_private(folder: Path) -> None:
    """`folder` is a real directory, owned by this user, that nobody else can enter."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{folder} is not a directory")
    if info.st_uid != os.getuid():
        raise UnsafeDirectory(f"{folder} belongs to another user")
    if info.st_mode & 0o077:
        raise UnsafeDirectory(f"{folder} can be reached by other users (mode {oct(info.st_mode & 0o777)})")


@dataclass(frozen=True)
class Paths:
    socket: Path
    info: Path  # JSON: pid, key, workspace, version, started, idle
    log: Path  # the helper's own output (what no client was there to see)
    lock: Path  # held by the helper while it runs: one helper an identity


def paths(identity: Identity, folder: Path | None = None) -> Paths:
    base = folder if folder is not None else runtime_dir()
    return Paths(
        base / f"{identity.name}.sock",
        base / f"{identity.name}.json",
        base / f"{identity.name}.log",
        base / f"{identity.name}.lock",
    )


def disabled(environ: Mapping[str, str] | None = None) -> bool:
    """GRAPHCHAT_WARM=0 (or off/false/no): no helper is used or started; nor under
    GRAPHCHAT_STORAGE=memory (graph's GRAPH_STORAGE), where a helper's files are not wanted."""
    env = os.environ if environ is None else environ
    storage = (env.get("GRAPHCHAT_STORAGE", "").strip() or env.get("GRAPH_STORAGE", "").strip()).lower()
    return env.get("GRAPHCHAT_WARM", "").strip().lower() in ("0", "off", "false", "no") or storage == "memory"
