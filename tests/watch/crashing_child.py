"""A child that crashes the way llama.cpp's AMX kernel crashes, but only under one setting.

The real engine child (doctor/sources/live/embedded/child.py), except that the warm-up — the first decode of a
batch of two tokens, where `ggml_backend_amx_mul_mat` segfaults on an AMX Xeon — kills the process
with SIGSEGV while the given setting holds (faulthandler prints "Fatal Python error: Segmentation
fault" first, as in ../shared/reference/engine-crash-amx/crash-amx.log). Run by the runner as

    python -m tests.watch.crashing_child [--crash-when use_extra_bufts=true|always] --msg-fd N --t0 T

(a command substituted through `run_embedded(command=...)` or LLM_DOCTOR_ENGINE_CHILD).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from doctor.sources.live.embedded.child import ChildRun, main

CRASH_WHEN = "use_extra_bufts=true"


def crashes(settings: dict[str, Any], when: str) -> bool:
    if when == "always":
        return True
    key, _, value = when.partition("=")
    defaults = {"use_extra_bufts": True, "flash_attn": False, "use_mmap": True}
    return str(settings.get(key, defaults.get(key))).lower() == value.lower()


def run_class(when: str) -> type[ChildRun]:
    class CrashingRun(ChildRun):
        def _warmup(self, llm: Any, llama_cpp: Any) -> None:
            if crashes(self.s, when):
                self.ch.flush()
                os.kill(os.getpid(), signal.SIGSEGV)
            super()._warmup(llm, llama_cpp)

    return CrashingRun


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--crash-when", default=CRASH_WHEN)
    ours, rest = parser.parse_known_args()
    sys.exit(main(rest, run_class=run_class(ours.crash_when)))
