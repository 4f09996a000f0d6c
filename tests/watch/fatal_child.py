"""A child for the crash-evidence tests: dies the way the embedded engine died on an AMX Xeon.

It prints the last lines llama-cpp-python printed before that crash
(/work/shared/reference/engine-crash-amx/crash-amx.log), then crashes in a function named `decode`
with CPython's own faulthandler output. `whole`: a real segmentation fault, faulthandler writing its
report as it does. `cut`: the header "Fatal Python error: " reaches the pipe followed by a line break
from another writer before the reason, as a cold run once delivered it; then the reason, the stack
and SIGSEGV. Run as `python -m tests.watch.fatal_child MODE` (the runner appends its own arguments).
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import sys

ENGINE_LINES = (
    "Available chat formats from metadata: chat_template.default",
    "Using chat eos_token: <|im_end|>",
    "Using chat bos_token: <|im_start|>",
)


def decode(mode: str) -> None:
    if mode == "whole":
        faulthandler.enable(file=sys.stderr)
        ctypes.string_at(0)  # a real SIGSEGV: faulthandler writes the header, the reason and this stack
    os.write(2, b"Fatal Python error: \n")  # a line break from elsewhere lands after the header
    os.write(2, b"Segmentation fault\n\nCurrent thread 0x00007f0f2325cb80 (most recent call first):\n")
    os.write(2, f'  File "{__file__}", line 33 in decode\n'.encode())
    os.write(2, f'  File "{__file__}", line 41 in main\n'.encode())
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGSEGV)


def main() -> None:
    for line in ENGINE_LINES:
        print(line, file=sys.stderr, flush=True)
    decode(sys.argv[1])


if __name__ == "__main__":
    main()
