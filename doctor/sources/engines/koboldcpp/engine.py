"""KoboldCpp's row of the engine table (doctor/core/engines.py).

KoboldCpp (LostRuins/koboldcpp) bundles llama.cpp, so its logs hold llama.cpp's own load and memory lines
beside its launcher's (koboldcpp.py) and its adapter's (gpttype_adapter.cpp). Its settings are its
launcher's flags, read from koboldcpp.py's argparse at v1.50.1..v1.76: `--contextsize`, `--gpulayers`,
`--blasbatchsize` (one of -1, 32 .. 2048), `--threads`. Flash attention (`--flashattention`) and the KV type
(`--quantkv 0|1|2`) have no one-to-one form here and are said in words by the rules.
"""

from __future__ import annotations

from doctor.core.engines import Engine, Spelling
from doctor.sources.engines.llamacpp.engine import ENGINE as LLAMACPP

FLAGS = {"n_ctx": "--contextsize {v}", "n_gpu_layers": "--gpulayers {v}", "n_batch": "--blasbatchsize {v}",
         "n_threads": "--threads {v}"}

ENGINE = Engine(
    "koboldcpp", "KoboldCpp", "doctor.sources.engines.koboldcpp.parser:KoboldCppParser", wraps=LLAMACPP.name,
    spelling=Spelling(FLAGS),
    launch="doctor.sources.engines.koboldcpp.launch:LAUNCH"
)
