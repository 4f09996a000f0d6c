"""Crash causes of a run's set-up, rows of the crash table (crashes.py) for engines that have no parser of
their own: a tensor-parallel size that does not divide the attention heads, a ROCm library that finds no
kernel data for this GPU, and a sequence longer than the room DeepSpeed-Inference reserved. Pure data.

Strings: DeepSpeed deepspeed/module_inject/replace_module.py (v0.9.0-v0.10.x: "{param} ({value}) must be
divisible by mp_size ({mp_size})"), tp_shard.py (v0.12: "Number of attention heads ({n}) must be divisible by
mp_size ({mp_size})"), containers/base.py ("To run the model parallel across the GPUs, the attention_heads
require to be divisible by the world_size!"); vLLM vllm/config.py verify_with_parallel_config (0.6.3; 0.11.0
vllm/config/model.py): "Total number of attention heads (%d) must be divisible by tensor parallel size (%d).";
hipBLASLt library/src/amd_detail/rocblaslt/src/tensile_host.cpp (rocm-6.0.0 .. develop): "rocblaslt error:
Cannot read %s: %s", "rocblaslt error: Could not load %s", "rocblaslt warning: No paths matched %s. Make sure
that HIPBLASLT_TENSILE_LIBPATH is set correctly." (the library goes on without the kernels: rocblaslt_abort()
is commented out); DeepSpeed csrc/transformer/inference/includes/inference_context.h (the workspace is sized
for max_out_tokens) and deepspeed/inference/engine.py (from v0.11.0 the input check "Input with size %d
exceeds maximum length of %d", the catalogue's deepspeed.input_exceeds_max_tokens); binfmt-support's
run-detectors ("unable to find an interpreter for %s") as the llamafile README's gotchas and cosmopolitan's
APE notes quote it.
"""

from __future__ import annotations

from doctor.sources.engines._ggml.cause import Cause, Fix

TP_HEADS = Cause(
    "tp_heads_indivisible", "The tensor-parallel size does not divide the model's attention heads",
    "Tensor parallelism gives each GPU an equal share of every layer's attention heads, so the number of GPUs "
    "it splits over must divide the head count (LLaMA-30B's 52 heads split over 1, 2, 4, 13, 26 or 52 GPUs, "
    "never 8). The engine refuses the setting before it loads anything; the model and the memory are fine.",
    Fix(
        "Use a tensor-parallel size that divides the number of attention heads (the model's config.json "
        "num_attention_heads; for 52 heads: 2 or 4), and reach more GPUs with pipeline parallelism where the "
        "engine has it, or with replicas.",
        checked="DeepSpeed deepspeed/module_inject/replace_module.py and tp_shard.py (the asserts), "
        "deepspeed/inference/config.py (tensor_parallel.tp_size, the older mp_size); vLLM vllm/config.py "
        "verify_with_parallel_config (--tensor-parallel-size, --pipeline-parallel-size); deepspeedai/DeepSpeed#3634 "
        "(a maintainer: by design, the heads must divide by the tensor-parallel degree)",
    ),
    ("AssertionError: num_heads (52) must be divisible by mp_size (8)",
     "AssertionError: Number of attention heads (52) must be divisible by mp_size (8)",
     "To run the model parallel across the GPUs, the attention_heads require to be divisible by the world_size!",
     "ValueError: Total number of attention heads (52) must be divisible by tensor parallel size (8)."),
)

HIPBLASLT_DATA = Cause(
    "hipblaslt_kernels_missing", "hipBLASLt found no kernel library for this GPU, so matrix products run on "
    "slower fallback kernels",
    "Not a crash: ROCm's hipBLASLt looks for its tuned kernel data (TensileLibrary*_<gfx target>.dat under its "
    "hipblaslt/library folder) relative to libhipblaslt.so, or where HIPBLASLT_TENSILE_LIBPATH points, and when "
    "the file for this GPU is not there it says so and goes on without those kernels: the model runs on the GPU, "
    "but its matrix multiplications fall back to slower generic ones. It happens when an application bundles "
    "its own copy of the ROCm libraries without hipBLASLt's data folder, or when the ROCm release ships no "
    "data for this GPU generation.",
    Fix(
        "Give hipBLASLt its kernel data: set HIPBLASLT_TENSILE_LIBPATH to the hipblaslt/library folder of the "
        "ROCm install (e.g. /opt/rocm/lib/hipblaslt/library) that holds TensileLibrary files for this gfx "
        "target, or install a build / ROCm release that ships them for this GPU.",
        checked="hipBLASLt library/src/amd_detail/rocblaslt/src/tensile_host.cpp (HIPBLASLT_TENSILE_LIBPATH, the "
        "library path relative to the .so, the two errors; rocblaslt_abort() commented out); mudler/LocalAI#10672 "
        "(its ROCm images bundled rocBLAS's data but not hipBLASLt's: fixed by copying hipblaslt/library and "
        "exporting HIPBLASLT_TENSILE_LIBPATH)",
    ),
    ('rocblaslt error: Cannot read "TensileLibrary_lazy_gfx1201.dat": No such file or directory',
     'rocblaslt error: Could not load "TensileLibrary_lazy_gfx1201.dat"',
     "rocblaslt warning: No paths matched DIR. Make sure that HIPBLASLT_TENSILE_LIBPATH is set correctly."),
)

DEEPSPEED_RESERVE = Cause(
    "deepspeed_tokens_past_reserve", "The sequence outgrew the KV cache DeepSpeed-Inference reserved "
    "(max_out_tokens)",
    "deepspeed.init_inference with kernel injection reserves its workspace - the KV cache and activations - for "
    "max_out_tokens tokens (the config's max_tokens, 1024 by default) when the model is wrapped. A prompt plus "
    "new tokens longer than that runs past the reserved cache, and releases before 0.11 did not check it: the "
    "kernels write outside their buffers and CUDA reports an illegal memory access, usually at the first long "
    "request (0.11 and later refuse such an input with 'Input with size N exceeds maximum length').",
    Fix(
        "Reserve room for the longest sequence: deepspeed.init_inference(model, ..., max_tokens=N) (max_out_tokens "
        "in older configs) with N at least the prompt plus the new tokens; or keep requests under 1024 tokens. "
        "A newer DeepSpeed names the overflow instead of crashing.",
        checked="DeepSpeed deepspeed/inference/config.py (max_out_tokens: Field(1024, alias='max_tokens')), "
        "csrc/transformer/inference/includes/inference_context.h GenWorkSpace (the workspace sized for "
        "max_out_tokens), deepspeed/inference/engine.py _generate (the input check from v0.11.0); "
        "deepspeedai/DeepSpeed#3758 (a maintainer: 1024 by default, pass max_out_tokens=2048; the reporter "
        "confirmed it ran)",
    ),
    ("RuntimeError: CUDA error: an illegal memory access was encountered   (a DeepSpeed-Inference run: "
     "init_inference, mp_size, deepspeed/ops/transformer/inference frames)",),
)

APE_NO_INTERPRETER = Cause(
    "ape_no_interpreter", "The system found no interpreter for the program's executable format, so it never ran",
    "A llamafile is an Actually Portable Executable (APE): one file that starts like a Windows MZ program and "
    "runs on Linux through a shell header or an `ape` loader. Distributions that register MZ programs with "
    "binfmt_misc (binfmt-support's `cli` entry for Mono, WINE, WSL's interop) hand it to that interpreter "
    "instead, and binfmt-support's run-detectors, finding none that accepts it, refuses to start it. The "
    "model and the hardware were never reached.",
    Fix(
        "Register the APE loader with binfmt_misc (sudo wget -O /usr/bin/ape https://cosmo.zip/pub/cosmos/bin/"
        "ape-$(uname -m).elf; sudo chmod +x /usr/bin/ape; sudo sh -c \"echo ':APE:M::MZqFpD::/usr/bin/ape:' "
        ">/proc/sys/fs/binfmt_misc/register\"); on WSL turn off the Windows interop that claims MZ files (sudo sh "
        "-c \"echo -1 > /proc/sys/fs/binfmt_misc/WSLInterop\").",
        checked="Mozilla-Ocho/llamafile README.md (Gotchas: the ape loader's binfmt_misc registration, WSLInterop); "
        "jart/cosmopolitan README.md (Linux platform notes: run-detectors); "
        "mozilla-ai/llamafile#513 (the maintainer pointed to the gotchas, the reporter confirmed)",
    ),
    ("run-detectors: unable to find an interpreter for ./llava-v1.5-7b-q4.llamafile",),
)

SETUP_CAUSES: tuple[Cause, ...] = (TP_HEADS, HIPBLASLT_DATA, DEEPSPEED_RESERVE, APE_NO_INTERPRETER)
