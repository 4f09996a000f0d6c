"""Log parsing on hostile input: random bytes, mutated real logs, huge lines, odd line ends.

Whatever comes in, analyze either returns facts or refuses with an InputError (binary input); it
never raises anything else, never hangs, and nothing it keeps for display carries a control byte.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.errors import InputError
from doctor.estimate import derive
from doctor.facts import Facts
from doctor.logs.analyze import analyze_stream

ROOT = Path(__file__).resolve().parents[2]
REAL = [p.read_bytes() for p in sorted((ROOT / "fixtures" / "logs").rglob("*.log"))][:40]
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(data: bytes, chunk: int = 1 << 16) -> Facts | None:
    try:
        facts = analyze_stream(io.BytesIO(data), "fuzz", chunk=chunk)
    except InputError:
        return None
    derive(facts)
    for fact in facts:
        if fact.source.text:
            assert not CONTROL.search(fact.source.text), fact
        if isinstance(fact.value, str) and fact.name != "run.output_text":
            assert "\x1b" not in fact.value, fact
    for event in facts.events():
        assert not CONTROL.search(event.text), event
    return facts


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes(data: bytes) -> None:
    run(data)


@FUZZ
@given(st.sampled_from(range(len(REAL))), st.lists(st.tuples(st.integers(0, 10**6), st.binary(max_size=64)),
                                                    max_size=20), st.integers(1, 4096))
def test_mutated_real_logs(which: int, edits: list[tuple[int, bytes]], chunk: int) -> None:
    data = bytearray(REAL[which])
    for pos, blob in edits:
        at = pos % (len(data) + 1)
        data[at:at + len(blob)] = blob
    run(bytes(data), chunk)


@FUZZ
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=2000))
def test_unicode_text_with_escapes(text: str) -> None:
    run(("\x1b]52;c;ZXZpbA==\x07" + text + "\x1b[2J\u202e").encode("utf-8", "surrogatepass"))


def test_a_single_huge_line_is_bounded() -> None:
    data = b"llama_context: n_ctx = " + b"9" * (30 << 20) + b"\nllama_context: n_ctx = 4096\n"
    facts = run(data, chunk=4 << 20)
    assert facts is not None and facts.value("config.n_ctx") == 4096


def test_millions_of_short_lines() -> None:
    data = b"x\n" * 2_000_000 + b"decode: failed to find a memory slot for batch of size 1\n"
    facts = run(data, chunk=1 << 20)
    assert facts is not None and facts.value("run.log_lines") == 2_000_001
    assert [e.line for e in facts.events("ctx_full")] == [2_000_001]


def test_cr_only_line_ends() -> None:
    data = (ROOT / "fixtures/logs/llama-cpp-python/prompt-too-long.log").read_bytes().replace(b"\n", b"\r")
    facts = run(data)
    assert facts is not None and facts.events("prompt_too_long")


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_json_lines(depth: int) -> None:
    line = b'{"log": ' + b"[" * depth + b"]" * depth + b', "msg": "decode: failed to find a memory slot for batch of size 1"}\n'
    facts = run(line * 3)
    assert facts is not None


def test_nul_bytes_inside_a_text_log() -> None:
    data = (ROOT / "fixtures/logs/llama-cpp-python/generation-past-context.log").read_bytes()
    data = data.replace(b"decode: failed", b"decode:\x00 failed", 1).replace(b"llama_context", b"llama\x00_context", 3)
    facts = run(data)
    assert facts is not None and facts.events("decode_failed")
