"""Secret scrubbing: every shape is caught, identifiers survive, the rule set is configurable."""

from __future__ import annotations

import pytest

from bosun.core.errors import InvalidInput
from bosun.core.redact import Redactor, looks_random, redact_value

SECRETS = {
    "aws_access_key": "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
    "aws_secret_key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github_token": "token ghp_abcdefghijklmnopqrstuvwxyzABCDEF0123 ok",
    "gitlab_token": "glpat-aB3dE6gH9jK2mN5pQ8sT",
    "slack_token": "xoxb-1234567890-abcdefghijkl",
    "private_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "auth_header": "Authorization: Bearer abc.def.ghi123456",
    "url_password": "postgres://admin:s3cr3tPassw0rd@db.example.com:5432/app",
    "secret_assignment": "DJANGO_SECRET_KEY='k8#2jf93jf0a9sdjf0A9SDJF023jfa'",
    "gcp_api_key": "key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    "stripe_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
}

ASSIGNMENTS = [
    "DB_PASSWORD=Xk39fj2KDm0sQp7Lz1",
    'export API_TOKEN="q8Zr1bW0pLmN5vXc3TyA"',
    '{"client_secret": "k2J9dL0qPz8WmX4rT6yB"}',
    "aws.secret_key: Q1w2E3r4T5y6U7i8O9p0",
    "TOKEN_SECRET = 'Zx9Cv8Bn7Mq6Wl5Ek4Rj'",
    "my_pwd:=H7g6F5d4S3a2Q1w0E9r8",
]

SURVIVE = [
    "commit 3f9a1c2b7d4e5f60718293a4b5c6d7e8f9012345",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "cache_key = make_cache_key(request)",
    '"cache_key": "3f9a1c2b7d4e5f60718293a4b5c6d7e8f9012345"',
    "PASSWORD = os.environ['X']",
    "MY_TOKEN=changeme_please_now",
    "http://user:pass@example.com/docs",
    "https://localhost:8000/a and http://user@host/x",
    "primary_key = True",
]


@pytest.mark.parametrize("rule", sorted(SECRETS))
def test_each_secret_shape_is_scrubbed(rule: str) -> None:
    out = Redactor().redact(SECRETS[rule])
    assert out.counts.get(rule) == 1, (rule, out.text, out.counts)
    assert f"[REDACTED:{rule}]" in out.text


@pytest.mark.parametrize("text", ASSIGNMENTS)
def test_secret_assignments_in_many_syntaxes(text: str) -> None:
    out = Redactor().redact(text)
    # a password-named assignment is caught by the password rules (no length or entropy gate)
    assert sum(out.counts.values()) == 1, (text, out.text)
    assert set(out.counts) <= {"secret_assignment", "password_bare", "password_quoted"}, out.counts


@pytest.mark.parametrize("text", SURVIVE)
def test_identifiers_and_code_survive(text: str) -> None:
    out = Redactor().redact(text)
    assert out.text == text and not out.counts


def test_secret_value_is_gone_but_context_stays() -> None:
    text = "connect postgres://admin:s3cr3tPassw0rd@db:5432/app now"
    out = Redactor().scrub(text)
    assert "s3cr3tPassw0rd" not in out
    assert out.startswith("connect postgres://admin:") and out.endswith("@db:5432/app now")


def test_bytes_path_keeps_invalid_utf8_and_scrubs() -> None:
    data = b"\xff\xfe binary ghp_abcdefghijklmnopqrstuvwxyzABCDEF0123 \x00 tail"
    out, counts = Redactor().redact_bytes(data)
    assert counts == {"github_token": 1}
    assert out.startswith(b"\xff\xfe binary [REDACTED:github_token]") and out.endswith(b"\x00 tail")


def test_configurable_rules() -> None:
    r = Redactor(disabled=["jwt"], extra=[r"ticket=TICKET-\d{6}"])
    out = r.redact(SECRETS["jwt"] + " TICKET-123456")
    assert "eyJ" in out.text and out.counts == {"ticket": 1}
    with pytest.raises(InvalidInput, match="redact_disable"):
        Redactor(disabled=["nope"])
    with pytest.raises(InvalidInput, match="redact_extra"):
        Redactor(extra=["bad=("])


def test_redact_value_walks_json() -> None:
    val = {"env": {"GITHUB": "ghp_abcdefghijklmnopqrstuvwxyzABCDEF0123"}, "list": ["ok", 3]}
    out = redact_value(val)
    assert out == {"env": {"GITHUB": "[REDACTED:github_token]"}, "list": ["ok", 3]}


def test_entropy_gate() -> None:
    assert looks_random("k8#2jf93jf0a9sdjf0A9SDJF023jfa")
    assert not looks_random("changeme_please_now")
    assert not looks_random("short1")


def _find_all(hay: bytes, lit: bytes) -> list[int]:
    out = []
    i = hay.find(lit)
    while i >= 0:
        out.append(i)
        i = hay.find(lit, i + 1)
    return out


def test_anchor_scan_equals_a_find_loop_on_large_payloads() -> None:
    """The vectorised scan (payloads >= SCAN_ABOVE) finds exactly what ``lowered.find`` finds."""
    from bosun.core.redact import SCAN_ABOVE, AnchorScan

    lits = [b"key", b"eyj", b"://", b"sk-", b"k_", b"a", b"-", b"accountkey=", b"hooks.slack.com"]
    scan = AnchorScan(lits)
    tricky = b"KEY kEy\rK\x7fY EYJ eyj S\rK- sk- SK-\rk_ K\x7f ://:\x1a/ \x00ccountkey= AccountKey= HOOKS.slack.COM keykey"
    data = (b"plain line of output with nothing in it\n" * 120 + tricky + b"\n" + "é ünïcode KEY\n".encode()) * 3
    data += b"ends with ke"  # a partial literal at the very end
    assert len(data) >= SCAN_ABOVE
    got = scan.positions(data)
    low = data.lower()
    for lit in lits:
        assert got.get(lit, []) == _find_all(low, lit), lit
    assert scan.positions(data[:100]) == {lit: _find_all(low[:100], lit) for lit in lits if lit in low[:100]}
    for lo, hi in ((0, len(data)), (7, len(data) - 3), (4100, 9000), (len(data) - 5000, len(data)), (10, 60)):
        expected = {lit: [p + lo for p in _find_all(low[lo:hi], lit)] for lit in lits if lit in low[lo:hi]}
        assert scan.positions(data, lo, hi) == expected, (lo, hi)  # a window, offsets into data


def test_large_payload_is_scrubbed_like_small_ones() -> None:
    """Secrets deep inside a megabyte-scale payload are caught, on the right lines only."""
    r = Redactor()
    filler = "".join(f"line {i}: sort_key = {i:040x} cache_key(x) ok\n" for i in range(3000))
    for name, secret in SECRETS.items():
        small = r.redact(secret)
        big = r.redact(filler + secret + "\n" + filler)
        assert big.counts == small.counts, name
        assert small.text in big.text, name
    assert r.redact(filler).counts == {}


def test_thousands_of_secrets_on_one_long_line_are_each_scrubbed() -> None:
    """One line of ~0.5 MB holding a secret every few dozen bytes (minified output, a dump without newlines):
    every hit's line is the same line, looked up once, and each secret is counted as it is on its own line."""
    r = Redactor()
    for name, secret in SECRETS.items():
        if "\n" in secret:
            continue  # (a PEM block spans lines)
        one = r.redact(secret + " ;")
        assert one.counts, name
        n = 2_000
        line = " ; ".join([secret] * n) + " ;"
        out = r.redact(line)
        assert out.counts == {k: v * n for k, v in one.counts.items()}, name
        assert out.text == " ; ".join([one.text[:-2]] * n) + " ;", name


def test_every_aws_access_key_prefix_is_scrubbed() -> None:
    from bosun.core.redact import default_redactor

    for prefix in ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"):
        key = prefix + "QWERTYUIOPASDFGH"
        assert key not in default_redactor().scrub(f"id {key} in the log")


def test_assignment_with_unicode_spaces_is_scrubbed() -> None:
    """``\\s`` in the rule matches non-ASCII spaces; the byte-level prefilter must let those lines through."""
    r = Redactor()
    for sep in ("\u00a0=\u00a0", "\u2003= ", " :\u3000", "\t:=\t"):
        line = f"API_TOKEN{sep}'q8Zr2LkP0vX7mN4sT1wY6bC3'"
        out = r.redact(line)
        assert out.counts == {"secret_assignment": 1}, sep
        assert "q8Zr2LkP0vX7mN4sT1wY6bC3" not in out.text


def test_code_that_assigns_a_call_is_not_a_secret() -> None:
    r = Redactor()
    for line in ('        password1 = self.cleaned_data.get("password1")',
                 '    password = ReadOnlyPasswordHashField(', 'token = token_generator.make_token(user)',
                 "SECRET_KEY = get_random_secret_key()"):
        assert r.redact(line).counts == {}, line


def test_quoted_password_after_unicode_or_cr_spaces_is_scrubbed() -> None:
    """The password prefilters read the bytes after the anchor; ``\\s`` around the operator includes
    non-ASCII spaces and ``\\r``, so those lines must reach the rule's regex too."""
    r = Redactor()
    for sep in ("\u00a0=\u00a0", "\r=", " =\u2003", '"\u3000:'):
        out = r.redact(f"db_password{sep}'x9Kf2LmQ'")
        assert out.counts == {"password_quoted": 1}, sep
        assert "x9Kf2LmQ" not in out.text


def test_aws_secret_key_needs_its_full_name_and_value() -> None:
    r = Redactor()
    key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Zr2LkP0"
    for line in (f"aws_secret_access_key = {key}", f'AWS_SECRET_KEY: "{key}"', f"awssecretkey={key}"):
        out = r.redact(line)
        assert key not in out.text and out.counts.get("aws_secret_key") == 1, line
    assert r.redact("secret_access_key_id = short").counts == {}


def test_anchor_scan_shared_pairs_and_literals_at_the_end() -> None:
    """Literals whose rarest pair is the same code, long literals (two 8-byte words) and hits in the
    last bytes of a window (too close to the end for a whole word) are found as a find loop finds them."""
    from bosun.core.redact import SCAN_ABOVE, AnchorScan

    lits = [b"aiza", b"authorization", b"hooks.slack.com", b"pwd", b"_pwd", b"k_", b"\nfailed "]
    scan = AnchorScan(lits)
    body = b"x AIZA authORIZATION _PWD pwd K_ HOOKS.SLACK.COM\nFAILED \n\n*failed _" * 40
    for end in (b"", b"aiz", b"_pw", b"hooks.slack.co", b"\nfailed", b"authorization", b"k_"):
        data = b"filler text " * (SCAN_ABOVE // 12 + 1) + body + end
        low = data.lower()
        for lo, hi in ((0, len(data)), (3, len(data) - 1), (len(data) - SCAN_ABOVE - 9, len(data))):
            expected = {lit: [p + lo for p in _find_all(low[lo:hi], lit)] for lit in lits if lit in low[lo:hi]}
            assert scan.positions(data, lo, hi) == expected, (end, lo, hi)


def test_assignment_precheck_keeps_every_place_a_password_or_assignment_tail_matches() -> None:
    """``assignment_may_follow`` (one numpy check of all anchor ends) never drops an end where one of
    the tails the password and assignment rules check per occurrence matches (names of 0-30 bytes,
    quotes, ASCII and non-ASCII white space, each operator, the end of the data)."""
    import random

    from bosun.core.redact import (
        _ASSIGN_TAIL,
        _PASSWORD_BARE_TAIL,
        _PASSWORD_QUOTED_TAIL,
        assignment_may_follow,
    )

    rnd = random.Random(5)
    pieces = [b"a", b"Z", b"_", b".", b"-", b"7", b"'", b'"', b" ", b"\t", b"\r", b"\x0b", b"\x1c", "\u00a0".encode(),
              "\u2003".encode(), b":", b"=", b":=", b"\n", b"(", b")", b",", b"abcdefghijklmnopqrstuvw", b"\xff"]
    kept_some = dropped_some = False
    for _ in range(3000):
        data = b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 40)))
        ends = list(range(len(data) + 1))
        ok = assignment_may_follow(data, ends).tolist()
        for end, keep in zip(ends, ok, strict=True):
            if any(rx.match(data, end) for rx in (_PASSWORD_QUOTED_TAIL, _PASSWORD_BARE_TAIL, _ASSIGN_TAIL)):
                assert keep, data[end:]
                kept_some = True
            dropped_some |= not keep
    assert kept_some and dropped_some
    code = b"x = self.password)\ncache_key(x)\npassword = 'hunter2hunter2'\n" * 200
    ends = [code.find(b"password") + 8, code.find(b"key") + 3, code.find(b"password =") + 8]
    assert assignment_may_follow(code, ends).tolist() == [False, False, True]


def test_anchor_scan_equals_a_find_loop_on_random_payloads() -> None:
    """The even-offset pair pass, its second look at the 8 bytes around each candidate and the short
    payloads' prefix runs find exactly what a find loop finds: random literals (two-byte ones, which need
    the odd pass, repeated bytes, newlines, shared pairs) in random case, whole payloads and windows."""
    import random

    from bosun.core.offload.outline import OUTLINE_LITERALS
    from bosun.core.redact import SCAN_ABOVE, AnchorScan, default_redactor

    rng = random.Random(15)
    base = list(default_redactor().scan.literals) + list(OUTLINE_LITERALS)
    alphabet = b"abcxyzAXZ_-:/ \n\x7f\xff=k"
    for trial in range(60):
        if trial % 2:
            lits = base
        else:
            lits = [bytes(rng.choice(b"abxAB_-:\n\x7f") for _ in range(rng.randint(1, 11))).lower() for _ in range(6)]
            lits += [b"aaa", b"abab", b"ab", b"xx"][: rng.randint(0, 4)]
        scan = AnchorScan(lits)
        parts: list[bytes] = []
        while sum(map(len, parts)) < rng.randint(SCAN_ABOVE // 2, 3 * SCAN_ABOVE):
            if rng.random() < 0.3:
                lit = rng.choice(lits)
                parts.append(bytes(c ^ 0x20 if 97 <= c <= 122 and rng.random() < 0.5 else c for c in lit))
            else:
                parts.append(bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 6))))
        data = b"".join(parts)
        low = data.lower()
        for lo, hi in ((0, len(data)), (rng.randint(0, 50), len(data) - rng.randint(0, 50)), (rng.randint(0, 99), 4200)):
            expected = {lit: [p + lo for p in _find_all(low[lo:hi], lit)] for lit in scan.literals if lit in low[lo:hi]}
            assert scan.positions(data, lo, hi) == expected, (trial, lo, hi)
