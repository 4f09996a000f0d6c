"""TGI's row of the engine table (doctor/core/engines.py): Hugging Face text-generation-inference.

Defaults are those of its llama.cpp backend (backends/llamacpp/src/main.rs): --n-threads defaults to
num_cpus::get(), flash attention on unless --disable-flash-attention. Start line: the launcher's
`Args {` (launcher/src/main.rs, the first thing it logs).
"""

from __future__ import annotations

from doctor.core.engines import Defaults, Engine, Starts
from doctor.sources.engines.llamacpp.engine import ENGINE as LLAMACPP

ENGINE = Engine(
    "tgi", "TGI", "doctor.sources.engines.tgi.parser:TgiParser", wraps=LLAMACPP.name,
    defaults=Defaults(threads="logical", flash_attn="enabled"),
    starts=Starts((r"text_generation_launcher: Args \{",)),
)
