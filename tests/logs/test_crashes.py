"""The crash-cause table on the engines' own strings: each cause from at least two phrasings or versions
where they exist, the AMX crash from the recorded log (plain and behind journal prefixes), and the
crashes the table must leave to the generic rule or to the OOM rules.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.core import engines
from doctor.core.facts import Event
from doctor.judge.evaluate import diagnose
from doctor.sources.engines._ggml.crash_setup import SETUP_CAUSES
from doctor.sources.engines._ggml.crashes import CAUSES, GGML, fix_data
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.entry import analyze_bytes

CRASHES = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "crashes"
AMX_LOG = CRASHES / "amx-crash-llama-cpp-python.log"
OK_LOG = CRASHES / "amx-ok-no-extra-bufts.log"
JOURNAL = "Dec 04 17:41:02 xeon-vm python3[4242]: "


def causes(text: str) -> list[Event]:
    return analyze_bytes(text.encode()).events("crash_cause")


def report_of(text: str, rulebase):
    return diagnose(analyze_bytes(text.encode()), rulebase, command="analyze", mode="analyze")


def journal(text: str) -> str:
    return "".join(JOURNAL + line + "\n" for line in text.splitlines())


# -- the AMX / repack kernel crash ------------------------------------------------------------------

def test_the_recorded_amx_crash_is_named_with_no_repack(rulebase) -> None:
    report = report_of(AMX_LOG.read_text(), rulebase)
    assert report.assessment is not None and report.assessment.id == "LD960"
    finding = next(f for f in report.findings if f.id == "LD960")
    assert finding.cls == "engine.crash" and finding.confidence == "high"
    assert "AMX" in finding.message
    assert "--no-repack" in finding.fix.text
    assert "use_extra_bufts" in finding.fix.by_engine["llama-cpp-python"]
    assert "-nr" in finding.fix.by_engine["llama.cpp"]
    assert "0.32.2" in finding.fix.by_engine["ollama"]
    lines = AMX_LOG.read_text().splitlines()
    cited = {lines[n - 1] for n in finding.lines}
    assert any("AMX model buffer size" in line for line in cited)
    assert any("Fatal Python error: Segmentation fault" in line for line in cited)
    assert all(f.id != "LD950" for f in report.findings)  # the generic advice is explained away


def test_the_amx_crash_behind_journal_prefixes(rulebase) -> None:
    report = report_of(journal(AMX_LOG.read_text()), rulebase)
    assert report.assessment is not None and report.assessment.id == "LD960"
    assert report.assessment.confidence == "high"


def test_the_same_run_without_extra_buffers_has_no_crash(rulebase) -> None:
    text = OK_LOG.read_text()
    assert "AMX_INT8 = 1" in text  # an AMX build: the evidence alone is not a crash
    assert causes(text) == []
    report = report_of(text, rulebase)
    assert not [f for f in report.findings if f.cls == "engine.crash"]


def test_amx_weights_are_host_memory_not_gpu() -> None:
    facts = analyze_bytes(AMX_LOG.read_bytes())
    assert facts.value("run.weights_gpu_bytes") == 0
    assert "AMX" not in (facts.value("engine.backends") or [])


GDB = ('Thread 3 "python" received signal SIGSEGV, Segmentation fault.\n'
       "#0  0x00007ffff647c193 in ggml_backend_amx_mul_mat(ggml_compute_params const*, ggml_tensor*) () from "
       ".venv/lib/python3.11/site-packages/llama_cpp/lib/libggml-cpu.so.0\n"
       "#1  0x00007ffff645496f in ggml::cpu::amx::tensor_traits::compute_forward(ggml_compute_params*, "
       "ggml_tensor*) () from .venv/lib/python3.11/site-packages/llama_cpp/lib/libggml-cpu.so.0\n"
       "#2  0x00007ffff64544e6 in ggml_cpu_extra_compute_forward () from "
       ".venv/lib/python3.11/site-packages/llama_cpp/lib/libggml-cpu.so.0\n")
SYSTEM_LINE = ("system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | "
               "AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | "
               "AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |")
KERNEL_SEGV = ("Dec 04 17:41:03 xeon-vm kernel: llama-server[4242]: segfault at 0 ip 00007f3a1c2b4193 sp "
               "00007f39f7ffe8d0 error 4 in libggml-cpu.so[7f3a1c200000+1f0000] likely on CPU 1 (core 1, socket 0)")
SMPBOOT = ("Dec 04 09:00:00 xeon-vm kernel: smpboot: CPU0: Intel(R) Xeon(R) Platinum 8480+ (family: 0x6, "
           "model: 0x8f, stepping: 0x8)")


@pytest.mark.parametrize(("text", "confidence"), [
    (GDB, "high"),  # the gdb backtrace through the AMX kernel (../shared/reference/engine-crash-amx)
    ("load_tensors:          AMX model buffer size =    95.34 MiB\nSegmentation fault (core dumped)\n", "high"),
    ("load_backend: loaded CPU backend from /usr/lib/ollama/libggml-cpu-sapphirerapids.so\n"
     "time=2026-07-01T10:00:00.000Z level=ERROR source=server.go:452 msg=\"llama runner terminated\" "
     "error=\"signal: segmentation fault (core dumped)\"\n", "medium"),
    ("Dec 04 17:41:03 xeon-vm kernel: traps: ollama[811] general protection fault ip:7f3a1c2b4193 "
     "sp:7f39f7ffe8d0 error:0 in libggml-cpu-sapphirerapids.so[7f3a1c200000+400000]\n", "high"),
    (SYSTEM_LINE + "\nFatal Python error: Segmentation fault\n", "medium"),
    ("load_tensors:   CPU_REPACK model buffer size =  3942.00 MiB\nSegmentation fault (core dumped)\n", "medium"),
    # the journal cut the system line before AMX_INT8; only the CPU model says AMX
    (SMPBOOT + "\n" + journal(SYSTEM_LINE[:200]) + KERNEL_SEGV + "\n", "low"),
], ids=["gdb-backtrace", "amx-buffer-then-shell-segfault", "ollama-amx-variant", "kernel-gpf-in-amx-backend",
        "system-line-amx-build", "cpu-repack-buffer", "cut-system-line-cpu-model"])
def test_amx_crash_evidence_sets_the_confidence(text: str, confidence: str) -> None:
    found = causes(text)
    assert [(e.data["cause"], e.data["confidence"]) for e in found] == [("amx_repack", confidence)]


@pytest.mark.parametrize("text", [
    "Segmentation fault (core dumped)\n",  # no evidence: the generic rule's
    "load_tensors:          AMX model buffer size =    95.34 MiB\nllama_perf_context_print:        load time =  "
    "   944.36 ms\n",  # the AMX buffer without a crash
    KERNEL_SEGV + "\n" + SMPBOOT.replace("8480+", "8380 CPU @ 2.30GHz").replace("0x8f", "0x6a").replace(
        "0x8,", "0x6,") + "\n",  # an Ice Lake Xeon has no AMX
    SYSTEM_LINE + "\nDec 04 17:41:03 xeon-vm kernel: chrome[9120]: segfault at 10 ip 000055d0c1a2b3c4 sp "
    "00007ffc1d2e3f40 error 4 in chrome[55d0c0000000+9000000]\n",  # another program's segfault in the journal
], ids=["bare-segfault", "amx-buffer-no-crash", "ice-lake-xeon", "another-process"])
def test_no_amx_cause_without_both_crash_and_evidence(text: str) -> None:
    assert causes(text) == []


def test_a_bare_segfault_keeps_the_generic_finding(rulebase) -> None:
    report = report_of("llama_model_loader: loaded meta data with 33 key-value pairs and 272 tensors from "
                       "m.gguf (version GGUF V3 (latest))\nSegmentation fault (core dumped)\n", rulebase)
    assert report.assessment is not None and report.assessment.id == "LD950"


# -- the other causes, each in the engines' own words --------------------------------------------------

CASES = [
    # (id, log text, cause, words the detail or fix must hold)
    ("sigill-shell", "main: build = 4747 (d07c6213)\nIllegal instruction (core dumped)\n", "illegal_instruction",
     "GGML_NATIVE=OFF"),
    ("sigill-kernel", "Dec 04 10:00:00 host kernel: traps: llama-cli[2211] trap invalid opcode ip:7f3c2a1b4e10 "
     "sp:7ffd8c1f2a40 error:0 in libggml-cpu.so[7f3c2a000000+400000]\n", "illegal_instruction", "GGML_NATIVE=OFF"),
    ("kshift-2024", "/llama.cpp/llama.cpp:18021: Deepseek2 does not support K-shift\n",
     "context_shift_unsupported", "--no-context-shift"),
    ("kshift-early-2025", "/src/llama.cpp/src/llama.cpp:9638: The current context does not support K-shift\n",
     "context_shift_unsupported", "--no-context-shift"),
    ("kshift-2025", "/src/llama.cpp/src/llama-kv-cache.cpp:630: The current KV cache / model configuration does "
     "not support K-shift\n", "context_shift_unsupported", "num_ctx"),
    ("arch-2025-lcp", "llama_model_load: error loading model: error loading model architecture: unknown model "
     "architecture: 'llama4'\nllama_model_load_from_file_impl: failed to load model\nValueError: Failed to load "
     "model from file: models/Llama-4-Scout-17B-16E-Instruct-Q4_K_M.gguf\n", "unknown_architecture", "llama4"),
    ("arch-2026", "llama_model_load: error loading model: unknown model architecture: 'qwen9'\n",
     "unknown_architecture", "upgrade"),
    ("arch-ollama", "Error: this model is not supported by your version of Ollama. You may need to upgrade\n",
     "unknown_architecture", "upgrade Ollama"),
    ("illegal-access-ggml", "CUDA error: an illegal memory access was encountered\n  current device: 0, in "
     "function ggml_backend_cuda_synchronize at /src/ggml/src/ggml-cuda/ggml-cuda.cu:2570\n  "
     "cudaStreamSynchronize(cuda_ctx->stream())\n/src/ggml/src/ggml-cuda/ggml-cuda.cu:96: CUDA error\n",
     "cuda_illegal_address", "ggml_backend_cuda_synchronize"),
    ("illegal-access-2023", "CUDA error 700 at /tmp/llama.cpp/ggml-cuda.cu:6951: an illegal memory access was "
     "encountered\n", "cuda_illegal_address", "-fa off"),
    ("illegal-access-torch", "RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel "
     "errors might be asynchronously reported at some other API call, so the stacktrace below might be "
     "incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n", "cuda_illegal_address",
     "--enforce-eager"),
    ("no-kernel-image", "CUDA error: no kernel image is available for execution on the device\n  current "
     "device: 0, in function ggml_cuda_op_mul_mat at /src/ggml/src/ggml-cuda/ggml-cuda.cu:1753\n",
     "cuda_arch_missing", "CMAKE_CUDA_ARCHITECTURES"),
    ("driver-too-old", "CUDA error: CUDA driver version is insufficient for CUDA runtime version\n",
     "cuda_driver_old", "driver"),
    ("cublas-status-name", "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED\n  current device: 0, in function "
     "ggml_cuda_op_mul_mat_cublas at /src/ggml/src/ggml-cuda/ggml-cuda.cu:1312\n  cublasSgemm(ctx.cublas_handle"
     "(id), CUBLAS_OP_T, CUBLAS_OP_N, row_diff, src1_ncols, ne10, &alpha, src0_ddf_i, ne00, src1_ddf1_i, ne10, "
     "&beta, dst_dd_i, ldc)\n", "cublas_error", "ggml_cuda_op_mul_mat_cublas"),
    ("cublas-status-string", "CUDA error: the function failed to launch on the GPU\n  current device: 1, in "
     "function ggml_cuda_mul_mat_batched_cublas at /src/ggml/src/ggml-cuda/ggml-cuda.cu:1870\n  "
     "cublasGemmBatchedEx(ctx.cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, ne01, ne11, ne10, alpha, ptrs_src, "
     "CUDA_R_16F, nb01/nb00, ptrs_dst, CUDA_R_16F, nb11/nb10, beta, ptrs_dst, cu_data_type, ne01, ne23, "
     "cu_compute_type, CUBLAS_GEMM_DEFAULT_TENSOR_OP)\n", "cublas_error", "cublasGemmBatchedEx"),
    ("cublas-torch", "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, "
     "opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, "
     "compute_type, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`\n", "cublas_error", "CUBLAS_STATUS_NOT_SUPPORTED"),
    ("cuda-other", "CUDA error: operation not supported\n  current device: 0, in function ggml_cuda_set_device "
     "at /src/ggml/src/ggml-cuda/ggml-cuda.cu:88\n  cudaSetDevice(device)\n", "cuda_error", "ggml_cuda_set_device"),
    ("assert-n-batch-2025", "/src/llama.cpp/src/llama-context.cpp:1785: GGML_ASSERT(n_tokens_all <= "
     "cparams.n_batch) failed\n", "assert_n_batch", "n_batch="),
    ("assert-n-batch-2024", "GGML_ASSERT: /tmp/pip-install/vendor/llama.cpp/llama.cpp:8829: n_tokens_all <= "
     "cparams.n_batch\n", "assert_n_batch", "-b "),
    ("assert-non-causal", "/src/llama.cpp/src/llama-context.cpp:1787: GGML_ASSERT((cparams.causal_attn || "
     "cparams.n_ubatch >= n_tokens_all) && \"non-causal attention requires n_ubatch >= n_tokens\") failed\n",
     "assert_ubatch_embeddings", "-ub "),
    ("assert-encoder-2024", "GGML_ASSERT: llama.cpp:9269: cparams.n_ubatch >= n_tokens && \"encoder requires "
     "n_ubatch >= n_tokens\"\n", "assert_ubatch_embeddings", "n_ubatch="),
    ("assert-cpy-int-max", "/src/ollama/ml/backend/ggml/ggml/src/ggml-cuda/cpy.cu:295: GGML_ASSERT(ggml_nbytes"
     "(src0) <= INT_MAX) failed\n", "assert_cuda_cpy_2gb", "num_ctx"),
    ("assert-cpy-int-max-2024", "GGML_ASSERT: /go/src/github.com/ollama/ollama/llm/llama.cpp/ggml-cuda/cpy.cu:474:"
     " ggml_nbytes(src0) <= INT_MAX\n", "assert_cuda_cpy_2gb", "upgrade"),
    ("assert-sampler", "/src/llama.cpp/src/llama-sampling.cpp:431: GGML_ASSERT(cur_p.selected >= 0 && "
     "cur_p.selected < (int32_t) cur_p.size) failed\n", "assert_no_token_sampled", "-ngl 0"),
    ("assert-get-rows", "/src/ggml/src/ggml-cpu/ops.cpp:5240: GGML_ASSERT(i01 >= 0 && i01 < ne01) failed\n",
     "assert_token_out_of_vocab", "vocabulary"),
    ("assert-experts", "/src/llama.cpp/src/llama-model.cpp:1361: GGML_ASSERT(hparams.n_expert <= "
     "LLAMA_MAX_EXPERTS) failed\n", "assert_too_many_experts", "upgrade"),
    ("assert-host-alloc", "/src/ggml/src/ggml.c:1644: GGML_ASSERT(ctx->mem_buffer != NULL) failed\n",
     "assert_host_alloc", "n_ctx="),
    ("ollama-restates-runner", "/src/llama.cpp/src/llama-context.cpp:1785: GGML_ASSERT(n_tokens_all <= "
     "cparams.n_batch) failed\ntime=2025-03-02T10:11:12.345Z level=ERROR source=sched.go:455 msg=\"error loading "
     "llama server\" error=\"llama runner process has terminated: GGML_ASSERT(n_tokens_all <= cparams.n_batch) "
     "failed\"\n", "assert_n_batch", "num_batch"),
    # no code for the GPU's architecture: HIP's and CUDA's "invalid device function" (cudaErrorInvalidDeviceFunction,
    # hipErrorInvalidDeviceFunction) through ggml_cuda_error's block, rocBLAS's missing Tensile library
    ("hip-invalid-device-function", "ggml_cuda_compute_forward: RMS_NORM failed\nCUDA error: invalid device "
     "function\n  current device: 0, in function ggml_cuda_compute_forward at /src/ggml/src/ggml-cuda/ggml-cuda.cu:"
     "2513\n", "cuda_arch_missing", "HSA_OVERRIDE_GFX_VERSION"),
    ("rocblas-tensile", "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file "
     "or directory for GPU arch : gfx1036\n", "cuda_arch_missing", "gfx target"),
    # how the process ended (glibc strsignal through bash, Go's "signal: bus error", Windows NTSTATUS codes)
    ("bus-error-shell", "llama_model_loader: loaded meta data with 29 key-value pairs and 291 tensors from "
     "/mnt/nfs/m.gguf (version GGUF V3 (latest))\nBus error (core dumped)\n", "bus_error", "--no-mmap"),
    ("bus-error-ollama", "time=2025-01-09T08:01:02.003Z level=ERROR source=sched.go:455 msg=\"error loading llama "
     "server\" error=\"llama runner process has terminated: signal: bus error (core dumped)\"\n", "bus_error",
     "use_mmap false"),
    ("dll-not-found-ollama", "Error: llama runner process has terminated: exit status 0xc0000135\n", "dll_not_found",
     "Visual C++"),
    ("dll-not-found-ide", "Process finished with exit code -1073741515 (0xC0000135)\n", "dll_not_found",
     "CUDA runtime DLLs"),
    # the GPU generation lacks the data type or kernel (vLLM's checks, Triton's fp8 check)
    ("bf16-volta-vllm", "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
     "Your Tesla V100-SXM2-32GB GPU has compute capability 7.0. You can use float16 instead by explicitly setting "
     "the`dtype` flag in CLI, for example: --dtype=half.\n", "gpu_dtype_unsupported", "--dtype half"),
    ("quant-capability-vllm", "ValueError: The quantization method fp8 is not supported for the current GPU. "
     "Minimum capability: 89. Current capability: 80.\n", "gpu_dtype_unsupported", "--kv-cache-dtype auto"),
    ("triton-fp8e4nv", "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are "
     "('fp8e4b15', 'fp8e5')\")\n", "gpu_dtype_unsupported", "float16"),
    # TGI's custom kernels (CHECK_CUDA) on a machine without a GPU, from the router's error reply and a shard
    ("cuda-tensor-tgi-reply", '{"error":"Request failed during generation: Server error: query_layer must be a CUDA '
     'tensor","error_type":"generation"}\n', "cuda_kernels_without_gpu", "--disable-custom-kernels"),
    ("cuda-tensor-shard", "2023-09-02T10:11:12.000000Z ERROR text_generation_launcher: Method Decode encountered an "
     "error.\nRuntimeError: attention_mask must be a CUDA tensor\n", "cuda_kernels_without_gpu",
     "--disable-custom-kernels"),
    # configuration errors of the PyTorch servers (crash_config.py), from the corpus cases' own lines: vLLM's heads
    # check (corpus/1234, MIV-XJTU/FSDrive#21), DeepSpeed-Inference's (corpus/1279, deepspeedai/DeepSpeed#3634) and
    # TGI's custom_modeling wording (v1.0.0-v2.4.0 format string); NCCL's system error as vLLM's worker reported it
    # (corpus/1226) and as an Xinference user pasted it (corpus/1225: spaces lost); NCCL's shared-memory warning
    # (src/misc/shmutils.cc format string); the Ascend runtime's grid check (shared corpus 562, vllm-ascend)
    ("tp-heads-vllm", "ValueError: Total number of attention heads (12) must be divisible by tensor parallel size "
     "(8).\n", "tp_heads_indivisible", "sizes that divide them: 6, 4, 3"),
    ("tp-heads-deepspeed", "AssertionError: num_heads (52) must be divisible by mp_size (8)\n", "tp_heads_indivisible",
     "sizes that divide them: 4, 2, 1"),
    ("tp-heads-deepspeed-0.12", "AssertionError: Number of attention heads (40) must be divisible by mp_size (3)\n",
     "tp_heads_indivisible", "sizes that divide them: 2, 1"),
    ("tp-heads-tgi", "ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: 40 and "
     "`num_shards`: 3\n", "tp_heads_indivisible", "--num-shard"),
    ("nccl-system-vllm", "ERROR 06-13 07:35:59 [core.py:517] cupy_backends.cuda.libs.nccl.NcclError: "
     "NCCL_ERROR_SYSTEM_ERROR: unhandled system error (run with NCCL_DEBUG=INFO for details)\n", "nccl_system_error",
     "--ipc=host"),
    ("nccl-system-pasted", "VllM \uff1a NCCLerror: unhandled system error (run withNCCL DEBUG=INFo for details)\n",
     "nccl_system_error", "--shm-size"),
    ("nccl-shm-warn", "node1:318:3584 [5] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-tyjPbR "
     "to 9637892 bytes\n", "nccl_system_error", "--shm-size"),
    ("kernel-grid-ascend", "KernelLaunch failed because value 74688 for parameter coreDim is invalid.\n",
     "kernel_grid_too_large", "--max-num-seqs"),
    # outside the engine's code (crash_launch.py): the OS, the GPU's watchdog, a front-end's estimate; lines from
    # the corpus's cases 1088 (mozilla-ai/llamafile#513), 1025 (aaif-goose/goose#9669), 1012
    # (lmstudio-ai/lmstudio-bug-tracker#1038)
    ("ape-run-detectors", "$ ./llava-v1.5-7b-q4.llamafile --version\nrun-detectors: unable to find an interpreter for "
     "./llava-v1.5-7b-q4.llamafile\n", "ape_no_interpreter", "/usr/bin/ape"),
    ("metal-watchdog", "Prefill decode failed: Decode Error -3: unknown\n\n"
     "kIOGPUCommandBufferCallbackErrorImpactingInteractivity\ncommand buffer 0 failed with status 5\n"
     "failed to decode, ret = -3\n", "metal_gpu_watchdog", "--ubatch-size 256"),
    ("estimate-nan", "Error: Model loading was stopped due to insufficient system resources. Under the current "
     "settings, this model requires approximately NaN undefined of memory, and continuing to load it would likely "
     "overload your system and cause it to freeze.\n", "memory_estimate_nan", "0.3.28"),
]


@pytest.mark.parametrize(("text", "cause", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_cause_in_the_engines_words(rulebase, text: str, cause: str, words: str) -> None:
    found = causes(text)
    assert [e.data["cause"] for e in found] == [cause]
    report = report_of(text, rulebase)
    if cause == "cuda_driver_old":
        # a GPU backend that cannot start for a driver reason is offload.none (issue 15), which explains the abort
        assert report.assessment is not None and report.assessment.cls == "offload.none"
        assert "LD960" not in {f.id for f in report.findings}
        lead = next(f for f in report.findings if f.id == report.assessment.id)
        assert words in " ".join([lead.message, lead.fix.text, *lead.fix.by_engine.values()])
        return
    finding = next(f for f in report.findings if f.id == "LD960")
    assert finding.cls == "engine.crash"
    assert report.assessment is not None and report.assessment.id == "LD960"
    shown = " ".join([finding.message, finding.fix.text, *finding.fix.by_engine.values()])
    assert words in shown, shown
    assert not [f for f in report.findings if f.id in ("LD950", "LD901", "LD903")]


@pytest.mark.parametrize("text", [
    # corpus/1234's line cut by a terminal at 80 columns, and corpus/1279's by a notification's wrap at a space
    "ValueError: Total number of attention heads (12) must be divisible by tensor par\nallel size (8).\n",
    "AssertionError: num_heads (52) must be divisible by mp_size\n(8)\n",
], ids=["wrap80-mid-word", "wrapped-at-a-space"])
def test_a_wrapped_heads_check_is_read_joined(text: str) -> None:
    found = causes(text)
    assert [(e.data["cause"], e.line) for e in found] == [("tp_heads_indivisible", 1)]
    assert "sizes that divide them" in str(found[0].data.get("detail"))


def test_every_cause_has_a_case_and_a_fix_for_each_engine(rulebase) -> None:
    covered = {c[2] for c in CASES} | {"amx_repack"} | {c.id for c in SETUP_CAUSES}  # test_setup_causes.py
    assert covered == {c.id for c in CAUSES}
    explain = next(r for r in rulebase.rules if r.id == "LD960").explain
    assert all(c.id in explain for c in CAUSES)  # `llm-doctor explain LD960` lists them all
    for c in CAUSES:
        assert c.fix.text and c.fix.checked, c.id
        assert c.family, c.id
        data = fix_data(c)  # one fix per engine of the table, whatever engines it holds
        assert set(data) == {"fix"} | {f"fix_{e.key}" for e in engines.table()}, c.id
        assert all(text.strip() for text in data.values()), c.id


def test_a_crash_fix_is_a_settings_change_spelled_by_each_ggml_engine_and_a_new_engine_gets_it() -> None:
    batch = next(c for c in CAUSES if c.id == "assert_n_batch")
    data = fix_data(batch)
    assert data["fix_lcp"] == "Llama(..., n_batch=<tokens>, n_ubatch=<tokens>)"  # the binding's spelling
    assert data["fix_ollama"] == "PARAMETER num_batch <tokens>"  # Ollama spells n_batch only
    assert data["fix_tgi"] == batch.fix.text  # TGI's launcher has no batch-size flag of llama.cpp's kind
    assert data["fix_llama_cpp"] == "-b <tokens> -ub <tokens>"  # its own words win over its spelling
    assert data["fix_vllm"] == batch.fix.text  # vLLM runs no ggml: the change is not spelled for it
    row = engines.register(engines.Engine("newd", "Newd", wraps=GGML.name,
                                          spelling=engines.Spelling({"n_batch": "--batch {v}"})))
    try:
        assert fix_data(batch)["fix_newd"] == "--batch <tokens>"
        shift = next(c for c in CAUSES if c.id == "context_shift_unsupported")
        assert fix_data(shift)["fix_newd"] == shift.fix.text  # no n_ctx form: the words
        assert fix_data(shift)["fix_tgi"] == "--max-total-tokens <larger>"  # TGI wraps llama.cpp and spells n_ctx
        assert row.key == "newd"
    finally:
        engines.unregister("newd")


@pytest.mark.parametrize("text", [
    "CUDA error: out of memory\n  current device: 0, in function alloc at /src/ggml/src/ggml-cuda/ggml-cuda.cu:"
    "473\n  cuMemCreate(&handle, reserve_size, &prop, 0)\n/src/ggml/src/ggml-cuda/ggml-cuda.cu:96: CUDA error\n",
    "CUDA error 2 at /data/llama.cpp/ggml-cuda.cu:5509: out of memory\ncurrent device: 0\n",
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED\n  current device: 0, in function cublas_handle at "
    "/src/ggml/src/ggml-cuda/common.cuh:1534\n  cublasCreate(&cublas_handles[device])\n",
    "/src/llama.cpp/src/llama-context.cpp:1201: GGML_ASSERT(some_new_check) failed\n",
], ids=["cuda-oom", "cuda-oom-2023", "cublas-alloc-failed", "unknown-assert"])
def test_out_of_memory_and_unknown_asserts_are_not_table_causes(text: str) -> None:
    assert causes(text) == []


def test_an_oom_abort_still_leads_with_the_oom_rule(rulebase) -> None:
    text = ("load_tensors:        CUDA0 model buffer size =  7500.00 MiB\nllama_context: n_ctx = 8192\n"
            "llama_kv_cache:      CUDA0 KV buffer size =  1024.00 MiB\n"
            "sched_reserve:      CUDA0 compute buffer size =   560.00 MiB\n"
            "llama_perf_context_print: prompt eval time =     944.26 ms /     5 tokens\n"
            "CUDA error: out of memory\n  current device: 0, in function alloc at /src/ggml/src/ggml-cuda/"
            "ggml-cuda.cu:473\n  cuMemCreate(&handle, reserve_size, &prop, 0)\n"
            "/src/ggml/src/ggml-cuda/ggml-cuda.cu:96: CUDA error\n")
    report = report_of(text, rulebase)
    assert report.assessment is not None and report.assessment.cls.startswith("oom."), report.assessment


def test_a_followed_log_names_the_cause_as_it_grows() -> None:
    """watch --log feeds the same parsers in pieces and asks for snapshots in between."""
    analyzer = LogAnalyzer("follow")
    text = AMX_LOG.read_bytes()
    cut = text.index(b"Fatal Python error")
    analyzer.feed(text[:cut])
    assert analyzer.snapshot().events("crash_cause") == []
    analyzer.feed(text[cut:])
    first = analyzer.snapshot().events("crash_cause")
    assert [e.data["cause"] for e in first] == ["amx_repack"]
    assert [e.data["cause"] for e in analyzer.snapshot().events("crash_cause")] == ["amx_repack"]  # not doubled


def test_family_strings_match_their_cause() -> None:
    """The documented message families are real inputs: each non-evidence family line is matched."""
    for c in CAUSES:
        if c.id in ("amx_repack",):
            continue
        for example in c.family:
            if re.search(r"current device|^\s|ValueError|<|: CUDA error$", example):
                continue  # lines of a block, or a placeholder for any error text
            assert [e.data["cause"] for e in causes(example + "\n")] == [c.id], (c.id, example)


@pytest.mark.parametrize("prefixed", [False, True], ids=["file", "journal-on-stdin"])
def test_the_cli_names_the_amx_crash(prefixed: bool) -> None:
    """`llm-doctor analyze --format text` on the recorded crash, as a file and piped behind journal prefixes."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "NO_COLOR": "1"}
    if prefixed:
        args, stdin = ["-"], journal(AMX_LOG.read_text()).encode()
    else:
        args, stdin = [str(AMX_LOG)], None
    proc = subprocess.run([sys.executable, "-m", "doctor", "analyze", "--format", "text", *args], input=stdin,
                          capture_output=True, cwd=root, env=env, timeout=60)
    out = proc.stdout.decode()
    assert proc.returncode == 1, proc.stderr.decode()
    assert "Likely root cause: The engine crashed for a known reason" in out
    assert "AMX" in out and "--no-repack" in out


@pytest.mark.parametrize(("name", "amx"), [
    ("Intel(R) Xeon(R) Platinum 8480+", True),  # Sapphire Rapids
    ("Intel(R) Xeon(R) Gold 6430", True),
    ("Intel(R) Xeon(R) Platinum 8592+", True),  # Emerald Rapids
    ("Intel(R) Xeon(R) 6980P", True),  # Granite Rapids (Xeon 6, P-cores)
    ("Intel(R) Xeon(R) w7-3455", True),
    ("Intel Xeon Processor (SapphireRapids)", True),  # QEMU's CPU model name
    ("Intel(R) Xeon(R) Processor (family: 0x6, model: 0x8f, stepping: 0x8)", True),  # generic name, model id
    ("Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", False),  # Ice Lake
    ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", False),  # Cascade Lake
    ("Intel(R) Xeon(R) 6780E", False),  # Sierra Forest (E-cores): no AMX
    ("AMD EPYC 9654 96-Core Processor", False),
])
def test_cpu_models_with_amx(name: str, amx: bool) -> None:
    text = f"Dec 04 09:00:00 host kernel: smpboot: CPU0: {name}\nFatal Python error: Segmentation fault\n"
    assert bool(causes(text)) is amx


def test_an_empty_architecture_name_is_a_file_that_is_not_a_model(rulebase) -> None:
    # llama.cpp names '' when the GGUF has no general.architecture key (a cut or foreign file): that is the
    # model-file rules' finding, not "the architecture is newer than this build"
    text = ("llama_model_load: error loading model: error loading model architecture: unknown model architecture: ''\n"
            "llama_model_load_from_file_impl: failed to load model\n"
            "ValueError: Failed to load model from file: /tmp/model.gguf\n")
    assert not any(e.data.get("cause") == "unknown_architecture" for e in causes(text))
    ids = {f.id for f in report_of(text, rulebase).findings}
    assert "LD960" not in ids and ids & {"LD901", "LD903"}
