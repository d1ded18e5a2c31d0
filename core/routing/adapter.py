"""A learned correction applied to prompt vectors before they meet the documents' vectors.

The embedding model places a question ("find me a surf forecast for tomorrow") and the sentence that
describes the thing it wants ("Get today's surf report for any break") further apart than two
questions about different things: prompts and descriptions are two styles of text. A low-rank map
``q -> normalise(q + (q V) U^T)`` trained contrastively (bench/route_adapter.py: prompts -> their
documents, in-batch softmax) moves prompt vectors toward the description style. Only the prompt side
moves: document vectors (and the shipped demo vectors) stay the model's own, and every prompt-side
vector (a prompt, its clauses, the background prompts of the self-calibration) goes through the same
map, so the corpus's null distribution is measured in the same space as the prompts it judges.

``mix`` blends the adapted and the original direction (1: adapted only). The file is package data keyed
by the model id and carries a probe (one background prompt's vector): an index uses the adapter only
when its own vector of that prompt agrees, so a different model under the same id is left unadapted.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

PACKAGE = "bosun.core.routing"
AGREE = 0.999  # cosine between the file's probe vector and the index's vector of the same text


def file_name(model_id: str) -> str:
    return f"adapter-{re.sub(r'[^A-Za-z0-9._-]+', '_', model_id)}.npz"


@dataclass(frozen=True)
class QueryAdapter:
    """The map applied to prompt vectors: ``normalise((1 - mix) q + mix normalise(q + (q V) U^T))``."""

    u: npt.NDArray[np.float32]  # [dim, rank]
    v: npt.NDArray[np.float32]  # [dim, rank]
    mix: float
    probe_text: str = ""  # a background prompt whose vector the index must reproduce (see ``matches``)
    probe_vec: npt.NDArray[np.float32] | None = None

    def apply(self, vecs: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Adapt one vector [dim] or many [n, dim]; unit length in, unit length out."""
        q = np.asarray(vecs, np.float32)
        one = q.ndim == 1
        q2 = q.reshape(1, -1) if one else q
        if q2.shape[1] != self.u.shape[0]:
            return q  # another model's dimension: nothing to adapt with
        z = q2 + (q2 @ self.v) @ self.u.T
        z /= np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
        mixed = (1.0 - self.mix) * q2 + self.mix * z
        out: npt.NDArray[np.float32] = (mixed / np.maximum(np.linalg.norm(mixed, axis=1, keepdims=True),
                                                           1e-12)).astype(np.float32)
        return out[0] if one else out

    def matches(self, vectors: dict[str, npt.NDArray[np.float32]]) -> bool:
        """True when ``vectors`` holds the probe text with (nearly) the file's vector: the same model."""
        if self.probe_vec is None or self.probe_text not in vectors:
            return False
        a = self.probe_vec.astype(np.float64).ravel()
        b = np.asarray(vectors[self.probe_text], np.float64).ravel()
        denom = float(np.linalg.norm(a) * np.linalg.norm(b))
        return a.shape == b.shape and denom > 0 and float(a @ b) / denom >= AGREE


@functools.cache
def shipped(model_id: str) -> QueryAdapter | None:
    """The package's adapter for ``model_id`` (None when it ships none, or the file is unreadable)."""
    resource = importlib.resources.files(PACKAGE) / "data" / file_name(model_id)
    try:
        with resource.open("rb") as fh, np.load(fh) as data:
            if str(data["model_id"]) != model_id:
                return None
            return QueryAdapter(np.asarray(data["u"], np.float32), np.asarray(data["v"], np.float32),
                                float(data["mix"]), str(data["probe_text"]),
                                np.asarray(data["probe_vec"], np.float32))
    except (FileNotFoundError, OSError, KeyError, ValueError):
        return None


def for_index(model_id: str, vectors: dict[str, npt.NDArray[np.float32]]) -> QueryAdapter | None:
    """The shipped adapter when the index's own vectors show it is the model it was trained for."""
    adapter = shipped(model_id)
    return adapter if adapter is not None and adapter.matches(vectors) else None
