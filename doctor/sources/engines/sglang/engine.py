"""SGLang's row of the engine table (doctor/core/engines.py).

A GPU server: no CPU thread setting. Settings are `python -m sglang.launch_server` flags
(srt/server_args.py, 0.3-0.5): --context-length, --mem-fraction-static (the share of GPU memory for
weights and the KV pool), --max-running-requests, --chunked-prefill-size, --max-total-tokens,
--cuda-graph-max-bs, --tp (tensor parallel size), --kv-cache-dtype. Start line: the server
arguments it logs first (`server_args=ServerArgs(...)` to 0.4, `server_args={...}` in 0.5).
"""

from __future__ import annotations

from doctor.core.engines import Defaults, Engine, Spelling, Starts

# setting -> launch_server flag; "{v}" the value (doctor/judge/changes.py)
FLAGS = {
    "n_ctx": "--context-length {v}", "mem_fraction_static": "--mem-fraction-static {v}",
    "max_running_requests": "--max-running-requests {v}", "chunked_prefill_size": "--chunked-prefill-size {v}",
    "max_total_tokens": "--max-total-tokens {v}", "cuda_graph_max_bs": "--cuda-graph-max-bs {v}",
    "tensor_parallel_size": "--tp {v}",
}

ENGINE = Engine(
    "sglang", "SGLang", "doctor.sources.engines.sglang.parser:SglangParser", defaults=Defaults(threads=None),
    spelling=Spelling(FLAGS), starts=Starts((r"server_args=(?:ServerArgs\(|\{)",)),
)
