"""Engine start lines: where one engine run ends and the next begins inside one input.

journalctl across a restart, `cat a.log b.log`, a log that a server appends to run after run: each
engine start (its banner, or the model load that begins it) opens a new session, so that facts of
two runs are not mixed. A marker belongs to a family (the engine) and has an order inside one start
(vLLM prints its API server version, then initialises the engine: one start, two markers).

The strings are the engines' own (see /work/shared/reference/engine_log_signatures.md):
- llama.cpp (llama-server, llama-cli, llama-cpp-python, and Ollama's runner): `build: N (hash) with`
  (common/common.cpp, printed first by the tools), `llama_model_loader: loaded meta data with N
  key-value pairs` (src/llama-model-loader.cpp, the start of every model load);
- vLLM: `vLLM API server version X` (entrypoints/openai/api_server.py), `Initializing a V1 LLM engine
  (vX) with config` / `Initializing an LLM engine (vX) with config` (V1 core.py / V0 llm_engine.py);
- Ollama: `msg="Listening on ADDR (version X)"` (server/routes.go, once per `ollama serve`);
- TGI: the launcher's `Args {` (launcher/src/main.rs, first thing it logs).

Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# (family, order within one start, pattern fragment)
MARKERS: tuple[tuple[str, int, str], ...] = (
    ("llama.cpp", 0, r"\bbuild: \d+ \([0-9a-f]+\) with "),
    ("llama.cpp", 1, r"llama_model_loader: loaded meta data with \d+ key-value pairs"),
    ("vllm", 0, r"vLLM API server version \d"),
    ("vllm", 1, r"Initializing an? (?:V1 )?LLM engine \(v\d"),
    ("ollama", 0, r"msg=\"?Listening on "),
    ("tgi", 0, r"text_generation_launcher: Args \{"),
)
FRAGMENTS = tuple(f for _, _, f in MARKERS)
_START = re.compile("|".join(f"({f})" for f in FRAGMENTS).encode())


@dataclass(frozen=True, slots=True)
class StartMarker:
    family: str
    order: int


def start_marker(raw: bytes) -> StartMarker | None:
    """The engine start this line marks, or None."""
    m = _START.search(raw)
    if m is None or m.lastindex is None:
        return None
    family, order, _ = MARKERS[m.lastindex - 1]
    return StartMarker(family, order)


@dataclass(slots=True)
class OpenSession:
    """The session being read: where it began, and the start markers it has seen (family → order)."""

    first_line: int = 1
    started_by: str = "input"
    text: str | None = None
    markers: dict[str, int] | None = None

    def begins_new(self, marker: StartMarker, has_run: bool, ollama: bool) -> bool:
        """Whether `marker` starts another engine run rather than continuing this one.

        - the same engine starting again (a marker of a family already seen, at the same or an
          earlier step of its start) is a new run — for llama.cpp only once the first run did
          something (a draft model loads right after the main one, in the same process);
        - a first marker after the session already logged a run (events, run facts) is a restart;
        - Ollama loads a model (llama.cpp's loader lines) in a runner per request: not a restart.
        """
        seen = self.markers or {}
        if marker.family == "llama.cpp" and ollama:
            return False
        if marker.family in seen and marker.order <= seen[marker.family]:
            return has_run or marker.family != "llama.cpp"
        return marker.family not in seen and has_run

    def note(self, marker: StartMarker) -> None:
        if self.markers is None:
            self.markers = {}
        self.markers[marker.family] = marker.order
