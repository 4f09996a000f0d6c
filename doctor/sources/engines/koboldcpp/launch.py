"""How KoboldCpp's launch commands read (doctor/sources/logs/launch.py): koboldcpp.py / koboldcpp(.exe) and its
CUDA 12 and no-CUDA builds, its flags from koboldcpp.py's argparse (v1.50.1..v1.76: --contextsize, --gpulayers,
--threads, --blasbatchsize). Pure data.
"""

from __future__ import annotations

from doctor.sources.engines.koboldcpp.engine import ENGINE
from doctor.sources.logs.launch_flags import Flag, Launch

LAUNCH = Launch(
    ENGINE.name,
    programs=(ENGINE.name, f"{ENGINE.name}_cu12", f"{ENGINE.name}_nocuda"),
    images=(ENGINE.name,),
    flags={"--contextsize": Flag("config.n_ctx"), "--gpulayers": Flag("config.n_gpu_layers"),
           "--threads": Flag("config.n_threads"), "--blasbatchsize": Flag("config.n_batch")},
)
