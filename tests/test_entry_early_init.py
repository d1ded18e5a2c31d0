"""``bosun stdio --standalone`` answers the handshake early with the SDK's own recorded answers (issue 15).

The process tests run the real command twice per protocol version: the first run records what the SDK
wrote (``initialize``, ``prompts/list``, ``tools/list``), the second answers from the first lines of the
process. The answers must be the same bytes, the SDK's own answers in the second run must have been
compared and dropped (one answer per id), and the rest of the session must answer as in the first run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

from bosun.server.transport import early_init
from tests.helpers_proc import env_for

CHECKED = "initialize was answered early with the SDK's recorded answer (identical, checked)"
CHECKED_LISTS = tuple(f"{m} was answered early with the SDK's recorded answer (identical, checked)"
                      for m in ("prompts/list", "tools/list"))
PREFETCH = "model load started beside the imports (BOSUN_MODEL_PREFETCH=auto: the handshake is recorded)"
VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS, "1999-01-01")  # the last two: not negotiable


def _initialize(version: str, request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {"roots": {"listChanged": True}},
                       "clientInfo": {"name": "entry-test", "version": "1"}}}


def _start(home: Path, version: str, request_id: Any) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in env_for(home).items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen([sys.executable, "-m", "bosun", "-v", "stdio", "--standalone"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    lines = [_initialize(version, request_id), {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": "prompts", "method": "prompts/list"},
             {"jsonrpc": "2.0", "id": "list", "method": "tools/list"},
             {"jsonrpc": "2.0", "id": "call", "method": "tools/call", "params": {"name": "stats", "arguments": {}}}]
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    proc.stdin.flush()
    return proc


def _finish(proc: subprocess.Popen[bytes]) -> tuple[list[bytes], str]:
    """Stdout lines up to the tools/call answer (then stdin closes: the server exits), and stderr."""
    assert proc.stdout is not None and proc.stdin is not None
    out: list[bytes] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        out.append(line)
        if json.loads(line).get("id") == "call":
            break
    rest, err = proc.communicate(timeout=60)
    return out + rest.splitlines(keepends=True), err.decode(errors="replace")


def _by_id(lines: list[bytes]) -> dict[Any, list[bytes]]:
    found: dict[Any, list[bytes]] = {}
    for line in lines:
        found.setdefault(json.loads(line).get("id"), []).append(line)
    return found


def test_the_early_answer_is_the_sdks_own_byte_for_byte_for_every_protocol_version(tmp_path: Path) -> None:
    """Every version the SDK negotiates and two it does not (the 2026 era has no handshake; a made-up one):
    run 1 records the SDK's answer, run 2 writes it early; same bytes, one answer per id, same session."""
    ids: dict[str, Any] = {v: (7 if i % 2 else f"init-{i}") for i, v in enumerate(VERSIONS)}  # int and str ids
    runs: list[dict[str, tuple[list[bytes], str]]] = []
    for _ in range(2):  # each wave in parallel (one home per version: separate caches)
        procs = {v: _start(tmp_path / f"home-{i}", v, ids[v]) for i, v in enumerate(VERSIONS)}
        runs.append({v: _finish(p) for v, p in procs.items()})
    for version in VERSIONS:
        (first, first_err), (second, second_err) = runs[0][version], runs[1][version]
        one, two = _by_id(first), _by_id(second)
        request_id = ids[version]
        assert len(one[request_id]) == 1 and len(two[request_id]) == 1, (version, first, second)  # never twice
        assert two[request_id] == one[request_id], version  # the SDK's bytes, written early
        assert CHECKED not in first_err and CHECKED in second_err, (version, second_err[-2000:])
        assert PREFETCH not in first_err and PREFETCH in second_err  # the model loads beside the imports
        for list_id, checked in zip(("prompts", "list"), CHECKED_LISTS, strict=True):  # the lists: early too
            assert len(one[list_id]) == 1 and two[list_id] == one[list_id], (version, list_id)
            assert checked not in first_err and checked in second_err, (version, second_err[-2000:])
        assert len(two["call"]) == 1 and json.loads(two["call"][0]).keys() == json.loads(one["call"][0]).keys()
        result = json.loads(two[request_id][0])["result"]
        negotiated = version if version in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        assert result["protocolVersion"] == negotiated and result["serverInfo"]["name"] == "bosun"
        assert second[0] == two[request_id][0]  # and it came first
        assert second[1:3] == [two["prompts"][0], two["list"][0]]  # in order, before the SDK's own answers


# -- the early reader alone, over pipes -------------------------------------------------------------
def _reader(home: Path, cache: dict[str, Any] | None, first: bytes, key: str = "k") -> tuple[
        early_init.EarlyInit, int, int]:
    home.mkdir(parents=True, exist_ok=True)
    if cache is not None:
        (home / early_init.CACHE_FILE).write_text(json.dumps({"entries": {"k": cache}}))
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(in_w, first)
    reader = early_init.EarlyInit(str(home), key, stdin_fd=in_r, stdout_fd=out_w)
    if first:
        reader.first_done.wait(10)  # its first line looked at (and perhaps answered)
    os.close(out_w)
    os.set_blocking(out_r, False)
    return reader, out_r, in_w


def _written(fd: int) -> bytes:
    reader_out = b""
    try:
        while chunk := os.read(fd, 65536):
            reader_out += chunk
    except BlockingIOError:
        pass
    return reader_out


SUFFIX = ',"result":{"protocolVersion":"2025-11-25"}}'
CACHE = {"handshake": list(HANDSHAKE_PROTOCOL_VERSIONS), "answers": {"2025-11-25": SUFFIX}, "stored_at": 1.0}


def _stored(home: Path, key: str = "k") -> dict[str, Any]:
    entry: dict[str, Any] = json.loads((home / early_init.CACHE_FILE).read_text())["entries"][key]
    return entry


def test_the_line_goes_to_the_sdk_unchanged_with_what_followed_it(tmp_path: Path) -> None:
    line = json.dumps(_initialize("2025-11-25", 3)).encode() + b"\n"
    reader, out, _ = _reader(tmp_path, CACHE, line + b'{"jsonrpc":"2.0","method":"x"}\n{"partial')
    assert _written(out) == b'{"jsonrpc":"2.0","id":3' + SUFFIX.encode() + b"\n"
    taken, fd = reader.take()
    assert taken == line + b'{"jsonrpc":"2.0","method":"x"}\n{"partial' and fd == reader.read_fd


@pytest.mark.parametrize("first", [
    json.dumps(_initialize("2025-11-25", True)),  # a bool id: pydantic would not echo it as JSON true
    json.dumps(_initialize("2025-11-25", 'a"b')),  # a string id whose escaping is not certain
    json.dumps({**_initialize("2025-11-25", 3), "params": {"protocolVersion": "2025-11-25"}}),  # SDK: an error
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}),  # the 2026 era
    "not json",
])
def test_no_early_answer_where_the_sdks_answer_is_not_certain(tmp_path: Path, first: str) -> None:
    reader, out, _ = _reader(tmp_path, CACHE, first.encode() + b"\n")
    assert _written(out) == b""
    assert reader.take()[0] == first.encode() + b"\n"


def test_another_key_finds_no_entry(tmp_path: Path) -> None:
    reader, out, _ = _reader(tmp_path, CACHE, json.dumps(_initialize("2025-11-25", 3)).encode() + b"\n", key="other")
    assert _written(out) == b"" and reader.sent is None


def test_the_sdks_answer_is_recorded_and_a_differing_entry_replaced(tmp_path: Path) -> None:
    """``settle``: no early answer -> the SDK's line is written and recorded; an early answer that differs
    -> the SDK's duplicate is still not written (one answer per id) and the entry becomes the SDK's."""
    first = json.dumps(_initialize("2025-06-18", 5)).encode() + b"\n"
    reader, _, _ = _reader(tmp_path / "a", None, first)
    sdk_line = '{"jsonrpc":"2.0","id":5,"result":{"protocolVersion":"2025-06-18"}}'
    assert reader.settle(sdk_line, True, HANDSHAKE_PROTOCOL_VERSIONS) is False  # written by the SDK
    stored = _stored(tmp_path / "a")
    assert stored["answers"] == {"2025-06-18": ',"result":{"protocolVersion":"2025-06-18"}}'}
    assert stored["handshake"] == list(HANDSHAKE_PROTOCOL_VERSIONS)

    stale = {**CACHE, "answers": {"2025-11-25": ',"result":{"old":1}}'}}
    reader, out, _ = _reader(tmp_path / "b", stale, json.dumps(_initialize("2025-11-25", 9)).encode() + b"\n")
    assert _written(out) == b'{"jsonrpc":"2.0","id":9,"result":{"old":1}}\n'
    sdk_line = '{"jsonrpc":"2.0","id":9' + SUFFIX
    assert reader.settle(sdk_line, True, HANDSHAKE_PROTOCOL_VERSIONS) is True  # not written twice
    assert _stored(tmp_path / "b")["answers"] == {"2025-11-25": SUFFIX}


def test_keys_share_the_file_and_the_oldest_go_first(tmp_path: Path) -> None:
    first = json.dumps(_initialize("2025-11-25", 1)).encode() + b"\n"
    sdk_line = '{"jsonrpc":"2.0","id":1' + SUFFIX
    for n in range(early_init.MAX_KEYS + 2):
        reader, _, _ = _reader(tmp_path, None, first, key=f"key-{n}")
        reader.settle(sdk_line, True, HANDSHAKE_PROTOCOL_VERSIONS)
    entries = json.loads((tmp_path / early_init.CACHE_FILE).read_text())["entries"]
    assert sorted(entries) == sorted(f"key-{n}" for n in range(2, early_init.MAX_KEYS + 2))
    reader, out, _ = _reader(tmp_path, None, first, key="key-3")  # an older key still answers early
    assert _written(out) == sdk_line.encode() + b"\n"


def test_unsupported_versions_share_the_sdks_fallback_slot(tmp_path: Path) -> None:
    cache = {**CACHE, "answers": {early_init.UNSUPPORTED_SLOT: SUFFIX}}
    for version in ("1999-01-01", *MODERN_PROTOCOL_VERSIONS):
        _, out, _ = _reader(tmp_path / version, cache, json.dumps(_initialize(version, 1)).encode() + b"\n")
        assert _written(out) == b'{"jsonrpc":"2.0","id":1' + SUFFIX.encode() + b"\n"


def test_the_key_changes_with_the_environment_and_arguments_and_keeps_no_secret() -> None:
    base = early_init.cache_key(["stdio", "--standalone"], {"BOSUN_HOME": "/h"})
    assert base == early_init.cache_key(["stdio", "--standalone"], {"BOSUN_HOME": "/h", "OTHER": "x"})
    assert base != early_init.cache_key(["stdio", "--standalone"], {"BOSUN_HOME": "/h", "BOSUN_TOOLS": "route"})
    assert base != early_init.cache_key(["-v", "stdio", "--standalone"], {"BOSUN_HOME": "/h"})
    assert "secret" not in early_init.cache_key(["stdio"], {"BOSUN_TOKEN": "secret"})


def test_the_standalone_fast_path_reads_arguments_as_the_full_parser_does() -> None:
    from bosun.server.cli import _standalone_args, build_parser

    for argv in (["stdio", "--standalone"], ["-v", "stdio", "--home", "/h", "--standalone", "--policies", "a",
                                             "--policies=b", "--database-url", "postgresql://x"]):
        fast = _standalone_args(argv)
        full = build_parser().parse_args(argv)
        assert fast is not None
        for name in ("home", "policies", "standalone", "database_url", "verbose", "func"):
            assert getattr(fast, name) == getattr(full, name), (argv, name)
    for other in (["stdio"], ["stdio", "--standalone", "--help"], ["serve", "--standalone"], ["stdio", "--stand"]):
        assert _standalone_args(other) is None


def test_a_host_that_has_not_written_yet_does_not_hold_up_the_server(tmp_path: Path) -> None:
    """The first line is awaited in the SDK's reader thread: with nothing on stdin, the lifespan still
    opens the engine and the model loads ("ready in" on stderr); the late initialize is then answered."""
    env = {k: v for k, v in env_for(tmp_path / "home").items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen([sys.executable, "-m", "bosun", "-v", "stdio", "--standalone"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        seen: list[str] = []
        ready = threading.Event()

        def watch() -> None:
            assert proc.stderr is not None
            for raw in proc.stderr:
                seen.append(raw.decode(errors="replace"))
                if "ready in" in seen[-1]:
                    ready.set()

        threading.Thread(target=watch, daemon=True).start()
        assert ready.wait(120), "".join(seen)[-2000:]  # a bound for a hang, not a speed check
        proc.stdin.write(json.dumps(_initialize("2025-11-25", 1)).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["result"]["serverInfo"]["name"] == "bosun"
        proc.stdin.close()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_sdks_duplicate_is_kept_back_at_the_line_level_and_everything_else_passes(tmp_path: Path) -> None:
    from bosun.server.transport.stdio import _AnswerOnceWriter

    reader, out, _ = _reader(tmp_path / "a", CACHE, json.dumps(_initialize("2025-11-25", 4)).encode() + b"\n")
    early_line = _written(out)
    wire_r, wire_w = os.pipe()
    writer = _AnswerOnceWriter(wire_w, reader)
    sdk_line = b'{"jsonrpc":"2.0","id":4' + SUFFIX.encode() + b"\n"
    for piece in (sdk_line[:10], sdk_line[10:] + b'{"jsonrpc":"2.0","id":"list","res', b'ult":{}}\n'):
        writer.write(piece)
    os.close(wire_w)
    assert early_line == sdk_line and os.read(wire_r, 65536) == b'{"jsonrpc":"2.0","id":"list","result":{}}\n'

    reader, _, _ = _reader(tmp_path / "b", CACHE, b'{"jsonrpc":"2.0","id":4,"method":"server/discover"}\n')
    wire_r, wire_w = os.pipe()
    writer = _AnswerOnceWriter(wire_w, reader)
    for piece in (b'{"jsonrpc":"2.0","id":4,"res', b'ult":{}}\n'):  # the id of a request that was no initialize
        writer.write(piece)
    os.close(wire_w)
    assert os.read(wire_r, 65536) == b'{"jsonrpc":"2.0","id":4,"result":{}}\n'


# -- the handshake's list requests ------------------------------------------------------------------
INIT_LINE = json.dumps(_initialize("2025-11-25", 3)).encode() + b"\n"
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
TOOLS = b'{"jsonrpc":"2.0","id":"t","method":"tools/list"}\n'
TOOLS_SUFFIX = ',"result":{"tools":[]}}'


def _tools_key() -> str:
    init_params = json.dumps(_initialize("2025-11-25", 3)["params"], sort_keys=True, separators=(",", ":"))
    return f"tools/list {{}} {init_params}"


def _with_lists(lists: dict[str, str]) -> dict[str, Any]:
    return {**CACHE, "lists": lists}


def _settled(reader: early_init.EarlyInit, out: int, wait_for: bytes) -> bytes:
    deadline = time.monotonic() + 10
    seen = b""
    while wait_for not in seen and time.monotonic() < deadline:
        seen += _written(out)
        time.sleep(0.01)
    return seen


def test_a_recorded_tool_list_is_answered_early_after_an_early_initialize(tmp_path: Path) -> None:
    reader, out, in_w = _reader(tmp_path, _with_lists({_tools_key(): TOOLS_SUFFIX}), INIT_LINE + INITIALIZED)
    os.write(in_w, TOOLS)  # the host sends it once the early initialize answer has arrived
    seen = _settled(reader, out, b'"id":"t"')
    assert seen == (b'{"jsonrpc":"2.0","id":3' + SUFFIX.encode() + b"\n"
                    + b'{"jsonrpc":"2.0","id":"t"' + TOOLS_SUFFIX.encode() + b"\n")
    taken, _ = reader.take()  # the SDK gets every byte, unchanged, and its duplicates are kept back
    assert taken == INIT_LINE + INITIALIZED + TOOLS
    assert reader.settle_id('"t"', '{"jsonrpc":"2.0","id":"t"' + TOOLS_SUFFIX, True, HANDSHAKE_PROTOCOL_VERSIONS)
    assert reader.settle_id("3", '{"jsonrpc":"2.0","id":3' + SUFFIX, True, HANDSHAKE_PROTOCOL_VERSIONS)
    assert reader.settle_id('"other"', "{}", True, HANDSHAKE_PROTOCOL_VERSIONS) is None  # not a handshake request


@pytest.mark.parametrize("cache", [CACHE, _with_lists({"tools/list {} {}": TOOLS_SUFFIX})])  # none, another host's
def test_an_unrecorded_list_stops_the_early_reader_and_the_sdks_answer_is_recorded(
        tmp_path: Path, cache: dict[str, Any]) -> None:
    reader, out, _ = _reader(tmp_path, cache, INIT_LINE + INITIALIZED + TOOLS + b'{"jsonrpc":"2.0","id":9,"met')
    reader.handed.wait(10)
    assert reader.handed.is_set() and _written(out) == b'{"jsonrpc":"2.0","id":3' + SUFFIX.encode() + b"\n"
    sdk_line = '{"jsonrpc":"2.0","id":"t"' + TOOLS_SUFFIX
    assert reader.settle_id('"t"', sdk_line, True, HANDSHAKE_PROTOCOL_VERSIONS) is False  # the SDK writes it
    assert _stored(tmp_path)["lists"][_tools_key()] == TOOLS_SUFFIX
    assert reader.take()[0] == INIT_LINE + INITIALIZED + TOOLS + b'{"jsonrpc":"2.0","id":9,"met'


def test_what_follows_the_state_of_the_server_is_never_answered_early(tmp_path: Path) -> None:
    """resources/list follows the policy corpus, a later page has a cursor, a list before ``initialize`` was
    answered early has no session to belong to: none is answered, and the reader stops at it."""
    resources = b'{"jsonrpc":"2.0","id":"r","method":"resources/list"}\n'
    paged = b'{"jsonrpc":"2.0","id":"t","method":"tools/list","params":{"cursor":"2"}}\n'
    lists = {_tools_key(): TOOLS_SUFFIX, _tools_key().replace("tools/list {}", 'tools/list {"cursor":"2"}'): TOOLS_SUFFIX}
    for n, (cache, lines) in enumerate([(_with_lists(lists), INIT_LINE + INITIALIZED + resources + TOOLS),
                                        (_with_lists(lists), INIT_LINE + INITIALIZED + paged),
                                        ({**_with_lists(lists), "answers": {}}, INIT_LINE + INITIALIZED + TOOLS)]):
        reader, out, _ = _reader(tmp_path / str(n), cache, lines)
        reader.handed.wait(10)
        assert reader.handed.is_set() and b'"id":"t"' not in _written(out) and b'"id":"r"' not in _written(out), n


def test_a_differing_list_answer_is_kept_back_and_replaced(tmp_path: Path) -> None:
    reader, out, _ = _reader(tmp_path, _with_lists({_tools_key(): ',"result":{"tools":["old"]}}'}),
                                INIT_LINE + INITIALIZED + TOOLS)
    _settled(reader, out, b'"id":"t"')
    reader.take()
    sdk_line = '{"jsonrpc":"2.0","id":"t"' + TOOLS_SUFFIX
    assert reader.settle_id('"t"', sdk_line, True, HANDSHAKE_PROTOCOL_VERSIONS) is True  # never twice
    assert _stored(tmp_path)["lists"][_tools_key()] == TOOLS_SUFFIX


def test_the_sdk_side_registers_the_handshake_lines_the_early_reader_did_not_read(tmp_path: Path) -> None:
    """A host that writes ``initialize`` after the SDK is ready: the reader is stopped before any line, the SDK
    reads them all, and its answers are recorded for the next start (then the handshake is over)."""
    reader, out, _ = _reader(tmp_path, None, b"")
    assert reader.take() == (b"", reader.read_fd)
    end = 0
    for line in (INIT_LINE, INITIALIZED, TOOLS, b'{"jsonrpc":"2.0","id":5,"method":"tools/call"}\n'):
        end += len(line)
        reader.note_line(line, end)
    assert not reader.watching and reader.expecting()  # two answers to settle
    reader.settle_id("3", '{"jsonrpc":"2.0","id":3' + SUFFIX, True, HANDSHAKE_PROTOCOL_VERSIONS)
    reader.settle_id('"t"', '{"jsonrpc":"2.0","id":"t"' + TOOLS_SUFFIX, True, HANDSHAKE_PROTOCOL_VERSIONS)
    assert not reader.expecting()
    stored = _stored(tmp_path)
    assert stored["answers"] == {"2025-11-25": SUFFIX} and stored["lists"] == {_tools_key(): TOOLS_SUFFIX}
    assert _written(out) == b""
