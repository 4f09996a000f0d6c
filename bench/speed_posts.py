"""Whole public posts through `llm-doctor analyze`, as a user would paste them (issue 36, items 6-7).

Each post is bench/data/public_posts/NNN.txt (the text the user pasted: a llama-bench table with its
device lines, an `ollama run --verbose` block, llama-cli timings, nvidia-smi / lscpu / fastfetch beside
them) and NNN.yaml (the thread's URL, the hardware as the post names it, `hardware_arg` where the post
names it only in its prose, and the verdict the thread supports: normal, slow with a `cause`, or
unknown). bench/data/README.md lists the sources.

Every post runs in its own process: `python -m doctor analyze NNN.txt --format json [--hardware ARG]`.
Scored:
- a verdict: the doctor placed the decode speed (within / above / below the usual range of its
  class, split between GPU and host, or against this engine's fraction floor) or named a slow
  cause; "which chip ran this?" is no verdict;
- flagged: a warning or error of the speed, offload, threads or PCIe checks, or LD821 (below the
  usual range);
- the cause named: a finding of the thread's cause fired (CAUSE_RULES);
- the fraction: measured / the doctor's ceiling, never above MAX_FRACTION.

    python -m bench.speed_public     (writes both tables; this module is its posts half)
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.derive.speed import CEILING_NOISE as MAX_FRACTION  # the doctor's own noise margin

ROOT = Path(__file__).resolve().parent.parent
POSTS = ROOT / "bench" / "data" / "public_posts"
# the findings that name each cause a thread can give
CAUSE_RULES = {
    "threads": {"LD840", "LD825", "LD826", "LD511", "LD512", "LD513"},
    "offload": {"LD846", "LD503", "LD504", "LD506", "LD507", "LD508", "LD550", "LD551", "LD554"},
    "cpu_build": {"LD845", "LD501", "LD505", "LD552"},
    "kv_cpu": {"LD841"},
    "working_set": {"LD844", "LD361"},
    "bar": {"LD842"},
    "pcie": {"LD843", "LD601", "LD602"},
}
FLAG_CLASSES = ("speed.", "offload.", "cpu.threads", "pcie.")
PLACED = ("within", "above", "below", "partial")


@dataclass
class PostOutcome:
    number: str
    meta: dict[str, Any]
    facts: dict[str, Any] = field(default_factory=dict)
    findings: list[tuple[str, str, str]] = field(default_factory=list)  # (id, severity, class)
    error: str | None = None

    def fact(self, name: str) -> Any:
        return self.facts.get(name)

    @property
    def expected(self) -> str:
        return str(self.meta.get("verdict"))

    @property
    def ids(self) -> set[str]:
        return {f[0] for f in self.findings}

    @property
    def flagged(self) -> list[str]:
        return [i for i, sev, cls in self.findings
                if i == "LD821" or (sev in ("warning", "error") and cls.startswith(FLAG_CLASSES))]

    @property
    def cause_named(self) -> bool:
        return bool(self.ids & CAUSE_RULES.get(str(self.meta.get("cause")), set()))

    @property
    def verdict(self) -> str | None:
        """What the doctor said of the speed: the placement, `fraction` (this engine's floor), `cause`, or None."""
        if self.fact("speed.decode.placement") in PLACED:
            return str(self.fact("speed.decode.placement"))
        if isinstance(self.fact("speed.decode.fraction"), int | float):
            return "fraction"
        if any(self.ids & rules for rules in CAUSE_RULES.values()):
            return "cause"
        return None

    @property
    def agrees(self) -> bool | None:
        if self.expected == "normal":
            return not self.flagged
        if self.expected == "slow":
            return self.cause_named
        return None


def load_posts(folder: Path = POSTS) -> list[tuple[str, dict[str, Any]]]:
    import yaml

    posts = []
    for meta_path in sorted(folder.glob("*.yaml")):
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) or {}
        posts.append((meta_path.stem, meta))
    return posts


def run_post(number: str, meta: dict[str, Any], folder: Path = POSTS) -> PostOutcome:
    """The post through the CLI, as a user runs it."""
    cmd = [sys.executable, "-m", "doctor", "analyze", str(folder / f"{number}.txt"), "--format", "json",
           "--no-tui"]
    if meta.get("hardware_arg"):
        cmd += ["--hardware", str(meta["hardware_arg"])]
    out = PostOutcome(number, meta)
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        out.error = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:200]
        return out
    facts = (report.get("facts") or {}).get("facts") or {}
    out.facts = {k: v.get("value") for k, v in facts.items() if isinstance(v, dict)}
    out.findings = [(f["id"], str(f.get("severity")), str(f.get("class"))) for f in report.get("findings") or []]
    return out


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "-"


def table(outcomes: list[PostOutcome]) -> list[str]:
    lines = ["| post | hardware | measured tg | fraction | efficiency (usual) | doctor says | flagged | source says "
             "| agrees |", "|---|---|---:|---:|---|---|---|---|---|"]
    for o in outcomes:
        says = o.expected + (f": {o.meta.get('cause')}" if o.expected == "slow" else "")
        usual = (f"{_pct(o.fact('speed.decode.efficiency'))} ({_pct(o.fact('speed.decode.usual_low'))}-"
                 f"{_pct(o.fact('speed.decode.usual_high'))})" if o.fact("speed.decode.usual_low") is not None
                 else _pct(o.fact("speed.decode.efficiency")))
        settle = str(o.fact("speed.decode.settle") or o.error or "-")[:50]
        doctor = o.verdict or f"? {settle}"
        agrees = {True: "yes", False: "**no**", None: "(not scored)"}[o.agrees]
        tg = o.fact("speed.decode.tok_s") or o.fact("run.decode_tps")
        url = str(o.meta.get("url", ""))
        lines.append(f"| [{o.number}]({url}) | {str(o.meta.get('hardware', ''))[:40]} | "
                     f"{tg if tg is not None else '-'} | {_pct(o.fact('speed.decode.fraction'))} | {usual} | "
                     f"{doctor} | {', '.join(o.flagged) or '-'} | {says} | {agrees} |")
    return lines


def summary(outcomes: list[PostOutcome]) -> list[str]:
    named = [o for o in outcomes if o.meta.get("hardware")]
    normal = [o for o in outcomes if o.expected == "normal"]
    slow = [o for o in outcomes if o.expected == "slow"]
    fractions = [float(o.fact("speed.decode.fraction")) for o in outcomes
                 if isinstance(o.fact("speed.decode.fraction"), int | float)]
    judged = [o for o in named if o.verdict]
    placed = [o for o in named if o.verdict in PLACED or o.verdict == "fraction"]

    def share(part: int, whole: int) -> str:
        return f"{part} / {whole} ({part / whole:.0%})" if whole else "0 / 0"

    lines = [f"- posts: {len(outcomes)} ({len(normal)} normal, {len(slow)} slow, "
             f"{len(outcomes) - len(normal) - len(slow)} unknown per the thread); {len(named)} name their hardware",
             f"- a verdict for the posts that name their hardware: {share(len(judged), len(named))} "
             f"(a speed placed against its ceiling: {share(len(placed), len(named))})",
             f"- slow posts flagged with the thread's cause: {share(sum(o.cause_named for o in slow), len(slow))} "
             f"(flagged at all: {share(sum(bool(o.flagged) for o in slow), len(slow))})",
             f"- normal posts not flagged: {share(sum(not o.flagged for o in normal), len(normal))}",
             f"- measured / ceiling: max {max(fractions):.2f}" if fractions else "- measured / ceiling: none",
             f"  (posts above {MAX_FRACTION}: {sum(f > MAX_FRACTION for f in fractions)})"]
    return lines


def run_all(folder: Path = POSTS) -> list[PostOutcome]:
    return [run_post(number, meta, folder) for number, meta in load_posts(folder)]
