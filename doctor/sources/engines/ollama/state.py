"""The Ollama parser's state and base: what one reading of a log keeps between lines (the memory
estimate, GPUs found, the runner's settings and deaths, access-log counts, the CLI statistics
blocks). Handlers: parser.py; the whole-input facts: summary.py.

Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.sources.engines.ollama.engine import ENGINE
from doctor.sources.logs.base import LogParser
from doctor.sources.logs.line import LogLine


@dataclass(slots=True)
class Offload:
    line: LogLine
    library: str | None = None
    requested: int | None = None
    model: int | None = None
    offload: int | None = None


@dataclass(slots=True)
class Cli:
    load_ms: float | None = None
    prompt_tokens: int | None = None
    prompt_ms: float | None = None
    prompt_tps: float | None = None
    eval_tokens: int | None = None
    eval_ms: float | None = None
    eval_tps: float | None = None
    total_ms: float | None = None
    line: LogLine | None = None
    prompt_line: LogLine | None = None  # the "prompt eval count" line
    rate_line: LogLine | None = None  # the "eval rate" line


@dataclass(slots=True)
class State:
    offload: Offload | None = None
    gpus: list[tuple[str, int | None, int | None]] = field(default_factory=list)  # name, total, free
    gpu_block_line: int = -10
    gpu_line: LogLine | None = None
    no_gpu_line: LogLine | None = None
    requests: int = 0
    errors_5xx: int = 0
    gin_line: LogLine | None = None
    cli: list[Cli] = field(default_factory=list)
    cli_current: Cli | None = None
    # `ollama run` parameters changed between generations: (name, value, line, CLI blocks before it)
    param_sets: list[tuple[str, str, LogLine, int]] = field(default_factory=list)
    memory: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> device -> bytes
    memory_line: LogLine | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_line: LogLine | None = None
    ctx_size: int | None = None
    parallel: int | None = None
    runner_line: LogLine | None = None
    start_s: float | None = None
    start_line: LogLine | None = None
    crashed_texts: set[str] = field(default_factory=set)
    gpu_failures: list[tuple[str, LogLine, str | None, str]] = field(default_factory=list)  # cause, line, code, text
    old_estimate_line: LogLine | None = None
    old_go_log: bool = False  # "llama.go:N:" lines: Ollama before v0.1.33
    served: int = 0  # inference requests answered since the last runner start
    # line, kind (cuda | cublas), requests served before it, an image being encoded just before it
    runner_ooms: list[tuple[LogLine, str, int, bool]] = field(default_factory=list)
    image_line: int = -1000
    progress: list[tuple[float, float, LogLine]] = field(default_factory=list)  # (seconds, fraction, line)
    evaluated: tuple[LogLine, str] | None = None  # the scheduler's "evaluating already loaded" and its model



class OllamaBase(LogParser):
    """The parser's name and state; the parser and its summary build on it."""

    name = ENGINE.name

    def __init__(self) -> None:
        super().__init__()
        self.s = State()
