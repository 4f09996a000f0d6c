"""How Ollama's launch commands read (doctor/sources/logs/launch.py): `ollama serve` / `ollama run`, its image
(ollama/ollama: CUDA libraries inside; :rocm), and its server environment (envconfig/config.go:
OLLAMA_CONTEXT_LENGTH, OLLAMA_NUM_PARALLEL, OLLAMA_FLASH_ATTENTION, OLLAMA_KV_CACHE_TYPE), set before the
command or with docker's -e. Pure data.
"""

from __future__ import annotations

from doctor.sources.engines.ollama.engine import ENGINE
from doctor.sources.logs.launch_flags import Flag, Launch

LAUNCH = Launch(
    ENGINE.name,
    programs=(ENGINE.name,),
    subcommands=("serve", "run"),
    images=(f"{ENGINE.name}/{ENGINE.name}",),
    gpu_image=True,
    env={"OLLAMA_CONTEXT_LENGTH": Flag("config.num_ctx"), "OLLAMA_NUM_PARALLEL": Flag("config.n_parallel"),
         "OLLAMA_FLASH_ATTENTION": Flag("config.flash_attn", "onoff"),
         "OLLAMA_KV_CACHE_TYPE": Flag("config.type_k", "str")},
)
