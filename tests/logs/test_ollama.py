"""Ollama server.log in every era (v0.1.38 to v0.12), behind journald or bare, and the CLI statistics.

Each case runs the whole `analyze` pipeline on a fixture built from Ollama's own format strings, with
the llama.cpp runner's output read by the llama.cpp parser. It names the finding that must lead, the
lines it must cite and a piece of the Ollama fix. Healthy logs - including a CPU-only machine whose
estimate says `layers.offload=0` - must produce no warning or error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.sources.engines.ollama.patterns import go_duration_ms, slog_pairs, unwrap
from doctor.sources.logs.entry import analyze_bytes
from doctor.sources.logs.line import make_line

OLLAMA = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "ollama"

CASES = [
    # file, leading rule, class, evidence lines that must be cited, text the Ollama fix must contain
    ("truncation-v0.5.7.log", "LD252", "context.overflow", [71], "OLLAMA_CONTEXT_LENGTH=5632"),
    ("partial-offload-v0.5.7.log", "LD554", "offload.partial", [9], "smaller quant"),
    ("offload-to-gpu-v0.1.38.log", "LD550", "offload.partial", [7], "OLLAMA_NUM_PARALLEL=1"),
    ("offload-msg-v0.6.8.log", "LD550", "offload.partial", [6], "num_ctx"),
    ("avx-gated-v0.1.45.log", "LD552", "offload.none", [3], "CUSTOM_CPU_FLAGS"),
    ("avx-gated-v0.5.7.log", "LD552", "offload.none", [8], "-cpu host"),
    ("runner-oom-compute-v0.5.13.log", "LD303", "oom.compute", [41, 42, 43], "OLLAMA_FLASH_ATTENTION=1"),
    ("system-memory-v0.5.7.log", "LD553", "oom.weights", [10], "OLLAMA_MAX_LOADED_MODELS=1"),
    ("kv-quant-without-fa-v0.5.7.log", "LD751", "kv.dtype", [8], "OLLAMA_FLASH_ATTENTION=1"),
]


@pytest.mark.parametrize(("name", "rule", "cls", "lines", "fix"), CASES, ids=[c[0] for c in CASES])
def test_diagnosis(analyze, name: str, rule: str, cls: str, lines: list[int], fix: str) -> None:
    report = analyze(OLLAMA / name)
    assert report.engine == "ollama"
    assert report.facts.value("engine.detect_confidence") == "high"
    assert report.assessment is not None, [f.id for f in report.findings]
    assert (report.assessment.id, report.assessment.cls) == (rule, cls)
    finding = next(f for f in report.findings if f.id == rule)
    for line in lines:
        assert line in finding.lines, (line, finding.lines)
    assert finding.fix.engine == "ollama"
    assert finding.fix.command is not None and fix in finding.fix.command, finding.fix.command


@pytest.mark.parametrize("name", ["healthy-v0.5.7-journald.log", "healthy-v0.12.11-ollama-engine.log",
                                  "cpu-only-v0.5.7.log", "cli-verbose.log"])
def test_healthy_logs_have_no_warning_or_error(analyze, name: str) -> None:
    report = analyze(OLLAMA / name)
    assert report.engine == "ollama"
    assert not report.fails("warning"), [(f.id, f.message) for f in report.findings]


def test_num_ctx_above_training_is_capped_not_overflowed(analyze) -> None:
    """The warning sounds like a context beyond training; Ollama's numbers say it ran at the trained length."""
    report = analyze(OLLAMA / "context-too-large-v0.9.6.log")
    assert not report.fails("warning"), [(f.id, f.message) for f in report.findings]
    finding = next(f for f in report.findings if f.id == "LD253")
    assert finding.severity == "info" and 3 in finding.lines
    assert "131072" in finding.message and "32768" in finding.message
    assert finding.fix.command == "PARAMETER num_ctx 32768   (more is capped to it)"
    assert report.facts.value("config.num_ctx") == 32768
    assert {c.id: c.outcome for c in report.checks}["LD205"] != "fired"


def test_truncation_names_where_num_ctx_is_set(analyze) -> None:
    report = analyze(OLLAMA / "truncation-v0.5.7.log")
    finding = report.findings[0]
    assert "5120 tokens" in finding.message and "2048" in finding.message
    command = finding.fix.command or ""
    for place in ("PARAMETER num_ctx 5632", '"options": {"num_ctx": 5632}', "OLLAMA_CONTEXT_LENGTH=5632",
                  "ollama serve"):
        assert place in command, command
    # Ollama's num_ctx is per slot: "fewer slots" (LD203) would not help, so it is explained away
    assert {c.id: c.inhibited_by for c in report.checks}["LD203"] == "LD252"
    facts = report.facts
    assert facts.value("config.num_ctx") == 2048
    assert facts.value("config.n_parallel") == 4
    assert facts.value("run.prompt_tokens_max") == 5120


def test_three_eras_of_the_offload_line(analyze) -> None:
    era1 = analyze(OLLAMA / "offload-to-gpu-v0.1.38.log").facts  # layers.requested / layers.real
    assert era1.value("server.ollama.layers_offload") == 39
    assert era1.value("server.ollama.layers_model") == 41  # from the runner's "offloaded 39/41 layers"
    assert era1.value("server.ollama.memory_required_full") == int(24.4 * (1 << 30))
    era2 = analyze(OLLAMA / "partial-offload-v0.5.7.log").facts  # "offload to cuda" with layers.model
    assert (era2.value("server.ollama.layers_offload"), era2.value("server.ollama.layers_model")) == (5, 62)
    assert era2.value("server.ollama.memory_available") == int(23.3 * (1 << 30))
    assert era2.value("server.ollama.memory_weights") == int(385.0 * (1 << 30))
    era3 = analyze(OLLAMA / "offload-msg-v0.6.8.log").facts  # msg=offload library=cuda
    assert era3.value("server.ollama.library") == "cuda"
    assert (era3.value("server.ollama.layers_offload"), era3.value("server.ollama.layers_model")) == (30, 49)
    assert era3.value("run.offloaded_layers") == 30 and era3.value("run.total_layers") == 49


def test_cpu_only_machine_is_not_an_offload_problem(analyze) -> None:
    report = analyze(OLLAMA / "cpu-only-v0.5.7.log")
    assert report.facts.value("host.gpu.count") == 0
    assert report.facts.value("server.ollama.layers_offload") == 0
    outcomes = {c.id: c.outcome for c in report.checks}
    assert outcomes["LD551"] == "ok"  # library=cpu: no GPU to fill
    assert outcomes["LD503"] != "fired"


def test_runner_command_and_server_config(analyze) -> None:
    facts = analyze(OLLAMA / "healthy-v0.5.7-journald.log").facts
    assert facts.value("engine.version") == "0.5.7"
    assert facts.value("config.n_gpu_layers") == 33
    assert facts.value("config.n_threads") == 8
    assert facts.value("config.n_parallel") == 4
    assert facts.value("config.num_ctx") == 2048
    assert facts.value("server.ollama.num_parallel_env") == 0
    assert facts.value("server.ollama.flash_attention_env") is False
    assert facts.value("server.ollama.runner_start_s") == 2.51
    assert facts.value("host.gpu[0].name") == "NVIDIA GeForce RTX 4070"
    assert facts.value("run.requests") == 4 and facts.value("server.http_errors") == 0


def test_ollama_engine_memory_lines(analyze) -> None:
    facts = analyze(OLLAMA / "healthy-v0.12.11-ollama-engine.log").facts
    assert facts.value("server.ollama.layers_model") == 49
    assert facts.value("server.ollama.layers_offload") == 49  # GPULayers:49[...] of the load request
    assert facts.value("run.offloaded_layers") == 49  # "offloaded 49/49 layers to GPU", read by the llama.cpp parser
    assert facts.value("run.weights_gpu_bytes") == int(7.6 * (1 << 30))
    assert facts.value("run.weights_host_bytes") == int(787.5 * (1 << 20))
    assert facts.value("run.kv_bytes") == int(1.1 * (1 << 30))
    assert facts.value("config.flash_attn") == "enabled"
    assert not facts.has("config.use_mmap")  # UseMmap is a legacy field the Ollama engine ignores


def test_cli_statistics(analyze) -> None:
    facts = analyze(OLLAMA / "cli-verbose.log").facts
    assert facts.value("run.prompt_tokens") == 228
    assert facts.value("run.prefill_ms") == pytest.approx(61.204)
    assert facts.value("run.decode_tokens") == 138
    assert facts.value("run.decode_ms_total") == pytest.approx(2805.338)
    assert facts.value("run.decode_tps") == 49.19
    assert facts.value("run.load_ms") == pytest.approx(0.9257)  # 925.7µs
    assert facts.value("run.requests") == 2
    assert (facts.value("run.decode_tps_min"), facts.value("run.decode_tps_max")) == (49.06, 49.19)


def test_runner_death_is_not_counted_twice(analyze) -> None:
    """Ollama repeats the runner's last error in its own line; that is the same OOM, not a second one."""
    report = analyze(OLLAMA / "runner-oom-compute-v0.5.13.log")
    ooms = report.facts.events("oom")
    assert {e.phase for e in ooms} == {"compute"}
    assert [e.data.get("exit_status") for e in report.facts.events("crash")] == [None]
    assert report.facts.value("run.crashed") is True
    assert [f.id for f in report.findings] == ["LD303"]


def test_go_durations() -> None:
    assert go_duration_ms("4.0233s") == pytest.approx(4023.3)
    assert go_duration_ms("24.817ms") == pytest.approx(24.817)
    assert go_duration_ms("925.7µs") == pytest.approx(0.9257)
    assert go_duration_ms("1m12.5s") == pytest.approx(72500.0)
    assert go_duration_ms("12 tokens") is None


def test_slog_pairs() -> None:
    text = ('Jan 16 04:29:50 gpu-box ollama[1532]: time=2025-01-16T04:29:50.909Z level=INFO source=memory.go:356 '
            'msg="offload to cuda" layers.requested=-1 memory.available="[23.3 GiB]" "model layers"=62 split=""')
    pairs = slog_pairs(text)
    assert pairs["msg"] == "offload to cuda"
    assert pairs["layers.requested"] == "-1"
    assert pairs["memory.available"] == "[23.3 GiB]"
    assert pairs["model layers"] == "62"
    assert pairs["split"] == ""


def test_terminal_wrapped_record_is_rejoined() -> None:
    full = ('time=2025-01-20T09:13:13.850Z level=WARN source=runner.go:129 msg="truncating input prompt" limit=2048 '
            'prompt=5120 keep=4 new=2048')
    cut = 120
    line = make_line(1, full[:cut].encode(), full[cut:].encode())
    assert slog_pairs(unwrap(line))["prompt"] == "5120"
    quoted = make_line(1, full[:110].rstrip().encode(), full[110:].lstrip().encode())  # an issue quote wraps at spaces
    assert slog_pairs(unwrap(quoted))["keep"] == "4"


def test_journald_only_paste_is_ollama() -> None:
    log = (b"Feb 02 18:07:16 box ollama[901]: time=2025-02-02T18:07:16.004Z level=WARN source=runner.go:129 "
           b'msg="truncating input prompt" limit=4096 prompt=9112 keep=5 new=4096\n')
    facts = analyze_bytes(log)
    assert facts.value("engine.name") == "ollama"
    event = facts.events("truncation")[0]
    assert (event.data["n_ctx"], event.data["n_tokens"], event.data["n_keep"]) == (4096, 9112, 5)


def test_runner_exit_status_in_both_notations() -> None:
    log = (b'time=2024-11-02T10:00:00.000+01:00 level=ERROR source=sched.go:455 msg="error loading llama server" '
           b'error="llama runner process has terminated: exit status 0xc0000409"\n'
           b'time=2024-11-02T10:05:00.000+01:00 level=ERROR source=sched.go:455 msg="error loading llama server" '
           b'error="llama runner process has terminated: signal: killed"\n')
    facts = analyze_bytes(log)
    assert facts.value("engine.name") == "ollama"
    causes = [e.data.get("exit_status") or e.data.get("signal") for e in facts.events("crash")]
    assert causes == ["0xc0000409", "killed"]
    assert facts.value("run.exit_status") == 0xC0000409
    assert facts.value("run.crashed") is True


def test_every_produced_fact_is_catalogued(analyze) -> None:
    from doctor.core import catalog

    for path in sorted(OLLAMA.glob("*.log")):
        for fact in analyze(path).facts:
            assert catalog.is_known(fact.name), (path.name, fact.name)


# the scheduler's two DEBUG lines as ollama/ollama#7773 quoted them (v0.4.2, corpus case 409), and the same two
# in the v0.6.8+ form (server/sched.go: "resetting ..." logs the runner as a group, runner.model=<path>)
RELOAD_V042 = (
    b'time=2024-11-20T21:26:53.535-05:00 level=DEBUG source=sched.go:575 msg="evaluating already loaded" '
    b'model=C:\\Users\\user\\.ollama\\models\\blobs\\sha256-f7d8\n'
    b'time=2024-11-20T21:26:53.535-05:00 level=DEBUG source=sched.go:283 msg="resetting model to expire immediately '
    b'to make room" modelPath=C:\\Users\\user\\.ollama\\models\\blobs\\sha256-f7d8 refCount=0\n')
RELOAD_V068 = (
    b'time=2025-06-01T10:00:00.000Z level=DEBUG source=sched.go:584 msg="evaluating already loaded" '
    b'model=/root/.ollama/models/blobs/sha256-aa11\n'
    b'time=2025-06-01T10:00:00.001Z level=DEBUG source=sched.go:279 msg="resetting model to expire immediately '
    b'to make room" runner.name=registry.ollama.ai/library/qwen3:8b runner.size="6.1 GiB" runner.vram="6.1 GiB" '
    b'runner.num_ctx=8192 runner.parallel=1 runner.pid=4242 runner.model=/root/.ollama/models/blobs/sha256-aa11 '
    b'refCount=0\n')


@pytest.mark.parametrize("log", [RELOAD_V042, RELOAD_V068], ids=["v0.4.2", "v0.6.8"])
def test_same_model_reset_after_evaluation_is_a_reload(log: bytes) -> None:
    facts = analyze_bytes(log)
    assert facts.value("engine.name") == "ollama"
    [event] = facts.events("reload")
    assert (event.line, event.data["evaluated_line"]) == (2, 1)


def test_reset_for_another_model_is_not_a_reload() -> None:
    """Room made for a different model (max loaded models, memory) is eviction, not the options changing."""
    other = RELOAD_V068.replace(b"runner.model=/root/.ollama/models/blobs/sha256-aa11",
                                b"runner.model=/root/.ollama/models/blobs/sha256-bb22")
    assert not analyze_bytes(other).events("reload")
    alone = RELOAD_V042.split(b"\n", 1)[1]  # the reset with no evaluation before it
    assert not analyze_bytes(alone).events("reload")


def test_reload_is_named_with_the_ollama_fix(analyze, tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(RELOAD_V042)
    report = analyze(path)
    assert report.assessment is not None and report.assessment.id == "LD770"
    finding = next(f for f in report.findings if f.id == "LD770")
    assert finding.fix.engine == "ollama" and finding.fix.command is not None and "num_ctx" in finding.fix.command


def test_load_rate_from_the_runner_buffers_when_ollama_does_not_say_the_size() -> None:
    """ollama/ollama#5826 (corpus case 1009): the llama.cpp runner's buffer lines and server.go's progress lines."""
    log = (b"llm_load_tensors: offloaded 57/57 layers to GPU\n"
           b"llm_load_tensors:  CUDA_Host buffer size =    82.50 MiB\n"
           b"llm_load_tensors:      CUDA0 buffer size = 64571.65 MiB\n"
           b'time=2024-07-21T09:37:04.768Z level=DEBUG source=server.go:623 msg="model load progress 0.01"\n'
           b'time=2024-07-21T09:38:11.808Z level=DEBUG source=server.go:623 msg="model load progress 0.08"\n')
    facts = analyze_bytes(log)
    size = (64571.65 + 82.50) * (1 << 20)
    assert abs(facts.value("model.file_bytes") - size) < 1 << 20
    assert facts.value("run.load_mb_s") == pytest.approx(0.07 * size / 67.04 / 1e6, rel=0.01)
