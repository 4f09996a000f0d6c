"""How vLLM's launch commands read (doctor/sources/logs/launch.py): `vllm serve`, the OpenAI server module, its
image (vllm/vllm-openai, a CUDA build; rocm/vllm), and its flags from EngineArgs (vllm/engine/arg_utils.py:
--max-model-len, --gpu-memory-utilization, --max-num-seqs, --max-num-batched-tokens, --tensor-parallel-size /
-tp, --kv-cache-dtype). Pure data.
"""

from __future__ import annotations

from doctor.sources.engines.vllm.engine import ENGINE
from doctor.sources.logs.launch_flags import Flag, Launch, same

LAUNCH = Launch(
    ENGINE.name,
    programs=(ENGINE.name,),
    subcommands=("serve",),
    modules=("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"),
    images=("vllm-openai", "rocm/vllm"),
    gpu_image=True,
    flags={
        "--max-model-len": Flag("config.max_model_len"),
        "--gpu-memory-utilization": Flag("config.gpu_memory_utilization", "float"),
        "--max-num-seqs": Flag("config.max_num_seqs"),
        "--max-num-batched-tokens": Flag("config.max_num_batched_tokens"),
        **same(Flag("config.tensor_parallel_size"), "--tensor-parallel-size", "-tp"),
        "--kv-cache-dtype": Flag("config.kv_cache_dtype", "str"),
    },
)
