"""``bosun stdio --standalone``: answer ``initialize`` from the process's first lines with the SDK's own answer.

Why: the MCP SDK's import alone is ~1 s on a 2-core machine (``import mcp`` loads every protocol era's
pydantic models, the client and the HTTP server), so no server built on it can answer ``initialize``
within 1 s by cutting its own imports (issue 15; Cline's ``initialize`` timeout is 1.5 s). The answer
to ``initialize`` does not depend on anything the SDK computes per session but the negotiated
version, so it can be sent early, as long as it is the SDK's answer, byte for byte:

* **Recorded from the SDK.** Every session records the line the SDK's stdio writer produced for
  its ``initialize`` (one entry per negotiated version slot) in ``$BOSUN_HOME/initialize-cache.json``,
  keyed by bosun's version, the installed ``mcp``/``mcp_types`` versions, bosun's server sources
  (size and mtime), the ``BOSUN_*`` environment and the command line. Nothing is ever written by
  hand; a key that differs finds no entry.
* **Answered early.** A thread started before any import reads the first line from stdin; when it
  is an ``initialize`` whose version slot has an entry, it writes that line with the request's id
  at once (on its own copy of fd 1), then hands the line to the SDK unchanged.
* **Checked.** The SDK still receives and handles that ``initialize`` (its session state is exactly
  as before); ``stdio.answered_once_stdout`` drops its answer instead of writing a second one, after comparing it
  with the early line: a difference is logged and the entry replaced, so it cannot happen twice.

Only stdlib modules are imported here; ``settle`` is called from the SDK side (server/transport/stdio.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CACHE_FILE = "initialize-cache.json"
MAX_KEYS = 8  # entries kept per home (one per command line and BOSUN_* environment in use)
UNSUPPORTED_SLOT = ""  # any version outside the SDK's handshake versions: it negotiates its latest
RESPONSE_HEAD = '{"jsonrpc":"2.0","id":'  # how the SDK's stdio writer starts every response line
SERVER_DIRS = ("server", "server/protocol", "server/tools", "server/transport")  # what builds the answer
_ACTIVE: EarlyInit | None = None


def active() -> EarlyInit | None:
    """The early reader of this process, if ``start`` ran (``bosun stdio --standalone``)."""
    return _ACTIVE


def id_json(request_id: Any) -> str | None:
    """The id as the SDK's writer (pydantic) prints it, for the ids where that is certain; else None."""
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return str(request_id)
    if isinstance(request_id, str) and all(" " <= c <= "~" and c not in '"\\' for c in request_id):
        return f'"{request_id}"'
    return None


def _dist_versions(names: tuple[str, ...]) -> list[str]:
    """``name-version`` of the installed distributions, from their ``.dist-info`` directory names
    (importlib.metadata costs more than the rest of this module)."""
    found: list[str] = []
    for entry in sys.path:
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        found += [n[: -len(".dist-info")] for n in listing
                  if n.endswith(".dist-info") and n.split("-", 1)[0].lower().replace(".", "_") in names]
    return sorted(set(found))


def _sources_fingerprint() -> list[list[Any]]:
    """Size and mtime of bosun's server modules: an edited checkout finds no stale entry."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    marks: list[list[Any]] = []
    for rel in SERVER_DIRS:
        folder = os.path.join(root, os.path.relpath(rel, "server"))
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".py"):
                stat = entry.stat()
                marks.append([rel, entry.name, stat.st_size, stat.st_mtime_ns])
    return marks


def cache_key(argv: list[str], environ: dict[str, str] | None = None) -> str:
    """What the answer may depend on, digested (the environment may hold a token: only its digest is kept)."""
    import bosun

    environ = dict(os.environ if environ is None else environ)
    material = json.dumps({
        "bosun": bosun.__version__, "dists": _dist_versions(("mcp", "mcp_types")), "python": sys.version,
        "sources": _sources_fingerprint(), "argv": argv,
        "env": sorted((k, v) for k, v in environ.items() if k.startswith("BOSUN_")),
    }, sort_keys=True)
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # builtin: no OpenSSL load
    except ImportError:  # pragma: no cover - other builds
        from hashlib import sha256
    return str(sha256(material.encode()).hexdigest())


class EarlyInit:
    """The first stdin line, read (and ``initialize`` answered from the cache) while the process imports."""

    def __init__(self, home: str, key: str, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
        import fcntl

        self.cache_path = os.path.join(home, CACHE_FILE)
        self.key = key
        self.cache = self._load()
        self.read_fd = fcntl.fcntl(stdin_fd, fcntl.F_DUPFD_CLOEXEC, 3)  # the wire, whatever fd 0 becomes
        self.write_fd = fcntl.fcntl(stdout_fd, fcntl.F_DUPFD_CLOEXEC, 3)  # the SDK moves fd 1 to stderr later
        self.first = b""
        self.rest = b""
        self.request_id: Any = None  # the initialize's id, when the first line is one
        self.version: str | None = None  # the protocol version it asked for
        self.sent: str | None = None  # the line written early, without its newline
        self.handed = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read_first, name="bosun-early-init", daemon=True)
        self.thread.start()

    def _read_file(self) -> dict[str, Any]:
        """Every key's entry in the home's cache file (``{"entries": {key: entry}}``); {} when unreadable."""
        try:
            with open(self.cache_path, "rb") as fh:
                data = json.loads(fh.read())
        except (OSError, ValueError):
            return {}
        entries = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            return {}
        return {k: v for k, v in entries.items() if isinstance(v, dict) and isinstance(v.get("stored_at"), float)}

    def _load(self) -> dict[str, Any]:
        """This key's entry: the SDK's handshake versions and its answer per version slot."""
        entry = self._read_file().get(self.key)
        if not isinstance(entry, dict) or not isinstance(entry.get("answers"), dict) or not isinstance(
                entry.get("handshake"), list):
            return {"handshake": [], "answers": {}}
        return entry

    # -- the early thread ------------------------------------------------------------------------
    def _read_first(self) -> None:
        buffer = b""
        try:
            while b"\n" not in buffer:
                data = os.read(self.read_fd, 65536)
                if not data:
                    break
                buffer += data
            line, newline, rest = buffer.partition(b"\n")
            self.first, self.rest = line + newline, rest
            self._answer(line)
        except Exception as exc:  # the SDK answers as it always did
            print(f"bosun: early initialize skipped: {exc!r}", file=sys.stderr)
        finally:
            self.handed.set()

    def _answer(self, line: bytes) -> None:
        request = _initialize_request(line)
        if request is None:
            return
        version = request["params"]["protocolVersion"]
        handshake = self.cache.get("handshake") or []
        with self.lock:
            self.request_id, self.version = request["id"], version
            slot = version if version in handshake else UNSUPPORTED_SLOT
            suffix = self.cache["answers"].get(slot) if handshake else None
            if not isinstance(suffix, str):
                return
            self.sent = RESPONSE_HEAD + str(id_json(request["id"])) + suffix
        data = (self.sent + "\n").encode()
        while data:
            data = data[os.write(self.write_fd, data):]

    # -- the SDK side --------------------------------------------------------------------------
    def take(self) -> tuple[bytes, int]:
        """The first line (and what was read after it) and the descriptor the rest of stdin comes from."""
        self.handed.wait()
        return self.first + self.rest, self.read_fd

    def settle(self, answer_line: str, is_result: bool, handshake: tuple[str, ...]) -> bool:
        """The SDK's own answer to the first ``initialize``: True when it must not be written (it was, early).

        Records it for the next start when it is a result; logs and replaces a cached line that differed."""
        import logging

        log = logging.getLogger("bosun.early_init")
        with self.lock:
            sent, version = self.sent, self.version
        slot = None if version is None else version if version in handshake else UNSUPPORTED_SLOT
        if sent is not None:
            if answer_line == sent:
                log.info("initialize was answered early with the SDK's recorded answer (identical, checked)")
                return True
            log.warning("the early initialize answer differed from the SDK's (%d vs %d bytes); the entry is "
                        "replaced", len(sent), len(answer_line))
        id_text = id_json(self.request_id)
        head = RESPONSE_HEAD + str(id_text)
        if slot is not None and id_text is not None and is_result and answer_line.startswith(head + ","):
            self._store(slot, answer_line[len(head):], handshake)
        elif slot is not None and sent is not None:
            self._store(slot, None, handshake)
        return sent is not None

    def _store(self, slot: str, suffix: str | None, handshake: tuple[str, ...]) -> None:
        same_sdk = list(self.cache.get("handshake") or []) == list(handshake)
        answers = dict(self.cache.get("answers") or {}) if same_sdk else {}
        if suffix is None:
            answers.pop(slot, None)
        else:
            answers[slot] = suffix
        self.cache = {"handshake": list(handshake), "answers": answers, "stored_at": time.time()}
        entries = self._read_file()  # other keys (another command line or environment on this home) stay
        entries[self.key] = self.cache
        newest = sorted(entries, key=lambda k: -entries[k]["stored_at"])[:MAX_KEYS]
        tmp = f"{self.cache_path}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump({"entries": {k: entries[k] for k in newest}}, fh)
            os.replace(tmp, self.cache_path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _initialize_request(line: bytes) -> dict[str, Any] | None:
    """The message when it is an ``initialize`` the SDK answers with a result (a well-formed request with
    an id it echoes verbatim, a string version and the two required objects); else None."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or msg.get("method") != "initialize":
        return None
    params = msg.get("params")
    if id_json(msg.get("id")) is None or not isinstance(params, dict):
        return None
    client = params.get("clientInfo")
    capabilities = params.get("capabilities")
    if not isinstance(params.get("protocolVersion"), str) or not isinstance(capabilities, dict):
        return None
    if not isinstance(client, dict) or not isinstance(client.get("name"), str) or not isinstance(
            client.get("version"), str):
        return None
    if not all(isinstance(v, dict) for v in capabilities.values()):
        return None
    return msg


def start(home: str, argv: list[str]) -> EarlyInit | None:
    """Start the early reader for this process (once); None when stdin/stdout cannot be duplicated."""
    global _ACTIVE
    if _ACTIVE is None:
        try:
            _ACTIVE = EarlyInit(home, cache_key(argv))
        except OSError:
            return None
    return _ACTIVE
