"""Write docs/benchmarks.md from bench/results/: one current figure per row, with the command that makes it.

Every figure on the page is read out of a results file by a pattern below, never typed here, so the page
cannot say what the results do not. A row whose pattern no longer matches stops the script with the file
and the pattern: re-run the benchmark, then point the row at the new line. tests/test_benchmarks_doc.py
fails when the committed page differs from this script's output.

    python bench/make_benchmarks_doc.py            # rewrite docs/benchmarks.md
    python bench/make_benchmarks_doc.py --check    # exit 1 if the committed page is stale
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_page import write_or_check

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Row:
    """One figure: where it is read from and how it is made."""

    area: str
    what: str
    source: str  # a file under bench/results/
    pattern: str  # a regex; its groups fill `shown`
    shown: str  # str.format template over the pattern's groups
    command: str
    after: str = ""  # the search starts after the first match of this regex (a later run in the same file)


ROWS: tuple[Row, ...] = (
    Row("route", "MetaTool held-out, 199 tools: top-1, false alarms", "route.md",
        r"\| held-out \| MetaTool \| \*\*\w+ \(shipped\)\*\* \| not read \| \*\*([\d.]+)\*\*.*?\| \*\*([\d.]+ \(\d+/\d+\))\*\*",
        "top-1 {0}, false alarms {1}", "python bench/route_dev.py --split heldout"),
    Row("route", "Ledgerline policy corpus, written blind, held out: recall@2 / top-1 / false alarms", "route.md",
        r"\| Ledgerline \(blind held out, read once\) \| [^|]+\| [\d.]+ / ([\d.]+) \| [\d.]+ / ([\d.]+) \| \| [\d/]+ / ([\d/]+) \|",
        "{0} / {1} / {2}", "bosun eval route score bench/corpora/policies-ledgerline-holdout/policies < bench/corpora/policies-ledgerline-holdout/prompts.jsonl"),
    Row("route", "Bookwell policy corpus, written blind, dev: recall@2 / top-1 / false alarms", "route.md",
        r"\| Bookwell \(blind dev\) \| [^|]+\| [\d.]+ / ([\d.]+) \| [\d.]+ / ([\d.]+) \| [\d.]* \| [\d/]+ / ([\d/]+) \|",
        "{0} / {1} / {2}", "bosun eval route score bench/corpora/policies-bookwell-dev/policies < bench/corpora/policies-bookwell-dev/prompts.jsonl"),
    Row("route", "demo corpus (17 documents, written here): recall@2, top-1, false alarms", "route.md",
        r"\| - \| demo \| [^|]+\| [\d.]+ / ([\d.]+) \| [\d.]+ / ([\d.]+) \| \| (\d+/\d+) \|",
        "{0} / {1} / {2}", "bosun eval route score server/policies < examples/policies-labelled.jsonl"),
    Row("route (Tool Compass)", "lists of 20 tools, held out: recall@3, abstained on positives", "compass_eval.md",
        r"\| lists of 20 \(x12\) \| positives \| \d+ \| [\d.]+ \| ([\d.]+) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|",
        "recall@3 {0}, abstained {1}", "python bench/compass_eval.py --split heldout",
        after=r"### Shipped level, held-out"),
    Row("observe / recall", "offloading alone, 71 held-out coding-agent runs: median net saving, p10, runs with a loss",
        "offload_issue24.md",
        r"\| \*\*held out \(71\)\*\* \| none \| [^|]+\| \*\*([+\d.]+ %)\*\* \| \*\*([+\d.]+ %)\*\* \| \*\*(\d+)\*\* \|",
        "{0}, p10 {1}, {2} runs with a loss", "python bench/offload_replay.py --compact-every 0 --split holdout"),
    Row("observe / recall", "tau-airline held out (60 runs, JSON table view): median saving, total", "offload_issue24.md",
        r"\| \*\*tau-airline held out \(60\)\*\* \| [^|]+-> \*\*([+\d.]+ %)\*\* \| [^|]+-> \*\*([+\d.]+ %)\*\* \|",
        "median {1}, total {0}", "python bench/offload_replay.py --compact-every 0 --split holdout --data ../shared/data/trajectories/tau-airline.jsonl.gz"),
    Row("observe / recall", "recall grep over 1 MB (fetch, sha256 verify, scan), p50", "speed_all_2026-12-02-round11.md",
        r"\| recall grep over 1 MB \(fetch \+ sha256 verify \+ scan\) \| ([\d.]+ ms) \|", "{0}",
        "python bench/speed_all.py"),
    Row("observe / recall", "redaction false positives on real agent outputs and commands", "redact.md",
        r"\| texts with any redaction \| ([\d,]+ of [\d,]+ \([\d.]+%)", "{0})", "python bench/redact_eval.py"),
    Row("precheck", "replay of 446 real runs: block precision, duplicate-suggestion precision", "precheck.md",
        r"\| block \| \d+ \| \d+ \| (\d+/\d+) = [\d.]+ \|\n\| suggest_alternative \| \d+ \| \d+ \| (\d+/\d+) = [\d.]+ \|",
        "block {0}, duplicates {1}", "python bench/loop_eval.py"),
    Row("select_context", "HotpotQA held out, both supporting passages found at a 2-passage budget: hybrid vs similarity only",
        "select_multihop.md",
        r"\| baseline \(similarity only\) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|[\s\S]*?"
        r"\| \*\*hybrid as shipped\*\* \| [\d.]+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|",
        "{1} vs {0}", "python bench/select_multihop.py --heldout"),
    Row("select_context", "select hybrid, 20 of 2,000 candidates, against a numpy MMR", "speed_all_2026-12-02-round11.md",
        r"\| 20 of 2,000 \| hybrid \(pool seen before\) \| ([\d.]+) \| ([\d.]+x) \|", "{0} ms ({1})",
        "python bench/speed_all.py"),
    Row("audit", "held-out fifth, balanced accuracy: WiCE, ExpertQA (dokis 0.3.0 on the same items)", "audit.md",
        r"\| \*\*default, final code \(sixth reading\)\*\* \| \*\*([\d.]+)\*\* \| \*\*([\d.]+)\*\* \|[\s\S]*?"
        r"\| dokis 0\.3\.0, same items \| ([\d.]+) \| ([\d.]+) \|",
        "{0} / {1} (dokis {2} / {3})", "python bench/audit_eval.py --holdout"),
    Row("fleet", "50 agents for 60 s, mixed calls: p99, failed / lost / duplicated", "fleet.md",
        r"\| mixed: observe, recall, plan update, precheck \| 50 \| [\d.]+ \| [\d.]+ \| ([\d.]+) \| (\d+) \| \d+ \| (\d+ / \d+) \|",
        "p99 {0} ms, {1} failed, {2} lost / duplicated", "python bench/fleet_load.py --clients 10 50 --seconds 60",
        after=r"fleet_load: 60 s per phase"),
    Row("fleet", "100 MB observe over HTTP: peak daemon RSS rise", "big_observe_quiet.md",
        r"\| http: peak daemon RSS rise \| [^|]+\| ([\d]+ MB = [\d.]+x)", "{0} the payload",
        "python bench/big_observe.py --mb 100"),
    Row("storage", "PostgreSQL against SQLite, small calls p50 (recall 5 lines)", "store_backends.md",
        r"\| recall 5 lines \| ([\d.]+) / [\d.]+ \| ([\d.]+) / [\d.]+ \| ([\d.]+x) \|", "{1} vs {0} ms ({2})",
        "python bench/store_backends.py --seconds 60 --agents 25"),
    Row("start-up", "`bosun stdio --standalone`, later starts: start -> `initialize` answered", "speed_all_2026-12-02-round11.md",
        r"`BOSUN_MODEL_PREFETCH=auto`, the default\): start -> `initialize` answered \| ([\d,]+ ms)", "{0}",
        "python bench/speed_all.py"),
    Row("start-up", "`bosun stdio` attaching to a running daemon", "speed_all_2026-12-02-round11.md",
        r"\| `bosun stdio` attaching to a running daemon: start -> `initialize` answered \| ([\d,]+ ms)", "{0}",
        "python bench/speed_all.py"),
    Row("start-up", "Claude Code UserPromptSubmit hook, fresh process, warm daemon", "hook_run_one_path.md",
        r"\| Claude Code hook as the settings run it, [^|]+\| ([\d,]+ ms)", "{0}", "python bench/route_hook.py"),
    Row("start-up", "`bosun run -- CMD` overhead over the bare command, p50", "hook_run_one_path.md",
        r"All commands: overhead p50 ([\d.]+ ms)", "{0}", "python bench/run_overhead.py"),
    Row("start-up", "daemon RSS idle, model ready, policy index built", "speed_all_2026-12-02-round11.md",
        r"\| daemon RSS idle, model ready and policy index built \| (\d+ MB) \|", "{0}", "python bench/speed_all.py"),
    Row("operations", "SIGTERM -> exit of `bosun serve`, median per moment (model loading ... under calls)", "shutdown.md",
        r"\| model_loading \| ([\d.]+) \|[\s\S]*?\| under_calls \| ([\d.]+) \|", "{0}-{1} s",
        "python bench/shutdown_bench.py"),
    Row("operations", "SIGTERM -> exit right after 10 MiB of observes (WAL at the signal), median / max", "shutdown.md",
        r"\| large_wal \| ([\d.]+) \| ([\d.]+) \| \[0\] \| 0 \| ([\d.]+ MB) \|", "{0} / {1} s (WAL {2})",
        "python bench/shutdown_bench.py --moments large_wal"),
    Row("operations", "Docker image size; `docker stop`", "docker.md",
        r"\| image size \| (\d+ MB) \|[\s\S]*?\| docker stop \(SIGTERM to exit\) \| ([\d.]+ s)", "{0}; {1}",
        "sudo bash bench/docker_check.sh"),
    Row("tokens", "token estimate against cl100k_base, agent tool outputs: median absolute error", "token_estimate.md",
        r"\| swe_tool_output \| \d+ \| \d+ \| [\d.]+ \| [+\-\d.]+% \| ([\d.]+%) \|", "{0}",
        "python bench/token_estimate.py", after=r"## cl100k_base"),
    Row("judge (opt-in)", "audit held-out fifth, WiCE: rules only (default) / with the judge", "judge.md",
        r"\| WiCE held-out fifth \| \d+ \| \*\*([\d.]+)\*\* \| ([\d.]+) \|",
        "{0} / {1}", "python bench/judge_audit_eval.py --skip-dev --unseen 300 --grid"),
    Row("judge (opt-in)", "audit held-out fifth, ExpertQA: rules only (default) / with the judge", "judge.md",
        r"\| ExpertQA held-out fifth \| \d+ \| ([\d.]+) \| ([\d.]+) \|",
        "{0} / {1}", "python bench/judge_audit_eval.py --skip-dev --unseen 300 --grid"),
    Row("judge (opt-in)", "MetaTool zero-shot, rank recall@2: first stage (default) / judge re-reading the top 10",
        "judge.md", r"\| first stage \(BOSUN_JUDGE=off\) \| [^|]+\| [^|]+\| \*\*([\d.]+)\*\* \|"
        r"[\s\S]*?\| judge re-reads the top 10, admits at 0.5 \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|",
        "{0} / {1}", "python bench/judge_route_eval.py --limit 1000 --grid --corpora metatool"),
)

HEADER = """# Benchmarks

<!-- Generated by `python bench/make_benchmarks_doc.py` from bench/results/; do not edit by hand.
     tests/test_benchmarks_doc.py fails when this page and the script's output differ. -->

The current figure for each measurement, read from the results file named in its row; the command re-makes
it. Every figure was measured on the project's 2-core development machine (shared, so absolute times move
with its load: compare a row with the baseline its results file reports in the same run). The results files
hold the full tables, baselines and conditions; what each capability does not reach yet is in its page under
docs/.

| area | measurement | figure | results file | command |
|---|---|---|---|---|
"""


class StaleRow(Exception):
    """A row's pattern no longer matches its results file."""


def figure(row: Row, results: Path = RESULTS) -> str:
    """The figure as the results file states it."""
    text = (results / row.source).read_text(encoding="utf-8")
    start = 0
    if row.after:
        anchor = re.search(row.after, text)
        if anchor is None:
            raise StaleRow(f"{row.source}: {row.after!r} not found (row {row.what!r})")
        start = anchor.end()
    found = re.compile(row.pattern).search(text, start)
    if found is None:
        raise StaleRow(f"{row.source}: {row.pattern!r} not found (row {row.what!r})")
    return row.shown.format(*found.groups())


def render(results: Path = RESULTS) -> str:
    """The whole page."""
    lines = [
        f"| {row.area} | {row.what} | {figure(row, results)} | [`{row.source}`](../bench/results/{row.source}) "
        f"| `{row.command}` |"
        for row in ROWS
    ]
    return HEADER + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/benchmarks.md differs from the output")
    args = ap.parse_args(argv)
    try:
        page = render()
    except StaleRow as exc:
        print(f"make_benchmarks_doc: {exc}", file=sys.stderr)
        return 2
    return write_or_check(PAGE, page, "make_benchmarks_doc.py", args.check, f" ({len(ROWS)} rows)")


if __name__ == "__main__":
    sys.exit(main())
