"""How llama.cpp's launch commands read (doctor/sources/logs/launch.py): llama-server, llama-cli and the
2023-24 names main / server (taken only with a model flag after them), its published images
(ghcr.io/ggml-org/llama.cpp:server-cuda, :full-rocm, ...), and its flags across versions from common/arg.cpp
(b5000, b10573: `{"-c", "--ctx-size"}`, `{"-t", "--threads"}`, `{"-tb", "--threads-batch"}`, `{"-b",
"--batch-size"}`, `{"-ub", "--ubatch-size"}`, `{"-ngl", "--gpu-layers", "--n-gpu-layers"}`, `{"-np",
"--parallel"}`, `{"-ctk", "--cache-type-k"}`, `{"-ctv", "--cache-type-v"}`, `{"-fa", "--flash-attn"}` on|off|auto
since 2025 and a bare switch before, `{"-cram", "--cache-ram"}` MiB, `{"-kvu", "--kv-unified"}`, `--no-mmap`,
`--mmap`, `--mlock`, `--numa`, `-fit` / `--fit`) and common/common.cpp of early 2024 (b2002: `-c`, `-t`, `-tb`,
`-b`, `-ngl`, `-np`, `--no-mmap`, `--mlock`). Until b6325 no GPU layers were placed unless asked (patterns.py).
Pure data.
"""

from __future__ import annotations

from doctor.sources.engines.llamacpp.engine import BINARIES, ENGINE
from doctor.sources.engines.llamacpp.patterns import NGL_DEFAULT_ALL_BUILD, OLD_BINARIES
from doctor.sources.logs.launch_flags import Flag, Launch, same

LAUNCH = Launch(
    ENGINE.name,
    programs=(*BINARIES, "llama-run"),
    model_flag_programs=tuple(dict.fromkeys(b.removesuffix(".exe") for b in OLD_BINARIES)),
    images=(ENGINE.name,),
    flags={
        **same(Flag("config.n_ctx"), "-c", "--ctx-size"),
        **same(Flag("config.n_threads"), "-t", "--threads"),
        **same(Flag("config.n_threads_batch"), "-tb", "--threads-batch"),
        **same(Flag("config.n_batch"), "-b", "--batch-size"),
        **same(Flag("config.n_ubatch"), "-ub", "--ubatch-size"),
        **same(Flag("config.n_gpu_layers"), "-ngl", "--gpu-layers", "--n-gpu-layers"),
        **same(Flag("config.n_parallel"), "-np", "--parallel"),
        **same(Flag("config.type_k", "str"), "-ctk", "--cache-type-k"),
        **same(Flag("config.type_v", "str"), "-ctv", "--cache-type-v"),
        **same(Flag("config.flash_attn", "onoff"), "-fa", "--flash-attn"),
        **same(Flag("config.cache_ram", "mib"), "-cram", "--cache-ram"),
        **same(Flag("config.kv_unified", const=True), "-kvu", "--kv-unified"),
        "--numa": Flag("config.numa", "str"),
        "--no-mmap": Flag("config.use_mmap", const=False),
        "--mmap": Flag("config.use_mmap", const=True),
        "--mlock": Flag("config.use_mlock", const=True),
    },
    layer_flags=("-ngl", "--gpu-layers", "--n-gpu-layers", "-fit", "--fit"),
    old_programs=tuple(b.removesuffix(".exe") for b in OLD_BINARIES),
    all_layers_from_build=NGL_DEFAULT_ALL_BUILD,
)
