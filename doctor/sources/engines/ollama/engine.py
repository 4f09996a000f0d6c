"""Ollama's row of the engine table (doctor/core/engines.py).

Defaults: one thread per physical core, swa_full false. Settings: Modelfile PARAMETERs and the
server's environment (envconfig/config.go). Start line: `msg="Listening on ADDR (version X)"`
(server/routes.go, once per `ollama serve`); the llama.cpp runner it starts loads a model per
request, which is not a restart.
"""

from __future__ import annotations

from doctor.core.engines import Defaults, Engine, Semantics, Spelling, Starts
from doctor.sources.engines.llamacpp.engine import ENGINE as LLAMACPP
from doctor.sources.engines.ollama.crash_fixes import FIXES

# RunSettings field -> Modelfile parameter or server environment; "{v}" the value, the other fields:
# doctor/judge/fixmap.py
PARAMS = {
    "n_ctx": "PARAMETER num_ctx {v}", "n_threads": "PARAMETER num_thread {v}", "n_batch": "PARAMETER num_batch {v}",
    "n_gpu_layers": "PARAMETER num_gpu {v}", "type_k": "OLLAMA_KV_CACHE_TYPE={v}",
    "type_v": "OLLAMA_KV_CACHE_TYPE={v}", "flash_attn": "OLLAMA_FLASH_ATTENTION={bit}",
    "use_mmap": "PARAMETER use_mmap {lower}", "temperature": "PARAMETER temperature {v}",
    "repeat_penalty": "PARAMETER repeat_penalty {v}", "repeat_last_n": "PARAMETER repeat_last_n {v}",
    "top_k": "PARAMETER top_k {v}", "top_p": "PARAMETER top_p {v}", "min_p": "PARAMETER min_p {v}",
}

ENGINE = Engine(
    "ollama", "Ollama", "doctor.sources.engines.ollama.parser:OllamaParser", wraps=LLAMACPP.name,
    defaults=Defaults(threads="physical", swa_full=False), spelling=Spelling(PARAMS, join=" / "),
    starts=Starts((r"msg=\"?Listening on ",), wrapped_per_request=True),
    fixes=FIXES, semantics=Semantics("per_sequence", {"n_ctx": "config.num_ctx"}),
    store="doctor.sources.engines.ollama.store:STORE", server="doctor.sources.engines.ollama.server:READER",
    launch="doctor.sources.engines.ollama.launch:LAUNCH"
)
