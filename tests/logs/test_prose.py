"""What `analyze` reads from a post's prose (doctor/sources/logs/prose.py, issue 36): speeds, settings,
the model and the machine as users write them, only where no engine output in the paste said them.
Each paste is a real post, quoted as its thread has it (the URL above each); a setting or speed that
was only in the prose is what each test checks, so each fails without the prose reader."""

from __future__ import annotations

from pathlib import Path

from doctor.core.facts import Facts
from doctor.judge.evaluate import diagnose
from doctor.sources.hardware_text import named_in
from doctor.sources.logs.entry import analyze_bytes
from doctor.sources.logs.prose import MAX_PROSE, NAME

ROOT = Path(__file__).resolve().parent.parent.parent

# https://github.com/am17an/llama.cpp/issues/28 (the description, as posted)
GB10_Q5_1 = """\
Upstream: https://github.com/ggml-org/llama.cpp/issues/28455

**Problem:** A default CUDA build accepts `-fa on -ctk q5_1 -ctv q5_1` but silently schedules every FlashAttention \
node on CPU, causing a large slowdown.

**Environment:** upstream `6a1a922d2` (b10819), NVIDIA GB10, CUDA 13.0, Linux, default `GGML_CUDA_FA_ALL_QUANTS=OFF`, \
Gemma 4 12B Q4_K_M.

**Reproduction:**
```sh
./build/bin/llama-bench -m gemma-4-12B-it-Q4_K_M.gguf -fa on -ctk q5_1 -ctv q5_1 -p 512 -n 64 -ngl 99 -t 12 -r 3
GGML_SCHED_DEBUG=2 ./build/bin/llama-bench -v -m gemma-4-12B-it-Q4_K_M.gguf -fa on -ctk q5_1 -ctv q5_1 -p 32 -n 1 \
-ngl 99 -t 12 -r 1
```

**Observed:** q5_1/q5_1 measured 378.70 t/s pp512 and 9.35 t/s tg64; the scheduler trace assigned `FLASH_ATTN` to \
`CPU`. The q8_0/q8_0 control measured 1899.28 t/s and 27.05 t/s, with `FLASH_ATTN` assigned to `CUDA0`.
"""

# https://github.com/ggml-org/llama.cpp/issues/7176 (the description, as posted)
ORANGE_PI = """\
help, i'm on orange pi 5 and i use phi-3 and now it slow :'((((( T_T :cry: :crying_cat_face: :sob:

./main -m models/Phi-3-mini-4k-instruct.IQ4_XS.gguf -s 1 -p "Hi! My name is"

b2750:
prompt time: 11t/s
eval time: 7t/s - 7.20t/s

b2826:
prompt time: 4.40t/s
eval time: 3.84t/s

llama.cpp selects too many cores!! adding "-t 4" makes it go fast again (eval=6.92 tokens per second; \
prompt=10.77 tokens per second)

rk3588s has 4 BIG and 4 little cores so only choosing 4 same cores seems to be the ideal thing
"""

# https://github.com/ollama/ollama/issues/9306 (the description's results)
FEWER_THREADS = """\
And i noticed 7 threads hit higher than any other, so i switched ollama to 7 threads instead of 16, which is one \
below the total core count.

Results:
16 threads = 0.83t/s
7 threads = 6.56t/s

This was specifically testing phi4 14b Q4_K_M (8.4GB) that consumed 10gb ram and offloads 36% to CPU
"""

# https://github.com/dmatora/LLM-inference-speed-benchmarks/issues/12 (title and description)
RTX_3080 = """\
# Llama 3.1 8B Q4_K_M NVIDIA RTX 3080

Prompt evaluation: 3806.89 ± 15.44.
Token generation: 111.95 ± 2.45.

This is with llama.cpp build: 93bc3839 (3622).
"""


def _facts(text: str) -> Facts:
    return analyze_bytes(text.encode())


def _src(facts: Facts, name: str) -> str:
    fact = facts.get(name)
    assert fact is not None, name
    return fact.source.name


def test_a_post_that_states_its_numbers_in_words_gets_them_as_the_timing_lines_would(rulebase) -> None:  # type: ignore[no-untyped-def]
    facts = _facts(GB10_Q5_1)
    assert facts.value("run.decode_tps") == 9.35 and facts.value("run.prefill_tps") == 378.7  # the first run stated
    assert _src(facts, "run.decode_tps") == NAME
    assert facts.value("config.type_k") == "q5_1" and facts.value("config.flash_attn") == "enabled"
    assert facts.value("config.n_threads") == 12
    assert facts.value("host.gpu[0].name") == "NVIDIA GB10 (DGX Spark)"
    assert facts.value("model.name") == "gemma-4-12B-it-Q4_K_M.gguf"
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    kv = next(f for f in report.findings if f.id == "LD841")
    assert "CUDA builds compile only f16" in kv.message
    assert report.facts.value("speed.decode.placement") == "below"


def test_the_first_run_is_taken_and_a_setting_stays_with_the_run_it_was_written_for() -> None:
    facts = _facts(ORANGE_PI)
    # "eval time: 7t/s - 7.20t/s": two speeds, the first taken
    assert facts.value("run.decode_tps") == 7.0 and facts.value("run.prefill_tps") == 11.0
    # "-t 4" is written in the sentence of the 6.92 run: not the first run's setting
    assert not facts.has("config.n_threads")
    assert facts.value("host.cpu.model") == "Rockchip RK3588 / RK3588S"
    assert not facts.has("model.name")  # "Phi-3-mini" names no parameter count: no size is guessed


def test_a_thread_count_written_beside_its_speed_is_that_runs() -> None:
    facts = _facts(FEWER_THREADS)
    assert facts.value("run.decode_tps") == 0.83
    assert facts.value("config.n_threads") == 16
    assert facts.value("model.name") == "phi4 14b Q4_K_M"
    assert facts.value("model.weights_bytes") is None  # sized by derive (model_guess), not here


def test_phase_names_with_a_colon_and_the_title_line() -> None:
    facts = _facts(RTX_3080)
    assert facts.value("run.decode_tps") == 111.95 and facts.value("run.prefill_tps") == 3806.89
    assert facts.value("host.gpu[0].name") == "NVIDIA GeForce RTX 3080"
    assert facts.value("model.name") == "Llama 3.1 8B Q4_K_M"
    assert facts.value("run.recognised") is True  # a stated speed is something to judge


def test_the_prose_never_overrides_the_engines_output(rulebase) -> None:  # type: ignore[no-untyped-def]
    # post 032 (https://github.com/ollama/ollama/issues/9683): ollama's verbose block, the env line, and a
    # comparison in words ("40+ tk/s" for another model)
    post = ROOT / "bench/data/public_posts/032.txt"
    facts = _facts(post.read_text(encoding="utf-8"))
    assert facts.value("run.decode_tps") == 16.29 and _src(facts, "run.decode_tps") != NAME
    assert facts.value("config.type_k") == "q8_0" and facts.value("config.flash_attn") == "enabled"
    assert facts.value("host.gpu[0].name") == "NVIDIA GeForce RTX 4090"  # "very slow for a 4090"
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    kv = next(f for f in report.findings if f.id == "LD841")
    assert kv.confidence == "medium"  # inferred: nothing in the paste shows where attention ran


def test_log_lines_and_large_inputs_are_not_prose() -> None:
    # a vLLM stats line states tokens/s, but it is the engine's (batched intervals: no decode speed)
    vllm = ("INFO 05-16 17:33:01 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
            "throughput: 150.2 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%\n")
    assert not _facts(vllm).has("run.decode_tps")
    big = "x" * (MAX_PROSE + 1) + "\nI get 12.5 t/s on my 4090 with -t 8\n"
    facts = _facts(big)
    assert not facts.has("run.decode_tps") and not facts.has("config.n_threads")


def test_devices_as_prose_names_them() -> None:
    for sentence, gpu, count in [("Which is obviously very slow for a 4090, I can run 14b Q8 at 40+ tk/s",
                                  "NVIDIA GeForce RTX 4090", 1),
                                 ("my 7900 XTX gives 20 t/s", "AMD Radeon RX 7900 XTX", 1),
                                 ("dual 3090s on x1 risers", "NVIDIA GeForce RTX 3090", 2),
                                 ("GPU: NVIDIA RTX A5000 24GB", "NVIDIA RTX A5000", 1)]:
        hw = named_in(sentence)
        assert hw is not None and hw.gpu is not None, sentence
        assert (hw.gpu.name, hw.gpu_count) == (gpu, count)
    assert named_in("dual 3090s on x1 risers").pcie_width == 1  # type: ignore[union-attr]
    assert named_in("ReBAR is disabled in the BIOS").rebar is False  # type: ignore[union-attr]
    for sentence in ("it makes 580 tokens in 2024", "the 2048 context", "With 4096 tokens of context"):
        assert named_in(sentence) is None, sentence


# https://github.com/AlexsJones/llmfit/pull/773 (the description)
RTX_2080_TABLE = """\
Community benchmarks for the **NVIDIA GeForce RTX 2080 (8 GB)** — sub-8B models running fully on the GPU (`-ngl 99`).

Measured with **llmfit v1.1.3** (`bench --provider llamacpp --runs 3`, warmed) against **llama.cpp**, all models \
**Q4_K_M** GGUF (gpt-oss: MXFP4), context 4096, single slot.
Host: Intel i9-10900X, 62 GB RAM, Linux.

| Model | avg tok/s | offload |
|---|---|---|
| Qwen3-4B | 110.6 | `-ngl 99` |
| Meta-Llama-3.1-8B-Instruct | 71.9 | `-ngl 99` |
"""

# https://github.com/LostRuins/koboldcpp/issues/1780 (a comment's table)
PHASE_COLUMNS = """\
|           | Prompt processing |  Generation |
|-----------|-------------------|-------------|
| LLama.cpp |     1490 tokens/s | 30 tokens/s |
| Koboldcpp with no KV offload |       34 tokens/s |  5 tokens/s |
"""


def test_a_table_the_user_wrote_gives_its_first_rows_run() -> None:
    facts = _facts(RTX_2080_TABLE)
    assert facts.value("run.decode_tps") == 110.6
    assert facts.value("config.n_gpu_layers") == 99  # the row's own cell
    assert facts.value("model.name") == "Qwen3-4B Q4_K_M"  # the row's model, the post's one quantisation
    assert facts.value("host.gpu[0].name") == "NVIDIA GeForce RTX 2080"
    phases = _facts(PHASE_COLUMNS)  # the header names each column's phase
    assert phases.value("run.prefill_tps") == 1490.0 and phases.value("run.decode_tps") == 30.0


def test_a_device_written_as_a_slug_and_a_sentence_starting_with_i() -> None:
    # https://github.com/AlexsJones/llmfit/pull/1013: the title names the machine as a slug
    post = ROOT / "bench/data/public_posts/053.txt"
    facts = _facts(post.read_text(encoding="utf-8"))
    assert facts.value("host.gpu[0].name") == "Apple M4" and facts.value("run.decode_tps") == 11.1
    # https://github.com/LostRuins/koboldcpp/issues/1294 (the reporter's comment): prose, not a log's "I " level
    assert _facts("I tried and got about 0.14 tokens/sec.\n").value("run.decode_tps") == 0.14


# https://github.com/ollama/ollama/issues/17916 (the runner line and the reporter's table, as posted)
QUOTA_SWEEP = """\
cmn init: llama threadpool init, n_threads = 8

| `num_thread` | tok/s (llama3.2:3b, q4) |
|---|---|
| 8 (auto-detected) | **0.27** |
| 4 (matches quota) | **12.07** |
| 2 | 9.09 |
"""

# https://github.com/ggml-org/llama.cpp/issues/1665 (the reporter's table, as posted: one dash a cell, a bound)
DEFAULT_THREADS_SWEEP = """\
Current performance for `Wizard-Vicuna-30B-Uncensored.ggmlv3.q4_0.bin` model:

| command | tokens/second |
| - | - |
| -ngl 2000000 | N/A (less than 0.1) |
| -t 7 | 1.6 |
| -t 7 -ngl 2000000 | 8.5 |
"""


def test_a_posts_own_thread_sweep_names_the_thread_count(rulebase) -> None:  # type: ignore[no-untyped-def]
    facts = _facts(QUOTA_SWEEP)  # a num_thread column against a tok/s column
    assert (facts.value("run.threads_fast"), facts.value("run.threads_fast_tps")) == (4, 12.07)
    assert (facts.value("run.threads_slow"), facts.value("run.threads_slow_tps")) == (8, 0.27)
    facts = _facts(FEWER_THREADS)  # "16 threads = 0.83t/s", "7 threads = 6.56t/s" in sentences
    assert (facts.value("run.threads_fast"), facts.value("run.threads_slow")) == (7, 16)
    # rows compared only where all else is the same: -t 7 -ngl against -ngl alone (the default count), never
    # against -t 7 without -ngl; "less than 0.1" is a bound, never the run's speed
    facts = _facts(DEFAULT_THREADS_SWEEP)
    assert (facts.value("run.threads_fast"), facts.value("run.threads_fast_tps")) == (7, 8.5)
    assert facts.value("run.threads_slow_tps") == 0.1 and not facts.has("run.threads_slow")
    assert facts.value("run.decode_tps") == 1.6
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert report.assessment is not None and (report.assessment.id, report.assessment.cls) == ("LD517", "cpu.threads")


def test_a_sweep_that_changes_little_is_not_a_thread_problem() -> None:
    facts = _facts(ORANGE_PI)  # 7 t/s, then 6.92 t/s with -t 4
    assert not facts.has("run.threads_fast_tps")


def test_a_pasted_post_is_read_as_its_lines_and_cited_at_the_users_lines() -> None:
    """A post quoted in markdown or behind docker compose's prefix: the prose is read from the paste's logical
    lines (doctor/core/paste.py), each fact citing the line the user pasted."""
    for prefix in ("> ", "ollama-1  | "):
        facts = _facts("".join(prefix + line + "\n" for line in QUOTA_SWEEP.splitlines()))
        assert (facts.value("run.threads_fast"), facts.value("run.threads_fast_tps")) == (4, 12.07), prefix
        fact = facts.get("run.threads_fast_tps")
        assert fact is not None and fact.source.line == 6 and fact.source.name == NAME
