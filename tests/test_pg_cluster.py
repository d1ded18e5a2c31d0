"""The throwaway-cluster fixture's contract: skip with the reason only outside CI; under CI, fail."""

from __future__ import annotations

import pytest
from _pytest.outcomes import Failed, Skipped

from tests import pg_cluster


def test_without_a_server_tests_skip_with_the_reason_or_fail_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_cluster, "_cluster", None)
    monkeypatch.setattr(pg_cluster, "_failure", "no PostgreSQL server binaries (initdb/pg_ctl not on PATH)")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(Skipped, match="PostgreSQL unavailable: no PostgreSQL server binaries"):
        pg_cluster.cluster()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(Failed, match="CI is set"):
        pg_cluster.cluster()


def test_the_server_binaries_are_found_on_path_or_in_debians_directories(monkeypatch: pytest.MonkeyPatch) -> None:
    found = pg_cluster.find_bindir()
    if found is None:
        pytest.skip("no PostgreSQL binaries on this machine")
    assert (found / "initdb").exists() and (found / "pg_ctl").exists()
    monkeypatch.setenv("PATH", "/nonexistent")  # not on PATH: Debian's versioned directory still serves
    fallback = pg_cluster.find_bindir()
    assert fallback is None or str(fallback).startswith("/usr/lib/postgresql/")
