"""Crash triage's decisions (doctor/sources/live/embedded/triage.py): which run comes next, when it stops, what it says.

Pure: attempts are made up here; the runs themselves are tested in test_triage_runs.py.
"""

from __future__ import annotations

from doctor.sources.live.embedded.runner import RunSettings
from doctor.sources.live.embedded.triage import (
    MIN_RUN_S,
    Attempt,
    TriagePlan,
    applicable,
    eligible,
)


def _settings(**kw: object) -> RunSettings:
    return RunSettings(model_path="/m.gguf", seed=5, **kw)


def _crash(steps: int = 0) -> Attempt:
    return Attempt(None, "the original settings", "crashed", "SIGSEGV in the warm-up", "warm-up", steps=steps,
                   short=False)


def _run(plan: TriagePlan, outcomes: list[str]) -> list[str | None]:
    """Feed outcomes in order; returns the change keys that were run."""
    ran: list[str | None] = []
    for outcome in outcomes:
        step = plan.next(0.0)
        if step is None:
            break
        change, label, _, _ = step
        ran.append(change.key if change else None)
        plan.record(Attempt(change.key if change else None, label, outcome, "SIGSEGV in the warm-up",
                            prefill_ms=41.2, decode_ms_per_token=14.04), 1.0)
    return ran


def test_changes_come_cheapest_first_and_only_where_they_change_something() -> None:
    plain = [c.key for c in applicable(_settings())]
    assert plain == ["repack_off", "mmap_off", "one_thread", "small_batch"]  # flash attention is off, no GPU, f16
    busy = [c.key for c in applicable(_settings(flash_attn=True, n_gpu_layers=-1, type_k="q8_0", n_threads=1,
                                                n_threads_batch=1, n_batch=16, n_ubatch=16, use_mmap=False))]
    assert busy == ["repack_off", "flash_attn_off", "no_gpu", "kv_f16"]


def test_it_confirms_first_then_stops_at_the_first_change_that_completes() -> None:
    plan = TriagePlan(_settings(), _crash())
    assert _run(plan, ["crashed", "crashed", "completed", "completed"]) == [None, "repack_off", "mmap_off"]
    result = plan.result()
    assert result.status == "fixed" and result.change is not None and result.change.key == "mmap_off"
    assert result.settings.use_mmap is False and result.settings.use_extra_bufts is True  # one change only
    assert result.runs == 3
    assert result.summary() == ("crashed 2/2 with the original settings (SIGSEGV in the warm-up); still crashed "
                                "with weight repacking off (no extra buffer types: AMX / CPU_REPACK kernels); "
                                "completed with mmap off (the model read into memory): prefill 41 ms, "
                                "decode 14.0 ms/token")
    data = result.data()
    assert data["final"] is True and data["change"] == "mmap_off" and data["runs"] == 3
    assert plan.next(2.0) is None


def test_the_short_job_keeps_prompt_and_seed_and_runs_one_step_past_the_crash() -> None:
    plan = TriagePlan(_settings(prompt="Hi there", max_tokens=128), _crash(steps=20))
    step = plan.next(0.0)
    assert step is not None
    _, _, short, limit = step
    assert (short.prompt, short.seed, short.max_tokens) == ("Hi there", 5, 22)
    assert limit == plan.budget_s
    early = TriagePlan(_settings(max_tokens=2), _crash())
    assert early.short_job(early.settings).max_tokens == 2  # never more than asked


def test_a_crash_that_does_not_come_back_is_said_so() -> None:
    plan = TriagePlan(_settings(), _crash())
    assert _run(plan, ["completed", "completed"]) == [None]
    result = plan.result()
    assert result.status == "not_reproduced" and result.settings is None
    assert "did not reproduce" in result.summary()


def test_when_nothing_works_it_says_what_was_tried() -> None:
    plan = TriagePlan(_settings(), _crash())
    ran = _run(plan, ["crashed"] * 10)
    assert ran == [None, "repack_off", "mmap_off", "one_thread", "small_batch", "all_together"]
    result = plan.result()
    assert result.status == "no_fix" and result.settings is None and result.change is None
    summary = result.summary()
    assert summary.startswith("crashed 2/2 with the original settings")
    assert "one thread" in summary and "all of them together" in summary and "no single change" in summary


def test_only_all_changes_together_is_reported_as_such() -> None:
    plan = TriagePlan(_settings(), _crash())
    _run(plan, ["crashed"] * 5 + ["completed"])
    result = plan.result()
    assert result.status == "combined" and result.change is not None
    s = result.settings
    assert (s.use_extra_bufts, s.use_mmap, s.n_threads, s.n_batch) == (False, False, 1, 32)


def test_the_budget_bounds_the_triage() -> None:
    plan = TriagePlan(_settings(), _crash(), budget_s=30.0)
    assert plan.next(0.0) is not None
    plan.record(Attempt(None, "the original settings", "crashed", "SIGSEGV"), 29.0)
    assert plan.next(30.0 - MIN_RUN_S + 0.1) is None  # too little left to start another run
    result = plan.result()
    assert result.status == "budget" and "budget of 30 s ran out after 1 re-runs" in result.summary()


def test_which_deaths_are_triaged() -> None:
    assert eligible("crashed", -11) and eligible("crashed", -6) and eligible("crashed", -4)
    assert eligible("exited", 1)
    assert eligible("error", None, exception_type="OSError")  # ctypes: a native exception
    assert not eligible("crashed", -9)  # the OOM killer or kill -9
    assert not eligible("crashed", -7, model_changed=True)  # the model file was cut under the engine
    assert not eligible("error", None, exception_type="ValueError")  # a refused prompt, a bad file
    assert not eligible("finished", 0) and not eligible("interrupted", -2) and not eligible("timeout", -2)
