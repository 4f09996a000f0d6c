"""Fuzz targets and input generators, shared by the hostile tests (bounded, in CI) and by
bench/fuzz_long.py (the long run).

A *target* runs one input through the real code path a user's input takes and returns "ok" (a
clean result) or "refused" (a clean one-line error: InputError, RuleError, GgufCorrupt). Anything
else it raises is a crash: an unexpected exception, or a broken promise checked on the way (a
control byte in what would reach the terminal, a refusal reason spanning lines, a tensor past the
end of its file). `time_limit` turns a hang into an exception; `tracemalloc` (the caller's) bounds
memory.

A *generator* takes a `random.Random` and makes one hostile input from the real material in
fixtures/: engine logs of every engine, watch recordings, saved facts, rule files, GGUF headers
written by the `gguf` package. Hypothesis drives the generators in CI (`st.randoms()`), the long
run drives them with seeded `Random`s.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import signal
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from random import Random
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

# What must never reach a terminal: ESC, 8-bit CSI/OSC/DCS/ST, BEL, BS, bidi overrides and isolates.
ESCAPE_BYTES = re.compile(rb"\x1b|\xc2[\x80-\x9f]|\x07|\x08|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
CONTROL_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# Numbers no engine prints, put where engines print numbers.
EXTREMES = ("0", "-1", "-0", "1", "65535", "4294967295", "4294967296", "9223372036854775807",
            "18446744073709551615", "18446744073709551616", "1" + "0" * 30, "9" * 400, "9" * 5000,
            "1e308", "1e309", "-1e308", "nan", "inf", "0.0000001", "1.5", "00000000000000000042", "",
            "0x7fffffff", "1_000")
HOSTILE_TEXT = ("\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b]0;pwned\x07", "\x1b[2J\x1b[H", "\x1b[6n", "\x9b31m",
                "\x9d0;t\x9c", "\x1bP+q544e\x1b\\", "\u202eevil\u202c", "\u2066x\u2069", "\x07\x08\x7f",
                "\x1b]8;;https://evil.invalid\x1b\\link\x1b]8;;\x1b\\", "\x1bc", "\r\x1b[K")
BAD_UTF8 = (b"\xff\xfe", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80\x80",
            b"\xfe\xff\x00<\x00l")


class Hang(BaseException):
    """An input ran past its time limit. A BaseException, so no `except Exception` swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise Hang in the main thread when the block runs longer than `seconds` (SIGALRM)."""
    def on_alarm(_sig: int, _frame: object) -> None:
        raise Hang(f"no result after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- shared real material ------------------------------------------------------------------------

@functools.cache
def rulebase() -> Any:
    from doctor.judge.rulebase import load_rulebase

    return load_rulebase([], env={})


@functools.cache
def log_corpus() -> tuple[bytes, ...]:
    """Every engine log under fixtures/ (llama.cpp, llama-cpp-python, llama-server, Ollama, vLLM,
    TGI, mixed pastes), as bytes."""
    paths = sorted(p for p in (FIXTURES / "logs").rglob("*") if p.suffix in (".log", ".md") and p.name != "README.md")
    paths += sorted((FIXTURES / "traces" / "tui").glob("*.log"))
    return tuple(p.read_bytes() for p in paths)


@functools.cache
def log_corpus_by_engine() -> dict[str, tuple[bytes, ...]]:
    out: dict[str, list[bytes]] = {}
    for p in sorted((FIXTURES / "logs").rglob("*")):
        if p.suffix in (".log", ".md") and p.name != "README.md":
            out.setdefault(p.parent.name, []).append(p.read_bytes())
    return {k: tuple(v) for k, v in out.items()}


@functools.cache
def trigger_lines() -> tuple[bytes, ...]:
    """The lines of the corpus that some parser reads (they match a trigger): where bugs live."""
    from doctor.sources.logs.analyze import LogAnalyzer

    scanner = LogAnalyzer("corpus").scanner
    seen: dict[bytes, None] = {}
    for data in log_corpus():
        for raw in scanner.feed(data.replace(b"\r\n", b"\n") + b"\n"):
            if raw.text:
                seen.setdefault(raw.text, None)
        scanner.lines = 0
    return tuple(seen)


@functools.cache
def trace_corpus() -> tuple[bytes, ...]:
    return tuple(p.read_bytes() for p in sorted((FIXTURES / "traces").rglob("*.jsonl")))


@functools.cache
def rule_corpus() -> tuple[str, ...]:
    return tuple(p.read_text(encoding="utf-8") for p in sorted((ROOT / "rules").glob("*.yaml")))


@functools.cache
def facts_corpus() -> tuple[dict[str, Any], ...]:
    """Saved-facts documents (what `scan --save` writes), from analysing real logs."""
    from doctor.derive import derive
    from doctor.sources.logs.entry import analyze_bytes

    docs = []
    for data in log_corpus()[::6]:
        facts = derive(analyze_bytes(data, "corpus"))
        docs.append({"llm_doctor": "facts", "version": "0.1.0", "command": "scan", **facts.to_json()})
    return tuple(docs)


# -- checks --------------------------------------------------------------------------------------

def check_inert_facts(facts: Any) -> None:
    for fact in facts:
        if fact.source.text:
            assert not CONTROL_TEXT.search(fact.source.text), fact
        if isinstance(fact.value, str) and fact.name != "run.output_text":
            assert "\x1b" not in fact.value and "\x9b" not in fact.value, fact
    for event in facts.events():
        assert not CONTROL_TEXT.search(event.text), event


def check_one_line(message: str) -> None:
    assert message and "\n" not in message and "\r" not in message, repr(message)
    assert not ESCAPE_BYTES.search(message.encode("utf-8", "surrogatepass")), repr(message)


def render_all(report: Any) -> None:
    """Every view of the report; none may carry a control sequence, the JSON must parse."""
    from doctor.views.render.json import render_json
    from doctor.views.render.markdown import render_markdown
    from doctor.views.render.style import choose_style
    from doctor.views.render.text import render_text

    style = choose_style(False, "utf-8", "never")
    for text in (render_text(report, style, verbose=True), render_text(report, style, verbose=False),
                 render_markdown(report), render_json(report)):
        found = ESCAPE_BYTES.search(text.encode("utf-8", "surrogatepass"))
        assert found is None, (found, text[max(0, found.start() - 80):found.end() + 80] if found else "")
    json.loads(render_json(report))


# -- targets -------------------------------------------------------------------------------------

def log_target(data: bytes, chunk: int = 1 << 16, full: bool = True) -> str:
    """analyze on a log: facts (inert), then derivation, every rule, every view."""
    from doctor.core.errors import InputError
    from doctor.judge.evaluate import diagnose
    from doctor.sources.logs.entry import analyze_stream

    try:
        facts = analyze_stream(io.BytesIO(data), "fuzz", chunk=chunk)
    except InputError as exc:
        check_one_line(exc.one_line())
        return "refused"
    check_inert_facts(facts)
    if full:
        report = diagnose(facts, rulebase(), command="analyze", mode="analyze")
        render_all(report)
    return "ok"


def input_target(data: bytes) -> str:
    """What `analyze FILE` does with any file: a log, a saved scan, a report, or a watch recording."""
    from doctor.core.errors import InputError
    from doctor.judge.evaluate import diagnose
    from doctor.sources.inputs import _dispatch
    from doctor.sources.logs.stream import rewindable

    try:
        facts = _dispatch(rewindable(io.BytesIO(data)), "fuzz")
    except InputError as exc:
        check_one_line(exc.one_line())
        return "refused"
    report = diagnose(facts, rulebase(), command="analyze", mode="analyze")
    render_all(report)
    return "ok"


def gguf_target(data: bytes, path: Path, sparse_size: int | None = None) -> str:
    """The GGUF header check, then the model probe (gguf.GGUFReader on what passed), the budget
    and the model rules. `sparse_size` extends the file with a hole (a large model, no disk)."""
    from doctor.judge.evaluate import diagnose
    from doctor.sources.probes.gguf_header import GgufCorrupt, check_gguf
    from doctor.sources.probes.gguf_model import collect_model

    path.write_bytes(data)
    if sparse_size and sparse_size > len(data):
        os.truncate(path, sparse_size)
    size = path.stat().st_size
    try:
        header = check_gguf(path)
    except GgufCorrupt as exc:
        check_one_line(str(exc))
        header = None
    if header is not None:
        for t in header.tensors:
            assert header.data_offset + t.offset + t.n_bytes <= size, t
            assert t.offset >= 0 and t.n_bytes >= 0 and 1 <= len(t.dims) <= 4, t
    facts = collect_model(str(path))
    corrupt = facts.value("model.corrupt")
    assert isinstance(corrupt, bool), corrupt
    if header is None:
        assert corrupt is True
    if corrupt:
        check_one_line(str(facts.value("model.corrupt_reason")))
        assert not facts.has("model.n_layer")
    check_inert_facts(facts)
    report = diagnose(facts, rulebase(), command="scan", mode="scan")
    render_all(report)
    return "refused" if corrupt else "ok"


@functools.cache
def _rule_facts() -> tuple[Any, ...]:
    """Real snapshots the fuzzed rules are evaluated on (every engine)."""
    from doctor.derive import derive
    from doctor.sources.logs.entry import analyze_bytes

    return tuple(derive(analyze_bytes(data, "rules")) for data in log_corpus()[::9])


def rules_target(text: str | bytes, path: Path | None = None) -> str:
    """The rule loader on one rule file; what loads is evaluated on real facts, its messages
    rendered and its own test cases run. Bytes go through a file (the UTF-8 and size checks)."""
    from doctor.core.errors import RuleError
    from doctor.judge.evaluate import build_report
    from doctor.judge.rulebase import RuleBase, _check_inhibits, load_rule_file, parse_rules
    from doctor.judge.ruletest import run_case

    where = str(path) if isinstance(text, bytes) else "fuzz.yaml"
    try:
        if isinstance(text, bytes):
            assert path is not None
            path.write_bytes(text)
            rules = load_rule_file(path)
        else:
            rules = parse_rules(text, where)
        _check_inhibits(rules)
    except RuleError as exc:
        message = exc.one_line()
        assert message.startswith(where), message
        check_one_line(message)
        return "refused"
    base = RuleBase(rules=rules)
    for facts in _rule_facts():
        for mode in ("analyze", "scan", "watch"):
            render_all(build_report(base, facts, command="analyze", mode=mode))
    for rule in rules:
        for case in rule.tests:
            run_case(rule, case)
    return "ok"


# -- log generators ------------------------------------------------------------------------------

def _extreme_numbers(rng: Random, line: bytes) -> bytes:
    def repl(m: re.Match[bytes]) -> bytes:
        return rng.choice(EXTREMES).encode() if rng.random() < 0.6 else m.group(0)

    return re.sub(rb"-?\d+(?:\.\d+)?", repl, line)


def _json_line(rng: Random, line: bytes) -> bytes:
    text = line.decode("utf-8", "replace")
    kind = rng.randrange(6)
    if kind == 0:  # docker json-file
        doc: Any = {"log": text + "\n", "stream": "stderr", "time": "2025-01-16T04:28:13.0Z"}
    elif kind == 1:  # journald -o json
        doc = {"MESSAGE": text, "_HOSTNAME": "gpu-box", "PRIORITY": "6", "_PID": "1532"}
    elif kind == 2:  # llama-server JSON log mode, with odd types where it puts fields
        doc = {"msg": text, "level": "INFO", "function": rng.choice(["launch_slot", [1], {"a": 1}, None, 7]),
               "n_ctx": rng.choice([4096, 1e308, "4096", [4096], None, 2**64, -1]), "tid": "1", "timestamp": 1}
    elif kind == 3:  # the message is not a string
        doc = {"msg": rng.choice([None, 1, 1.5, [text], {"msg": text}, True]), "log": rng.choice([text, None, []])}
    elif kind == 4:  # nested deep in a field
        depth = rng.choice([10, 100, 1000, 50_000])
        return b'{"log": ' + b"[" * depth + b"]" * depth + b', "msg": ' + json.dumps(text).encode() + b"}"
    else:  # nested message objects
        doc = text
        for _ in range(rng.randrange(1, 40)):
            doc = {rng.choice(["log", "msg", "message", "MESSAGE", "text"]): doc}
    return json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def _decorate(rng: Random, line: bytes) -> bytes:
    r = rng.random()
    if r < 0.15:
        line = rng.choice(HOSTILE_TEXT).encode() + line
    elif r < 0.25:
        line = line + rng.choice(HOSTILE_TEXT).encode()
    elif r < 0.32:
        line = rng.choice([b"> ", b"> > ", b"- ", b"    ", b"Jan 16 04:28:13 gpu-box ollama[1532]: ",
                           b"\x1b[32mINFO\x1b[0m ", b"2025-01-16 04:28:13.123 "]) + line
    elif r < 0.36:
        at = rng.randrange(len(line) + 1)
        line = line[:at] + rng.choice(BAD_UTF8) + line[at:]
    elif r < 0.38:
        line = line.replace(b" ", b"\x00", rng.randrange(1, 3))
    return line


def synth_log(rng: Random, n_lines: int | None = None) -> bytes:
    """A log made of real trigger lines from every engine, with extreme numbers, JSON framing,
    quoting, escape sequences, invalid UTF-8 and filler, joined with random line ends."""
    lines = trigger_lines()
    corpus = log_corpus()
    out: list[bytes] = []
    for _ in range(n_lines if n_lines is not None else rng.randrange(1, 60)):
        r = rng.random()
        if r < 0.1:
            data = rng.choice(corpus)
            at = rng.randrange(len(data))
            line = data[at:at + rng.randrange(1, 400)]
        else:
            line = rng.choice(lines)
        if rng.random() < 0.6:
            line = _extreme_numbers(rng, line)
        if rng.random() < 0.12:
            line = _json_line(rng, line)
        out.append(_decorate(rng, line))
    sep = rng.choice([b"\n", b"\n", b"\n", b"\r\n", b"\r"])
    return sep.join(out) + (sep if rng.random() < 0.8 else b"")


def mutate_bytes(rng: Random, data: bytes, n_edits: int | None = None) -> bytes:
    buf = bytearray(data)
    for _ in range(n_edits if n_edits is not None else rng.randrange(1, 12)):
        op = rng.randrange(10)
        at = rng.randrange(len(buf) + 1)
        if op == 0 and buf:  # flip bits
            i = min(at, len(buf) - 1)
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # insert random bytes
            buf[at:at] = rng.randbytes(rng.randrange(1, 32))
        elif op == 2:  # delete a range
            del buf[at:at + rng.randrange(1, 256)]
        elif op == 3:  # duplicate a range
            chunk = buf[at:at + rng.randrange(1, 512)]
            buf[at:at] = chunk * rng.randrange(1, 4)
        elif op == 4:  # an escape sequence
            buf[at:at] = rng.choice(HOSTILE_TEXT).encode()
        elif op == 5:  # invalid UTF-8
            buf[at:at] = rng.choice(BAD_UTF8)
        elif op == 6:  # NUL
            buf[at:at] = b"\x00" * rng.randrange(1, 4)
        elif op == 7:  # line ends
            buf = bytearray(bytes(buf).replace(b"\n", rng.choice([b"\r", b"\r\n", b"\n\n", b""]), rng.randrange(1, 50)))
        elif op == 8:  # splice another log in
            other = rng.choice(log_corpus())
            o = rng.randrange(len(other))
            buf[at:at] = other[o:o + rng.randrange(1, 2000)]
        else:  # numbers
            end = min(len(buf), at + 400)
            buf[at:end] = _extreme_numbers(rng, bytes(buf[at:end]))
    return bytes(buf)


def gen_log(rng: Random) -> bytes:
    """One hostile log input (the mix the long run and CI use)."""
    r = rng.random()
    if r < 0.1:
        return rng.randbytes(rng.randrange(0, 4096))
    if r < 0.45:
        data = rng.choice(log_corpus())
        if len(data) > 64 << 10 and rng.random() < 0.8:
            at = rng.randrange(len(data) - (32 << 10))
            data = data[at:at + (32 << 10)]
        return mutate_bytes(rng, data)
    if r < 0.95:
        return synth_log(rng)
    return _json_line(rng, rng.choice(trigger_lines())) * rng.randrange(1, 4)


def gen_log_for(rng: Random, engine: str) -> bytes:
    """A mutated log of one engine's folder (llama.cpp, llama-cpp-python, llama-server, ollama, vllm,
    tgi, mixed), so each parser is exercised on its own formats."""
    data = rng.choice(log_corpus_by_engine()[engine])
    return mutate_bytes(rng, data, rng.randrange(1, 20))


# -- recordings and saved facts ------------------------------------------------------------------

def _mutate_json(rng: Random, doc: Any, depth: int = 0) -> Any:
    """Change types and values inside a JSON document (keys kept, so the reader gets far)."""
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            r = rng.random()
            if r < 0.05:
                continue
            out[k] = _mutate_json(rng, v, depth + 1) if r < 0.9 else _json_value(rng)
        if rng.random() < 0.05:
            out[rng.choice(["kind", "t_ms", "step", "token", "value", "unit", "facts", "events", "n_ctx"])] = \
                _json_value(rng)
        return out
    if isinstance(doc, list):
        items = [_mutate_json(rng, v, depth + 1) for v in doc if rng.random() > 0.03]
        if items and rng.random() < 0.03:
            items = items * rng.randrange(2, 50)
        return items
    if rng.random() < 0.15:
        return _json_value(rng)
    return doc


def _json_value(rng: Random) -> Any:
    r = rng.randrange(12)
    if r == 0:
        return None
    if r == 1:
        return rng.choice([True, False])
    if r == 2:
        return rng.choice([0, -1, 2**31, 2**63, 2**64, 10**18, 10**300])
    if r == 3:
        return rng.choice([1e308, -1e308, 0.5, float("nan"), float("inf")])
    if r == 4:
        return rng.choice(HOSTILE_TEXT)
    if r == 5:
        return "x" * rng.choice([0, 1, 1000, 100_000])
    if r == 6:
        return [_json_value(rng) for _ in range(rng.randrange(4))]
    if r == 7:
        return {rng.choice(["a", "kind", "value", "__class__", ""]): _json_value(rng)}
    if r == 8:  # nested (deeper nesting is made as text: see deep_json)
        deep: Any = []
        for _ in range(rng.choice([10, 100, 300])):
            deep = [deep]
        return deep
    if r == 9:
        return rng.choice(["step", "end", "log", "settings", "finding", "facts", "phase", "sample", "incident"])
    if r == 10:
        return "\ud800"  # a lone surrogate (json.dumps escapes it)
    return rng.randrange(-5, 5000)


def gen_recording(rng: Random) -> bytes:
    """A watch recording (real ones from fixtures/traces) with damaged lines, odd types and values."""
    lines = rng.choice(trace_corpus()).splitlines()
    out: list[bytes] = []
    for i, raw in enumerate(lines):
        r = rng.random()
        if i == 0 and r < 0.9:
            out.append(raw)
            continue
        if r < 0.7:
            out.append(raw)
        elif r < 0.9:
            try:
                doc = json.loads(raw)
            except ValueError:
                out.append(raw)
                continue
            out.append(json.dumps(_mutate_json(rng, doc)).encode())
        elif r < 0.95:
            out.append(mutate_bytes(rng, raw, 2))
        elif r < 0.97:
            out.append(raw[: rng.randrange(len(raw) + 1)])  # cut mid-write
        # else: drop the line
    return b"\n".join(out) + b"\n"


def gen_facts_doc(rng: Random) -> bytes:
    doc = _mutate_json(rng, json.loads(json.dumps(rng.choice(facts_corpus()), default=str)))
    facts = doc.get("facts") if isinstance(doc, dict) else None
    if isinstance(facts, dict) and rng.random() < 0.7:  # absurd values in the facts the estimator loops over
        for name in rng.sample(["model.n_layer", "host.gpu.count", "config.n_ctx", "config.n_parallel",
                                "model.n_head_kv", "model.layer_bytes", "config.n_gpu_layers", "model.n_vocab",
                                "config.n_ubatch", "model.n_head_kv_per_layer", "run.decode_ms"], 3):
            value = rng.choice([2**32 - 1, 10**9, 2**63, -5, 0, 1e308, [1] * rng.randrange(0, 3000), "x", None])
            facts[name] = {"value": value}
    return json.dumps(doc, indent=rng.choice([None, 1])).encode()


def deep_json(rng: Random, prefix: bytes) -> bytes:
    """A document that opens with a real header and then nests past any recursion limit."""
    depth = rng.choice([1000, 20_000, 200_000])
    open_, close = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
    return prefix + open_ * depth + b"1" + close * depth + b"}\n"


def gen_input(rng: Random) -> bytes:
    r = rng.random()
    if r < 0.45:
        return gen_recording(rng)
    if r < 0.88:
        return gen_facts_doc(rng)
    if r < 0.94:
        return deep_json(rng, rng.choice([b'{"llm_doctor": "facts", "facts": ',
                                          b'{"llm_doctor":"trace","version":1}\n{"kind": "step", "x": ',
                                          b'{"schema_version": "1", "tool": {"name": "llm-doctor"}, "facts": ']))
    return mutate_bytes(rng, rng.choice(trace_corpus())[:4096])


# -- GGUF ------------------------------------------------------------------------------------------

U32_EXTREMES = (0, 1, 2, 3, 7, 8, 9, 12, 13, 31, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)
U64_EXTREMES = (0, 1, 2, 4096, 1 << 31, 1 << 32, 1 << 40, 1 << 60, (1 << 63) - 1, 1 << 63, (1 << 64) - 1,
                (1 << 64) - 8)


@functools.cache
def gguf_seeds() -> tuple[tuple[str, bytes, int], ...]:
    """(name, header bytes, full file size): small real-shaped files written by the gguf package, and
    the headers of the fixture specs (8B to 70B models: the data region is a sparse hole)."""
    import tempfile

    import numpy as np
    from gguf import GGUFWriter

    seeds: list[tuple[str, bytes, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "small.gguf"
        w = GGUFWriter(str(path), "llama")
        w.add_name("fuzz \x1b]0;title\x07 model")
        w.add_uint32("llama.block_count", 2)
        w.add_uint32("llama.context_length", 4096)
        w.add_uint32("llama.embedding_length", 64)
        w.add_uint32("llama.attention.head_count", 4)
        w.add_array("llama.attention.head_count_kv", [2, 1])
        w.add_float32("llama.rope.freq_base", 10000.0)
        w.add_bool("general.flag", True)
        w.add_int64("general.count", -3)
        w.add_float64("general.ratio", 0.5)
        w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "a", "\u202eb"])
        w.add_array("general.nested", [[1, 2], [3]])
        w.add_uint32("general.alignment", 32)
        for i in range(2):
            w.add_tensor(f"blk.{i}.attn_norm.weight", np.zeros(64, dtype=np.float32))
            w.add_tensor(f"blk.{i}.attn_q.weight", np.zeros((64, 64), dtype=np.float16))
        w.add_tensor("token_embd.weight", np.zeros((4, 64), dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        data = path.read_bytes()
        seeds.append(("small", data, len(data)))
        import sys

        sys.path.insert(0, str(FIXTURES / "gguf"))
        try:
            from make_gguf import build_gguf, load_spec
        finally:
            sys.path.pop(0)
        for name in ("llama-3-8b-instruct-q4_k_m", "gemma-2-9b-it-q4_k_m", "mamba-130m-f16"):
            out = build_gguf(load_spec(name), Path(tmp) / f"{name}.gguf")
            size = out.stat().st_size
            from doctor.sources.probes.gguf_header import check_gguf

            head = check_gguf(out)
            with open(out, "rb") as handle:
                seeds.append((name, handle.read(head.data_offset), size))
    return tuple(seeds)


def gguf_fields(data: bytes) -> list[tuple[int, str]]:
    """(offset, struct format) of every count, length, type, dimension and offset in a valid
    little-endian GGUF header: where a lie does the most harm."""
    fields: list[tuple[int, str]] = [(4, "I"), (8, "Q"), (16, "Q")]
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string() -> None:
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        fields.append((pos, "Q"))
        pos += 8 + n

    def value(t: int) -> None:
        nonlocal pos
        if t in scalar:
            pos += scalar[t]
        elif t == 8:
            string()
        elif t == 9:
            (et,) = struct.unpack_from("<I", data, pos)
            fields.append((pos, "I"))
            (count,) = struct.unpack_from("<Q", data, pos + 4)
            fields.append((pos + 4, "Q"))
            pos += 12
            for _ in range(count):
                value(et)

    for _ in range(n_kv):
        string()
        (t,) = struct.unpack_from("<I", data, pos)
        fields.append((pos, "I"))
        pos += 4
        value(t)
    for _ in range(n_tensors):
        string()
        (nd,) = struct.unpack_from("<I", data, pos)
        fields.append((pos, "I"))
        pos += 4
        for _ in range(nd):
            fields.append((pos, "Q"))
            pos += 8
        fields.append((pos, "I"))  # type
        fields.append((pos + 4, "Q"))  # offset
        pos += 12
    return fields


def synth_gguf(rng: Random) -> bytes:
    """A header built from nothing: random version, counts, key/value types (valid and not), nested
    arrays, tensors with random dimensions, types and offsets, and a random tail."""
    out = bytearray(b"GGUF" if rng.random() < 0.95 else rng.choice([b"GGML", b"FUGG", b"\x00\x00\x00\x00"]))
    n_kv = rng.randrange(0, 6)
    n_tensors = rng.randrange(0, 5)
    out += struct.pack("<I", rng.choice([3, 3, 3, 2, 1, 4, 0x03000000, rng.randrange(1 << 32)]))
    out += struct.pack("<Q", n_tensors if rng.random() < 0.8 else rng.choice(U64_EXTREMES))
    out += struct.pack("<Q", n_kv if rng.random() < 0.8 else rng.choice(U64_EXTREMES))

    def s(text: bytes) -> bytes:
        length = len(text) if rng.random() < 0.9 else rng.choice(U64_EXTREMES)
        return struct.pack("<Q", length) + text

    def val(t: int, depth: int) -> bytes:
        fmts = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t in fmts:
            return rng.randbytes(struct.calcsize(fmts[t]))
        if t == 8:
            return s(rng.choice([b"", b"x", b"\x1b[2J", b"\xff\xfe", "\u202e".encode()]))
        if t == 9:
            et = rng.choice([0, 4, 8, 9, 6, 13, 0xFFFFFFFF]) if depth < 5 else 4
            count = rng.randrange(0, 4) if rng.random() < 0.8 else rng.choice(U64_EXTREMES)
            body = b"".join(val(et, depth + 1) for _ in range(min(count, 4)))
            return struct.pack("<IQ", et, count) + body
        return b""

    for _ in range(n_kv):
        key = rng.choice([b"general.alignment", b"general.architecture", b"llama.block_count", b"x",
                          b"general.name", b"\x1b]52;c;eA==\x07"])
        t = rng.choice([0, 4, 5, 6, 7, 8, 9, 10, 12, 13, 0xFFFFFFFF])
        out += s(key) + struct.pack("<I", t) + val(t, 0)
    for i in range(n_tensors):
        n_dims = rng.choice([1, 2, 3, 4, 0, 5, 0xFFFFFFFF]) if rng.random() < 0.3 else rng.randrange(1, 3)
        out += s(f"blk.{rng.choice([0, 1, 511, 512, 10**9])}.w{i}".encode())
        out += struct.pack("<I", n_dims)
        for _ in range(min(n_dims, 4)):
            dim = rng.choice([1, 32, 64, 256, 0]) if rng.random() < 0.8 else rng.choice(U64_EXTREMES)
            out += struct.pack("<Q", dim)
        out += struct.pack("<I", rng.choice([0, 1, 2, 8, 12, 30, 39, 4242, 0xFFFFFFFF]))
        out += struct.pack("<Q", rng.choice([0, 32, 64, 31]) if rng.random() < 0.8 else rng.choice(U64_EXTREMES))
    pad = (-len(out)) % 32
    return bytes(out) + b"\x00" * pad + rng.randbytes(rng.randrange(0, 2048))


def gen_gguf(rng: Random) -> tuple[bytes, int | None]:
    """(header bytes, sparse size or None): a real header with lies in its fields, truncated at a
    field boundary, mutated bytes, or a header built from nothing."""
    _, data, size = rng.choice(gguf_seeds())
    r = rng.random()
    if r < 0.4:  # lie in one or more fields
        buf = bytearray(data)
        fields = gguf_fields(data)
        for _ in range(rng.randrange(1, 4)):
            pos, fmt = rng.choice(fields)
            choices = U32_EXTREMES if fmt == "I" else U64_EXTREMES
            value = rng.choice(choices) if rng.random() < 0.8 else rng.randrange(1 << (32 if fmt == "I" else 64))
            struct.pack_into("<" + fmt, buf, pos, value)
        return bytes(buf), size if rng.random() < 0.5 else None
    if r < 0.6:  # cut at (or next to) a field boundary
        pos, fmt = rng.choice(gguf_fields(data))
        cut = pos + rng.choice([0, 1, struct.calcsize(fmt) - 1, struct.calcsize(fmt)])
        return data[:cut], None
    if r < 0.75:
        return mutate_bytes(rng, data, rng.randrange(1, 6)), size if rng.random() < 0.3 else None
    return synth_gguf(rng), None


# -- rules -----------------------------------------------------------------------------------------

HOSTILE_YAML = (
    "- !!python/object/apply:os.system ['touch /tmp/llm-doctor-pwned']\n",
    "- !!python/object/new:subprocess.Popen [['touch', '/tmp/llm-doctor-pwned']]\n",
    "- !!python/name:os.system\n",
    "- !!python/module:os\n",
    "id: !!python/object/apply:builtins.eval ['__import__(\"os\").system(\"id\")']\n",
    "- {id: !!binary aGk=}\n",
    "- !!set {a, b}\n",
    "- &a [*a]\n",
    "a: &a {b: *a}\n",
    "- {<<: {id: LD999}}\n",
    "- id: LD999\n  when: {fact: config.n_ctx, matches: '(a+)+$'}\n",
    "- !include /etc/passwd\n",
    "- !ENV ${HOME}\n",
    "[" * 5000 + "]" * 5000,
    "{a: " * 3000 + "1" + "}" * 3000,
    "- " * 3000 + "x\n",
    "- id: LD999\n  title: \"\\e]52;c;eA==\\a\"\n",
    "\ufeff- id: LD999\n",
    "- id: LD999\n\tslug: tab\n",
    "- 99999999999999999999999999999999999999999999999999\n",
    "%YAML 1.1\n%TAG ! tag:yaml.org,2002:python/\n---\n- !object/apply:os.system [id]\n",
)
# what a template must never reach
TEMPLATE_ATTACKS = ("{fact.__class__}", "{config.n_ctx.__class__.__mro__}", "{__import__}", "{event.__init__}",
                    "{config.n_ctx!r}", "{config.n_ctx:>999999999}", "{0.__class__}", "{facts._facts}",
                    "{config.n_ctx[0]}", "{event.__class__.__init__.__globals__}", "{config.n_ctx|__class__}",
                    "{event.data}", "{{config.n_ctx}}", "%(x)s %s %n", "${HOME} $(id) `id`")


def _rule_tree(rng: Random) -> Any:
    import yaml

    docs = yaml.safe_load(rng.choice(rule_corpus()))
    return rng.choice(docs)


def _mutate_tree(rng: Random, node: Any, depth: int = 0) -> Any:
    ops = ["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "matches", "exists", "between", "__class__",
           "all", "any", "not", "fact", "events", "min_count", "times", "plus"]
    if isinstance(node, dict):
        out: dict[Any, Any] = {}
        for k, v in node.items():
            r = rng.random()
            if r < 0.04:
                continue
            if r < 0.08:
                k = rng.choice(ops)
            out[k] = _mutate_tree(rng, v, depth + 1)
        return out
    if isinstance(node, list):
        return [_mutate_tree(rng, v, depth + 1) for v in node if rng.random() > 0.05]
    r = rng.random()
    if r < 0.08:
        return _json_value(rng)
    if r < 0.11:
        return rng.choice(TEMPLATE_ATTACKS)
    if r < 0.13:
        return rng.choice(["(a+)+$", "(x|x)*y", "[", "(?P<a>)(?P=a)", "\\1", "(?=a)", "a{1000000}", ".*" * 40])
    if r < 0.15 and isinstance(node, str):
        return node + rng.choice(HOSTILE_TEXT)
    return node


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in _leaves(v, (*path, k))]
    if isinstance(node, list):
        return [leaf for i, v in enumerate(node) for leaf in _leaves(v, (*path, i))]
    return [path]


def _hostile_leaf(rng: Random, key: Any, value: Any) -> Any:
    """A value of the same type with something hostile in it: the rule still loads, mostly."""
    if key == "matches" or (isinstance(value, str) and rng.random() < 0.2 and key not in ("id", "slug", "class")):
        return rng.choice(["(a+)+$", "(.*a){20}", "(x|x)*y", "^(\\w+\\s?)*$", "[\\s\\S]*$", "a|" * 50 + "b"])
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return rng.choice([0, -1, 2**63, 2**64, 10**30, 1e308, 0.5, -(10**20)])
    if isinstance(value, str):
        if key in ("message", "explain", "text", "title", "llama.cpp", "llama-cpp-python", "ollama", "vllm", "tgi"):
            attack = rng.choice(TEMPLATE_ATTACKS + HOSTILE_TEXT)
            return value + " " + attack if rng.random() < 0.5 else attack + value
        return value + rng.choice(["", "\x1b[2J", "\u202e", "x" * 300])
    return value


def gen_rule_light(rng: Random) -> str:
    """A real rule with one or two leaves made hostile (regex bombs, template attacks, extreme
    numbers, escape sequences): most still load, so evaluation and rendering get exercised."""
    import yaml

    rule = _rule_tree(rng)
    for _ in range(rng.randrange(1, 3)):
        leaves = _leaves(rule)
        path = rng.choice(leaves)
        node = rule
        for k in path[:-1]:
            node = node[k]
        if path:
            node[path[-1]] = _hostile_leaf(rng, path[-1], node[path[-1]])
    if rng.random() < 0.3:  # a regex bomb on a fact that holds a long log line
        rule["when"] = {"all": [rule.get("when", {"fact": "config.n_ctx", "exists": True}),
                                {"fact": rng.choice(["model.name", "engine.name", "model.path", "run.output_text"]),
                                 "matches": rng.choice(["(a+)+$", "(.*a){25}", "(x|x)*y"])}]}
    return yaml.safe_dump([rule], allow_unicode=True, sort_keys=False)


def gen_rules(rng: Random) -> str:
    """One rule file: a real rule with its tree mutated, a real file with its lines mutated, or a
    hostile YAML construct (tags, aliases, anchors, nesting, bombs)."""
    import yaml

    r = rng.random()
    if r < 0.35:
        return gen_rule_light(rng)
    r = rng.random()
    if r < 0.45:
        rules = [_mutate_tree(rng, _rule_tree(rng)) for _ in range(rng.randrange(1, 3))]
        return yaml.safe_dump(rules, allow_unicode=True, sort_keys=False)
    if r < 0.75:
        lines = rng.choice(rule_corpus()).splitlines()
        start = rng.randrange(len(lines))
        lines = lines[start:start + rng.randrange(5, 200)]
        for _ in range(rng.randrange(1, 6)):
            i = rng.randrange(len(lines)) if lines else 0
            op = rng.randrange(6)
            if not lines:
                break
            if op == 0:
                del lines[i]
            elif op == 1:
                lines.insert(i, lines[rng.randrange(len(lines))])
            elif op == 2:
                lines[i] = "  " * rng.randrange(4) + lines[i].lstrip()
            elif op == 3:
                value = ": " + json.dumps(_json_value(rng), default=str)
                lines[i] = re.sub(r":\s.*$", lambda _m, v=value: v, lines[i])
            elif op == 4:
                lines[i] = lines[i] + rng.choice([" &a", " *a", " !!python/name:os.system", " #", " {", " [", "\t"])
            else:
                lines[i] = lines[i].replace("{", rng.choice(TEMPLATE_ATTACKS)[:-1], 1)
        if lines and not lines[0].startswith("-"):
            lines.insert(0, "- id: LD999")
        return "\n".join(lines) + "\n"
    if r < 0.9:
        return rng.choice(HOSTILE_YAML)
    depth = rng.choice([50, 500, 5000])
    return "- " + "{all: [" * depth + "{fact: config.n_ctx, gt: 1}" + "]}" * depth + "\n"


def gen_rule_bytes(rng: Random) -> bytes:
    text = gen_rules(rng).encode("utf-8", "surrogatepass")
    r = rng.random()
    if r < 0.3:
        return mutate_bytes(rng, text, 2)
    if r < 0.35:
        return text + b"#" + b"x" * (1 << 20)  # over the size limit
    return text


# -- the registry the long run and the tests share ------------------------------------------------

Target = Callable[[Random, Path], str]


def _run_log(rng: Random, tmp: Path) -> str:
    return log_target(gen_log(rng), chunk=rng.choice([1 << 16, 4096, 1 << 20, 7]))


def _run_input(rng: Random, tmp: Path) -> str:
    return input_target(gen_input(rng))


_gguf_counter = [0]


def _run_gguf(rng: Random, tmp: Path) -> str:
    data, sparse = gen_gguf(rng)
    _gguf_counter[0] += 1
    path = tmp / f"fuzz-{os.getpid()}-{_gguf_counter[0]}.gguf"
    try:
        return gguf_target(data, path, sparse)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def _run_rules(rng: Random, tmp: Path) -> str:
    if rng.random() < 0.2:
        return rules_target(gen_rule_bytes(rng), tmp / f"fuzz-{os.getpid()}.yaml")
    return rules_target(gen_rules(rng))


TARGETS: dict[str, Target] = {"logs": _run_log, "inputs": _run_input, "gguf": _run_gguf, "rules": _run_rules}
