"""Every fix is checked before it is shown (issue 37, items 1 and 5): a fix's settings change is applied
to the run's plan in the engine's own terms, derived and judged again; a change that would not clear its
finding, or would make something worse, is set aside for the next, and no advice asks for what the run
already has. One case per engine, each on a log of that engine's own lines (fixtures/logs; where a
number must differ from the recorded run, the test changes that number in the real lines)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from doctor.core.facts import Facts
from doctor.core.report import Report
from doctor.derive import derive
from doctor.derive.change import apply, current
from doctor.judge import fixmap
from doctor.judge.changes import Recipe
from doctor.views.render.style import Style
from doctor.views.render.text import render_text as _render

PLAIN = Style(colour=False, unicode=True)


def render_text(report: Report, verbose: bool = False) -> str:
    return _render(report, PLAIN, verbose)

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def _variant(tmp_path: Path, source: Path, *swaps: tuple[str, str]) -> Path:
    """The real log with numbers changed (each swap must hit: the lines stay the engine's own)."""
    text = source.read_text(encoding="utf-8")
    for old, new in swaps:
        assert old in text, old
        text = text.replace(old, new)
    out = tmp_path / source.name
    out.write_text(text, encoding="utf-8")
    return out


def _fix(report: Report, rule: str):
    return next(f for f in report.findings if f.id == rule).fix


# -- Ollama: the case -------------------------------------------------------------------------

def test_ollama_num_ctx_is_per_request_times_the_slots(analyze) -> None:
    """OLLAMA_NUM_PARALLEL=4, OLLAMA_CONTEXT_LENGTH=8192: the runner started with --ctx-size 32768
    --parallel 4 and the KV cache failed. `PARAMETER num_ctx 16384` would give the runner 65536 cells,
    twice what failed; the fix shown gives it 16384 (num_ctx 4096 x 4)."""
    report = analyze(LOGS / "ollama" / "kv-cache-oom-parallel-v0.6.8.log")
    assert report.assessment is not None and report.assessment.id == "LD302"
    fix = _fix(report, "LD302")
    assert fix.engine == "ollama" and fix.command is not None
    assert "num_ctx 16384" not in fix.command and "PARAMETER num_ctx 4096" in fix.command
    assert "num_ctx 16384" not in render_text(report)
    # the engine's own terms: num_ctx counts per request, the runner holds it times the slots
    facts = report.facts
    assert facts.value("config.n_ctx") == 32768 and facts.value("config.num_ctx") == 8192
    assert current(facts, "n_ctx", "ollama") == 8192
    assert apply(facts, {"n_ctx": 16384}, "ollama").value("config.n_ctx") == 65536
    assert apply(facts, {"n_ctx": 4096}, "ollama").value("config.n_ctx") == 16384
    assert derive(apply(facts, {"n_ctx": 4096}, "ollama")).value("derived.n_ctx_seq") == 4096


def test_a_change_the_check_rejects_says_why(analyze) -> None:
    """The rule's first change alone (num_ctx = half the runner's context) is set aside with the
    numbers, and no safe setting change is claimed when nothing else passes."""
    from doctor.judge.evaluate import build_report
    from doctor.judge.rulebase import RuleBase, load_rulebase

    rules = load_rulebase()
    ld302 = rules.by_id("LD302")
    assert ld302 is not None
    first_only = replace(ld302, fix_candidates=ld302.fix_candidates[:1],
                         fix_engines={"ollama": "PARAMETER num_ctx {derived.ctx_reduced}"})
    only_first = RuleBase(rules=[r if r.id != "LD302" else first_only for r in rules.rules],
                          families=rules.families)
    facts = analyze(LOGS / "ollama" / "kv-cache-oom-parallel-v0.6.8.log").facts
    report = build_report(only_first, facts, command="analyze", mode="analyze")
    fix = _fix(report, "LD302")
    assert fix.command is None and "ollama" not in fix.by_engine
    assert fix.note.startswith("No safe setting change was found")
    assert "PARAMETER num_ctx 16384" in fix.note and "65536" in fix.note and "32768" in fix.note


# -- llama.cpp: --ctx-size is split over --parallel ---------------------------------------------------

def test_llama_server_context_is_split_over_its_slots(analyze) -> None:
    """Two slots of 4096 (--ctx-size 8192 -np 2), a 3500-token prompt, generation ran into the end of
    its slot: `--ctx-size 8192` is what the run had (each slot still 4096); the fix gives 16384."""
    report = analyze(LOGS / "llama.cpp" / "server-generation-end-two-slots.log")
    assert report.assessment is not None and report.assessment.id == "LD202"
    fix = _fix(report, "LD202")
    assert fix.command == "--ctx-size 16384"
    assert derive(apply(report.facts, {"n_ctx": 16384}, "llama.cpp")).value("derived.n_ctx_seq") == 8192
    unified = report.facts
    unified.set("config.kv_unified", True, unified.get("config.n_ctx").source)  # type: ignore[union-attr]
    assert derive(apply(unified, {"n_ctx": 16384}, "llama.cpp")).value("derived.n_ctx_seq") == 16384


# -- llama-cpp-python: a prompt longer than the model was trained for ----------------------------------

def test_llama_cpp_python_no_context_change_is_safe_past_training(analyze, tmp_path: Path) -> None:
    """A 9500-token prompt at n_ctx 8192 on a model trained for 8192: the recommended context is capped
    at 8192, which the run already has; 9500 would run the model past its training. No safe setting
    change; the fix says so (and still says to send shorter prompts)."""
    log = _variant(tmp_path, LOGS / "llama-cpp-python" / "prompt-too-long.log",
                   ("llama_context: n_ctx                 = 256", "llama_context: n_ctx                 = 8192"),
                   ("llama_context: n_ctx_seq             = 256", "llama_context: n_ctx_seq             = 8192"),
                   ("llama_context: n_ctx_seq (256) < n_ctx_train (8192) -- the full capacity of the model will "
                    "not be utilized\n", ""),
                   ("Requested tokens (328) exceed context window of 256",
                    "Requested tokens (9500) exceed context window of 8192"))
    report = analyze(log)
    fix = _fix(report, "LD201")
    assert fix.engine == "llama-cpp-python" and fix.command is None
    assert fix.already == {"n_ctx": "8192"}
    assert "n_ctx=9500" in fix.note and "LD205" in fix.note and "shorter prompts" in fix.text
    # the recorded run itself (328 tokens at 256) gets its command as before
    assert _fix(analyze(LOGS / "llama-cpp-python" / "prompt-too-long.log"), "LD201").command == \
        "Llama(model_path=..., n_ctx=512)"


# -- vLLM: --max-model-len against the KV pool -----------------------------------------------------

def test_vllm_max_model_len_must_fit_the_kv_pool(analyze, tmp_path: Path) -> None:
    """An 11240-token request over max_model_len 8192, with a KV pool of 700 blocks x 16 = 11200 tokens:
    every longer --max-model-len would not fit the pool (vLLM refuses to start), so none is shown."""
    log = _variant(tmp_path, LOGS / "vllm" / "prompt-over-max-len-v0.6.3.log",
                   ("# GPU blocks: 26141, # CPU blocks: 2048", "# GPU blocks: 700, # CPU blocks: 2048"),
                   ("Maximum concurrency for 8192 tokens per request: 51.06x",
                    "Maximum concurrency for 8192 tokens per request: 1.37x"))
    report = analyze(log)
    assert report.facts.value("server.kv_tokens") == 11200
    fix = _fix(report, "LD201")
    assert fix.command is None and "KV pool of 11200" in fix.note
    assert "--max-model-len 12544" in fix.note
    # with the recorded pool (418256 tokens) the same fix passes
    assert _fix(analyze(LOGS / "vllm" / "prompt-over-max-len-v0.6.3.log"), "LD201").command.startswith(
        "--max-model-len 12544")


# -- SGLang: --context-length against max_total_num_tokens ------------------------------------------

def test_sglang_context_length_takes_the_next_candidate_that_fits_the_pool(analyze, tmp_path: Path) -> None:
    """An 18503-token request over --context-length 16384 with a pool of 20000 tokens: 20480 (the need
    and a tenth) does not fit the pool; the bare need does, and is shown."""
    log = _variant(tmp_path, LOGS / "sglang" / "v0.5.23-input-longer-than-context.log",
                   ("max_total_num_tokens=398120", "max_total_num_tokens=20000"))
    fix = _fix(analyze(log), "LD201")
    assert fix.command == "--context-length 18503"
    assert fix.checks == ["not --context-length 20480: a request of 20480 tokens would not fit the KV pool of 20000"]


# -- TGI: max-input below max-total -----------------------------------------------------------------

def test_tgi_total_tokens_fix_keeps_the_input_limit_below_it(analyze) -> None:
    """The pool holds 24320 tokens, max_total_tokens 32768 and max_input_tokens 32000: `--max-total-tokens
    24320` alone would leave --max-input-tokens above it (the launcher refuses); the fix lowers both."""
    report = analyze(LOGS / "tgi" / "max-total-tokens-over-kv-v3.0.log")
    fix = _fix(report, "LD350")
    assert fix.command == "--max-total-tokens 24320 --max-input-tokens 24319"
    assert any("--max-input-tokens 32000 is not below --max-total-tokens 24320" in c for c in fix.checks)


# -- item 5: advice from the run's own settings ------------------------------------------------------

def test_loop_advice_does_not_ask_for_a_temperature_the_run_already_samples_at(analyze, tmp_path: Path) -> None:
    greedy = _fix(analyze(LOGS / "llama.cpp" / "cli-repetition.log"), "LD401")
    assert greedy.command is not None and greedy.command.startswith("--temp 0.7 --repeat-penalty 1.1")
    log = _variant(tmp_path, LOGS / "llama.cpp" / "cli-repetition.log",
                   ("top_k = 1, ", "top_k = 40, "), ("temp = 0.000", "temp = 0.800"))
    report = analyze(log)
    fix = _fix(report, "LD401")
    assert fix.command == "--repeat-penalty 1.1 --repeat-last-n 256"
    assert fix.already == {"temperature": "0.8"}
    text = render_text(report)
    assert "--temp 0.7" not in text and "(already so in this run: temperature 0.8)" in text


def test_no_layer_advice_when_every_layer_is_on_the_gpu(analyze) -> None:
    """Ollama with 33/33 layers on the GPU: the planner note keeps its finding, but no `PARAMETER num_gpu N`."""
    report = analyze(LOGS / "ollama" / "healthy-v0.5.7-journald.log")
    fix = _fix(report, "LD316")
    assert fix.command is None and "num_gpu" not in " ".join(fix.by_engine.get("ollama", ""))
    assert fix.note == "Nothing to change in the settings: the run already has n_gpu_layers all layers."
    assert "PARAMETER num_gpu N" not in render_text(report, verbose=True)


def test_verify_does_not_rerun_a_setting_the_run_already_had() -> None:
    """--verify's candidates: `--threads-batch 2` where the run reported 2 batch threads (the engine's
    default, given by no option) is not re-run; the thread count that differs is."""
    recipe = Recipe(((("n_threads", "{derived.threads_recommended}"),
                      ("n_threads_batch", "{derived.threads_recommended}")),))
    facts = Facts.from_values({"derived.threads_recommended": 2, "config.n_threads": 4, "config.n_threads_batch": 2})
    assert fixmap.candidates(recipe, facts, {"n_threads": 4}) == [{"n_threads": 2}]
    facts = Facts.from_values({"derived.threads_recommended": 2, "config.n_threads": 2, "config.n_threads_batch": 2})
    assert fixmap.candidates(recipe, facts, {}) == []


def test_a_change_equal_to_the_run_s_settings_is_never_shown(analyze) -> None:
    """The general mechanism, on every finding of the fixtures above: no command asks for a setting at
    the value the run already has."""
    for path in (LOGS / "ollama" / "kv-cache-oom-parallel-v0.6.8.log",
                 LOGS / "llama.cpp" / "server-generation-end-two-slots.log",
                 LOGS / "ollama" / "healthy-v0.5.7-journald.log", LOGS / "llama.cpp" / "cli-repetition.log"):
        report = analyze(path)
        for finding in report.findings:
            assert finding.fix.command != "--ctx-size 8192" or report.facts.value("config.n_ctx") != 8192
            for setting, value in finding.fix.already.items():
                assert f"{setting} {value}" not in (finding.fix.command or "")
