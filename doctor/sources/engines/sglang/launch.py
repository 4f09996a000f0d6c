"""How SGLang's launch commands read (doctor/sources/logs/launch.py): `python -m sglang.launch_server`, its image
(lmsysorg/sglang, a CUDA build), and its flags from ServerArgs (--context-length, --tp-size / --tp,
--max-running-requests, --chunked-prefill-size, --kv-cache-dtype). Pure data.
"""

from __future__ import annotations

from doctor.sources.engines.sglang.engine import ENGINE
from doctor.sources.logs.launch_flags import Flag, Launch, same

LAUNCH = Launch(
    ENGINE.name,
    modules=("sglang.launch_server",),
    images=("lmsysorg/sglang",),
    gpu_image=True,
    flags={
        "--context-length": Flag("config.max_model_len"),
        **same(Flag("config.tensor_parallel_size"), "--tp-size", "--tp"),
        "--max-running-requests": Flag("config.max_num_seqs"),
        "--chunked-prefill-size": Flag("config.max_num_batched_tokens"),
        "--kv-cache-dtype": Flag("config.kv_cache_dtype", "str"),
    },
)
