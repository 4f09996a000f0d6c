"""LM Studio's row of the engine table (doctor/core/engines.py).

LM Studio runs llama.cpp (its "llama.cpp" runtime extension) and prints llama.cpp's own lines; the app
is closed source, so what is read of it is the `lms` CLI (lmstudio-ai/lms src/subcommands/load.ts:
`lms load --context-length N --gpu max|off|0-1 --parallel N`) and the paths its llama.cpp lines carry.
Settings are spelled as `lms load` flags where the CLI has one (the context length); the rest of a fix
is said in words.
"""

from __future__ import annotations

from doctor.core.engines import Engine, Spelling
from doctor.sources.engines.llamacpp.engine import ENGINE as LLAMACPP

FLAGS = {"n_ctx": "lms load --context-length {v}"}

ENGINE = Engine(
    "lmstudio", "LM Studio", "doctor.sources.engines.lmstudio.parser:LmStudioParser", wraps=LLAMACPP.name,
    spelling=Spelling(FLAGS),
)
