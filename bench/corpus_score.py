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


def score_case(log: Path) -> CaseResult:
    from doctor.core.errors import DoctorError
    from doctor.judge.evaluate import diagnose
    from doctor.judge.rulebase import load_rulebase
    from doctor.sources.inputs import read_input

    label, diagnosis, accepted = _label(log.with_suffix(".yaml"))
    wanted = CLASS_MAP.get(label, label)
    try:
        facts = read_input(str(log))
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
    logs = sorted(folder.glob("*.log"))
    return [score_case(log) for log in logs
            if log.with_suffix(".yaml").exists() and split in ("all", split_of(log.name))]


def repo_corpus() -> Path:
    """The repository's own cases (numbered from 1001), beside the shared ones."""
    return ROOT / "corpus"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.corpus_score", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", nargs="*", help="corpus folders (default: $LLM_DOCTOR_CORPUS or ../shared/corpus, "
                   "and the repository's corpus/)")
    p.add_argument("-v", "--verbose", action="store_true", help="list every case, not only the misses")
    p.add_argument("--split", choices=("all", "fit", "check"), default="all",
                   help="score only the fit split or the check split (cases numbered by a multiple of 3); the "
                        "check split's cases are never listed one by one, only counted")
    args = p.parse_args(argv)
    folders = [Path(d) for d in args.dir] or [f for f in (default_dir(), repo_corpus()) if f.is_dir()]
    for folder in folders:
        if not folder.is_dir():
            print(f"error: {folder}: no such folder", file=sys.stderr)
            return 2
    results = [r for folder in folders for r in score_dir(folder, args.split)]
    if not results:
        print(f"error: {', '.join(map(str, folders))}: no .log with a .yaml beside it", file=sys.stderr)
        return 2
    right = sum(r.right for r in results)
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
    for part in ("fit", "check"):
        cases = [r for r in results if split_of(r.name) == part]
        if cases:
            print(f"{part} split: {sum(r.right for r in cases)} / {len(cases)}")
    blind = [r for r in results if split_of(r.name) == "check" and (case_number(r.name) or 0) >= 401]
    if blind:  # 101-328 were all read before the split existed: this is the honest figure
        print(f"check split, cases 401 and above: {sum(r.right for r in blind)} / {len(blind)}")
    print(f"named right: {right} / {len(results)}")
    return 0 if right == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
