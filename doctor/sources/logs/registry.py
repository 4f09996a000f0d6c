"""The parsers `analyze` runs: each engine's parser from the engine table (doctor/core/engines.py), then
the parsers that belong to no engine (crash messages of any engine, settings pasted beside a log).
Add an engine with its table row, not here."""

from __future__ import annotations

from doctor.core import engines
from doctor.sources.logs.base import LogParser


def engine_parser_classes() -> list[type[LogParser]]:
    """The table's parsers, each once, in table order."""
    classes: list[type[LogParser]] = []
    for spec in engines.parser_specs():
        cls = engines.load(spec)
        if not (isinstance(cls, type) and issubclass(cls, LogParser)):
            raise TypeError(f"engine parser {spec} is not a LogParser")
        classes.append(cls)
    return classes


def parser_classes() -> list[type[LogParser]]:
    from doctor.sources.logs.crashes import CrashParser
    from doctor.sources.logs.devices import DeviceLineParser
    from doctor.sources.logs.llama_bench import LlamaBenchParser
    from doctor.sources.logs.pasted import PastedParser

    # PastedParser reads settings and output pasted beside a log, DeviceLineParser the hardware pasted with it;
    # neither they nor CrashParser cast an engine vote. LlamaBenchParser reads llama-bench's results (a
    # llama.cpp tool with no engine row of its own).
    return [*engine_parser_classes(), CrashParser, PastedParser, DeviceLineParser, LlamaBenchParser]
