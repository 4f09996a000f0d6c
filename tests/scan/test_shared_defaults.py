"""scan and watch share their defaults (issue 37, item 8): the context (the model's training context,
at most 4096) and the reply length come from one place, doctor/commands/options.py; and scan's plan
line says what its short trace really ran, beside what it planned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.cli import build_parser, main
from doctor.commands.options import DEFAULT_CTX_CAP, DEFAULT_MAX_TOKENS, default_ctx


def test_watch_runs_with_the_context_and_length_scan_plans(smollm2: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from doctor.commands.watch import _settings

    settings = _settings(build_parser().parse_args(["watch", "-m", str(smollm2)]))
    assert main(["scan", "-m", str(smollm2), "--no-trace", "--format", "json", "--ram", "8G"]) in (0, 1)
    facts = json.loads(capsys.readouterr().out)["facts"]["facts"]
    assert facts["model.n_ctx_train"]["value"] == 8192  # SmolLM2: so both cap it
    assert settings.n_ctx == facts["config.n_ctx_requested"]["value"] == DEFAULT_CTX_CAP
    assert settings.max_tokens == facts["config.max_new_tokens"]["value"] == DEFAULT_MAX_TOKENS
    # what is given still wins, in both
    given = _settings(build_parser().parse_args(["watch", "-m", str(smollm2), "-c", "1024", "-n", "16"]))
    assert (given.n_ctx, given.max_tokens) == (1024, 16)


def test_the_default_context_is_the_training_context_up_to_the_cap() -> None:
    assert default_ctx(2048) == (2048, "default: the training context 2048")
    assert default_ctx(131072)[0] == DEFAULT_CTX_CAP and "capped" in default_ctx(131072)[1]
    assert default_ctx(None) == (DEFAULT_CTX_CAP, f"default: {DEFAULT_CTX_CAP} (training context unknown)")


def test_the_plan_line_says_what_the_trace_ran() -> None:
    from doctor.core.facts import Facts, Source
    from doctor.judge.evaluate import diagnose
    from doctor.judge.rulebase import load_rulebase
    from doctor.views.render.style import choose_style
    from doctor.views.render.text import render_text

    facts = Facts()
    src = Source("probe", "plan")
    for name, value in (("config.prompt_tokens", 512), ("config.max_new_tokens", 512), ("config.n_ctx", 4096)):
        facts.set(name, value, src)
    report = diagnose(facts, load_rulebase([]), command="scan", mode="scan")
    style = choose_style(False, "utf-8", "never")
    plan = next(line for line in render_text(report, style).splitlines() if line.startswith("  plan:"))
    assert "prompt 512 + 512 new tokens" in plan and "trace" not in plan  # no trace ran: the plan only
    facts.set("run.prompt_tokens", 274, Source("trace", "trace.prefill"))
    facts.set("run.generated_tokens", 32, Source("trace", "trace.end"))
    report = diagnose(facts, load_rulebase([]), command="scan", mode="scan")
    plan = next(line for line in render_text(report, style).splitlines() if line.startswith("  plan:"))
    assert "prompt 512 + 512 new tokens planned (the trace ran a 274-token prompt + 32 new)" in plan
