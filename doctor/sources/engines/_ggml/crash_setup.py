"""Crash causes of a run's set-up, rows of the crash table (crashes.py) for engines that have no parser of
their own: a ROCm library that finds no kernel data for this GPU, a sequence longer than the room
DeepSpeed-Inference reserved, and a llamafile the system has no interpreter for. Pure data.

Strings: hipBLASLt library/src/amd_detail/rocblaslt/src/tensile_host.cpp (rocm-6.0.0 .. develop): "rocblaslt error:
Cannot read %s: %s", "rocblaslt error: Could not load %s", "rocblaslt warning: No paths matched %s. Make sure
that HIPBLASLT_TENSILE_LIBPATH is set correctly." (the library goes on without the kernels: rocblaslt_abort()
is commented out); DeepSpeed csrc/transformer/inference/includes/inference_context.h (the workspace is sized
for max_out_tokens) and deepspeed/inference/engine.py (from v0.11.0 the input check "Input with size %d
exceeds maximum length of %d", the catalogue's deepspeed.input_exceeds_max_tokens); binfmt-support's
run-detectors ("unable to find an interpreter for %s") as the llamafile README's gotchas and cosmopolitan's
APE notes quote it. (A tensor-parallel size that does not divide the heads is crash_config.py's, branch
miss-torch.)
"""

from __future__ import annotations

from doctor.sources.engines._ggml.cause import Cause, Fix

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

SETUP_CAUSES: tuple[Cause, ...] = (HIPBLASLT_DATA, DEEPSPEED_RESERVE, APE_NO_INTERPRETER)
