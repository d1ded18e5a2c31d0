"""Chunked redaction (``server/chunked_redact.py``) finds exactly what redaction of the whole text finds.

Secrets sit on every side of a chunk edge: on the last line of a chunk, the first of the next,
in a private-key block that a cut by size alone would split, in a block whose END never comes,
and on lines longer than a chunk. The payloads are generated from a fixed seed list.
"""

from __future__ import annotations

import random

import pytest

from bosun.core.offload.offload import count_lines
from bosun.core.redact import Redactor
from bosun.server.chunked_redact import RedactTotals, redact_chunks, safe_cut

SECRETS = [
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "API_KEY=Zx9Qw8Er7Ty6Ui5Op4As3Df2",
    'password = "hunter2hunter2"',
    "Authorization: Bearer abcdefghijklmnop1234567890XYZ",
    "postgres://user:s3cr3tPw@db.example.com/x",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END CERTIFICATE-----\nmore\n-----END PRIVATE KEY-----",
    "xoxb-1234567890-abcdefghij",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


def _text(seed: int) -> bytes:
    rng = random.Random(seed)
    parts = []
    for i in range(rng.randint(50, 400)):
        roll = rng.random()
        if roll < 0.2:
            parts.append(rng.choice(SECRETS) + ("\n" if rng.random() < 0.9 else " "))
        elif roll < 0.22:
            parts.append("y" * rng.randint(300, 3000) + " token=" + "Qw8Er7Ty6Ui5Op4As3Df2Zx9\n")  # a long line
        else:
            parts.append(f"line {i} é " + "x" * rng.randint(0, 120) + "\n")
    if rng.random() < 0.3:
        parts.insert(rng.randint(0, len(parts)), "-----BEGIN PRIVATE KEY-----\nabc\n")  # its END never comes
    if rng.random() < 0.5:
        parts.append("last line without a newline")
    return "".join(parts).encode()


def _chunked(data: bytes, redactor: Redactor, chunk: int, piece: int) -> tuple[bytes, RedactTotals]:
    out: list[bytes] = []
    totals = redact_chunks((data[i:i + piece] for i in range(0, len(data), piece)), redactor, out.append, chunk)
    return b"".join(out), totals


@pytest.mark.parametrize("seed", range(24))
def test_chunked_redaction_equals_redaction_of_the_whole_text(seed: int) -> None:
    redactor = Redactor()
    data = _text(seed)
    whole, counts = redactor.redact_bytes(data)
    assert counts  # every payload carries secrets
    for chunk in (64, 257, 1000, 4096):
        got, totals = _chunked(data, redactor, chunk, 97)
        assert got == whole, chunk
        assert totals.counts == counts, chunk
        assert totals.nbytes == len(whole) and totals.lines == count_lines(whole)


def test_a_secret_on_each_side_of_every_cut_is_found() -> None:
    redactor = Redactor()
    line = b"filler " * 8 + b"\n"
    secret = b"export GITHUB_TOKEN=ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n"
    data = (line * 3 + secret) * 50
    whole, counts = redactor.redact_bytes(data)
    for chunk in range(len(line), 4 * len(line) + len(secret) + 2):  # every cut position, in turn
        got, totals = _chunked(data, redactor, chunk, 50)
        assert got == whole and totals.counts == counts, chunk


def test_a_cut_never_falls_inside_a_private_key_block() -> None:
    block = b"-----BEGIN RSA PRIVATE KEY-----\n" + b"QUJD\n" * 40 + b"-----END RSA PRIVATE KEY-----\n"
    data = b"a\n" * 10 + block + b"b\n" * 10
    for target in range(1, len(data)):
        cut = safe_cut(data, target, False)
        assert cut == 0 or cut <= 20 or cut >= 20 + len(block), target


def test_a_custom_rule_and_a_disabled_rule_are_applied_per_chunk_as_configured() -> None:
    redactor = Redactor(disabled=["private_key"], extra=["ticket=TCK-[0-9]{6}"])
    data = b"".join(b"row %d TCK-%06d AKIAIOSFODNN7EXAMPLE\n" % (i, i) for i in range(300))
    whole, counts = redactor.redact_bytes(data)
    got, totals = _chunked(data, redactor, 500, 64)
    assert got == whole and totals.counts == counts and counts["ticket"] == 300
