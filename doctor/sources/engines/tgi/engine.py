"""TGI's row of the engine table (doctor/core/engines.py): Hugging Face text-generation-inference.

Defaults are those of its llama.cpp backend (backends/llamacpp/src/main.rs): --n-threads defaults to
num_cpus::get(), flash attention on unless --disable-flash-attention. Flags: the launcher's
(launcher/src/main.rs: --max-input-tokens, --max-total-tokens, --max-batch-prefill-tokens,
--cuda-memory-fraction); the llama.cpp backend's own flags (--n-threads, --n-gpu-layers, ...) are not
spelled, since the launcher of the usual CUDA backend refuses them. Start line: the launcher's
`Args {` (launcher/src/main.rs, the first thing it logs).
"""

from __future__ import annotations

from doctor.core.engines import Defaults, Engine, Metrics, Semantics, Spelling, Starts
from doctor.sources.engines.llamacpp.engine import ENGINE as LLAMACPP
from doctor.sources.engines.tgi.crash_fixes import FIXES
from doctor.sources.engines.tgi.metrics import QUERIES

# setting -> the launcher's flag; "{v}" the value. n_ctx is the context of one request (prompt and new
# tokens: max_total_tokens); max_input_tokens and max_batch_prefill_tokens are TGI's own;
# gpu_memory_utilization is the share of GPU memory it may take (cuda_memory_fraction)
FLAGS = {
    "n_ctx": "--max-total-tokens {v}", "max_input_tokens": "--max-input-tokens {v}",
    "max_batch_prefill_tokens": "--max-batch-prefill-tokens {v}",
    "gpu_memory_utilization": "--cuda-memory-fraction {v}",
}

ENGINE = Engine(
    "tgi", "TGI", "doctor.sources.engines.tgi.parser:TgiParser", wraps=LLAMACPP.name,
    defaults=Defaults(threads="logical", flash_attn="enabled"), spelling=Spelling(FLAGS),
    semantics=Semantics("per_request", {"n_ctx": "config.max_total_tokens"}),
    starts=Starts((r"text_generation_launcher: Args \{",)),
    fixes=FIXES,
    metrics=Metrics("tgi_.+", "tgi_queue_size", QUERIES),
    launch="doctor.sources.engines.tgi.launch:LAUNCH"
)
