"""`analyze FILE --verify`: a log cannot re-run the user's engine, but the embedded one can re-run
the model it names when that file is on this machine (or `--model PATH`): the log's settings,
then each setting fix, judged by the same rules (doctor/commands/verify.py). Without the model it
says which `llm-doctor watch` command checks the fixes where the model is.

The prompt is not in a log: the re-runs use a filler prompt of the log's longest prompt length,
so what a fix does to fitting, memory and speed is measured; what it does to this prompt's output
(a loop) is not, and the report says so.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any

from doctor.commands.verify import VERIFY_BUDGET_S, verify
from doctor.core.report import Report, Verification

FILLER = "The quick brown fox jumps over the lazy dog while the painter mixes colours. "
MAX_REPLY = 128  # tokens: a short job
MAX_PROMPT = 4096  # tokens of filler at most


def _int(facts: Any, name: str) -> int | None:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(facts: Any, name: str) -> float | None:
    value = facts.value(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def log_settings(facts: Any) -> dict[str, Any]:
    """The RunSettings fields the log states (n_ctx, threads, batch, GPU layers, KV types, sampling)."""
    out: dict[str, Any] = {}
    for field_, name in (("n_ctx", "config.n_ctx_requested"), ("n_threads", "config.n_threads"),
                         ("n_batch", "config.n_batch"), ("n_ubatch", "config.n_ubatch"),
                         ("n_gpu_layers", "config.n_gpu_layers"), ("top_k", "sampling.top_k"),
                         ("repeat_last_n", "sampling.repeat_last_n"), ("seed", "sampling.seed")):
        value = _int(facts, name)
        if value is not None:
            out[field_] = value
    if "n_ctx" not in out and _int(facts, "config.n_ctx") is not None:
        out["n_ctx"] = _int(facts, "config.n_ctx")
    for field_, name in (("temperature", "sampling.temperature"), ("repeat_penalty", "sampling.repeat_penalty"),
                         ("top_p", "sampling.top_p"), ("min_p", "sampling.min_p")):
        number = _num(facts, name)
        if number is not None:
            out[field_] = number
    for field_, name in (("type_k", "config.type_k"), ("type_v", "config.type_v")):
        value = facts.value(name)
        if isinstance(value, str) and value:
            out[field_] = value.lower()
    fa = facts.value("config.flash_attn")
    if isinstance(fa, str):
        out["flash_attn"] = fa == "enabled"
    prompt = _int(facts, "run.prompt_tokens_max")
    if prompt:
        out["prompt_tokens"] = min(prompt, MAX_PROMPT)
    return out


def watch_command(model: str, settings: dict[str, Any]) -> str:
    """The command a user can run where the model is, to check the fixes themselves."""
    flags = {"n_ctx": "--ctx-size", "n_threads": "--threads", "n_batch": "--batch-size",
             "n_ubatch": "--ubatch-size", "n_gpu_layers": "--n-gpu-layers", "temperature": "--temperature",
             "repeat_penalty": "--repeat-penalty", "type_k": "--type-k", "type_v": "--type-v"}
    words = ["llm-doctor", "watch", "--model", model]
    for name, flag in flags.items():
        if name in settings:
            words += [flag, str(settings[name])]
    if settings.get("flash_attn"):
        words.append("--flash-attn")
    words += ["-p", "<a prompt like yours>", "--verify"]
    return " ".join(shlex.quote(w) for w in words)


def verify_log(report: Report, rulebase: Any, model: str | None, budget_s: float | None) -> None:
    settings = log_settings(report.facts)
    named = report.facts.value("model.path")
    path = model or (named if isinstance(named, str) and os.path.isfile(named) else None)
    if path is None:
        shown = named if isinstance(named, str) and named else "MODEL.gguf"
        where = f"the model the log names ({named}) is not on this machine" if isinstance(named, str) and named \
            else "the log names no model file"
        hint = (f"nothing was re-run: {where}. To check the fixes where the model is, run this there (or here: "
                "llm-doctor analyze FILE --verify --model PATH):")
        report.verification = Verification(0.0, budget_s or VERIFY_BUDGET_S, 0,
                                           notes=[hint, watch_command(shown, settings)])
        return
    if model is not None and not os.path.isfile(path):  # a name the user knows (Ollama, the Hub cache, ...)
        from doctor.sources.models.resolve import resolve

        path = resolve(model).path
    import dataclasses

    from doctor.judge.live_judge import LiveJudge
    from doctor.sources.live.embedded.runner import RunSettings, run_embedded

    prompt_tokens = settings.pop("prompt_tokens", 64)
    words = FILLER.split()
    base = RunSettings(model_path=path, prompt=" ".join(words[i % len(words)] for i in range(prompt_tokens)),
                       max_tokens=MAX_REPLY, seed=settings.pop("seed", 1))
    known = {f.name for f in dataclasses.fields(RunSettings)}
    base = dataclasses.replace(base, **{k: v for k, v in settings.items() if k in known})
    base.validate()

    def run_job(changes: dict[str, Any], max_tokens: int | None, timeout_s: float) -> Report:
        job = dataclasses.replace(base, **changes)
        if max_tokens is not None:
            job = dataclasses.replace(job, max_tokens=max_tokens)
        if job.n_ubatch > job.n_batch:
            job = dataclasses.replace(job, n_ubatch=job.n_batch)
        run = run_embedded(job, timeout_s=timeout_s, judge=LiveJudge(rulebase, engine=report.engine), triage=False)
        assert run.report is not None
        return run.report

    def progress(text: str) -> None:
        print(f"llm-doctor analyze: {text}", file=sys.stderr, flush=True)

    why = "the log does not hold the prompt, so a re-run cannot show what a sampling change does to its output"
    result = verify(report, dataclasses.asdict(base), run_job, budget_s=budget_s or VERIFY_BUDGET_S,
                    progress=progress, skip={"sampling": why}, rules=rulebase)
    result.notes.append(f"--verify re-ran {path} with the log's settings and a filler prompt of {prompt_tokens} "
                        "tokens (a log does not hold the prompt): fixes to fitting, memory and speed are measured, "
                        "fixes to this prompt's output are not")
