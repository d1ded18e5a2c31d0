"""docs/benchmarks.md is exactly what bench/make_benchmarks_doc.py makes from bench/results/ (it cannot drift)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_benchmarks_doc", ROOT / "bench" / "make_benchmarks_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_committed_page_is_the_generated_page() -> None:
    gen = _generator()
    assert (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8") == gen.render(), (
        "docs/benchmarks.md is stale: run python bench/make_benchmarks_doc.py")


def test_every_row_names_a_results_file_and_a_command() -> None:
    gen = _generator()
    for row in gen.ROWS:
        assert (ROOT / "bench" / "results" / row.source).is_file(), row.source
        assert row.command.startswith(("python bench/", "bosun ", "sudo bash bench/")), row.command


def test_a_figure_missing_from_its_results_file_stops_the_script(tmp_path: Path) -> None:
    gen = _generator()
    row = gen.ROWS[0]
    (tmp_path / row.source).write_text("nothing measured here\n", encoding="utf-8")
    with pytest.raises(gen.StaleRow, match=row.source):
        gen.figure(row, tmp_path)
