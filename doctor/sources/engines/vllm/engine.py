"""vLLM's row of the engine table (doctor/core/engines.py).

A GPU server: no CPU thread setting. Flags: vllm/engine/arg_utils.py EngineArgs, one `--flag-name`
per field (the names its `args: Namespace(...)` start-up line prints: max_model_len,
gpu_memory_utilization, max_num_seqs, max_num_batched_tokens; fixtures/logs/vllm). Start lines:
`vLLM API server version X` (entrypoints/openai/api_server.py), then `Initializing a V1 LLM engine
(vX) with config` / `Initializing an LLM engine (vX) with config` (V1 core.py / V0 llm_engine.py):
one start, two lines.
"""

from __future__ import annotations

from doctor.core.engines import Defaults, Engine, Metrics, Semantics, Spelling, Starts
from doctor.sources.engines.vllm.crash_fixes import FIXES
from doctor.sources.engines.vllm.metrics import QUERIES

# setting -> the server flag; "{v}" the value. n_ctx is the context of one request (max_model_len),
# n_batch the tokens one scheduler step takes (max_num_batched_tokens); gpu_memory_utilization and
# max_num_seqs are vLLM's own settings (the share of GPU memory it may take, the sequences it runs at once)
FLAGS = {
    "n_ctx": "--max-model-len {v}", "n_batch": "--max-num-batched-tokens {v}",
    "gpu_memory_utilization": "--gpu-memory-utilization {v}", "max_num_seqs": "--max-num-seqs {v}",
}

ENGINE = Engine(
    "vllm", "vLLM", "doctor.sources.engines.vllm.parser:VllmParser", defaults=Defaults(threads=None),
    spelling=Spelling(FLAGS), semantics=Semantics("per_request", {"n_ctx": "config.max_model_len"}),
    starts=Starts((r"vLLM API server version \d", r"Initializing an? (?:V1 )?LLM engine \(v\d")),
    fixes=FIXES,
    metrics=Metrics("vllm:.+", "vllm:num_requests_running", QUERIES, prefix="vllm:"),
    server="doctor.sources.engines.vllm.server:READER",
    launch="doctor.sources.engines.vllm.launch:LAUNCH"
)
