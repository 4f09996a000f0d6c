"""How a launch command reads: the `Launch` each engine folder declares (its programs, images, flags across
versions, the fact each flag sets and how its value reads), and docker run's own options. Pure data for
doctor/sources/logs/launch.py; each engine's table is in its folder (doctor/sources/engines/<engine>/launch.py).

Each engine's spellings are read from its own argument definitions (cited in its launch.py); docker run's
options from its reference (docs.docker.com: --gpus, --runtime, --device, -e, --cpus, --cpuset-cpus, --memory,
--shm-size, --ipc).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Flag:
    """What one flag sets: `fact` from its value read as `kind` (int | float | str | mib | onoff), or the
    constant `const` for a switch that takes no value."""

    fact: str
    kind: str = "int"
    const: object = None

    @property
    def switch(self) -> bool:
        return self.const is not None


@dataclass(frozen=True, slots=True)
class Launch:
    """How one engine's launch commands read: the programs, subcommands and Python modules that start it, its
    published container images, its flags and server environment variables, and (llama.cpp) what its GPU
    layers default to. Each engine folder holds its own (`launch.py`, named by its row's `launch`)."""

    engine: str  # the engine table's name of the engine it starts
    programs: tuple[str, ...] = ()  # base names (lower case, no .exe / .py), taken with flags after them
    model_flag_programs: tuple[str, ...] = ()  # programs taken only with a model flag after them (old names)
    subcommands: tuple[str, ...] = ()  # a program taken only with one of these after it (`vllm serve`)
    modules: tuple[str, ...] = ()  # `python -m MODULE`
    images: tuple[str, ...] = ()  # what its published container images' names hold
    gpu_image: bool = False  # its image is a CUDA build whatever the tag says
    flags: Mapping[str, Flag] = field(default_factory=dict, hash=False)
    env: Mapping[str, Flag] = field(default_factory=dict, hash=False)  # server environment variables
    layer_flags: tuple[str, ...] = ()  # flags that place GPU layers (their absence: the default)
    old_programs: tuple[str, ...] = ()  # programs whose builds placed no GPU layers unless asked
    all_layers_from_build: int | None = None  # the build from which every layer is placed by default


def same(flag: Flag, *names: str) -> dict[str, Flag]:
    """The same setting under each of its spellings."""
    return dict.fromkeys(names, flag)


# docker run's options that take a value (the next token, or after `=`); the others are switches
DOCKER_VALUED = frozenset({
    "-e", "--env", "-v", "--volume", "-p", "--publish", "--name", "--gpus", "--cpus", "--cpuset-cpus", "-m",
    "--memory", "--memory-swap", "--shm-size", "--ipc", "--runtime", "--device", "--network", "--net",
    "--entrypoint", "-w", "--workdir", "--env-file", "--restart", "-u", "--user", "--mount", "-l", "--label",
    "--ulimit", "--cap-add", "--cap-drop", "--security-opt", "--platform", "--pull", "--add-host", "-h",
    "--hostname", "--log-driver", "--log-opt", "--group-add", "--tmpfs", "--health-cmd", "--stop-signal",
    "--pid", "--cgroupns",
})
# image tag words -> the backend the build has (llama.cpp: server-cuda, full-rocm, server-vulkan, ...)
TAG_BACKENDS: tuple[tuple[str, str], ...] = (
    ("cuda", "CUDA"), ("rocm", "ROCm"), ("vulkan", "Vulkan"), ("musa", "MUSA"), ("intel", "SYCL"),
)
