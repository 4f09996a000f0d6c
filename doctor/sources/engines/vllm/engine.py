"""vLLM's row of the engine table (doctor/core/engines.py).

A GPU server: no CPU thread setting. Start lines: `vLLM API server version X`
(entrypoints/openai/api_server.py), then `Initializing a V1 LLM engine (vX) with config` /
`Initializing an LLM engine (vX) with config` (V1 core.py / V0 llm_engine.py): one start, two lines.
"""

from __future__ import annotations

from doctor.core.engines import Defaults, Engine, Starts

ENGINE = Engine(
    "vllm", "vLLM", "doctor.sources.engines.vllm.parser:VllmParser", defaults=Defaults(threads=None),
    starts=Starts((r"vLLM API server version \d", r"Initializing an? (?:V1 )?LLM engine \(v\d")),
)
