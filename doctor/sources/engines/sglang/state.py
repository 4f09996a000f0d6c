"""The SGLang parser's state between lines (a server's run: its batch lines' extremes and rates, its
retractions) and the base its parser and its fold build on (doctor/sources/engines/sglang/parser.py,
fold.py; the strings they read are named there).

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from doctor.core.facts import Source
from doctor.sources.logs.base import Extremes, LogParser

GEN_TPS_KEPT = 10000  # decode rates kept for the median (the first ones of a run)


@dataclass(slots=True)
class Run:
    running: Extremes
    queued: Extremes
    usage: Extremes
    gen_tps: list[tuple[float, Source]] = field(default_factory=list)
    retracted: int = 0
    retract_source: Source | None = None


def new_run() -> Run:
    return Run(Extremes(), Extremes(), Extremes())


class SglangBase(LogParser):
    """The parser's name and state (its line kinds are bound to the parser class, which holds the handlers)."""

    name = "sglang"
    # SGLang sizes its token pool after the weights (the timeline's own order), then captures CUDA graphs
    startup_next: ClassVar[Mapping[str, tuple[str, str]]] = {"kv": ("compute", "cuda_graphs")}

    def __init__(self) -> None:
        super().__init__()
        self.s = new_run()

    def _vote(self) -> None:
        self.votes["sglang"] += 1
