"""The llama.cpp family on real logs: recorded llama-cpp-python runs and llama.cpp lines from issues.

Each case names the finding that must lead, its class, lines that must be cited as evidence, and a
piece of the fix a user would paste. Healthy logs must produce no warning or error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.sources.logs.entry import analyze_bytes

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
LCP = ROOT / "llama-cpp-python"
LC = ROOT / "llama.cpp"

CASES = [
    # file, leading rule, class, evidence line numbers that must be cited, text the fix must contain
    (LCP / "prompt-too-long.log", "LD201", "context.overflow", [2130], "n_ctx="),
    (LCP / "generation-past-context.log", "LD202", "context.overflow", [2120], "n_ctx="),
    (LCP / "generation-cut-at-context.log", "LD202", "context.overflow", [], "max_tokens"),
    (LCP / "kv-f32.log", "LD701", "kv.dtype", [], "GGML_TYPE_F16"),
    (LCP / "quantized-v-without-fa.log", "LD703", "kv.dtype", [1121], "flash_attn=True"),
    (LCP / "truncated-model.log", "LD901", "model.corrupt", [1], "re-download"),
    (LCP / "missing-model.log", "LD902", "model.corrupt", [5], "model_path"),
    (LC / "cuda-oom-weights.log", "LD301", "oom.weights", [35, 36, 37], "-ngl"),
    (LC / "cuda-oom-compute.log", "LD303", "oom.compute", [35, 36, 37], "-ub"),
    (LC / "cuda-oom-kv.log", "LD302", "oom.kv_cache", [29, 30], "-ctk q8_0"),
    (LC / "cuda-oom-runtime.log", "LD304", "oom.runtime", [22], "-ngl"),
    (LC / "host-oom-weights.log", "LD301", "oom.weights", [12, 13, 14], "mmap"),
    (LC / "rocm-vulkan-metal-oom.log", "LD301", "oom.weights", [4, 5, 6], "-ngl"),
    (LC / "vulkan-oom-kv.log", "LD302", "oom.kv_cache", [13, 14, 15, 16], "--ctx-size"),
    (LC / "metal-oom-runtime.log", "LD304", "oom.runtime", [12], "-ngl"),
    (LC / "partial-offload-slow.log", "LD504", "offload.partial", [28], "-ngl all"),
    (LC / "server-slots-truncated.log", "LD203", "context.overflow", [62], "--parallel 4"),
    (LC / "server-context-exceeded.log", "LD202", "context.overflow", [44, 47], "--ctx-size"),
    (LC / "server-generation-end-no-shift.log", "LD202", "context.overflow", [54], "--ctx-size"),
    (LC / "cpu-only-build-ngl.log", "LD501", "offload.none", [1, 2], "-DGGML_CUDA"),
    (LC / "pasted-issue-crlf.log", "LD302", "oom.kv_cache", [17], "--ctx-size"),
    (LC / "slow-load-threads.log", "LD512", "cpu.threads", [23], "-t "),
]


@pytest.mark.parametrize(("path", "rule", "cls", "lines", "fix"), CASES, ids=[c[0].name for c in CASES])
def test_diagnosis(analyze, path: Path, rule: str, cls: str, lines: list[int], fix: str) -> None:
    report = analyze(path)
    assert report.assessment is not None, [f.id for f in report.findings]
    assert (report.assessment.id, report.assessment.cls) == (rule, cls)
    finding = next(f for f in report.findings if f.id == rule)
    for line in lines:
        assert line in finding.lines, (line, finding.lines)
    commands = " ".join([finding.fix.text, *finding.fix.by_engine.values()])
    assert fix in commands, commands


@pytest.mark.parametrize("path", [LCP / "healthy.log", LCP / "healthy-chat.log", LCP / "mmap-off.log",
                                  LC / "server-json-era-a.log"], ids=lambda p: p.name)
def test_healthy_logs_have_no_warning_or_error(analyze, path: Path) -> None:
    report = analyze(path)
    assert not report.fails("warning"), [(f.id, f.message) for f in report.findings]


def test_the_two_context_failures_are_told_apart_by_their_numbers(analyze, tmp_path: Path) -> None:
    """Issue 37, item 2: a prompt of 3500 tokens in a 4096 slot, then llama-server's "context shift is
    disabled" (sent for a slot that is generating when the next token has no cell): generation ran into
    the end of the context (LD202) leads; "the prompt does not fit" is not said. The same lines with a
    prompt that fills the slot are the prompt's fault (LD201)."""
    report = analyze(LC / "server-generation-end-no-shift.log")
    assert report.assessment is not None and report.assessment.id == "LD202"
    assert "LD201" not in {f.id for f in report.findings}
    assert "ctx_full" in [e.kind for e in report.facts.events() if e.line == 54]
    assert report.facts.events("ctx_full")[0].data == {"n_tokens": 3500, "n_ctx": 4096}
    text = (LC / "server-generation-end-no-shift.log").read_text(encoding="utf-8")
    whole = tmp_path / "prompt-fills-slot.log"
    whole.write_text(text.replace("n_prompt_tokens = 3500", "n_prompt_tokens = 4096"), encoding="utf-8")
    report = analyze(whole)
    assert report.assessment is not None and report.assessment.id == "LD201", [f.id for f in report.findings]
    assert "prompt_too_long" in [e.kind for e in report.facts.events() if e.line == 54]


def test_slow_load_is_found_beside_the_threads(analyze) -> None:
    report = analyze(LC / "slow-load-threads.log")
    slow = next(f for f in report.findings if f.id == "LD101")
    assert "100 MB/s" in slow.message and slow.cls == "io.slow_load"


def test_the_engine_is_detected(analyze) -> None:
    assert analyze(LCP / "healthy.log").engine == "llama-cpp-python"
    assert analyze(LC / "server-slots-truncated.log").engine == "llama.cpp"
    report = analyze(LCP / "healthy.log")
    assert report.facts.value("engine.detect_confidence") == "high"


def test_facts_from_a_real_llama_cpp_python_run(analyze) -> None:
    facts = analyze(LCP / "healthy.log").facts
    assert facts.value("model.arch") == "llama" and facts.value("model.n_layer") == 30
    assert facts.value("model.n_head_kv") == 3 and facts.value("model.n_ctx_train") == 8192
    assert facts.value("config.n_ctx") == 2048 and facts.value("config.type_k") == "f16"
    assert facts.value("config.use_mmap") is True and facts.value("engine.gpu_offload_supported") is False
    assert facts.value("run.prompt_tokens") == 12 and facts.value("run.load_ms") > 0
    assert facts.value("run.weights_host_bytes") == int(92.10 * 2**20)
    assert facts.get("config.n_ctx").source.line == 1123


def test_server_era_b_timing_block_without_prefixes(analyze) -> None:
    facts = analyze(LC / "server-slots-truncated.log").facts
    assert facts.value("run.requests") == 2
    assert facts.value("run.prompt_tokens_max") == 3174
    assert facts.value("config.n_ctx_seq") == 2048 and facts.value("config.n_parallel") == 4
    assert facts.event_count("truncation") == 2 and facts.event_count("context_shift") == 1


def test_common_log_prefix_and_unified_kv(analyze) -> None:
    facts = analyze(LC / "server-context-exceeded.log").facts
    assert facts.value("config.kv_unified") is True and facts.value("config.flash_attn") == "enabled"
    assert facts.value("run.offloaded_layers") == 29 and facts.value("run.gpu_free_at_load") == 11402 * 2**20


def test_json_log_mode_and_era_a_timings(analyze) -> None:
    facts = analyze(LC / "server-json-era-a.log").facts
    assert facts.value("run.prompt_tokens") == 12 and facts.value("run.decode_tokens") == 128
    assert facts.value("config.n_ctx_seq") == 2048 and facts.value("config.n_threads") == 12


def test_pasted_crlf_quoted_wrapped_log(analyze) -> None:
    facts = analyze(LC / "pasted-issue-crlf.log").facts
    assert facts.value("model.n_layer") == 40 and facts.value("run.offloaded_layers") == 41
    assert facts.value("run.weights_gpu_bytes") == int(8694.21 * 2**20)
    [oom] = facts.events("oom")
    # placed by the run's timeline: after the weights (line 14), before any KV cache line
    assert oom.line == 17 and oom.phase == "kv_cache" and oom.data["phase_from"] == "timeline"
    assert [n for n, _ in oom.placed_by] == [14] and oom.data["placed_after"] == "weights"


def test_sampler_params_are_read(analyze) -> None:
    facts = analyze(LC / "cli-repetition.log").facts
    assert facts.value("sampling.temperature") == 0.0 and facts.value("sampling.top_k") == 1
    assert facts.value("sampling.repeat_penalty") == 1.0 and facts.value("sampling.seed") == 42
    assert "golden brown" in facts.value("run.output_text")


def test_old_sampling_block_and_legacy_buffers(analyze) -> None:
    facts = analyze(LC / "partial-offload-slow.log").facts
    assert facts.value("sampling.repeat_penalty") == 1.1 and facts.value("sampling.temperature") == 0.8
    assert facts.value("run.weights_gpu_bytes") == int(7788.28 * 2**20)
    assert facts.value("run.kv_host_bytes") == 352 * 2**20 and facts.value("run.kv_gpu_bytes") == 160 * 2**20
    assert facts.value("run.decode_tps") == 5.25


def test_the_gguf_header_dump_gives_the_model_shape() -> None:
    """A paste cut before print_info: the loader's "- kv" lines (src/llama-model-loader.cpp "%s: - kv %3d: %42s %-16s
    = %s"; these from ggml-org/llama.cpp#9112, corpus case 1090) give the shape the KV cache is sized from."""
    log = (b"llama_model_loader: - kv   0:                       general.architecture str              = phi3\n"
           b"llama_model_loader: - kv   7:                       general.license.link str              = "
           b"https://huggingface.co/microsoft/Phi-...\n"
           b"llama_model_loader: - kv  10:                        phi3.context_length u32              = 131072\n"
           b"llama_model_loader: - kv  11:  phi3.rope.scaling.original_context_length u32              = 4096\n"
           b"llama_model_loader: - kv  12:                      phi3.embedding_length u32              = 3072\n"
           b"llama_model_loader: - kv  14:                           phi3.block_count u32              = 32\n"
           b"llama_model_loader: - kv  15:                  phi3.attention.head_count u32              = 32\n"
           b"llama_model_loader: - kv  16:               phi3.attention.head_count_kv u32              = 32\n")
    facts = analyze_bytes(log)
    assert facts.value("engine.name") == "llama.cpp"
    shape = {name: facts.value(f"model.{name}") for name in ("arch", "n_ctx_train", "n_embd", "n_layer", "n_head",
                                                              "n_head_kv")}
    assert shape == {"arch": "phi3", "n_ctx_train": 131072, "n_embd": 3072, "n_layer": 32, "n_head": 32,
                     "n_head_kv": 32}
    # a LoRA adapter's own header (src/llama-adapter.cpp prints it in the same form) is not the model's
    adapter = analyze_bytes(b"llama_adapter_lora_init_impl: - kv   3:  llama.block_count u32 = 99\n")
    assert not adapter.has("model.n_layer")


# ggml-org/llama.cpp#1230 (the command and the load output as posted; corpus case 506): a cuBLAS build of
# 2023-04 under WSL2, no -ngl, --no-mmap
PINNED_2023 = """\
./main -m /mnt/wsl/ggml-vic13b-q5_0.bin -b 512 -t 12 --no-mmap
main: seed = 1682770733
llama.cpp: loading model from /mnt/wsl/ggml-vic13b-q5_0.bin
llama_model_load_internal: format     = ggjt v1 (latest)
llama_model_load_internal: n_vocab    = 32000
llama_model_load_internal: n_ctx      = 512
llama_model_load_internal: n_embd     = 5120
llama_model_load_internal: n_mult     = 256
llama_model_load_internal: n_head     = 40
llama_model_load_internal: n_layer    = 40
llama_model_load_internal: n_rot      = 128
llama_model_load_internal: ftype      = 8 (mostly Q5_0)
llama_model_load_internal: n_ff       = 13824
llama_model_load_internal: n_parts    = 1
llama_model_load_internal: model size = 13B
llama_model_load_internal: ggml ctx size = 8740093.73 KB
llama_model_load_internal: mem required  = 10583.25 MB (+ 1608.00 MB per state)
CUDA error 2 at ggml-cuda.cu:359: out of memory
"""


def test_2023_hyper_parameters_and_mem_required_come_before_the_weights(analyze, tmp_path: Path) -> None:
    """2023 builds print n_ctx among the hyper-parameters and "mem required" before the model's buffer is allocated
    (llama.cpp 2023-04 llama_model_load_internal): an out-of-memory right after is the weights', not the KV cache's;
    with no layers on the GPU and mmap off, the buffer that failed is pinned host memory (LD366)."""
    facts = analyze_bytes(PINNED_2023.encode())
    assert facts.value("config.n_ctx") == 512
    [oom] = facts.events("oom")
    assert oom.phase == "weights"
    path = tmp_path / "wsl.log"
    path.write_text(PINNED_2023)
    report = analyze(path)
    assert report.assessment is not None and (report.assessment.id, report.assessment.cls) == ("LD366", "oom.weights")
    lead = next(f for f in report.findings if f.id == "LD366")
    assert lead.fix.command is not None and "GGML_CUDA_NO_PINNED=1" in lead.fix.command
    with_layers = PINNED_2023.replace("--no-mmap", "--no-mmap -ngl 40")  # the card's memory: LD301's
    path.write_text(with_layers)
    assert analyze(path).assessment.id == "LD301"


@pytest.mark.parametrize(("line", "kind", "cls"), [
    # Vali-98/ChatterUI#332 (corpus case 1042): the app's own check of the file's magic
    ("Failed to create data: java.lang.IllegalArgumentException: File is not in GGUF format", "load_failed",
     "model.corrupt"),
    # Ollama's words for the same (fs/ggml/ggml.go, llm/ggml.go v0.1.33 on)
    ('Error: llama runner process has terminated: error loading model: invalid file magic', "load_failed",
     "model.corrupt"),
    # eullm/eullm#302 (corpus case 1079): a wrapper's words for llama_init_from_model returning NULL
    ("Failed to create context: null reference from llama.cpp", "context_failed", "oom.kv_cache"),
])
def test_a_wrappers_words_for_a_file_that_is_not_gguf_and_a_context_that_failed(
        analyze, tmp_path: Path, line: str, kind: str, cls: str) -> None:
    assert analyze_bytes(line.encode() + b"\n").events(kind)
    path = tmp_path / "app.log"
    path.write_text(line + "\n")
    report = analyze(path)
    assert report.assessment is not None and report.assessment.cls == cls
