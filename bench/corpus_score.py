"""`python -m bench.corpus_score [DIR]`: how many real logs llm-doctor names right.

DIR (default ../shared/corpus) holds pairs `NNN_<engine>_<slug>.log` + `.yaml`, each yaml with the
`failure_class` the public thread reached. Every log is analysed as `llm-doctor analyze` would (same
reader, same rule base); the case is *named right* when the report's likely root cause (the
assessment, the leading finding) has the expected llm-doctor class, and a healthy case is right
when no warning or error is reported. Prints named-right / total with the misses; exit 0 when all
are right, 1 otherwise.

A case's yaml may list `accept_also`: the other classes the thread's diagnosis also supports (103 and
324 are the same vLLM start-up message, one labelled oom_kv, the other ctx_overflow with oom.kv_cache
accepted); a root cause of one of those is right too.

The class map is the corpus's own (INDEX.md). `other` has no class in the vocabulary; its cases are
scored by what the yaml's diagnosis says: a model the engine cannot load is right when the root cause
is in the model area (model.*) and is not a memory class, or is the crash-cause table's engine.crash
(LD960), whose message names the architecture the build does not know.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

CLASS_MAP = {
    "oom_weights": "oom.weights", "oom_kv": "oom.kv_cache", "oom_compute": "oom.compute",
    "oom_runtime": "oom.runtime", "oom_concurrency": "oom.concurrency", "ctx_overflow": "context.overflow",
    "kv_preemption": "kv.preemption", "io_bound_load": "io.slow_load", "partial_offload": "offload.partial",
    "no_gpu_offload": "offload.none", "threads": "cpu.threads", "repetition_sampling": "sampling.repetition",
    "healthy": None,
}
ROOT = Path(__file__).resolve().parent.parent


def default_dir() -> Path:
    """$LLM_DOCTOR_CORPUS, else the first of ../shared/corpus, shared/corpus, ../../shared/corpus that
    exists (a checkout beside shared/, one holding it, a worktree one level further down)."""
    env = os.environ.get("LLM_DOCTOR_CORPUS")
    if env:
        return Path(env)
    candidates = [ROOT.parent / "shared" / "corpus", ROOT / "shared" / "corpus",
                  ROOT.parent.parent / "shared" / "corpus"]
    return next((c for c in candidates if c.is_dir()), candidates[0])


@dataclass(slots=True)
class CaseResult:
    name: str
    expected: str  # the corpus label
    wanted: str | None  # the llm-doctor class (None: healthy)
    got: str | None  # the root cause's class (None: nothing at warning or above)
    right: bool
    findings: list[str] = field(default_factory=list)  # "id class severity", in report order
    error: str | None = None


def _label(yaml_path: Path) -> tuple[str, str, tuple[str, ...]]:
    import yaml

    data = yaml.safe_load(yaml_path.read_text(encoding="utf-8")) or {}
    also = data.get("accept_also") or ()
    accepted = tuple(str(c) for c in also) if isinstance(also, list) else ()
    return str(data.get("failure_class", "")), str(data.get("diagnosis", "")), accepted


def _other_ok(got: str | None, diagnosis: str) -> bool:
    """`other`: no class in the vocabulary; a model the engine cannot load must read as a model problem."""
    text = diagnosis.lower()
    if "architecture" in text or "load the model" in text or "fails to load" in text:
        return got is not None and (got.startswith("model.") or got == "engine.crash")
    return got is not None


def score_case(log: Path, source: Path | None = None) -> CaseResult:
    """Score the case `log` (its yaml beside it); `source`: read this file instead of the log (the
    paste harness's re-pasted variant of it), judged by the log's label."""
    from doctor.core.errors import DoctorError
    from doctor.judge.evaluate import diagnose
    from doctor.judge.rulebase import load_rulebase
    from doctor.sources.inputs import read_input

    label, diagnosis, accepted = _label(log.with_suffix(".yaml"))
    wanted = CLASS_MAP.get(label, label)
    try:
        facts = read_input(str(source or log))
        report = diagnose(facts, load_rulebase(None), command="analyze", mode="analyze")
    except DoctorError as exc:
        return CaseResult(log.name, label, wanted, None, False, error=str(exc))
    serious = [f for f in report.findings if f.severity in ("error", "warning")]
    got = report.assessment.cls if report.assessment else None
    if label == "healthy":
        right = not serious
    elif label == "other":
        right = _other_ok(got, diagnosis) or (got is not None and got in accepted)
    else:
        right = got == wanted or (got is not None and got in accepted)
    findings = [f"{f.id} {f.cls} {f.severity}" for f in report.findings]
    return CaseResult(log.name, label, wanted, got, right, findings)


def case_number(name: str) -> int | None:
    """The case's number (the digits before the first `_`), or None."""
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def split_of(name: str) -> str:
    """"check" for a case whose number is divisible by 3 (never read while writing rules), else "fit"."""
    number = case_number(name)
    return "check" if number is not None and number % 3 == 0 else "fit"


def score_dir(folder: Path, split: str = "all") -> list[CaseResult]:
    return [score_case(log) for log in corpus_logs([folder], split)]


def corpus_logs(folders: list[Path], split: str = "all") -> list[Path]:
    """Every case's log (a .log with its .yaml beside it) in `folders`, of `split` ("all", "fit", "check")."""
    return [log for folder in folders for log in sorted(folder.glob("*.log"))
            if log.with_suffix(".yaml").exists() and split in ("all", split_of(log.name))]


def engine_of(name: str) -> str:
    """The engine a case's file name gives (`NNN_<engine>_<slug>.log`)."""
    parts = name.split("_", 2)
    return parts[1] if len(parts) == 3 else "?"


def repo_corpus() -> Path:
    """The repository's own cases (numbered from 1001), beside the shared ones."""
    return ROOT / "corpus"


def default_folders() -> list[Path]:
    """The shared corpus and the repository's corpus/, those that exist."""
    return [f for f in (default_dir(), repo_corpus()) if f.is_dir()]


@dataclass(slots=True)
class Count:
    right: int = 0
    total: int = 0

    def add(self, right: bool) -> None:
        self.right += right
        self.total += 1

    def __str__(self) -> str:
        return f"{self.right} / {self.total}" if self.total else "-"

    def percent(self) -> float:
        return 100.0 * self.right / self.total if self.total else 0.0


@dataclass(slots=True)
class SplitTally:
    """One split's figures: all cases, failures only (healthy apart), and per engine and per class."""

    cases: Count = field(default_factory=Count)
    failures: Count = field(default_factory=Count)
    healthy: Count = field(default_factory=Count)
    errors: int = 0  # cases whose analysis raised (never expected: an InputError on a real log)
    by_engine: dict[str, Count] = field(default_factory=dict)
    by_class: dict[str, Count] = field(default_factory=dict)

    def add(self, r: CaseResult) -> None:
        self.cases.add(r.right)
        (self.healthy if r.expected == "healthy" else self.failures).add(r.right)
        self.errors += r.error is not None
        self.by_engine.setdefault(engine_of(r.name), Count()).add(r.right)
        self.by_class.setdefault(r.expected or "?", Count()).add(r.right)


def tally(results: list[CaseResult]) -> dict[str, SplitTally]:
    """Figures per split: "fit", "check", "check401" (the check split's cases from 401 on, none of them
    read before the split existed: the honest figure) and "all"."""
    out = {name: SplitTally() for name in ("fit", "check", "check401", "all")}
    for r in results:
        part = split_of(r.name)
        out[part].add(r)
        out["all"].add(r)
        if part == "check" and (case_number(r.name) or 0) >= 401:
            out["check401"].add(r)
    return out


def tables(figures: dict[str, SplitTally]) -> str:
    """Markdown: the splits, then per engine and per class with one column per split."""
    fit, check = figures["fit"], figures["check"]
    lines = ["| split | named right | failures named right | healthy clean | errors |", "|---|---|---|---|---|"]
    for name, label in (("fit", "fit"), ("check", "check"), ("check401", "check, 401 and above"), ("all", "all")):
        t = figures[name]
        share = f" ({t.cases.percent():.0f}%)" if t.cases.total else ""
        lines.append(f"| {label} | {t.cases}{share} | {t.failures} | {t.healthy} | {t.errors} |")
    for title, key in (("engine", "by_engine"), ("class", "by_class")):
        names = sorted(set(getattr(fit, key)) | set(getattr(check, key)))
        lines += ["", f"| {title} | fit | check |", "|---|---|---|"]
        lines += [f"| {n} | {getattr(fit, key).get(n, Count())} | {getattr(check, key).get(n, Count())} |"
                  for n in names]
    return "\n".join(lines)


def as_json(results: list[CaseResult], figures: dict[str, SplitTally]) -> dict[str, object]:
    """The figures, and the fit split's cases one by one (the check split's never)."""
    def split_json(t: SplitTally) -> dict[str, object]:
        def counts(d: dict[str, Count]) -> dict[str, list[int]]:
            return {k: [c.right, c.total] for k, c in sorted(d.items())}
        return {"right": t.cases.right, "total": t.cases.total, "failures": [t.failures.right, t.failures.total],
                "healthy": [t.healthy.right, t.healthy.total], "errors": t.errors,
                "by_engine": counts(t.by_engine), "by_class": counts(t.by_class)}

    return {"splits": {k: split_json(v) for k, v in figures.items()},
            "fit_cases": [{"name": r.name, "expected": r.expected, "wanted": r.wanted, "got": r.got,
                           "right": r.right, "error": r.error} for r in results if split_of(r.name) == "fit"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.corpus_score", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", nargs="*", help="corpus folders (default: $LLM_DOCTOR_CORPUS or ../shared/corpus, "
                   "and the repository's corpus/)")
    p.add_argument("-v", "--verbose", action="store_true", help="list every case, not only the misses")
    p.add_argument("--split", choices=("all", "fit", "check"), default="all",
                   help="score only the fit split or the check split (cases numbered by a multiple of 3); the "
                        "check split's cases are never listed one by one, only counted")
    p.add_argument("--json", action="store_true", help="print the figures (and the fit split's cases) as JSON")
    args = p.parse_args(argv)
    folders = [Path(d) for d in args.dir] or default_folders()
    for folder in folders:
        if not folder.is_dir():
            print(f"error: {folder}: no such folder", file=sys.stderr)
            return 2
    results = [score_case(log) for log in corpus_logs(folders, args.split)]
    if not results:
        print(f"error: {', '.join(map(str, folders))}: no .log with a .yaml beside it", file=sys.stderr)
        return 2
    figures = tally(results)
    right = figures["all"].cases.right
    if args.json:
        import json

        print(json.dumps(as_json(results, figures), indent=1))
        return 0 if right == len(results) else 1
    for r in results:
        if (r.right and not args.verbose) or split_of(r.name) == "check":
            continue
        mark = "ok  " if r.right else "MISS"
        want = r.wanted or "healthy (no warning/error)"
        print(f"{mark} {r.name}\n     expected {r.expected} -> {want}; root cause {r.got or 'none'}")
        if r.error:
            print(f"     error: {r.error}")
        elif not r.right or args.verbose:
            print("     findings: " + ("; ".join(r.findings) or "none"))
    print()
    print(tables(figures))
    print()
    for part in ("fit", "check"):
        if figures[part].cases.total:
            print(f"{part} split: {figures[part].cases}")
    if figures["check401"].cases.total:  # 101-328 were all read before the split existed: the honest figure
        print(f"check split, cases 401 and above: {figures['check401'].cases}")
    print(f"named right: {right} / {len(results)}")
    return 0 if right == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
