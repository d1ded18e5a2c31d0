"""``bosun audit FILE``: the trust report for a dokis-format JSON file ({query, chunks, response}).

Config discovery follows dokis: ``--config`` if given, else ``provenance.toml`` in the working
directory, else beside the input file. Exit 0 when trust passes, 1 when it fails, 2 for input errors.
The lexical matcher never loads the embedding model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NAME = "audit"
HELP = "audit an answer's claims against its sources (dokis input format)"
EXAMPLE = "bosun audit examples/audit-answer.json --config examples/provenance.toml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="JSON file with query, chunks, response ('-' reads stdin)")
    # dest is not "config": bosun.server.cli stores the daemon's Config in args.config
    parser.add_argument("--config", dest="audit_config", type=Path, default=None,
                        help="provenance.toml (default: discovered)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--as-of", default=None, help="evaluate freshness on this date (YYYY-MM-DD)")
    parser.add_argument("--matcher", choices=["auto", "bm25", "semantic"], default=None,
                        help="override the config's matcher (auto: semantic when the model loads, else bm25)")
    parser.add_argument("--no-color", action="store_true", help="plain output")


def _fail(message: str) -> int:
    print(f"bosun audit: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from bosun.core.audit.audit import audit
    from bosun.core.audit.config import discover_config, load_config_file, parse_as_of
    from bosun.core.errors import BosunError

    input_path = None if args.file == "-" else Path(args.file)
    try:
        raw = sys.stdin.read() if input_path is None else input_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _fail(f"{args.file}: no such file")
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"{args.file}: cannot read: {exc}")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _fail(f"{args.file}: not valid JSON: {exc}")
    if not isinstance(data, dict):
        return _fail(f"{args.file}: expected a JSON object with query, chunks and response")
    missing = [k for k in ("chunks", "response") if k not in data]
    if missing:
        return _fail(f"{args.file}: missing field(s): {', '.join(missing)}")
    config_path = args.audit_config or discover_config(input_path, Path.cwd())
    try:
        cfg = load_config_file(config_path) if config_path else None
        from bosun.core.audit.config import AuditConfig

        cfg = cfg or AuditConfig()
        if args.matcher:
            cfg = replace(cfg, matcher=args.matcher)
        as_of = parse_as_of(args.as_of, "--as-of") or parse_as_of(data.get("as_of"), "as_of")
        model: tuple[Any, Any] | None = None
        if cfg.matcher == "semantic":
            model = _local_embedder()
        elif cfg.matcher == "auto":
            model = _try_local_embedder()
        embed, words = model if model is not None else (None, None)
        report = audit(data.get("query", ""), data["chunks"], data["response"], cfg, as_of, embed, words)
    except BosunError as exc:
        return _fail(str(exc))
    report["config_file"] = str(config_path) if config_path else None
    try:
        if args.json:
            print(json.dumps(report, indent=2, ensure_ascii=False))
        else:
            color = sys.stdout.isatty() and not args.no_color
            print(render(report, args.file, color))
        sys.stdout.flush()
    except BrokenPipeError:  # `bosun audit x.json | head`: the reader left; the verdict still counts
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if report["trust_passed"] else 1


def _local_embedder() -> tuple[Any, Any]:
    """Load the embedded model in-process (semantic matcher): ``embed`` and, as the daemon has, the token
    states for the alignment, one model run per text for both (None when the model gives no states)."""
    import os

    from bosun.core.audit.align import encoder_from_embedder, one_pass_words
    from bosun.core.embedding import CachingEmbedder
    from bosun.server.model import ModelSpec, load_embedder

    home = Path(os.environ.get("BOSUN_HOME", str(Path.home() / ".bosun"))).expanduser()
    model = CachingEmbedder(load_embedder(home, ModelSpec()))
    encoder = encoder_from_embedder(model)
    return model.embed, one_pass_words(encoder, model) if encoder is not None else None


def _try_local_embedder() -> tuple[Any, Any] | None:
    """The model for ``auto``, or None (lexical) when it cannot be loaded here; says so on stderr."""
    from bosun.core.errors import BosunError
    from bosun.server.model import ModelError

    try:
        return _local_embedder()
    except (BosunError, ModelError, OSError, ImportError) as exc:
        print(f"bosun audit: embedding model unavailable ({exc}); using the bm25 matcher", file=sys.stderr)
        return None


def _short(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def render(report: dict[str, Any], name: str, color: bool = False) -> str:
    """A readable trust report."""
    def paint(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if color else text

    out: list[str] = []
    c = report["counts"]
    head = paint("TRUST PASSED", "32;1") if report["trust_passed"] else paint("TRUST FAILED", "31;1")
    out.append(f"bosun audit: {name}" + (f"  (config: {report['config_file']})" if report.get("config_file") else ""))
    out.append(
        f"{head}  [{report['enforcement_verdict']}]  compliance {report['compliance_rate']:.2f} "
        f"(min {report['min_citation_rate']:.2f})  "
        f"supported {c['supported']} · partial {c['partially_supported']} · contradicted {c['contradicted']} · "
        f"unsupported {c['unsupported']}  "
        f"matcher {report['matcher']}"
    )
    if report["failure_reasons"]:
        out.append("Why it failed:")
        out.extend(f"  - {r}" for r in report["failure_reasons"])
    if report["blocked_source_details"]:
        out.append(f"Blocked sources ({len(report['blocked_source_details'])}):")
        for b in report["blocked_source_details"]:
            out.append(f"  - {b['url'] or '(no url)'}  {b['reason']}" + (f" ({b['domain']})" if b["domain"] else ""))
    for w in report.get("source_warnings", []):
        out.append(f"  ! {w['chunk_id']}: {w['warning']} ({w['url']!r})")
    out.append("Claims:")
    tags = {"supported": ("SUPPORTED", "32"), "partially_supported": ("PARTIAL", "33"),
            "contradicted": ("CONTRADICTED", "31"), "unsupported": ("UNSUPPORTED", "33")}
    for i, cl in enumerate(report["claims"], 1):
        tag, code = tags[cl["verdict"]]
        out.append(f"  [{i}] {paint(tag, code)} {cl['confidence']:.2f}  {_short(cl['text'])}")
        for ev in cl["evidence"]:
            out.append(f"      evidence {ev['chunk_id']}[{ev['start']}:{ev['end']}] {ev['source_url'] or '(no url)'}")
            out.append(f"        \"{_short(ev['sentence'], 90)}\"")
        for mm in cl["mismatches"]:
            out.append(f"      {mm['kind']}: claim {mm['claim']!r} vs evidence {mm['evidence']!r}")
        if cl.get("nearest"):
            nb = cl["nearest"]
            out.append(f"      nearest {nb['chunk_id']}[{nb['start']}:{nb['end']}] score {nb['score']:.2f}: "
                       f"\"{_short(nb['sentence'], 80)}\"")
        if cl["verdict"] == "supported" and cl["freshness_status"] != "not_applicable":
            out.append(f"      freshness {cl['freshness_status']}"
                       + (f" ({cl['source_date']}, {cl['source_age_days']} days)" if cl["source_date"] else ""))
        elif cl["verdict"] == "unsupported" and cl["note"] and not cl.get("nearest"):
            out.append(f"      {cl['note']}")
    if report["freshness_enabled"]:
        out.append(f"Freshness: as of {report['as_of']}, max age {report['max_source_age_days']} days, "
                   f"stale sources {report['stale_source_action']}")
        for f in report["source_freshness_details"]:
            age = f"{f['age_days']} days" if f["age_days"] is not None else "age unknown"
            out.append(f"  - {f['url'] or '(no url)'}  {f['status']}  {f['source_date'] or ''} {age}"
                       + (f"  ({f['note']})" if f["note"] else ""))
    if report["policy_issues"]:
        out.append("Policy issues: " + ", ".join(report["policy_issues"]))
    return "\n".join(out)
