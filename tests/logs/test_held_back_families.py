"""The families issue 27 names as missed on logs kept apart for judging, each on a log built from the
engine's own format strings (the tag and file each line comes from are given beside it):

- llama.cpp's --fit projection (src/llama.cpp llama_params_fit_impl b7416..b8660, common/fit.cpp b9917..):
  the context it cut is named as the cause when a prompt then does not fit, in llama.cpp's and Ollama's
  words, and its initial projection is not compared with what the cut plan allocated;
- koboldcpp's own launcher lines (koboldcpp.py v1.65..v1.76): --gpulayers without a GPU backend;
- Ollama's llama-server era scheduler (server/sched.go v0.30.0..v0.33.0-rc2): a runtime OOM;
- slow external storage during a vLLM load (vllm 0.8.5 loader.py / gpu_model_runner.py), as llama.cpp's
  and Ollama's loads were already (LD101);
- vLLM V1 preemption: silent in 0.8.5 (KV full with requests waiting, LD754), `Preemptions: N` in the
  stats line of 0.34 (LD750, fixtures/logs/vllm/preemption-v0.34.log).
"""

from __future__ import annotations

from pathlib import Path

from doctor.judge.evaluate import diagnose
from doctor.sources.logs.entry import analyze_bytes

FIT_B8660 = """\
build: 8660 (3b7f2a1c) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu
main: loading model
llama_params_fit_impl: projected to use 41850 MiB of device memory vs. 23542 MiB of free device memory
llama_params_fit_impl: cannot meet free memory target of 1024 MiB, need to reduce device memory by 19332 MiB
llama_params_fit_impl: context size reduced from 40960 to 4096 -> need 9980 MiB less memory in total
llama_params_fit_impl: filling dense layers back-to-front:
llama_params_fit_impl:   - CUDA0 (NVIDIA GeForce RTX 4090): 49 layers ( 1 overflowing),  22480 MiB used,   1062 MiB free
llama_params_fit: successfully fit params to free device memory
llama_params_fit: fitting params to free memory took 2.31 seconds
print_info: file size   = 18.40 GiB (4.85 BPW)
print_info: n_ctx_train      = 40960
print_info: n_layer          = 64
load_tensors: offloaded 49/65 layers to GPU
load_tensors:        CUDA0 model buffer size = 14105.42 MiB
load_tensors:   CPU_Mapped model buffer size =  4731.61 MiB
llama_context: n_ctx         = 4096
llama_context: n_ctx_seq     = 4096
llama_kv_cache:      CUDA0 KV buffer size =   768.00 MiB
llama_context:      CUDA0 compute buffer size =   368.00 MiB
slot update_slots: id  0 | task 0 | new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 6840
srv    send_error: task id = 0, error: the request exceeds the available context size, try increasing it
"""


def _report(text: str, rulebase):  # type: ignore[no-untyped-def]
    facts = analyze_bytes(text.encode(), "log")
    return facts, diagnose(facts, rulebase, command="analyze", mode="analyze")


def test_fit_cut_context_is_the_cause_of_the_refused_prompt(rulebase) -> None:
    facts, report = _report(FIT_B8660, rulebase)
    assert (facts.value("run.fit_ctx_from"), facts.value("run.fit_ctx_to")) == (40960, 4096)
    assert facts.value("run.fit_short_bytes") == 19332 << 20
    assert report.assessment is not None and report.assessment.id == "LD216", report.assessment
    found = {f.id: f for f in report.findings}
    assert "LD201" not in found and "LD217" not in found  # the cut context is the cause, said once
    assert "--fit-ctx" in found["LD216"].fix.by_engine.get("llama.cpp", "")
    # the projection was for the uncut plan: no "planner off by 26 GB" against what the cut plan allocated
    assert "LD316" not in found and not facts.has("derived.planner_name")


def test_fit_cut_context_without_a_refusal_is_a_warning_and_says_num_ctx_to_ollama(rulebase) -> None:
    text = "\n".join(ln for ln in FIT_B8660.splitlines() if "send_error" not in ln and "new prompt" not in ln)
    _, report = _report(text, rulebase)
    found = {f.id: f for f in report.findings}
    assert found["LD217"].severity == "warning" and "LD216" not in found
    assert "num_ctx" in found["LD217"].fix.by_engine.get("ollama", "")


def test_fit_standing_back_for_a_user_ngl_is_no_warning(rulebase) -> None:
    line = "llama_params_fit: failed to fit params to free device memory: n_gpu_layers already set by user to 99, abort"
    facts, report = _report(line + "\n", rulebase)
    assert not facts.events("message") and not [f for f in report.findings if f.severity != "info"]


def test_koboldcpp_gpu_layers_without_a_backend(rulebase) -> None:
    text = ("***\nWelcome to KoboldCpp - Version 1.76\n"
            "WARNING: GPU layers is set, but a GPU backend was not selected! GPU will not be used!\n"
            "Loading model: /models/Mistral-Nemo-Instruct-2407-Q4_K_M.gguf\n"
            "llm_load_tensors:        CPU buffer size =  7130.00 MiB\n")
    _, report = _report(text, rulebase)
    found = [f for f in report.findings if f.cls == "offload.none" and f.severity == "warning"]
    assert found and "--usecublas" in found[0].fix.text, report.findings


def test_ollama_runtime_oom_of_the_llama_server_era(rulebase) -> None:
    text = ('time=2026-05-20T09:14:02.331Z level=WARN source=sched.go:1648 msg="runtime OOM detected; expiring '
            'loaded models to clear memory before next request" model=qwen3:32b error="llama-server exited"\n')
    _, report = _report(text, rulebase)
    found = [f for f in report.findings if f.cls == "oom.runtime"]
    assert found and "OLLAMA_NUM_PARALLEL" in found[0].fix.text, report.findings


VLLM_085_NFS = """\
INFO 05-02 10:11:02 [api_server.py:1043] vLLM API server version 0.8.5
INFO 05-02 10:11:20 [gpu_model_runner.py:1329] Starting to load model /mnt/nfs/Llama-3.1-8B-Instruct...
INFO 05-02 10:26:30 [loader.py:458] Loading weights took 904.31 seconds
INFO 05-02 10:26:31 [gpu_model_runner.py:1347] Model loading took 14.9889 GiB and 910.120741 seconds
INFO 05-02 10:26:41 [kv_cache_utils.py:634] GPU KV cache size: 140,960 tokens
"""


def test_vllm_weights_read_at_a_few_mb_s_are_slow_storage(rulebase) -> None:
    facts, report = _report(VLLM_085_NFS, rulebase)
    assert 15 < facts.value("run.load_mb_s") < 20
    found = {f.id: f for f in report.findings}
    assert "LD105" in found and "--download-dir" in found["LD105"].fix.by_engine.get("vllm", "")
    fast = VLLM_085_NFS.replace("904.31", "7.31").replace("910.120741", "8.104122")
    _, report = _report(fast, rulebase)
    assert "LD105" not in {f.id for f in report.findings}


def test_vllm_v1_silent_preemption_is_named_by_the_kv_pool(rulebase) -> None:
    stats = ("INFO 05-02 10:12:{s:02d} [loggers.py:111] Engine 000: Avg prompt throughput: 1502.0 tokens/s, Avg "
             "generation throughput: 140.8 tokens/s, Running: 5 reqs, Waiting: {w} reqs, GPU KV cache usage: 99.9%, "
             "Prefix cache hit rate: 12.9%\n")
    text = "INFO 05-02 10:11:02 [api_server.py:1043] vLLM API server version 0.8.5\n" + "".join(
        stats.format(s=s, w=w) for s, w in ((10, 24), (20, 27), (30, 29)))
    _, report = _report(text, rulebase)
    assert "LD754" in {f.id for f in report.findings}, report.findings


def test_fit_lines_inside_an_ollama_log_get_ollamas_words(rulebase) -> None:
    # Ollama v0.32+ runs llama-server and writes its output through (llm/llama_server.go, memoryParsingWriter,
    # which reads these common_params_fit_impl lines itself); the fix is num_ctx, not -c
    head = (Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "wrappers"
            / "ollama-llama-server-era-v0.33.log").read_text().splitlines()[:4]
    fit = ["common_params_fit_impl: projected to use 30512 MiB of device memory vs. 15221 MiB of free device memory",
           "common_params_fit_impl: cannot meet free memory target of 1024 MiB, need to reduce device memory by "
           "16315 MiB",
           "common_params_fit_impl: context size reduced from 262144 to 32768 -> need 14336 MiB less memory in total",
           "common_params_fit_impl: entire model can be fit by reducing context",
           "llama_context: n_ctx         = 32768"]
    facts, report = _report("\n".join(head + fit) + "\n", rulebase)
    assert facts.value("engine.name") == "ollama"
    found = {f.id: f for f in report.findings}
    assert report.engine == "ollama" and "num_ctx" in found["LD217"].fix.by_engine.get("ollama", "")


def test_a_koboldcpp_log_is_koboldcpps_and_its_fixes_use_its_launchers_flags(rulebase) -> None:
    # koboldcpp.py v1.76: the welcome line and the dynamic library it loads; then the bundled llama.cpp's lines
    oom = (Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "llama.cpp" / "cuda-oom-weights.log").read_text()
    text = ("***\nWelcome to KoboldCpp - Version 1.76\nInitializing dynamic library: koboldcpp_cublas.so\n"
            "==========\nLoading model: /models/Qwen3-235B-A22B-Q4_K_M.gguf\n" + oom)
    facts, report = _report(text, rulebase)
    assert facts.value("engine.name") == "koboldcpp" and report.engine == "koboldcpp"
    found = {f.id: f for f in report.findings}
    assert found["LD301"].fix.command is not None and found["LD301"].fix.command.startswith("--gpulayers")
    # a change the rule spells is said with the launcher's flag too (LD201: n_ctx -> --contextsize)
    from doctor.core import engines

    assert engines.get("koboldcpp").spelling.spell({"n_ctx": 8192}) == "--contextsize 8192"


def test_sglang_weights_read_slowly_are_slow_storage(rulebase) -> None:
    # SGLang 0.5.x `Load weight end. elapsed=%.2f s, ...` (fixtures/logs/sglang/v0.5.23-input-longer-than-context.log)
    line = ("[2026-03-11 09:14:31 TP0] Load weight end. elapsed={s} s, type=LlamaForCausalLM, avail mem=63.10 GB, "
            "mem usage=15.06 GB.\n")
    facts, report = _report(line.format(s="912.40"), rulebase)
    assert facts.value("run.load_ms") == 912400.0
    assert "LD105" in {f.id for f in report.findings}
    _, report = _report(line.format(s="9.84"), rulebase)
    assert "LD105" not in {f.id for f in report.findings}
