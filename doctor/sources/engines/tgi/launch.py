"""How TGI's launch commands read (doctor/sources/logs/launch.py): text-generation-launcher, its image
(ghcr.io/huggingface/text-generation-inference, a CUDA build), and its flags from launcher/src/main.rs
(--max-total-tokens, --max-input-tokens / --max-input-length, --max-batch-prefill-tokens, --num-shard,
--cuda-memory-fraction). Pure data.
"""

from __future__ import annotations

from doctor.sources.engines.tgi.engine import ENGINE
from doctor.sources.logs.launch_flags import Flag, Launch, same

LAUNCH = Launch(
    ENGINE.name,
    programs=("text-generation-launcher",),
    images=("text-generation-inference",),
    gpu_image=True,
    flags={
        "--max-total-tokens": Flag("config.max_total_tokens"),
        **same(Flag("config.max_input_tokens"), "--max-input-tokens", "--max-input-length"),
        "--max-batch-prefill-tokens": Flag("config.max_batch_prefill_tokens"),
        "--num-shard": Flag("config.num_shard"),
        "--cuda-memory-fraction": Flag("config.gpu_memory_utilization", "float"),
    },
)
