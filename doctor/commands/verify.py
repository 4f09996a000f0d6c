"""`--verify`: try each setting fix on this machine and show before -> after; sweep threads and batch.

After the first run is judged, every finding whose fix is a setting of the embedded engine
(doctor/judge/fixmap.py says which, and which settings) is tried: the same short job — same prompt,
same seed — re-run in a fresh engine child (doctor.sources.live.embedded.runner.run_embedded, the machinery
crash triage uses) with the fix applied, and judged again. A fix that raises a new finding is
"made worse" and the recipe's next candidate is tried. Findings whose fix is not a setting say
"not tried" and why. Then a small measured sweep: threads (1..physical cores, decode ms/token),
the batch size for prefill (where the prompt is long enough to tell), GPU layers (where a GPU is).

Everything runs within one time budget, reported with the runs made; nothing runs without --verify.
The caller gives `run_job(changes, max_tokens, timeout_s) -> Report`: scan and watch each judge a
re-run their own way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.commands.options import VERIFY_BUDGET_S
from doctor.core.report import Report, Sweep, Verification, Verified
from doctor.judge import fixmap
from doctor.judge.changes import flags
from doctor.judge.rulebase import RuleBase, load_rulebase

MIN_RUN_S = 8.0  # no run is started with less of the budget left
STOP_GRACE_S = 5.0  # a run stopped at its limit may take this long to end (doctor.sources.live.embedded.runner)
RUN_LIMIT_S = 60.0  # one re-run at most
SWEEP_TOKENS = 16  # decode steps per thread-sweep run
MAX_THREAD_VALUES = 6
BATCH_VALUES = (32, 128, 512)

def engine_processes(report: Report | None) -> int:
    """Engine processes one re-run started: itself, plus a crash triage's short runs and its full
    re-run with the working setting (an engine that crashes at the fix's setting, e.g. AMX)."""
    if report is None:
        return 0
    triage_runs = report.facts.value("run.triage_runs")
    extra = triage_runs if isinstance(triage_runs, int) else 0
    if report.facts.value("run.triage_status") in ("fixed", "combined"):
        extra += 1
    return 1 + extra


RunJob = Callable[[dict[str, Any], "int | None", float], Report]


@dataclass
class Verifier:
    report: Report  # the first run, judged
    settings: dict[str, Any]  # the first run's RunSettings as a dict (model, prompt, seed, ...)
    run_job: RunJob
    budget_s: float = VERIFY_BUDGET_S
    progress: Callable[[str], None] | None = None
    runs: int = 0
    processes: int = 0  # engine processes those runs started (a crash triage adds its own)
    base: dict[str, Any] = field(default_factory=dict)  # resolved fixes: the sweeps run with them
    skip: dict[str, str] = field(default_factory=dict)  # class area -> why its fixes are not tried here
    stopped: Callable[[], bool] | None = None  # the user stopped: no more runs
    rules: RuleBase | None = None  # whose `verify:` the fixes follow (None: the rule base as loaded by default)
    _start: float = field(default_factory=time.monotonic)
    _cache: dict[tuple[tuple[str, Any], ...], Report] = field(default_factory=dict)

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self._start)

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"verify: {text}")

    def job(self, changes: dict[str, Any], max_tokens: int | None = None) -> Report | None:
        """The short job with `changes` (one run per distinct change; None when the budget is spent)."""
        changes = {**self.base, **changes}
        key = (*sorted(changes.items()), ("max_tokens", max_tokens))
        if key in self._cache:
            return self._cache[key]
        left = self.left()
        if left < MIN_RUN_S or (self.stopped is not None and self.stopped()):
            return None
        self.runs += 1
        report = self.run_job(changes, max_tokens, min(left - STOP_GRACE_S, RUN_LIMIT_S))
        self.processes += engine_processes(report)
        self._cache[key] = report
        return report

    # -- fixes ------------------------------------------------------------------------------
    def verify_fixes(self) -> None:
        has_gpu = (self.report.facts.value("host.gpu.count") or 0) > 0
        before_all = fixmap.figures(self.report.facts)
        rules = self.rules if self.rules is not None else load_rulebase()
        for finding in self.report.findings:
            recipe = fixmap.recipe_for(finding, rules)
            if recipe is None:
                finding.fix.verified = Verified("not tried", "not tried: no setting fix to try for this check",
                                                reason="no setting fix to try for this check")
                continue
            skipped = self.skip.get(finding.cls.split(".")[0])
            if recipe.not_tried or (recipe.needs_gpu and not has_gpu) or skipped:
                reason = recipe.not_tried or skipped or fixmap.NO_GPU
                finding.fix.verified = Verified("not tried", f"not tried: {reason}", reason=reason)
                continue
            cands = fixmap.candidates(recipe, self.report.facts, self.settings)
            if not cands:
                reason = "the suggested setting is what this run already used, or could not be worked out"
                finding.fix.verified = Verified("not tried", f"not tried: {reason}", reason=reason)
                continue
            finding.fix.verified = self._try(finding, cands, before_all)

    def _try(self, finding: Any, cands: list[dict[str, Any]], before_all: dict[str, Any]) -> Verified:
        tries: list[dict[str, Any]] = []
        began = time.monotonic()
        baseline = None
        if finding.cls.split(".")[0] in fixmap.SPEED_AREAS:  # speed: measure the original settings again, alike
            base_report = self.job({})
            if base_report is not None and base_report.facts.value("run.crashed") is not True:
                baseline = fixmap.figures(base_report.facts)
                before_all = {**before_all, **{k: v for k, v in baseline.items()
                                               if k in ("decode_ms_per_token", "prefill_ms")}}
        before = fixmap.pick(finding.cls, before_all)
        result: Verified | None = None
        for changes in cands:
            applied_flags = flags(changes)
            label = next(iter(applied_flags.values()), None) or ", ".join(f"{k}={v}" for k, v in changes.items())
            self.say(f"{finding.id}: re-running with {label}")
            after_report = self.job(changes)
            if after_report is None:
                reason = "the run was stopped" if self.stopped is not None and self.stopped() \
                    else f"the verify budget of {self.budget_s:.0f} s ran out"
                result = Verified("not tried", f"not tried: {reason}", applied=changes, flags=applied_flags,
                                  before=before, reason=reason, tries=tries)
                break
            after_all = fixmap.figures(after_report.facts)
            after = fixmap.pick(finding.cls, after_all)
            outcome, reason = fixmap.outcome(finding, self.report, after_report, after_all, baseline, changes)
            text = fixmap.line(finding.cls, label, before, after, outcome, reason)
            fired = [f.id for f in after_report.findings]
            before_ids = {f.id for f in self.report.findings}
            others = [f"{f.id} {f.title}" for f in after_report.findings
                      if f.id not in before_ids and f.severity != "info"
                      and (outcome != "made worse" or not fixmap.related(f, changes))]
            others = [o for o in others if o.split(" ")[0] not in {
                f.id for f in after_report.findings if f.cls.split(".")[0] in self.skip}]
            if others:
                text += "; also fired after, not the change's doing: " + ", ".join(others)
            self.say(f"{finding.id}: {outcome}: {text}")
            result = Verified(outcome, text, applied=changes, flags=applied_flags, before=before, after=after,
                              fired_after=fired, reason=reason, tries=list(tries))
            if outcome == "resolved":
                self.base.update(changes)
            if outcome != "made worse":
                break
            tries.append({"applied": changes, "outcome": outcome, "reason": reason, "after": after})
        assert result is not None
        result.seconds = time.monotonic() - began
        return result

    # -- sweeps ------------------------------------------------------------------------------
    def sweep_threads(self) -> Sweep:
        facts = self.report.facts
        physical = facts.value("host.cpu.physical_cores") or facts.value("host.cpu.logical_cores") \
            or _physical_cores()
        used = facts.value("config.n_threads") or self.settings.get("n_threads")
        sweep = Sweep("n_threads", "decode ms/token", baseline=used)
        if not isinstance(physical, int) or physical < 1:
            sweep.note = "the number of cores is unknown"
            return sweep
        values = list(range(1, physical + 1))
        if len(values) > MAX_THREAD_VALUES:  # 1, 2, 4, ... and the physical count
            values = sorted({1, physical, *(2 ** i for i in range(1, 8) if 2 ** i < physical)})[:MAX_THREAD_VALUES]
        if isinstance(used, int) and used not in values:
            values.append(used)
        for n in values:
            report = self.job({"n_threads": n, "n_threads_batch": n}, SWEEP_TOKENS)
            if report is None:
                sweep.rows.append((n, None, "budget spent"))
                continue
            ms = report.facts.value("run.decode_ms_p50")
            sweep.rows.append((n, ms if isinstance(ms, (int, float)) else None,
                               _failed(report) or _of_ceiling(report, "decode")))
        _best(sweep, lower=True)
        return sweep

    def sweep_batch(self) -> Sweep:
        prompt = self.report.facts.value("run.prompt_tokens_max")
        used = self.settings.get("n_batch")
        sweep = Sweep("n_batch", "prefill ms", baseline=used)
        if not isinstance(prompt, int) or prompt < 2 * BATCH_VALUES[0]:
            sweep.note = f"skipped: the prompt ({prompt} tokens) fits in one small batch; nothing to tell apart"
            return sweep
        if prompt > (self.base.get("n_ctx") or self.report.facts.value("config.n_ctx") or 0):
            sweep.note = "skipped: the prompt does not fit in the context"
            return sweep
        values = sorted({b for b in BATCH_VALUES if b < prompt} | {min(used or 512, 512)})
        for b in values:
            report = self.job({"n_batch": b, "n_ubatch": b}, 2)
            if report is None:
                sweep.rows.append((b, None, "budget spent"))
                continue
            ms = report.facts.value("run.prefill_ms")
            sweep.rows.append((b, round(ms, 1) if isinstance(ms, (int, float)) else None,
                               _failed(report) or _of_ceiling(report, "prefill")))
        _best(sweep, lower=True)
        return sweep

    def sweep_gpu_layers(self) -> Sweep:
        gpus = self.report.facts.value("host.gpu.count")
        sweep = Sweep("n_gpu_layers", "decode ms/token", baseline=self.settings.get("n_gpu_layers"))
        if not isinstance(gpus, int) or gpus < 1:
            sweep.note = "skipped: no GPU on this machine"
            return sweep
        layers = self.report.facts.value("model.n_layer")
        values = [0, -1] if not isinstance(layers, int) else sorted({0, layers // 2, layers + 1})
        for n in values:
            report = self.job({"n_gpu_layers": n}, SWEEP_TOKENS)
            if report is None:
                sweep.rows.append((n, None, "budget spent"))
                continue
            ms = report.facts.value("run.decode_ms_p50")
            bad = report.facts.value("run.crashed") is True or any(f.cls.startswith("oom.") for f in report.findings)
            sweep.rows.append((n, ms if isinstance(ms, (int, float)) and not bad else None,
                               "does not fit / crashed" if bad else ""))
        _best(sweep, lower=True)
        return sweep


def _physical_cores() -> int | None:
    """This machine's physical cores (a log's report has none of its own)."""
    try:
        import psutil

        return psutil.cpu_count(logical=False) or psutil.cpu_count()
    except ImportError:
        import os

        return os.cpu_count()


def _of_ceiling(report: Report, phase: str) -> str:
    """The run's speed as a share of this machine's ceiling for it (doctor/derive/speed.py), if judged;
    above the ceiling it is the ceiling that does not fit, and said so."""
    fraction = report.facts.value(f"speed.{phase}.fraction")
    if not isinstance(fraction, (int, float)):
        return ""
    return "above the ceiling (it does not fit)" if fraction > fixmap.CEILING_NOISE else f"{fraction:.0%} of ceiling"


def _failed(report: Report) -> str:
    if report.facts.value("run.crashed") is True:
        return "crashed"
    if report.facts.value("run.finish_reason") == "error":
        return "failed"
    if report.facts.value("run.finish_reason") in ("timeout", "interrupted"):
        return "timed out"
    return ""


def _best(sweep: Sweep, lower: bool) -> None:
    measured = [(v, f) for v, f, _ in sweep.rows if f is not None]
    if not measured:
        fails = {n for _, _, n in sweep.rows if n}
        sweep.note = sweep.note or "no run completed" + (f" ({', '.join(sorted(fails))})" if fails else "")
        return
    best_value, best_figure = min(measured, key=lambda r: r[1]) if lower else max(measured, key=lambda r: r[1])
    sweep.best = best_value
    base = next((f for v, f in measured if v == sweep.baseline), None)
    if base:
        sweep.gain = round((base - best_figure) / base, 3)


def _more_threads(finding: Any, verifier: Verifier) -> bool:
    """Whether the finding's fix gives the engine more threads than it ran."""
    recipe = fixmap.recipe_for(finding, verifier.rules if verifier.rules is not None else load_rulebase())
    used = verifier.report.facts.value("config.n_threads") or verifier.settings.get("n_threads")
    if recipe is None or not isinstance(used, int):
        return False
    return any(isinstance(n := c.get("n_threads"), int) and n > used
               for c in fixmap.candidates(recipe, verifier.report.facts, verifier.settings))


def follow_measured(report: Report, result: Verification, threads: Sweep | None, verifier: Verifier) -> None:
    """The headline follows what --verify measured: a speed finding whose fix measured no faster (or
    worse), or that advises more threads where the thread sweep measured no count 10% faster than the
    one used, is no longer the likely root cause."""
    from doctor.judge.evaluate import assess

    swept_gain = None
    if threads is not None and threads.best is not None and threads.gain is not None and threads.gain < 1:
        swept_gain = 1 / (1 - threads.gain)  # speed at the best count / at the count used
    refuted: dict[str, str] = {}
    for finding in report.findings:
        tried = finding.fix.verified
        if finding.cls.split(".")[0] in fixmap.SPEED_AREAS and tried is not None \
                and tried.outcome in ("made worse", "not resolved"):
            refuted[finding.id] = f"its fix measured {tried.outcome}"
        elif swept_gain is not None and swept_gain < fixmap.FASTER and _more_threads(finding, verifier):
            refuted[finding.id] = f"the thread sweep measured {threads.best if threads else '?'} thread(s) fastest, " \
                                  f"{swept_gain:.2f}x the count used"
    if report.assessment is not None and report.assessment.id in refuted:
        was = report.assessment.id
        report.assessment = assess(report.findings, frozenset(refuted))
        result.notes.append(f"{was} is not the likely root cause after all: {refuted[was]}")


def verify(report: Report, settings: dict[str, Any], run_job: RunJob, *, budget_s: float = VERIFY_BUDGET_S,
           progress: Callable[[str], None] | None = None, sweeps: bool = True,
           skip: dict[str, str] | None = None, stopped: Callable[[], bool] | None = None,
           rules: RuleBase | None = None) -> Verification:
    """Try the fixes of `report` and run the sweeps; the fixes' `verified` and `report.verification` are set.
    `skip`: class areas ("sampling") whose fixes cannot be judged by these re-runs, with the reason;
    `rules`: the rule base that judged the report (its rules' `verify:` say what to try)."""
    verifier = Verifier(report, settings, run_job, budget_s, progress, skip=dict(skip or {}), stopped=stopped,
                        rules=rules)
    began = time.monotonic()
    verifier.verify_fixes()
    done: list[Sweep] = []
    if sweeps:
        for sweep in (verifier.sweep_threads, verifier.sweep_batch, verifier.sweep_gpu_layers):
            done.append(sweep())
    seconds = time.monotonic() - began
    result = Verification(round(seconds, 1), budget_s, verifier.runs, done, processes=verifier.processes)
    threads = next((s for s in done if s.setting == "n_threads"), None)
    for finding in report.findings:  # a threads finding is verified by the sweep as well
        if finding.cls == "cpu.threads" and threads is not None and threads.best is not None:
            result.notes.append(f"{finding.id}: the thread sweep measured {threads.best} threads as fastest")
    follow_measured(report, result, threads, verifier)
    report.verification = result
    if progress is not None:
        started = f", {verifier.processes} engine processes with crash triage" \
            if verifier.processes != verifier.runs else ""
        progress(f"verify: {verifier.runs} runs{started} in {seconds:.1f} s (budget {budget_s:.0f} s)")
    return result
