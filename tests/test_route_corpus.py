"""Parsing policy files (oiax markdown, Claude skills, Cursor rules) and scanning corpora."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bosun.core.routing.corpus import (
    MAX_DOC_BYTES,
    PolicyParseError,
    is_active,
    parse_front_matter,
    parse_policy,
)
from bosun.server.services.policies import CorpusError, demo_corpus_dir, scan_corpus

OIAX = """# Deploy policy

**Agent-trigger:** deploying the application to production, CI/CD configuration
**Family:** delivery
**Depends-on:** code-review, testing
**See-also:** `incident-response.md`
**Status:** Active

Always run the test suite before deploying. Never deploy on Friday.
"""


def test_oiax_markdown_fields() -> None:
    p = parse_policy("/x/deploy-policy.md", OIAX)
    assert p is not None
    assert p.name == "deploy-policy"
    assert p.surface == "deploying the application to production, CI/CD configuration"
    assert p.fmt == "oiax"
    assert p.title == "Deploy policy"
    assert p.family == "delivery"
    assert p.depends_on == ("code-review", "testing")
    assert p.see_also == ("incident-response",)
    assert is_active(p)
    assert p.text.count("Agent-trigger") == 1  # whole document, trigger once


def test_inactive_status_is_not_active() -> None:
    p = parse_policy("old.md", OIAX.replace("Status:** Active", "Status:** Superseded by deploy-v2"))
    assert p is not None and not is_active(p)


def test_skill_front_matter() -> None:
    text = "---\nname: pdf-tools\ndescription: >\n  Fill PDF forms\n  and extract tables\nallowed-tools: [Read, Bash]\n---\n# PDF\nbody"
    p = parse_policy("/s/pdf/SKILL.md", text, stem="pdf")
    assert p is not None
    assert (p.name, p.fmt, p.surface) == ("pdf-tools", "skill", "Fill PDF forms and extract tables")


def test_cursor_rule() -> None:
    text = '---\ndescription: "Python style: type hints, ruff"\nglobs: "**/*.py"\nalwaysApply: false\n---\nUse ruff.'
    p = parse_policy("/r/python.mdc", text)
    assert p is not None
    assert (p.name, p.fmt, p.surface) == ("python", "cursor", "Python style: type hints, ruff")


def test_front_matter_subset() -> None:
    fm = parse_front_matter("a: 'it''s'\nb:\n  - x\n  - y\nc: |\n  line1\n  line2\nd: plain # note\ne: [1, 'two']")
    assert fm == {"a": "it's", "b": ["x", "y"], "c": "line1\nline2", "d": "plain", "e": ["1", "two"]}


def test_no_surface_is_none_and_huge_doc_is_an_error() -> None:
    assert parse_policy("notes.md", "# Notes\n\nno trigger here") is None
    with pytest.raises(PolicyParseError, match=r"big\.md"):
        parse_policy("big.md", "**Agent-trigger:** x\n" + "a" * (MAX_DOC_BYTES + 1))


def test_bad_name_is_an_error_naming_the_file() -> None:
    with pytest.raises(PolicyParseError, match="weird"):
        parse_policy("weird.md", "---\nname: 'has spaces'\ndescription: d\n---\n")


def _write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_scan_warnings_name_the_file(tmp_path: Path) -> None:
    _write(tmp_path, "good.md", OIAX)
    _write(tmp_path, "empty.md", "# nothing to route")
    _write(tmp_path, "latin1.md", b"**Agent-trigger:** caf\xe9\n")
    _write(tmp_path, "old.md", OIAX.replace("Active", "deprecated"))
    _write(tmp_path, "README.md", "# readme is not a policy")
    scan = scan_corpus([tmp_path, tmp_path / "missing"])
    assert [p.name for p in scan.policies] == ["good"]
    text = "\n".join(scan.warnings)
    assert "empty.md: no routing surface" in text
    assert "latin1.md: not valid UTF-8" in text
    assert "missing does not exist" in text
    assert "README" not in text
    assert scan.skipped_inactive == ["old"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable files")
def test_unreadable_file_is_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, "locked.md", OIAX)
    path.chmod(0)
    try:
        scan = scan_corpus([tmp_path])
    finally:
        path.chmod(0o644)
    assert any("locked.md: unreadable" in w for w in scan.warnings)


def test_duplicate_names_name_both_files(tmp_path: Path) -> None:
    a = _write(tmp_path, "a/deploy.md", OIAX)
    b = _write(tmp_path, "b/deploy.md", OIAX)
    with pytest.raises(CorpusError) as err:
        scan_corpus([tmp_path])
    assert str(a) in str(err.value) and str(b) in str(err.value)


def test_demo_corpus_ships_at_least_twelve_policies() -> None:
    scan = scan_corpus([demo_corpus_dir()])
    assert len(scan.policies) >= 12
    assert not scan.warnings
    assert {p.fmt for p in scan.policies} == {"oiax", "skill", "cursor"}
    assert "deploy-freeze-2024" in scan.skipped_inactive


def test_labelled_jsonl_parsing() -> None:
    from bosun.core.errors import InvalidInput
    from bosun.core.routing.metrics import compute, parse_labelled

    rows = parse_labelled([
        '{"prompt": "a", "expected": ["x"]}', "", '{"prompt": "b", "expected": "y", "sibling": "x"}',
        '{"prompt": "c", "expected": []}', '{"prompt": "d", "expected": null}',
    ])
    assert [r.expected for r in rows] == [("x",), ("y",), (), ()] and rows[1].sibling == ("x",)
    m = compute(rows, [["x", "z"], ["x"], [], ["y"]])
    assert m["recall_at_2"] == 0.5 and m["top1"] == 0.5 and m["false_alarms"] == 1
    assert m["harmful_sibling_rate"] == 1.0 and m["precision"] == 1 / 4
    with pytest.raises(InvalidInput, match="line 2"):
        parse_labelled(['{"prompt": "a"}', "{not json"])


def test_untitled_document_is_labelled_by_its_split_name() -> None:
    """A tool blurb has no title: its name, split into words, is one of the phrases the model compares."""
    from bosun.core.routing.corpus import Policy
    from bosun.core.routing.route import humanise_name, surface_phrases

    tool = Policy(name="AusSurfReport", surface="Get today's report for any break throughout Australia!",
                  text="", source="t", fmt="oiax")
    assert surface_phrases(tool)[-1] == "Aus Surf Report"
    assert humanise_name("AppyPieAIAppBuilder") == "Appy Pie AI App Builder"
    titled = parse_policy("/x/deploy-policy.md", OIAX)
    assert titled is not None
    phrases = surface_phrases(titled)
    assert "Deploy policy" in phrases and "deploy policy" not in phrases


NO_TRIGGER = """# Backups and restore drills

**Family:** infrastructure
**Status:** active

A backup nobody has restored is a hope. This standard covers every datastore we cannot
regenerate: the Postgres clusters and the object buckets.

## Rules
1. Restore drills run every quarter.
"""


def test_a_document_without_a_trigger_line_routes_on_its_title_and_opening_paragraph() -> None:
    p = parse_policy("/x/backup-restore.md", NO_TRIGGER)
    assert p is not None and p.surface_derived
    assert p.surface.startswith("Backups and restore drills: A backup nobody has restored is a hope.")
    assert "Restore drills run every quarter" not in p.surface  # the lead, not the rules
    assert "Family" not in p.surface and p.family == "infrastructure"
    assert p.summary()["surface_derived"] is True
    declared = parse_policy("/x/deploy-policy.md", OIAX)
    assert declared is not None and not declared.surface_derived and "surface_derived" not in declared.summary()


def test_a_derived_surface_is_cut_at_a_sentence_end_and_needs_a_real_paragraph() -> None:
    long_body = "# Title\n\n" + " ".join(f"Sentence number {i} says something here." for i in range(40)) + "\n"
    p = parse_policy("t.md", long_body)
    assert p is not None and len(p.surface) <= 410 and p.surface.endswith(".")
    assert parse_policy("thin.md", "# Thin\n\nToo short.\n") is None
    assert parse_policy("list.md", "# Only a list\n\n- one thing to do\n- another thing to do here now\n") is None


def test_scan_warns_when_a_surface_was_derived(tmp_path: Path) -> None:
    _write(tmp_path, "backup-restore.md", NO_TRIGGER)
    scan = scan_corpus([tmp_path])
    assert [p.name for p in scan.policies] == ["backup-restore"]
    assert any("backup-restore.md: no **Agent-trigger:** line" in w and "opening paragraph" in w for w in scan.warnings)
