"""Vectors of the package's own texts shipped as package data, so a fresh install does not embed them first.

The background prompts (``bosun.core.routing.background``) do not depend on the user's corpus, only
on the model; nor do the texts of the demo corpus bosun serves when no corpus is configured
(``server/policies``). ``bench/route_background_vectors.py`` embeds them once per model and writes
``data/background-<model id>.npz`` and ``data/demo-<model id>.npz`` (texts keyed by sha256, so an
edited text simply falls back to the model). Loading checks one vector against the live model before trusting the file
(``verified``): a model with the same id but different weights must not reuse them.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import re
from pathlib import Path

import numpy as np
import numpy.typing as npt

PACKAGE = "bosun.core.routing"
AGREE = 0.999  # cosine between a shipped vector and the live model's vector of the same text


BACKGROUND = "background"
DEMO = "demo"  # the demo corpus's surfaces, phrases and body chunks


def file_name(model_id: str, kind: str = BACKGROUND) -> str:
    return f"{kind}-{re.sub(r'[^A-Za-z0-9._-]+', '_', model_id)}.npz"


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def load(model_id: str, texts: list[str], kind: str = BACKGROUND) -> dict[str, npt.NDArray[np.float32]]:
    """Shipped vectors for those of ``texts`` the ``kind`` file has under ``model_id`` (empty when none)."""
    resource = importlib.resources.files(PACKAGE) / "data" / file_name(model_id, kind)
    try:
        with resource.open("rb") as fh, np.load(fh) as data:
            if str(data["model_id"]) != model_id:
                return {}
            keys = [str(k) for k in data["keys"]]
            vecs = np.asarray(data["vecs"], np.float32)
    except (FileNotFoundError, OSError, KeyError, ValueError):
        return {}
    row = {k: i for i, k in enumerate(keys)}
    return {t: vecs[row[text_key(t)]] for t in texts if text_key(t) in row}


def verified(shipped: npt.NDArray[np.float32], live: npt.NDArray[np.float32]) -> bool:
    """True when the live model reproduces a shipped vector (same model, not merely the same id)."""
    a = shipped.astype(np.float64).ravel()
    b = live.astype(np.float64).ravel()
    if a.shape != b.shape:
        return False
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return denom > 0 and float(a @ b) / denom >= AGREE


def save(directory: Path, model_id: str, texts: list[str], vecs: npt.NDArray[np.float32],
         kind: str = BACKGROUND) -> Path:
    """Write the ``kind`` package-data file for ``model_id`` (used by the bench script that ships it)."""
    path = directory / file_name(model_id, kind)
    np.savez_compressed(path, model_id=np.array(model_id), keys=np.array([text_key(t) for t in texts]),
                        vecs=np.asarray(vecs, np.float32))
    return path
