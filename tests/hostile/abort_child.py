"""A stand-in engine child that aborts: it speaks the runner's message protocol
(doctor/sources/live/embedded/messages.py) like the real child, prints what llama.cpp prints on its way to an
assert, and then calls abort() - with no model and no llama-cpp-python, so the fault test is fast.

Run by the runner as `python -m tests.hostile.abort_child --msg-fd N --t0 T` (settings on stdin).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

STEPS = 6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--msg-fd", type=int, required=True)
    parser.add_argument("--t0", type=float, required=True)
    args = parser.parse_args()
    settings = json.loads(sys.stdin.read())
    out = os.fdopen(args.msg_fd, "w", buffering=1)

    def send(msg: dict[str, object]) -> None:
        msg["t"] = round((time.monotonic() - args.t0) * 1000.0, 3)
        out.write(json.dumps(msg) + "\n")
        out.flush()

    send({"m": "hello", "pid": os.getpid(), "python": sys.version.split()[0]})
    send({"m": "log", "lvl": "info", "text": f"llama_context: n_ctx         = {settings['n_ctx']}"})
    send({"m": "phase", "phase": "load", "ms": 12.5})
    send({"m": "settings", "settings": {"n_ctx": settings["n_ctx"], "n_batch": 512, "n_ubatch": 512,
                                        "prompt_tokens": 9, "engine_name": "llama-cpp-python"}})
    send({"m": "phase", "phase": "prefill", "ms": 8.0, "tokens": 9, "token": " Once", "kv": 10})
    send({"m": "steps", "s": [[i, 4.0 + i / 10, f" w{i}", 10 + i, 30.0 + i] for i in range(1, STEPS + 1)]})
    print("llama_context: graph reserve failed", file=sys.stderr, flush=True)
    print("ggml/src/ggml-cpu/ggml-cpu.c:2131: GGML_ASSERT(n_tokens_all <= cparams.n_batch) failed",
          file=sys.stderr, flush=True)
    send({"m": "abort", "text": "GGML_ASSERT(n_tokens_all <= cparams.n_batch) failed"})
    os.abort()


if __name__ == "__main__":
    main()
