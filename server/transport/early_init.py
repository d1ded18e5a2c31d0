"""``bosun stdio --standalone``: answer the handshake from the process's first lines with the SDK's own answers.

Why: the MCP SDK's import alone is ~1 s on a 2-core machine (``import mcp`` loads every protocol era's
pydantic models, the client and the HTTP server), so no server built on it can answer ``initialize``
within 1 s by cutting its own imports (Cline's ``initialize`` timeout is 1.5 s). The answer
to ``initialize`` does not depend on anything the SDK computes per session but the negotiated
version, and the answers to ``tools/list`` and ``prompts/list`` only on what the process serves (its
sources, arguments and ``BOSUN_*`` environment: the key below), so they can be sent early, as long as
they are the SDK's answers, byte for byte. (``resources/list`` follows the policy corpus: never early.)

* **Recorded from the SDK.** Every session records the line the SDK's stdio writer produced for
  its ``initialize`` (one entry per negotiated version slot) and for the list requests of its
  handshake (one entry per ``initialize`` parameters, method and parameters) in
  ``$BOSUN_HOME/initialize-cache.json``, keyed by bosun's version, the installed ``mcp``/``mcp_types``
  versions, bosun's server sources (size and mtime), the ``BOSUN_*`` environment and the command
  line. Nothing is ever written by hand; a key that differs finds no entry.
* **Answered early.** A thread started before any import reads stdin; when the first line is an
  ``initialize`` whose version slot has an entry, it writes that line with the request's id at once
  (on its own copy of fd 1). While every line so far was answered early it goes on: after
  ``notifications/initialized``, a ``tools/list`` or ``prompts/list`` with an entry is answered the
  same way. It stops at the first line it cannot answer, or when the SDK is ready to read, and hands
  every byte it read to the SDK unchanged.
* **Checked.** The SDK still receives and handles every one of those requests (its session state is
  exactly as before); ``stdio.answered_once_stdout`` drops its answers instead of writing second ones,
  after comparing each with the early line: a difference is logged and the entry replaced, so it
  cannot happen twice.

Only stdlib modules are imported here; ``note_line`` and ``settle_id`` are called from the SDK side
(server/transport/stdio.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CACHE_FILE = "initialize-cache.json"
MAX_KEYS = 8  # entries kept per home (one per command line and BOSUN_* environment in use)
MAX_LISTS = 16  # list answers kept per key (one per host's initialize parameters and list method)
MAX_WATCHED = 8  # lines of a session's start looked at for handshake requests
LIST_METHODS = ("tools/list", "prompts/list")  # what the process serves decides these answers, nothing else
INITIALIZED = "notifications/initialized"
INITIALIZE = ""  # ``pending``'s key for the initialize request (list requests: their cache key)
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
    """The first stdin lines, read (and the handshake answered from the cache) while the process imports."""

    def __init__(self, home: str, key: str, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
        import fcntl

        self.cache_path = os.path.join(home, CACHE_FILE)
        self.key = key
        self.cache = self._load()
        self.read_fd = fcntl.fcntl(stdin_fd, fcntl.F_DUPFD_CLOEXEC, 3)  # the wire, whatever fd 0 becomes
        self.write_fd = fcntl.fcntl(stdout_fd, fcntl.F_DUPFD_CLOEXEC, 3)  # the SDK moves fd 1 to stderr later
        self.wake_r, self.wake_w = os.pipe()  # ``take`` stops the reader through it
        self.first = b""  # every byte the early thread read (whole lines and a partial one): the SDK's first input
        self.parsed = 0  # bytes of ``first`` whose lines the early thread looked at (the SDK side looks at the rest)
        self.request_id: Any = None  # the initialize's id, when the first line is one
        self.version: str | None = None  # the protocol version it asked for
        self.init_params: str | None = None  # its parameters, canonical: what list answers are keyed by
        self.sent: str | None = None  # the initialize line written early, without its newline
        self.pending: dict[str, tuple[str, str | None]] = {}  # id -> (INITIALIZE or list key, the early line)
        self.watching = True  # still inside the handshake: its requests are registered in ``pending``
        self.watched = 0
        self.first_done = threading.Event()  # the first line was looked at (and perhaps answered)
        self.handed = threading.Event()  # the early thread stopped: ``first`` is final
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read_handshake, name="bosun-early-init", daemon=True)
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
        """This key's entry: the SDK's handshake versions, its answer per version slot and its list answers."""
        entry = self._read_file().get(self.key)
        if not isinstance(entry, dict) or not isinstance(entry.get("answers"), dict) or not isinstance(
                entry.get("handshake"), list):
            return {"handshake": [], "answers": {}, "lists": {}}
        if not isinstance(entry.get("lists"), dict):
            entry["lists"] = {}
        return entry

    # -- the early thread ------------------------------------------------------------------------
    def _read_handshake(self) -> None:
        import select

        read = b""
        parsed = 0
        go_on = True
        try:
            while go_on:
                ready = select.select([self.read_fd, self.wake_r], [], [])[0]
                if self.wake_r in ready:  # the SDK reads from here on
                    break
                data = os.read(self.read_fd, 65536)
                if not data:
                    break
                read += data
                while go_on:
                    end = read.find(b"\n", parsed)
                    if end < 0:
                        break
                    line, parsed = read[parsed:end], end + 1
                    go_on = self.look(line, may_answer=True)
                    self.first_done.set()
        except Exception as exc:  # the SDK answers as it always did
            print(f"bosun: early initialize skipped: {exc!r}", file=sys.stderr)
        finally:
            with self.lock:
                self.first, self.parsed = read, parsed
            self.first_done.set()
            self.handed.set()

    def look(self, line: bytes, may_answer: bool) -> bool:
        """Register ``line`` when it is a request of the handshake (its answer is checked or recorded), and
        with ``may_answer`` answer it from the cache; True when it was answered (or needs no answer)."""
        with self.lock:
            if not self.watching:
                return False
            self.watched += 1
            if self.watched == 1:
                sent = self._initialize(line, may_answer)
            elif self.watched > MAX_WATCHED:
                self.watching = False
                return False
            else:
                message = _message(line)
                if message is not None and message.get("method") == INITIALIZED and "id" not in message:
                    return may_answer and self.sent is not None
                sent = self._list(message, may_answer and self.sent is not None)
            if sent is None:
                return False
        data = (sent + "\n").encode()
        while data:
            data = data[os.write(self.write_fd, data):]
        return True

    def _initialize(self, line: bytes, may_answer: bool) -> str | None:
        """The first line: registered when it is an initialize the SDK answers with a result; the early line."""
        request = _initialize_request(line)
        if request is None:
            self.watching = False
            return None
        version = request["params"]["protocolVersion"]
        self.request_id, self.version = request["id"], version
        self.init_params = json.dumps(request["params"], sort_keys=True, separators=(",", ":"))
        handshake = self.cache.get("handshake") or []
        slot = version if version in handshake else UNSUPPORTED_SLOT
        suffix = self.cache["answers"].get(slot) if handshake and may_answer else None
        if isinstance(suffix, str):
            self.sent = RESPONSE_HEAD + str(id_json(request["id"])) + suffix
        self.pending[str(id_json(request["id"]))] = (INITIALIZE, self.sent)
        return self.sent

    def _list(self, message: dict[str, Any] | None, may_answer: bool) -> str | None:
        """A later line: registered when it is a list request of the handshake; the early line, if any."""
        key = _list_key(message, self.init_params)
        id_text = None if message is None else id_json(message.get("id"))
        if key is None or id_text is None or id_text in self.pending:
            self.watching = False  # the handshake is over (or an id is reused: nothing is certain)
            return None
        suffix = self.cache["lists"].get(key) if may_answer else None
        sent = RESPONSE_HEAD + id_text + suffix if isinstance(suffix, str) else None
        self.pending[id_text] = (key, sent)
        return sent

    # -- the SDK side --------------------------------------------------------------------------
    def take(self) -> tuple[bytes, int]:
        """What the early thread read (handed over whole) and the descriptor the rest of stdin comes from.

        Stops the thread first: from here the SDK reads the wire (and ``note_line`` sees its lines)."""
        try:
            os.write(self.wake_w, b"x")
        except OSError:
            pass
        self.handed.wait()
        return self.first, self.read_fd

    def note_line(self, line: bytes, end: int) -> None:
        """The SDK's reader read ``line``, ending ``end`` bytes into the wire: registered (never answered here)
        unless the early thread already looked at it."""
        if end > self.parsed and self.watching:
            self.look(line.rstrip(b"\r\n"), may_answer=False)

    def expecting(self) -> bool:
        """True while an answer of the SDK may still have to be checked, recorded or kept back."""
        with self.lock:
            return self.watching or bool(self.pending)

    def settle_id(self, id_text: str, answer_line: str, is_result: bool, handshake: tuple[str, ...]) -> bool | None:
        """The SDK's answer to request ``id_text``: None when it is no registered request of the handshake,
        else True when it must not be written (it was, early)."""
        with self.lock:
            kind, sent = self.pending.pop(id_text, (None, None))
        if kind is None:
            return None
        try:
            if kind == INITIALIZE:
                return self.settle(answer_line, is_result, handshake)
            return self._settle_list(kind, id_text, sent, answer_line, is_result)
        except Exception:  # recording is best effort; the wire must never break on it
            import logging

            logging.getLogger("bosun.early_init").exception("checking an early handshake answer failed")
            return sent is not None  # answered early: still never twice

    def settle(self, answer_line: str, is_result: bool, handshake: tuple[str, ...]) -> bool:
        """The SDK's own answer to the first ``initialize``: True when it must not be written (it was, early).

        Records it for the next start when it is a result; logs and replaces a cached line that differed."""
        with self.lock:
            sent, version = self.sent, self.version
        id_text = id_json(self.request_id)
        if version is None or id_text is None:
            return sent is not None
        slot = version if version in handshake else UNSUPPORTED_SLOT
        return self._check("initialize", id_text, sent, answer_line, is_result,
                           lambda suffix: self._store(handshake, slot=slot, suffix=suffix))

    def _settle_list(self, key: str, id_text: str, sent: str | None, answer_line: str, is_result: bool) -> bool:
        return self._check(key.split(" ", 1)[0], id_text, sent, answer_line, is_result,
                           lambda suffix: self._store(None, list_key=key, suffix=suffix))

    @staticmethod
    def _check(what: str, id_text: str, sent: str | None, answer_line: str, is_result: bool,
               store: Callable[[str | None], None]) -> bool:
        """Compare the SDK's answer with the line written early (if one was), and record it for the next start
        when it is a result (``store(suffix)``; ``store(None)`` drops an entry that answered wrongly). True when
        the SDK's answer must not be written: one was, early."""
        import logging

        log = logging.getLogger("bosun.early_init")
        if sent is not None and answer_line == sent:
            log.info("%s was answered early with the SDK's recorded answer (identical, checked)", what)
            return True
        if sent is not None:
            log.warning("the early %s answer differed from the SDK's (%d vs %d bytes); the entry is replaced",
                        what, len(sent), len(answer_line))
        head = RESPONSE_HEAD + id_text
        if is_result and answer_line.startswith(head + ","):
            store(answer_line[len(head):])
        elif sent is not None:
            store(None)
        return sent is not None

    def _store(self, handshake: tuple[str, ...] | None, suffix: str | None, slot: str | None = None,
               list_key: str | None = None) -> None:
        """Set (or with ``suffix`` None drop) one recorded answer: an initialize slot (``handshake``: the SDK's
        versions; another SDK's entries start over) or a list answer; then write the file atomically."""
        with self.lock:
            cache = self.cache
            same_sdk = handshake is None or list(cache.get("handshake") or []) == list(handshake)
            answers = dict(cache.get("answers") or {}) if same_sdk else {}
            lists = dict(cache.get("lists") or {}) if same_sdk else {}
            if slot is not None:
                answers.pop(slot, None)
                if suffix is not None:
                    answers[slot] = suffix
            if list_key is not None:
                lists.pop(list_key, None)
                if suffix is not None:
                    lists[list_key] = suffix
            lists = dict(list(lists.items())[-MAX_LISTS:])  # the newest kept (insertion order)
            versions = list(handshake) if handshake is not None else list(cache.get("handshake") or [])
            self.cache = {"handshake": versions, "answers": answers, "lists": lists, "stored_at": time.time()}
            mine = self.cache
        entries = self._read_file()  # other keys (another command line or environment on this home) stay
        entries[self.key] = mine
        newest = sorted(entries, key=lambda k: -entries[k]["stored_at"])[:MAX_KEYS]
        tmp = f"{self.cache_path}.{os.getpid()}.{threading.get_ident()}.tmp"
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


def _message(line: bytes) -> dict[str, Any] | None:
    """The JSON-RPC 2.0 object on ``line``, or None."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) and message.get("jsonrpc") == "2.0" else None


def _list_key(message: dict[str, Any] | None, init_params: str | None) -> str | None:
    """The cache key of a list request whose answer depends only on what the process serves (and, to be
    sure, on the host's ``initialize`` parameters); None for anything else."""
    if message is None or init_params is None or message.get("method") not in LIST_METHODS:
        return None
    params = message.get("params", {})
    if not isinstance(params, dict) or "cursor" in params:  # a later page: not part of a handshake
        return None
    return " ".join((str(message["method"]), json.dumps(params, sort_keys=True, separators=(",", ":")), init_params))


def _initialize_request(line: bytes) -> dict[str, Any] | None:
    """The message when it is an ``initialize`` the SDK answers with a result (a well-formed request with
    an id it echoes verbatim, a string version and the two required objects); else None."""
    msg = _message(line)
    if msg is None or msg.get("method") != "initialize":
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
