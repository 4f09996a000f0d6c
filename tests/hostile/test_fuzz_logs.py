"""Log parsing on hostile input: random bytes, mutated real logs of every engine, real trigger lines
with numbers no engine prints, JSON framing nested past any recursion limit, invalid UTF-8, NUL
bytes, huge lines, millions of lines, CR-only line ends.

Whatever comes in, analyze either returns facts or refuses with an InputError (binary input); it
never raises anything else, never hangs, allocates nothing near what a line claims, and nothing it
keeps or shows carries a control byte. The longer run of the same targets is bench/fuzz_long.py.
"""

from __future__ import annotations

import io
from pathlib import Path
from random import Random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.core.errors import InputError
from doctor.core.facts import Facts
from doctor.derive import derive
from doctor.judge.evaluate import diagnose
from doctor.sources.logs.entry import analyze_stream

from .fuzz_targets import (
    check_inert_facts,
    gen_log,
    gen_log_for,
    log_corpus,
    log_corpus_by_engine,
    log_target,
    render_all,
    rulebase,
    synth_log,
    time_limit,
)

ROOT = Path(__file__).resolve().parents[2]
REAL = log_corpus()
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PER_ENGINE = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SECONDS = 30  # per input; a hang fails the test instead of stalling CI


def run(data: bytes, chunk: int = 1 << 16) -> Facts | None:
    try:
        facts = analyze_stream(io.BytesIO(data), "fuzz", chunk=chunk)
    except InputError:
        return None
    derive(facts)
    check_inert_facts(facts)
    return facts


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes(data: bytes) -> None:
    with time_limit(SECONDS):
        log_target(data)


@FUZZ
@given(st.sampled_from(range(len(REAL))), st.lists(st.tuples(st.integers(0, 10**6), st.binary(max_size=64)),
                                                    max_size=20), st.integers(1, 4096))
def test_mutated_real_logs(which: int, edits: list[tuple[int, bytes]], chunk: int) -> None:
    data = bytearray(REAL[which])
    for pos, blob in edits:
        at = pos % (len(data) + 1)
        data[at:at + len(blob)] = blob
    with time_limit(SECONDS):
        run(bytes(data), chunk)


@pytest.mark.parametrize("engine", sorted(log_corpus_by_engine()))
def test_every_engines_logs_mutated(engine: str) -> None:
    """Each parser on its own engine's formats (llama.cpp eras, llama-cpp-python, llama-server,
    Ollama, vLLM, TGI, mixed pastes), mutated: flips, splices, escapes, invalid UTF-8, odd numbers."""

    @PER_ENGINE
    @given(st.randoms(use_true_random=False))
    def check(rng: Random) -> None:
        with time_limit(SECONDS):
            log_target(gen_log_for(rng, engine), chunk=rng.choice([1 << 16, 4096, 97]))

    check()


@FUZZ
@given(st.randoms(use_true_random=False))
def test_trigger_lines_with_numbers_no_engine_prints(rng: Random) -> None:
    """Real trigger lines of every engine with 2**64, 10**400, 1e309, nan, ... where the numbers
    are; framed as docker/journald/llama-server JSON; quoted; with escapes: the whole pipeline
    (parsers, summaries, derivation, every rule, every view) keeps going."""
    with time_limit(SECONDS):
        log_target(synth_log(rng))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_the_long_runs_mix(rng: Random) -> None:
    with time_limit(SECONDS):
        log_target(gen_log(rng))


@FUZZ
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=2000))
def test_unicode_text_with_escapes(text: str) -> None:
    run(("\x1b]52;c;ZXZpbA==\x07" + text + "\x1b[2J\u202e").encode("utf-8", "surrogatepass"))


# -- shapes the issue names ------------------------------------------------------------------------

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
@pytest.mark.parametrize("shape", [(b"[", b"]"), (b'{"a":', b"}")])
def test_deeply_nested_json_lines(depth: int, shape: tuple[bytes, bytes]) -> None:
    open_, close = shape
    line = (b'{"log": ' + open_ * depth + b"1" + close * depth
            + b', "msg": "decode: failed to find a memory slot for batch of size 1"}\n')
    with time_limit(SECONDS):
        facts = run(line * 3)
    assert facts is not None and facts.value("run.log_lines") == 3
    if len(line) < 16 << 10:  # longer lines are judged by their first 16 KiB, where this message is not
        assert len(facts.events("ctx_full")) == 3  # the message is still read


def test_nested_message_objects_and_wrong_types() -> None:
    import json

    msg = "llama_context: n_ctx = 4096"
    nested = '{"log": ' * 2000 + json.dumps(msg) + "}" * 2000  # past the decoder's recursion limit
    lines = [json.dumps({"msg": None, "log": [msg]}), json.dumps({"msg": 4096}), json.dumps({"MESSAGE": {"x": 1}}),
             json.dumps({"function": [1, 2], "msg": msg, "n_ctx": 1e308}), nested]
    facts = run(("\n".join(lines) + "\n").encode())
    assert facts is not None and facts.value("config.n_ctx") == 4096


def test_nul_bytes_inside_a_text_log() -> None:
    data = (ROOT / "fixtures/logs/llama-cpp-python/generation-past-context.log").read_bytes()
    data = data.replace(b"decode: failed", b"decode:\x00 failed", 1).replace(b"llama_context", b"llama\x00_context", 3)
    facts = run(data)
    assert facts is not None and facts.events("decode_failed")


@pytest.mark.parametrize("bad", [b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc3"])
def test_invalid_utf8_inside_trigger_lines(bad: bytes) -> None:
    data = (ROOT / "fixtures/logs/llama-cpp-python/prompt-too-long.log").read_bytes()
    data = data.replace(b"Requested tokens", bad + b"Requested tokens").replace(b"n_ctx", b"n_ctx" + bad, 2)
    facts = run(data)
    assert facts is not None and facts.events("prompt_too_long")


# -- what the fuzzing found (each was a crash, a hang or a runaway allocation) ----------------------

HEALTHY = (ROOT / "fixtures/logs/llama-cpp-python/healthy.log").read_bytes()
TOO_LONG = (ROOT / "fixtures/logs/llama-cpp-python/prompt-too-long.log").read_bytes()


def edit(base: bytes, old: bytes, new: bytes) -> bytes:
    assert old in base, old  # the real line this case edits is still in the fixture
    return base.replace(old, new, 1)


FOUND = {
    # per-layer lists sized by the log's n_layer: 32 GiB for 2**32 - 1 layers
    "n_layer 2**32 - 1": edit(HEALTHY, b"n_layer               = 30", b"n_layer               = 4294967295"),
    "n_layer 10**15": edit(HEALTHY, b"n_layer               = 30", b"n_layer               = 999999999999999"),
    "n_layer 3e8": edit(HEALTHY, b"n_layer               = 30", b"n_layer               = 300000000"),
    # a loop over every GPU the log claims
    "a billion CUDA devices": HEALTHY + b"ggml_cuda_init: found 999999999 CUDA devices:\n",
    # float('1e309') is inf; int(inf * MiB) raised in the buffer summary
    "an infinite KV buffer": edit(HEALTHY, b"CPU KV buffer size =    45.00 MiB", b"CPU KV buffer size = 1e309 MiB"),
    # 10**400 in an event's data reached float() in a message template
    "a 400-digit token count": edit(TOO_LONG, b"Requested tokens (", b"Requested tokens (" + b"9" * 400),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_what_fuzzing_found(name: str, memory_cap: int) -> None:
    with time_limit(SECONDS):
        facts = run(FOUND[name])
        assert facts is not None
        report = diagnose(facts, rulebase(), command="analyze", mode="analyze")
        render_all(report)
