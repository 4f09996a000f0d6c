"""The probe interface: what a probe is, the roots it reads, and the helper that writes its facts.

A probe has a `name`, a `cost` (passive | light | heavy: heavy ones run only with `scan --bench`),
the main facts it produces, and `collect(ctx) -> Facts`. `run_probe` calls it so that nothing a
probe does can crash the tool: an exception becomes *unknown* for the probe's facts, with the
reason. Inside a probe, `Reporter.read()` wraps each single read the same way.

`Roots` carries everything machine-specific a probe touches: the sysfs and proc roots, the NVML
and psutil modules (or recorded stand-ins from doctor/sources/probes/replay.py), and how to stat/resolve a path.
The defaults are this machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from doctor.core.facts import Facts, Source, Value
from doctor.core.sanitize import strip_controls

COSTS = ("passive", "light", "heavy")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Roots:
    """Where probes read from. Everything defaults to the live machine."""

    sysfs: str = "/sys"
    proc: str = "/proc"
    nvml: Any = None  # the pynvml module, a recorded stand-in, or None = import pynvml
    psutil: Any = None  # the psutil module, a recorded stand-in, or None = import psutil
    engine: Any = None  # recorded engine answers (dict), or None = ask llama_cpp
    bench: Any = None  # recorded heavy measurements (dict) when replaying; never measured then
    stat: Callable[[str], Any] = os.stat
    realpath: Callable[[str], str] = os.path.realpath
    affinity: Callable[[], set[int]] | None = None  # None = os.sched_getaffinity(0)
    recorded: str | None = None  # the recorded machine's name, when replaying one
    live: bool = True  # False when replaying: heavy probes must not touch this machine

    def sys(self, *parts: str) -> str:
        return os.path.join(self.sysfs, *parts)

    def procfs(self, *parts: str) -> str:
        return os.path.join(self.proc, *parts)


@dataclass(frozen=True, slots=True)
class ProbeContext:
    roots: Roots = field(default_factory=Roots)
    model_path: str | None = None  # the file to read (GGUF, read speed)
    storage_path: str | None = None  # the path to map to a disk, when it differs (a recorded machine)
    bench: bool = False
    bench_seconds: float = 8.0  # time budget of each heavy measurement
    threads: int | None = None  # the engine's thread count, for the ceilings measured at it


@dataclass(frozen=True, slots=True)
class Probe:
    name: str
    cost: str
    doc: str
    facts: tuple[str, ...]  # the main facts; marked unknown if the probe fails as a whole
    collect: Callable[[ProbeContext], Facts]

    def __post_init__(self) -> None:
        if self.cost not in COSTS:
            raise ValueError(f"probe {self.name}: cost must be one of {COSTS}")


class Reporter:
    """Writes one probe's facts with its source, and turns failed reads into unknowns."""

    def __init__(self, name: str, facts: Facts | None = None) -> None:
        self.name = f"probe.{name}"
        self.facts = facts if facts is not None else Facts()

    def source(self, text: str | None = None) -> Source:
        return Source("probe", self.name, text=strip_controls(text[:300]) if text else None)

    def set(self, name: str, value: Value, *, text: str | None = None) -> None:
        """Set a fact (its unit is the catalogue's); `text` says what was read, for the evidence."""
        if value is None:
            self.unknown(name, text or "not reported")
            return
        if isinstance(value, str):  # names read from files and drivers (a GGUF's general.name) are outside text
            value = strip_controls(value)
        self.facts.set(name, value, self.source(text))

    def unknown(self, name: str, reason: str) -> None:
        self.facts.unknown(name, reason, self.source(reason))

    def read(self, names: str | tuple[str, ...], fn: Callable[[], T], what: str = "") -> T | None:
        """Run one read; on any failure mark `names` unknown with the reason and return None."""
        try:
            return fn()
        except Exception as exc:
            reason = describe_error(exc, what)
            for name in (names,) if isinstance(names, str) else names:
                self.unknown(name, reason)
            return None


def describe_error(exc: BaseException, what: str = "") -> str:
    if isinstance(exc, FileNotFoundError):
        text = f"{exc.filename or what} not found"
    elif isinstance(exc, PermissionError):
        text = f"permission denied reading {exc.filename or what}"
    elif isinstance(exc, OSError):
        text = f"cannot read {exc.filename or what}: {exc.strerror or exc}"
    else:
        text = f"{what + ': ' if what else ''}{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:300]


def run_probe(probe: Probe, ctx: ProbeContext) -> Facts:
    """Call a probe so that it cannot raise: a crash becomes unknown facts with the reason."""
    try:
        facts = probe.collect(ctx)
    except Exception as exc:
        rep = Reporter(probe.name)
        reason = f"probe {probe.name} failed: {describe_error(exc)}"
        for name in probe.facts:
            rep.unknown(name, reason)
        facts = rep.facts
    facts.inputs.append(f"probe.{probe.name}")
    return facts


def read_text(path: str, limit: int = 1 << 20) -> str:
    """A small text file (sysfs / procfs attribute), stripped."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read(limit).strip()


def read_int(path: str) -> int:
    return int(read_text(path).split()[0])


def try_text(path: str) -> str | None:
    try:
        return read_text(path)
    except (OSError, ValueError):
        return None


def try_int(path: str) -> int | None:
    text = try_text(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None
