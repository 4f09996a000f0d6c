"""SGLang's row of the engine table (doctor/core/engines.py).

A GPU server: no CPU thread setting. Settings are `python -m sglang.launch_server` flags
(srt/server_args.py, 0.3-0.5): n_ctx is --context-length, n_batch the tokens of one prefill chunk
(--chunked-prefill-size), max_num_seqs the requests it runs at once (--max-running-requests); its own:
--mem-fraction-static (the share of GPU memory for weights and the KV pool), --max-total-tokens,
--cuda-graph-max-bs, --tp. Start line: the server arguments it logs first (`server_args=ServerArgs(...)`
to 0.4, `server_args={...}` in 0.5). Metrics: metrics.py.
"""

from __future__ import annotations

from doctor.core.engines import Defaults, Engine, Metrics, Semantics, Spelling, Starts
from doctor.sources.engines.sglang.metrics import QUERIES

# setting -> launch_server flag; "{v}" the value (doctor/judge/changes.py)
FLAGS = {
    "n_ctx": "--context-length {v}", "n_batch": "--chunked-prefill-size {v}",
    "max_num_seqs": "--max-running-requests {v}", "mem_fraction_static": "--mem-fraction-static {v}",
    "max_total_tokens": "--max-total-tokens {v}", "cuda_graph_max_bs": "--cuda-graph-max-bs {v}",
    "tensor_parallel_size": "--tp {v}",
}

# what its settings count (doctor/core/engines.py Semantics): --context-length is one request's, against
# the KV pool (max_total_num_tokens); --max-running-requests and --mem-fraction-static are read into its own facts
SEMANTICS = Semantics("per_request", {"n_ctx": "config.max_model_len",
                                      "max_num_seqs": "server.sglang.max_running_requests",
                                      "mem_fraction_static": "server.sglang.mem_fraction_static"})

ENGINE = Engine(
    "sglang", "SGLang", "doctor.sources.engines.sglang.parser:SglangParser", defaults=Defaults(threads=None),
    spelling=Spelling(FLAGS), semantics=SEMANTICS, starts=Starts((r"server_args=(?:ServerArgs\(|\{)",)),
    metrics=Metrics("sglang:.+", "sglang:num_running_reqs", QUERIES, prefix="sglang:"),
    launch="doctor.sources.engines.sglang.launch:LAUNCH"
)
