"""`bosun provision`: PRESENT only after a real offline load; MISMATCH on a tampered cache."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers_proc import BOSUN, env_for


def _provision(home: Path, *args: str) -> tuple[int, dict[str, object]]:
    res = subprocess.run([*BOSUN, "provision", "--json", "--home", str(home), *args],
                         env=env_for(home), capture_output=True, timeout=120)
    return res.returncode, json.loads(res.stdout)


def test_states_from_unassembled_to_present_to_mismatch_and_repair(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, report = _provision(home, "--check")
    assert (code, report["state"]) == (1, "FETCHABLE")  # weights installed, directory not assembled yet
    code, report = _provision(home)
    assert (code, report["state"]) == (0, "PRESENT")
    model_dir = Path(str(report["cache_dir"]))
    manifest = json.loads((model_dir / "bosun-manifest.json").read_text())
    assert set(manifest["files"]) == {"model.onnx", "tokenizer.json", "tokenizer_config.json",
                                      "special_tokens_map.json"}
    code, report = _provision(home, "--check")
    assert (code, report["state"]) == (0, "PRESENT")

    # truncate the weights: a cache-shaped directory that must not pass
    weights = model_dir / "model.onnx"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    code, report = _provision(home, "--check")
    assert (code, report["state"]) == (3, "MISMATCH")
    assert report["mismatched"] == ["model.onnx"]

    # provisioning again rebuilds from the verified sources
    code, report = _provision(home)
    assert (code, report["state"]) == (0, "PRESENT")
    assert weights.stat().st_size == len(data)


def test_another_model_without_the_hub_is_unavailable_not_fetchable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, report = _provision(home, "--check", "--model", "BAAI/bge-small-en-v1.5")
    # this machine cannot reach the model hub, so it must not be told it can fetch
    assert code == 1
    assert report["state"] in ("UNAVAILABLE", "FETCHABLE")
    if report["state"] == "FETCHABLE":  # only where the hub really answers
        from bosun.server.provision import HUB_PROBE, reachable

        assert reachable(HUB_PROBE.format(repo="BAAI/bge-small-en-v1.5"))


def test_texts_are_embedded_shortest_first_in_batches_bounded_by_attention_size() -> None:
    """Every text once; short ones 64 at a time; a long one alone (the arena keeps the peak batch's memory)."""
    from bosun.server.model import BATCH_TOKENS2, CHARS_PER_TOKEN, MAX_TOKENS, length_batches

    lengths = [2000, 40, 300, 40, 5000, *([60] * 100), 300]
    batches = length_batches(lengths)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)
    for batch in batches:
        longest = min(MAX_TOKENS, max(lengths[i] for i in batch) // CHARS_PER_TOKEN)
        assert len(batch) <= 64 and (len(batch) == 1 or len(batch) * longest * longest <= BATCH_TOKENS2)
    assert [len(b) for b in batches if lengths[b[0]] >= 2000] == [1, 1]
    assert length_batches([]) == []
