"""llama.cpp's row of the engine table (doctor/core/engines.py): llama-cli and llama-server.

Defaults: one thread per physical core, flash attention auto, swa_full false; llama-server keeps
prompt states in host memory up to --cache-ram (`llama-server --help`: "default: 8192"). Flags:
common/arg.cpp. Start lines (see /work/shared/reference/engine_log_signatures.md): `build: N (hash)
with` (common/common.cpp, printed first by the tools) and `llama_model_loader: loaded meta data with
N key-value pairs` (src/llama-model-loader.cpp, the start of every model load; llama-cpp-python's
and Ollama's runner's too).
"""

from __future__ import annotations

from doctor.core.engines import Defaults, Engine, Metrics, Spelling, Starts
from doctor.sources.engines.llamacpp.crash_fixes import FIXES
from doctor.sources.engines.llamacpp.metrics import QUERIES

# RunSettings field -> the engine's form; "{v}" the value, the other fields: doctor/judge/fixmap.py
FLAGS = {
    "n_ctx": "--ctx-size {v}", "n_threads": "--threads {v}", "n_threads_batch": "--threads-batch {v}",
    "n_batch": "--batch-size {v}", "n_ubatch": "--ubatch-size {v}", "n_gpu_layers": "--n-gpu-layers {v}",
    "type_k": "--cache-type-k {v}", "type_v": "--cache-type-v {v}", "flash_attn": "--flash-attn {onoff}",
    "use_mmap": "{mmap}", "use_extra_bufts": "{repack}", "temperature": "--temp {v}",
    "repeat_penalty": "--repeat-penalty {v}", "repeat_last_n": "--repeat-last-n {v}", "top_k": "--top-k {v}",
    "top_p": "--top-p {v}", "min_p": "--min-p {v}",
}

PARSER = "doctor.sources.engines.llamacpp.parser:LlamaCppParser"

# its programs as a user or a wrapper starts them (llm-doctor reads the server's --help: probes/engine_flags.py)
BINARIES = ("llama-server", "llama-cli")

ENGINE = Engine(
    "llama.cpp", "llama.cpp", PARSER, aliases=("llama-server", "llama.cpp-library"),
    defaults=Defaults(threads="physical", flash_attn="auto", swa_full=False, prompt_cache_mib=8192),
    spelling=Spelling(FLAGS),
    starts=Starts((r"\bbuild: \d+ \([0-9a-f]+\) with ",
                   r"llama_model_loader: loaded meta data with \d+ key-value pairs"), again_after_run=True),
    fixes=FIXES,
    metrics=Metrics("llamacpp:.+", "llamacpp:requests_processing", QUERIES, prefix="llamacpp:", props=True),
    store="doctor.sources.engines.llamacpp.store:STORE", server="doctor.sources.engines.llamacpp.server:READER",
    launch="doctor.sources.engines.llamacpp.launch:LAUNCH"
)
