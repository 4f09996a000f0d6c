"""LD318's premise on the real llama-server: its host prompt cache (--cache-ram, 8192 MiB unless set)
keeps the KV state of each distinct prompt, so the server's private memory grows with every new
prompt and is not given back; a cap stops the growth (scan's side: tests/scan/test_whatif.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.server.harness import http_json, llama_server

pytestmark = [pytest.mark.server, pytest.mark.slow]


def private_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:")) / 1024


def grow(server, prompts: int) -> list[float]:
    """Private memory after each of `prompts` different ~500-token prompts."""
    seen = []
    for k in range(prompts):
        words = " ".join(f"topic{k} word{i % 89}" for i in range(100))
        status, _ = http_json(f"{server.base}/completion", {"prompt": words, "n_predict": 2})
        assert status == 200
        seen.append(private_mib(server.process.pid))
    return seen


def test_each_distinct_prompt_stays_in_the_servers_memory_until_the_cap(
        server_bin: Path, model: Path, tmp_path: Path) -> None:
    # one ~500-token prompt's KV state: 500 cells x 30 layers x (K + V) x 3 heads x 64 x 2 bytes = 11 MiB
    with llama_server(server_bin, model, tmp_path / "default.log", "-c", "2048", "-np", "1", "-fa", "on") as server:
        default = grow(server, 5)
    steps = [b - a for a, b in itertools.pairwise(default)]
    assert all(step > 8 for step in steps), default  # each new prompt keeps its state
    with llama_server(server_bin, model, tmp_path / "capped.log", "-c", "2048", "-np", "1", "-fa", "on",
                      "--cache-ram", "20") as server:
        capped = grow(server, 5)
    assert capped[-1] - capped[1] < 0.5 * (default[-1] - default[1]), (capped, default)
