"""The judge: bosun's own cross-encoder (or one the operator provisions), run by onnxruntime.

The shipped judge is a MiniLM-L6 cross-encoder trained here (bench/train/train.py) and exported as int8
ONNX into ``bosun/core/models/bosun-judge``; its sha256 is pinned below, and the file is verified before
it is loaded, like the embedder's weights. Its four outputs are supported / refuted / nei logits for
``claim [SEP] evidence`` and a relevance logit for ``query [SEP] document``; it shares the embedder's
tokenizer files.

``BOSUN_JUDGE`` chooses: ``off`` (the default: the shipped judge measured worse than the rules on held-out data,
see docs/judge.md), ``on`` (the shipped judge), a local
directory holding ``model.onnx`` + ``tokenizer.json`` (verified against the manifest ``bosun provision
--judge PATH`` recorded), or a fastembed cross-encoder name provisioned with ``bosun provision --judge NAME``.
A one-output model (an ordinary reranker) gives relevance only; the audit then keeps its own rules.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bosun.core.judge import Judge
from bosun.server.model import ModelError, set_offline, sha256_file

log = logging.getLogger("bosun.judge")

SHIPPED = "bosun-judge-minilm-l6"
SHIPPED_DIR = ("models", "bosun-judge")
SHIPPED_SHA256 = "1b8c77a64310aaca3ea52e4285fa08331e623611b5b932482349a0d5dfe4ef25"
TOKENIZER_DIR = ("models", "all-MiniLM-L6-v2")
MAX_LEN = {"claim": 192, "route": 96}
BATCH = 32
JUDGE_MANIFEST = "judge-manifest.json"


def shipped_dir() -> Path:
    root = importlib.resources.files("bosun.core")
    return Path(str(root.joinpath(*SHIPPED_DIR)))


def tokenizer_path() -> Path:
    return Path(str(importlib.resources.files("bosun.core").joinpath(*TOKENIZER_DIR, "tokenizer.json")))


@dataclass(frozen=True)
class JudgeChoice:
    """What BOSUN_JUDGE names: off, the shipped judge, a local directory or a catalogue name."""

    kind: str  # off | shipped | path | name
    value: str = ""

    @classmethod
    def parse(cls, raw: str) -> JudgeChoice:
        text = raw.strip()
        if text.lower() in ("", "on", "1", "true", "default", SHIPPED):
            return cls("shipped")
        if text.lower() in ("off", "0", "false", "none"):
            return cls("off")
        if ("/" in text and Path(text).expanduser().is_dir()) or text.startswith((".", "~", "/")):
            return cls("path", str(Path(text).expanduser().resolve()))
        return cls("name", text)


def manifest_path(home: Path, choice: JudgeChoice) -> Path:
    """Where ``bosun provision --judge`` records the digests of a provisioned judge's files."""
    key = re.sub(r"[^A-Za-z0-9_.-]+", "_", choice.value).strip("_")[:80] or "judge"
    digest = hashlib.sha256(choice.value.encode()).hexdigest()[:10]
    return home / "judges" / f"{key}-{digest}" / JUDGE_MANIFEST


def judge_files(model_dir: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(model_dir.iterdir())
            if p.is_file() and p.suffix in (".onnx", ".json") and p.name != JUDGE_MANIFEST}


def verify_files(model_dir: Path, expected: dict[str, str]) -> list[str]:
    """Names of the files that are missing or differ from their recorded digest."""
    return [name for name, digest in expected.items()
            if not (model_dir / name).is_file() or sha256_file(model_dir / name) != digest]


class OnnxJudge:
    """A cross-encoder ONNX graph (inputs input_ids / attention_mask [/ token_type_ids]; logits [n, 1 or 4])."""

    def __init__(self, onnx_path: Path, tokenizer_file: Path, model_id: str, threads: int = 1,
                 max_len: dict[str, int] | None = None, reranks: bool = True) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._id = model_id
        self.reranks = reranks  # False: its card says its relevance measured below the first stage
        self._max_len = dict(MAX_LEN | (max_len or {}))
        self._tokenizers: dict[str, Any] = {}
        for task, n in self._max_len.items():
            tok = Tokenizer.from_file(str(tokenizer_file))
            tok.enable_truncation(max_length=n, strategy="longest_first")
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            self._tokenizers[task] = tok
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        self.session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"], sess_options=options)
        self.input_names = {node.name for node in self.session.get_inputs()}
        shape = self.session.get_outputs()[0].shape
        width = shape[-1] if isinstance(shape[-1], int) else None
        self.outputs = int(width) if width else int(self._logits([("probe", "probe")], "route").shape[1])
        if self.outputs not in (1, 4):
            raise ModelError(f"{onnx_path}: the judge must output 1 (relevance) or 4 (claim + relevance) logits, "
                             f"not {self.outputs}")

    @property
    def has_claims(self) -> bool:
        return self.outputs == 4

    def model_id(self) -> str:
        return self._id

    def ready(self) -> bool:
        return True

    def _logits(self, pairs: Sequence[tuple[str, str]], task: str) -> npt.NDArray[np.float32]:
        tok = self._tokenizers[task]
        out: list[np.ndarray] = []
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        for start in range(0, len(order), BATCH):
            idx = order[start : start + BATCH]
            encs = tok.encode_batch([pairs[i] for i in idx])
            feed = {"input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64)}
            if "token_type_ids" in self.input_names:
                feed["token_type_ids"] = np.array([e.type_ids for e in encs], dtype=np.int64)
            out.append(np.asarray(self.session.run(None, feed)[0], dtype=np.float32).reshape(len(idx), -1))
        if not out:
            return np.zeros((0, getattr(self, "outputs", 4)), np.float32)
        logits = np.concatenate(out)
        back = np.empty_like(logits)
        back[np.array(order)] = logits
        return back

    def claim_probs(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        if not self.has_claims:
            raise ModelError(f"the judge {self._id} scores relevance only, not claims")
        z = self._logits(pairs, "claim")[:, :3].astype(np.float64)
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)

    def relevance(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        z = self._logits(pairs, "route")[:, -1].astype(np.float64)
        return (1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))).astype(np.float32)


def load_shipped(threads: int = 1, directory: Path | None = None, sha256: str | None = None) -> OnnxJudge:
    """The judge inside the package, verified against its pinned digest before it is loaded."""
    model_dir = directory or shipped_dir()
    onnx = model_dir / "model.onnx"
    if not onnx.is_file():
        raise ModelError(f"the shipped judge is missing ({onnx}); reinstall bosun or set BOSUN_JUDGE=off")
    want = sha256 or SHIPPED_SHA256
    actual = sha256_file(onnx)
    if actual != want:
        raise ModelError(f"{onnx} has sha256 {actual}, expected {want}: refusing to load a tampered judge")
    card = json.loads((model_dir / "judge.json").read_text()) if (model_dir / "judge.json").is_file() else {}
    max_len = card.get("max_len") if isinstance(card.get("max_len"), dict) else None
    return OnnxJudge(onnx, tokenizer_path(), card.get("name", SHIPPED), threads, max_len,
                     bool(card.get("route_rerank", True)))


def serves_route(judge: Judge) -> bool:
    """Whether route should re-rank with this judge: not when its card records that its relevance head
    measured below the first stage (the shipped judge: bench/results/judge.md); a provisioned reranker does."""
    return bool(getattr(judge, "reranks", True))


def load_provisioned(home: Path, choice: JudgeChoice, threads: int = 1) -> OnnxJudge:
    """A judge the operator provisioned: its files must match the manifest ``bosun provision --judge`` wrote."""
    manifest = manifest_path(home, choice)
    if not manifest.is_file():
        raise ModelError(f"the judge {choice.value!r} is not provisioned; run `bosun provision --judge {choice.value}`")
    record = json.loads(manifest.read_text())
    model_dir = Path(record["dir"])
    bad = verify_files(model_dir, record["files"])
    if bad:
        raise ModelError(f"the judge files {', '.join(bad)} in {model_dir} differ from the manifest; "
                         f"run `bosun provision --judge {choice.value}` again")
    onnx = model_dir / record["onnx"]
    tok = model_dir / "tokenizer.json" if (model_dir / "tokenizer.json").is_file() else tokenizer_path()
    return OnnxJudge(onnx, tok, record.get("model_id", choice.value), threads)


def load_judge(home: Path, raw_choice: str, threads: int = 1) -> OnnxJudge | None:
    """The judge BOSUN_JUDGE names, or None when it is off."""
    choice = JudgeChoice.parse(raw_choice)
    if choice.kind == "off":
        return None
    set_offline()
    if choice.kind == "shipped":
        return load_shipped(threads)
    return load_provisioned(home, choice, threads)
