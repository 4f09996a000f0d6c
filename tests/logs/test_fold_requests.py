"""Folding a vLLM server's request lines (doctor/sources/engines/vllm/fold.py) gives the per-line path's facts.

The logs are built from the recordings' own lines (fixtures/logs/vllm/: V0's and V1's `Received request` lines
with their prompts and sampling parameters, `Added request`, the API server's access lines, the stats lines of
metrics.py and loggers.py), with the prompts' free text carrying what other parsers read: a llama.cpp sampler
line, a client's usage numbers and reply budget, a container's CPU limit, an engine's error words, an engine's
start line, greedy sampling (which turns on the pasted-settings parser's capture), text that is not ASCII, a
prompt longer than the scanner's cut, and preemptions in the stats. Each log is read folded and line by line
(LLM_DOCTOR_FOLD=0) in reads of several sizes, and with worker processes (tests/logs/test_parallel.py).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from doctor.sources.engines.vllm.parser import VllmParser
from doctor.sources.logs.analyze import LogAnalyzer
from tests.logs import test_fold as fold_tests
from tests.logs.test_parallel import _same

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "fixtures" / "logs" / "vllm"
LINES = [line for p in sorted(VLLM.glob("*.log")) for line in p.read_bytes().splitlines()]
RECEIVED = [line for line in LINES if b"Received request " in line]
ADDED = [line for line in LINES if b"Added request " in line]
ACCESS = [line for line in LINES if b' HTTP/1.1" ' in line]
STATS = [line for line in LINES if b"Avg prompt throughput: " in line]
START = (VLLM / "healthy-v0.8.5-v1-tp2.log").read_bytes().splitlines()
HEAD = b"\n".join(START[: next(i for i, line in enumerate(START) if b"Received request " in line)])

# what a prompt may carry (free text), each something a parser other than vLLM's reads line by line
PLANTED = {
    "sampler": b"llama.cpp said: sampler params: repeat_last_n = 64, repeat_penalty = 1.100, temp = 0.500",
    "usage": b'the reply was {\\"prompt_tokens\\": 12, \\"completion_tokens\\": 30}',
    "budget": b"please use max_tokens: 7 at most",
    "cpus": b"docker run --cpus=2 vllm/vllm-openai",
    "engine_error": b"then: CUDA out of memory. Tried to allocate 2.00 GiB",
    "start": b"INFO 05-06 10:03:01 [api_server.py:1043] vLLM API server version 0.8.5",
    "greedy_temp": b"temperature=0.0",
    "non_ascii": "une requête: 日本語".encode(),
    "long": b"x" * 20_000,
    "ollama": b'[GIN] 2025/01/20 - 09:12:54 | 200 |   9.514022871s |       127.0.0.1 | POST     "/api/generate"',
}


def _received(rng: random.Random, plant: bytes | None = None, greedy: bool = False) -> bytes:
    line = rng.choice(RECEIVED)
    head, found, rest = line.partition(b"prompt: '")
    if not found:  # a request given as token ids (`prompt: None`): the prompt's text is not logged
        head, rest = line.split(b"prompt: None", 1)[0], b"', params: " + line.split(b", params: ", 1)[1]
    prompt, _, tail = rest.partition(b"', params: ")
    if plant is not None:
        prompt = prompt[: len(prompt) // 2] + plant + prompt[len(prompt) // 2:]
    tail = tail.replace(b"max_tokens=256", b"max_tokens=%d" % rng.randrange(16, 4096))
    # greedy sampling only where asked (the recordings hold one greedy request)
    tail = tail.replace(b"temperature=0.7", b"temperature=0.0") if greedy else tail.replace(b"temperature=0.0,",
                                                                                           b"temperature=0.7,")
    return head + b"prompt: '" + prompt + b"', params: " + tail


def vllm_log(seed: int = 1, requests: int = 3000, plants: tuple[str, ...] = (), greedy_every: int = 0,
             crlf: bool = False) -> bytes:
    """A busy vLLM server: its start-up, then requests with access lines and a stats line every few."""
    rng = random.Random(seed)
    out = [HEAD]
    planted = {rng.randrange(50, requests): name for name in plants}
    for n in range(requests):
        plant = PLANTED[planted[n]] if n in planted else None
        out.append(_received(rng, plant, greedy=bool(greedy_every) and n % greedy_every == greedy_every - 1))
        out.append(rng.choice(ADDED))
        if rng.random() < 0.9:
            out.append(rng.choice(ACCESS))
        if n % 7 == 6:
            stats = rng.choice(STATS)
            if rng.random() < 0.2 and b"Waiting:" in stats:
                stats = stats.replace(b"GPU KV cache", b"Preemptions: %d, GPU KV cache" % rng.randrange(1, 9), 1)
            out.append(stats)
    data = b"\n".join(out) + b"\n"
    return data.replace(b"\n", b"\r\n") if crlf else data


def _both(data: bytes, chunk: int = 1 << 22) -> LogAnalyzer:
    """`data` read folded and line by line (the same facts, or the test fails): the folded analyzer."""
    return fold_tests._both(data, chunk)[0]


def test_a_busy_server_folds_to_the_same_facts() -> None:
    data = vllm_log()
    folded = _both(data)
    assert folded.folders is not None and folded.folders.runs > 0
    folder = folded.folders.of(VllmParser)
    assert folder is not None and folder.runs > 0
    assert folded.scanner.folded > 0.9 * data.count(b"\n")  # nearly every line went through a fold


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_what_a_prompt_carries_reads_the_same(name: str) -> None:
    data = vllm_log(seed=hash(name) % 1000, requests=600, plants=(name,) * 3)
    folded = _both(data, chunk=(1 << 22, 65_536)[len(name) % 2])
    assert folded.folders is not None and folded.folders.runs > 0


def test_every_plant_at_once_in_reads_of_every_size() -> None:
    data = vllm_log(seed=5, requests=900, plants=tuple(PLANTED) * 2, greedy_every=40)
    for chunk in (997, 40_000, 1 << 22):
        _both(data, chunk)


@pytest.mark.parametrize("seed", range(4))
def test_greedy_requests_and_crlf_read_the_same(seed: int) -> None:
    data = vllm_log(seed=seed, requests=700, greedy_every=(0, 5, 50, 1)[seed], crlf=seed % 2 == 1)
    folded = _both(data, chunk=(1 << 22, 30_000, 100_000, 7_000)[seed])
    if seed != 3:  # every request greedy: captured all along, nothing folds
        assert folded.folders is not None and folded.folders.runs > 0


def test_the_budget_is_the_last_request_s() -> None:
    """The client parser keeps the last reply budget a line names (a run read for its last line only)."""
    data = vllm_log(seed=3, requests=400)
    last = int(data.rsplit(b"max_tokens=", 1)[1].split(b",")[0])
    analyzer = _both(data)
    facts = analyzer.finish()
    assert facts.value("client.max_tokens") == last or any(
        f.value == last for f in facts if f.name.startswith("client."))


def test_parallel_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log"
    path.write_bytes(vllm_log(seed=9, requests=4000, plants=tuple(PLANTED), greedy_every=25))
    seen = _same(path, 200_000)
    assert seen["worker"] > 0
