"""``bosun stdio``: relay a host's stdio MCP session to the shared daemon over HTTP.

Every harness on a machine then shares one warm process (one model load, one
state). The relay is stdlib-only so it starts in tens of milliseconds: it
forwards each JSON-RPC line as one POST, writes each response message back as
one stdout line, and never writes anything else to stdout. If the daemon is
not running it starts one (a file lock makes simultaneous starts produce
one daemon); if the daemon restarts mid-session, the relay replays the
session's ``initialize`` so the host never notices.

Every ``tools/call`` gets an idempotency key (``params._meta["bosun/idempotency_key"]``, unless
the host sent one) before its first post; a re-send after a restart carries the same key, so
the daemon answers it from its record instead of applying it twice (issue 13).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import threading
import time
from collections import deque

from bosun.server.transport.daemon_file import LOCK_FILE, LOG_FILE, health_url, pid_alive, read_daemon_file
from bosun.server.transport.http_lite import Connection, HttpProtocolError, split_url

TYPE_CHECKING = False
if TYPE_CHECKING:  # the bridge's start-up is on every host's clock: typing and pathlib stay unimported
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, BinaryIO

PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
IDEMPOTENCY_META_KEY = "bosun/idempotency_key"  # server/idempotency.py reads it
DISPATCH_META_KEY = "bosun/tools"  # server/protocol/dispatch.py reads it: this host's BOSUN_TOOLS with dispatch
NAME_BEARING_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_HEADER_SAFE = r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?"  # compiled on first use (re's cache), not per start
_B64_SENTINEL = r"=\?base64\?[A-Za-z0-9+/=]*\?="
START_TIMEOUT_S = 60.0


class DaemonUnavailable(RuntimeError):
    """No daemon could be found or started; the message says why."""


def _encode_header_value(value: str) -> str:
    """Same encoding as the SDK's ``encode_header_value`` (kept here to avoid importing mcp)."""
    if re.fullmatch(_HEADER_SAFE, value) and value == value.strip() and not re.fullmatch(_B64_SENTINEL, value):
        return value
    import base64  # rare: a name that is not header-safe ASCII

    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def probe(url: str, timeout: float = 1.0) -> bool:
    """True when something answers /healthz at the daemon's address (200 or 503 both count)."""
    host, port, path = split_url(health_url(url))
    conn = Connection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        status = conn.getresponse().status
    except OSError:
        return False
    finally:
        conn.close()
    return status in (200, 503)


def find_daemon(home: Path | str) -> dict[str, Any] | None:
    data = read_daemon_file(home)
    if data and pid_alive(data.get("pid")) and probe(str(data["url"])):
        return data
    return None


def ensure_daemon(home: Path | str, extra_args: list[str] | None = None, start: bool = True) -> dict[str, Any]:
    """The running daemon of ``home``, starting one (detached) if none answers."""
    found = find_daemon(home)
    if found or not start:
        if found:
            return found
        raise DaemonUnavailable(f"no bosun daemon is running for {home}")
    os.makedirs(home, mode=0o700, exist_ok=True)  # owner-only, like everything the daemon writes
    with os.fdopen(os.open(os.path.join(home, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two bridges starting at once: the second waits, then finds it
        try:
            found = find_daemon(home)
            if found:
                return found
            return _spawn(home, extra_args or [])
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _spawn(home: Path | str, extra_args: list[str]) -> dict[str, Any]:
    import subprocess  # only when no daemon answers: not on the attach path

    port = os.environ.get("BOSUN_PORT", "").strip() or "0"
    # -P: the working directory is not put on sys.path, so a folder named "bosun" there
    # (a clone, seen from its parent) cannot shadow the installed package
    cmd = [sys.executable, "-P", "-m", "bosun", "serve", "--home", str(home), "--port", port, *extra_args]
    log_path = os.path.join(home, LOG_FILE)
    # the daemon is shared by every harness: one host's tool filter must not narrow it for all
    env = {k: v for k, v in os.environ.items() if k != "BOSUN_TOOLS"}
    with os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, env=env
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log_path, "rb") as fh:
                tail = fh.read().decode(errors="replace")[-2000:]
            raise DaemonUnavailable(f"bosun daemon exited with code {proc.returncode}; log {log_path}:\n{tail}")
        data = read_daemon_file(home)
        if data and data.get("pid") == proc.pid and probe(str(data["url"])):
            return data
        time.sleep(0.02)
    raise DaemonUnavailable(f"bosun daemon did not answer within {START_TIMEOUT_S:.0f}s; see {log_path}")


class Relay:
    """One stdio session relayed to the daemon's streamable HTTP endpoint."""

    def __init__(self, home: Path | str, daemon: dict[str, Any], out: BinaryIO, extra_args: list[str]) -> None:
        self.home = home
        self.extra_args = extra_args
        self.out = out
        self.out_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.local = threading.local()
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.init_messages: list[dict[str, Any]] = []  # replayed if the daemon restarts
        self.generation = 0
        self.tool_filter = {t.strip() for t in os.environ.get("BOSUN_TOOLS", "").split(",") if t.strip()}
        # dispatch (one tool over the others) is built by the daemon for the requests that name it
        self.dispatch = ",".join(sorted(self.tool_filter)) if "dispatch" in self.tool_filter else None
        self.list_ids: set[Any] = set()  # ids of in-flight tools/list requests (filtered per host)
        self._use(daemon)

    def _use(self, daemon: dict[str, Any]) -> None:
        self.host, self.port, path = split_url(str(daemon["url"]))
        self.path = path or "/mcp"
        self.token = daemon.get("token")
        self.generation += 1

    # -- HTTP ------------------------------------------------------------------------------
    def _conn(self) -> Connection:
        conn = getattr(self.local, "conn", None)
        if conn is None or getattr(self.local, "generation", -1) != self.generation:
            conn = Connection(self.host, self.port, timeout=None)
            self.local.conn = conn
            self.local.generation = self.generation
        return conn

    def _headers(self, msg: dict[str, Any] | list[Any]) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        version = None
        if isinstance(msg, dict):
            params = msg.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            if isinstance(meta, dict) and isinstance(meta.get(PROTOCOL_VERSION_META_KEY), str):
                version = meta[PROTOCOL_VERSION_META_KEY]
                method = msg.get("method")
                if isinstance(method, str):
                    headers["Mcp-Method"] = method
                    key = NAME_BEARING_METHODS.get(method)
                    value = params.get(key) if key and isinstance(params, dict) else None
                    if isinstance(value, str):
                        headers["Mcp-Name"] = _encode_header_value(value)
        version = version or self.protocol_version
        if version:
            headers["MCP-Protocol-Version"] = version
        return headers

    def _post(self, msg: dict[str, Any] | list[Any], emit: bool = True) -> int:
        body = json.dumps(msg, separators=(",", ":")).encode()
        conn = self._conn()
        try:
            conn.request("POST", self.path, body=body, headers=self._headers(msg))
            resp = conn.getresponse()
        except OSError:
            conn.close()
            self.local.conn = None
            raise
        sid = resp.getheader("Mcp-Session-Id")
        if sid:
            self.session_id = sid
        ctype = (resp.getheader("Content-Type") or "").lower()
        if ctype.startswith("text/event-stream"):
            if not self._relay_sse(resp, msg, emit) and _expects_answer(msg):
                conn.close()  # the stream ended before the answer: the daemon went away mid-call
                self.local.conn = None
                raise HttpProtocolError("the event stream ended before the answer")
        else:
            data = resp.read()
            if resp.status >= 400 and resp.status != 404:
                self._http_error(msg, resp.status, data)
            elif data.strip() and resp.status < 400:
                self._note_init(msg, data)
                if emit:
                    self._write(data)
        return resp.status

    def _relay_sse(self, resp: Any, msg: Any, emit: bool) -> bool:
        """Relay the stream's messages; True once the answer to ``msg`` (its result or error) went by."""
        data_lines: list[bytes] = []
        answered = False
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n")
            if not line:
                if data_lines:
                    payload = b"\n".join(data_lines)
                    data_lines = []
                    if payload.strip():
                        self._note_init(msg, payload)
                        answered = answered or _is_answer(msg, payload)
                        if emit:
                            self._write(payload)
                continue
            if line.startswith(b"data:"):
                data_lines.append(line[5:].lstrip(b" "))
        if data_lines:
            payload = b"\n".join(data_lines)
            answered = answered or _is_answer(msg, payload)
            if emit:
                self._write(payload)
        return answered

    def _note_init(self, msg: Any, payload: bytes) -> None:
        if isinstance(msg, dict) and msg.get("method") == "initialize":
            try:
                version = json.loads(payload).get("result", {}).get("protocolVersion")
            except (ValueError, AttributeError):
                return
            if isinstance(version, str):
                self.protocol_version = version

    def _http_error(self, msg: Any, status: int, data: bytes) -> None:
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(msg, dict) and msg.get("id") is not None:
            error = parsed.get("error")
            if isinstance(error, dict):  # already a JSON-RPC error
                parsed["id"] = msg["id"]
                self._write(json.dumps(parsed).encode())
                return
            if isinstance(error, str) and msg.get("method") == "tools/call":
                # the daemon's guard refused the request (413, 400): a tool error the model can read,
                # the same shape stdio gives for an oversized argument
                result = {"content": [{"type": "text", "text": f"bosun: {error}"}], "isError": True}
                self._write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode())
                return
            if isinstance(error, str):
                self._error(msg, -32600, f"bosun daemon answered HTTP {status}: {error}")
                return
        text = data.decode(errors="replace")[:300]
        self._error(msg, -32000, f"bosun daemon answered HTTP {status}: {text}")

    def _error(self, msg: Any, code: int, message: str) -> None:
        if isinstance(msg, dict) and msg.get("id") is not None:
            err = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": code, "message": message}}
            self._write(json.dumps(err).encode())

    def _filter_tools(self, payload: bytes) -> bytes:
        """Apply this host's BOSUN_TOOLS to a tools/list answer (the daemon serves everyone)."""
        try:
            msg = json.loads(payload)
        except ValueError:
            return payload
        if not isinstance(msg, dict) or msg.get("id") not in self.list_ids:
            return payload
        result = msg.get("result")
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            result["tools"] = [t for t in result["tools"] if isinstance(t, dict) and t.get("name") in self.tool_filter]
            return json.dumps(msg, separators=(",", ":")).encode()
        return payload

    def _write(self, payload: bytes) -> None:
        if self.tool_filter and not self.dispatch and self.list_ids and b'"tools"' in payload:
            payload = self._filter_tools(payload)
        line = payload.replace(b"\n", b" ").strip() + b"\n"
        with self.out_lock:
            self.out.write(line)
            self.out.flush()

    # -- messages --------------------------------------------------------------------------
    def handle(self, msg: dict[str, Any] | list[Any]) -> None:
        """Forward one message; on a lost daemon or session, restart and replay, then retry once.

        A tools/call is keyed first (``with_idempotency_key``): the retry re-sends the same key."""
        if isinstance(msg, dict):
            msg = with_idempotency_key(msg)
        is_init = isinstance(msg, dict) and msg.get("method") in ("initialize", "notifications/initialized")
        if self.tool_filter and isinstance(msg, dict) and msg.get("method") == "tools/list":
            self.list_ids.add(msg.get("id"))
        if self.dispatch and isinstance(msg, dict) and msg.get("method") in ("tools/list", "tools/call"):
            msg = with_meta(msg, DISPATCH_META_KEY, self.dispatch)
        if is_init and isinstance(msg, dict):
            self.init_messages.append(msg)
        generation = self.generation
        try:
            status = self._post(msg)
        except OSError:
            status = -1
        if status in (-1, 404) and not is_init:
            try:
                self._recover(generation)
                status = self._post(msg)
            except (OSError, DaemonUnavailable) as exc:
                self._error(msg, -32000, f"bosun daemon unavailable: {exc}")
                return
        if status == -1:
            self._error(msg, -32000, "bosun daemon unavailable")
        elif status == 404:
            self._error(msg, -32001, "bosun daemon lost this session; restart the MCP server in your host")

    def _recover(self, generation: int) -> None:
        with self.state_lock:
            if self.generation != generation:
                return  # another thread already recovered
            daemon = ensure_daemon(self.home, self.extra_args)
            self._use(daemon)
            self.session_id = None
            for init in self.init_messages:
                self._post(init, emit=False)

    def close(self) -> None:
        if self.session_id:
            try:
                conn = self._conn()
                conn.request("DELETE", self.path, headers=self._headers({}))
                conn.getresponse().read()
            except OSError:
                pass


def with_meta(msg: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    """``msg`` with ``params._meta[key] = value`` (a copy; the host's message is not changed)."""
    params = msg.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    return {**msg, "params": {**params, "_meta": {**meta, key: value}}}


def with_idempotency_key(msg: dict[str, Any]) -> dict[str, Any]:
    """``msg`` with an idempotency key in ``params._meta`` if it is a tools/call without one."""
    params = msg.get("params")
    if msg.get("method") != "tools/call" or "id" not in msg or not isinstance(params, dict):
        return msg
    meta = params.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        return msg  # malformed: the daemon names the problem
    if meta is not None and IDEMPOTENCY_META_KEY in meta:
        return msg  # the host's own key wins
    keyed = {**(meta or {}), IDEMPOTENCY_META_KEY: os.urandom(16).hex()}  # 128 random bits, as uuid4().hex
    return {**msg, "params": {**params, "_meta": keyed}}


def _expects_answer(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("id") is not None and "method" in msg


def _is_answer(msg: Any, payload: bytes) -> bool:
    if not isinstance(msg, dict) or msg.get("id") is None:
        return False
    try:
        parsed = json.loads(payload)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("id") == msg["id"] and ("result" in parsed or "error" in parsed)


class Workers:
    """``ThreadPoolExecutor``'s submit/shutdown for the relay, without importing ``concurrent.futures``
    (and its ``logging``, ``queue``...): up to ``size`` threads, started as work arrives; a job's exception
    is reported on stderr (the host's log), never on stdout."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self.jobs: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self.cond = threading.Condition()
        self.threads: list[threading.Thread] = []
        self.idle = 0
        self.closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self.cond:
            if self.closed:
                raise RuntimeError("cannot submit after shutdown")
            self.jobs.append((fn, args))
            if self.idle == 0 and len(self.threads) < self.size:
                thread = threading.Thread(target=self._work, name=f"{self.name}_{len(self.threads)}", daemon=True)
                self.threads.append(thread)
                thread.start()
            else:
                self.cond.notify()

    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.jobs and not self.closed:
                    self.idle += 1
                    self.cond.wait()
                    self.idle -= 1
                if not self.jobs:
                    return
                fn, args = self.jobs.popleft()
            try:
                fn(*args)
            except Exception as exc:  # one message's failure must not stop the relay
                print(f"bosun stdio: relaying a message failed: {exc!r}", file=sys.stderr)

    def shutdown(self) -> None:
        """Run every submitted job to its end, then stop the threads."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        for thread in self.threads:
            thread.join()


def run_bridge(home: Path | str, extra_args: list[str]) -> int:
    """Relay stdin to the daemon until EOF. Returns the process exit code."""
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but protocol messages may reach the real stdout
    try:
        daemon = ensure_daemon(home, extra_args)
    except DaemonUnavailable as exc:
        print(f"bosun stdio: {exc}", file=sys.stderr)
        return 1
    relay = Relay(home, daemon, stdout, extra_args)
    pool = Workers(8, "bosun-relay")
    stdin = sys.stdin.buffer
    for raw in stdin:
        raw = raw.strip()
        if not raw:
            continue
        try:
            msg = json.loads(raw)
        except ValueError:
            relay._write(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')
            continue
        # initialize and notifications go in order on this thread; requests run concurrently
        if isinstance(msg, dict) and ("id" not in msg or msg.get("method") == "initialize"):
            relay.handle(msg)
        else:
            pool.submit(relay.handle, msg)
    pool.shutdown()
    relay.close()
    return 0
