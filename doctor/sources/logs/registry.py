"""The parsers `analyze` runs: each engine's parser from the engine table (doctor/core/engines.py), then
the parsers that belong to no engine (crash messages of any engine, settings pasted beside a log, what a
client sent and got back: doctor/sources/clients; the catalogue's messages and the vocabulary's meanings).
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
    from doctor.sources.catalogue.meaning_parser import MeaningParser
    from doctor.sources.catalogue.parser import CatalogueParser
    from doctor.sources.clients.parser import ClientParser
    from doctor.sources.engines._ggml.crash_parser import CrashParser
    from doctor.sources.engines.llamacpp.bench_table import LlamaBenchParser
    from doctor.sources.logs.devices import DeviceLineParser
    from doctor.sources.logs.host_oom import HostOomParser
    from doctor.sources.logs.hostinfo import HostInfoParser
    from doctor.sources.logs.launch import LaunchParser
    from doctor.sources.logs.pasted import PastedParser
    from doctor.sources.logs.unexplained import UnexplainedParser

    # PastedParser reads settings and output pasted beside a log, ClientParser request budgets and reply
    # bodies, DeviceLineParser and HostInfoParser the hardware pasted with it (HostInfoParser also where the
    # engine put the work: Metal's working set, graph splits); none of them nor CrashParser casts an engine vote.
    # LlamaBenchParser (in llama.cpp's folder) reads llama-bench's results: a llama.cpp tool whose tables no
    # line of the engine's own parser resembles. CatalogueParser (every engine's catalogued messages) comes after
    # them: it asks whether a parser read a line already; MeaningParser (the vocabulary's meaning of what no
    # parser nor catalogue entry read) after it, asking both. HostOomParser reads the host running out of memory
    # (the kernel's OOM killer, SIGKILL), which no engine prints; LaunchParser launch commands (the engine they
    # start, their flags, a container's GPUs); UnexplainedParser, last, quotes the error lines nothing else read.
    return [*engine_parser_classes(), CrashParser, HostOomParser, LaunchParser, PastedParser, ClientParser,
            DeviceLineParser, HostInfoParser, LlamaBenchParser, CatalogueParser, MeaningParser, UnexplainedParser]
