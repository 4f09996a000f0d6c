"""llama-cpp-python's row of the engine table (doctor/core/engines.py): the C API through Python.

Defaults: n_threads = os.cpu_count() // 2, flash attention off, swa_full true (llama_cpp/llama.py).
Its logs are llama.cpp's with its own lines: the llama.cpp parser reads both (it reads this
folder's patterns through this folder's handlers, parser.py). It starts as llama.cpp does (the model
loader's lines). The embedded engine: scan's short trace and watch's default run go through it.
"""

from __future__ import annotations

from doctor.core.engines import Engine, Spelling
from doctor.sources.engines.llama_cpp_python.crash_fixes import FIXES
from doctor.sources.engines.llamacpp.engine import ENGINE as LLAMACPP
from doctor.sources.engines.llamacpp.engine import PARSER

# RunSettings field -> Llama() keyword argument; "{v}" the value, the other fields: doctor/judge/fixmap.py
ARGS = {
    "n_ctx": "n_ctx={v}", "n_threads": "n_threads={v}", "n_threads_batch": "n_threads_batch={v}",
    "n_batch": "n_batch={v}", "n_ubatch": "n_ubatch={v}", "n_gpu_layers": "n_gpu_layers={v}",
    "type_k": "type_k=llama_cpp.GGML_TYPE_{V}", "type_v": "type_v=llama_cpp.GGML_TYPE_{V}",
    "flash_attn": "flash_attn={v}",
    "use_mmap": "use_mmap={v}", "use_extra_bufts": "use_extra_bufts={v}", "temperature": "temperature={v}",
    "repeat_penalty": "repeat_penalty={v}", "repeat_last_n": "last_n_tokens_size={v}", "top_k": "top_k={v}",
    "top_p": "top_p={v}", "min_p": "min_p={v}",
}
# sampling is an argument of each completion call (Llama.create_completion / __call__ /
# create_chat_completion), not of Llama(): llama_cpp/llama.py
CALL = "llm.create_chat_completion(..., {})"
SAMPLING = ("temperature", "repeat_penalty", "top_k", "top_p", "min_p")

ENGINE = Engine(
    "llama-cpp-python", "llama-cpp-python", PARSER, wraps=LLAMACPP.name,
    spelling=Spelling(ARGS, join=", ", wrap="Llama(..., {})", wraps=dict.fromkeys(SAMPLING, CALL)),
    embedded=True, short="lcp",
    fixes=FIXES,
)
