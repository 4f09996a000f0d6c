"""Generate a large engine log for throughput benchmarks: real lines, repeated and renumbered.

The body is made of real output: the recorded llama-cpp-python runs (model load, tensor creation,
graph reservation, timings), llama-server request blocks, and — when their fixtures exist — Ollama
and vLLM lines. Problems (an OOM, a context shift, a truncated input) are sprinkled every few
megabytes so the parsers have work to do, as in a real long-running server log.

    python bench/gen_log.py OUT_PATH SIZE_MB
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "logs"

PROBLEMS = [
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4507.00 MiB on device 0: cudaMalloc failed: out of memory",
    "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 4725934080",
    "llama_new_context_with_model: failed to allocate compute buffers",
    "slot update_slots: id  1 | task 236 | input truncated, n_ctx = 2048, n_keep = 0, n_left = 2048, "
    "n_prompt_tokens = 2150",
    "slot update_slots: id  1 | task 236 | slot context shift, n_keep = 0, n_left = 2047, n_discard = 1023",
    "decode: failed to find a memory slot for batch of size 128",
]


def corpus() -> list[bytes]:
    parts: list[bytes] = []
    for folder in ("llama-cpp-python", "llama.cpp", "ollama", "vllm", "tgi"):
        d = FIX / folder
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.log")):
            data = path.read_bytes()
            if folder != "llama-cpp-python" or "healthy" in path.name:
                parts.append(data if data.endswith(b"\n") else data + b"\n")
    return parts


def generate(out: Path, size_mb: int) -> int:
    parts = corpus()
    target = size_mb * 1_000_000
    written = 0
    i = 0
    with out.open("wb") as f:
        while written < target:
            block = parts[i % len(parts)]
            f.write(block)
            written += len(block)
            if i % 10 == 7:
                line = (PROBLEMS[(i // 10) % len(PROBLEMS)] + "\n").encode()
                f.write(line)
                written += len(line)
            i += 1
    return written


if __name__ == "__main__":
    path, size = Path(sys.argv[1]), int(sys.argv[2])
    n = generate(path, size)
    print(f"wrote {n / 1e6:.0f} MB to {path}")
