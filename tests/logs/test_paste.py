"""What was pasted, normalised before anything matches (doctor/core/paste.py, paste_wrap.py,
paste_escapes.py, encoding.py): real logs re-pasted each way bench/paste_harness.py re-pastes the
corpus (wrapped, CRLF, docker and kubectl prefixes, quoted, inside a JSON string, as a Python repr,
UTF-16, a notification's word wrap) keep their diagnosis, and the evidence cites the user's own
lines. The logs are the repository's real fixtures (fixtures/logs, each README cites its source)
and, where the shared corpus is beside the checkout, cases of its fit split (never the check split).
"""

from __future__ import annotations

import io
import json
import random
import textwrap
from pathlib import Path

import pytest

from bench.corpus_score import corpus_logs, default_folders, split_of
from bench.paste_harness import WAYS
from doctor.core.encoding import sniff_encoding
from doctor.core.lines import decode, split_lines
from doctor.core.paste import looks_pasted, normalise_paste
from doctor.core.paste_escapes import decode_spans
from doctor.core.paste_wrap import rejoin
from doctor.sources.logs import entry as entry_module
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.entry import analyze_bytes, analyze_stream
from doctor.sources.logs.line import make_line
from doctor.views.tui.log_source import LogSource

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
# real logs of five engines, each with a root cause quoted from a line
REAL = ["llama-server/real-prompt-too-long.log", "vllm/prompt-over-max-len-v0.6.3.log", "ollama/truncation-v0.5.7.log",
        "llama.cpp/cuda-oom-kv.log", "vllm/kv-blocks-below-max-len-block-size-v0.4.2.log"]
# ways that keep every line where it was (the evidence cites the same numbers)
SAME_LINES = {"crlf", "docker", "kubectl", "quote", "utf16", "utf16-nobom"}
ONE_LINE = {"json", "repr"}  # the whole paste is one physical line


def _lines(report) -> list[int]:
    """Every line the findings cite (log lines, and the lines the facts they use were read from)."""
    return sorted({line for f in report.findings for line in f.lines})


def _starts(text: str, way: str) -> list[int]:
    """The physical line each line of `text` begins on once re-pasted `way` (a wrapping way)."""
    starts, at = [], 1
    for line in text.split("\n"):
        starts.append(at)
        at += len(WAYS[way](line).decode().split("\n"))
    return starts


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("name", REAL)
def test_a_repasted_log_keeps_its_diagnosis_and_cites_the_pasted_lines(analyze, tmp_path: Path, name: str,
                                                                      way: str) -> None:
    text = (LOGS / name).read_text(encoding="utf-8")
    original = analyze(LOGS / name)
    assert original.assessment is not None
    pasted = tmp_path / f"{way}.log"
    pasted.write_bytes(WAYS[way](text))
    report = analyze(pasted)
    assert report.assessment is not None, [f.id for f in report.findings]
    assert (report.assessment.id, report.assessment.cls) == (original.assessment.id, original.assessment.cls)
    cited, before = _lines(report), _lines(original)
    assert cited and before
    if way in SAME_LINES:
        assert cited == before
    elif way in ONE_LINE:
        assert cited == [1]
    else:  # wrapped: a logical line is cited by the physical line it begins on, which the pane shows
        starts = _starts(text, way)
        assert cited == sorted({starts[n - 1] for n in before})
        pane = LogSource.from_path(pasted)
        for f in report.findings:
            for e in f.evidence:
                if e.kind == "log" and e.line:
                    [shown] = pane.read(e.line, 1)
                    assert e.text.startswith(shown.text.strip()[:30]), (e.line, shown.text, e.text)
    if not way.startswith("utf16"):
        assert report.facts.value("run.log_lines") == len(split_lines(pasted.read_bytes()))


@pytest.mark.parametrize("style", ["terminal", "word"])
def test_a_number_split_by_a_wrap_is_read_whole(style: str) -> None:
    """llama-server's 400 (`request (582 tokens) exceeds the available context size (256 tokens)`),
    its numbers cut at the wrap: the request is 582 tokens, not 58 or 2."""
    data = (LOGS / "llama-server/real-prompt-too-long.log").read_text(encoding="utf-8")
    line = next(t for t in data.splitlines() if "exceeds the available context size" in t)
    cut = line.index("(582") + 3  # "(58" | "2 tokens)"
    if style == "terminal":
        width = cut
        pasted = "\n".join(piece for t in data.splitlines() for piece in
                           ([t[i:i + width] for i in range(0, len(t), width)] or [""]))
        assert "(58\n2 tokens)" in pasted
    else:  # a notification's word wrap: the width a space short of the number, so it moves down whole
        width = line.index("(582") + 2
        pasted = "\n".join(piece for t in data.splitlines()
                           for piece in (textwrap.wrap(t, width, break_on_hyphens=False) or [""]))
    facts = analyze_bytes(pasted.encode(), "paste")
    original = analyze_bytes(data.encode(), "log")
    for name in ("run.prompt_tokens", "run.context_size", "config.n_ctx"):
        if original.has(name):
            assert facts.value(name) == original.value(name), name
    assert any(original.has(n) for n in ("run.prompt_tokens", "run.context_size"))


def test_wraps_are_undone_only_where_the_lengths_say_so() -> None:
    """No real log of the fixtures is taken for a wrapped one (lines of one width followed by records,
    siblings of the same format, a longest line followed by a long word are no wrap)."""
    for log in sorted(LOGS.rglob("*.log")):
        lines = [decode(line) for line in split_lines(log.read_bytes())]
        assert rejoin(lines) is None, log.name
    # and the corpus's fit split (the shared one where it is here, the repository's): only the logs
    # that were wrapped are
    for log in corpus_logs(default_folders(), "fit"):
        if split_of(log.name) == "fit":
            joined = rejoin([decode(line) for line in split_lines(log.read_bytes())])
            assert (joined is not None) == log.name.startswith(WRAPPED_IN_CORPUS), log.name


# the fit split's cases whose text was wrapped before it was pasted
WRAPPED_IN_CORPUS = ("311_",  # `ollama run` wraps the model's answer at the terminal's width
                     "421_")  # a VS Code notification's text, word-wrapped


def test_server_logs_keep_their_fast_path() -> None:
    """The logs bench/analyze_real.py repeats (a busy llama-server, Ollama, vLLM with prompts logged,
    SGLang) show no paste mark in their head: the normaliser never touches them."""
    for name in ("llama-server/real-queueing.log", "llama-server/real-parallel-4.log", "vllm/healthy-v0.8.5-v1-tp2.log",
                 "vllm/healthy-v0.6.3.log", "ollama/healthy-v0.5.7-journald.log", "sglang"):
        paths = sorted((LOGS / name).glob("*.log")) if (LOGS / name).is_dir() else [LOGS / name]
        for path in paths:
            assert not looks_pasted(path.read_bytes()[: 64 << 10]), path.name


def test_framing_is_stripped_only_where_most_lines_carry_it() -> None:
    log = (LOGS / "ollama/truncation-v0.5.7.log").read_text(encoding="utf-8").splitlines()
    quoted = "\n".join(["> " + line for line in log] + ["", "that is all I see > nothing else"]) + "\n"
    pasted = normalise_paste(quoted.encode())
    assert pasted is not None
    lines = pasted.data.decode().splitlines()
    assert lines[: len(log)] == log and lines[-1] == "that is all I see > nothing else"
    assert pasted.physical == list(range(1, len(lines) + 1))  # nothing joined, nothing split
    # one quoted line in prose is no quoted log
    assert normalise_paste(b"the server said:\n> out of memory\nthen it stopped\nand restarted\n") is None
    fenced = "```\n" + "\n".join(log) + "\n```\n"
    assert normalise_paste(fenced.encode()).data.decode().splitlines()[1:-1] == log


def test_a_message_in_a_string_becomes_its_lines_at_the_strings_line() -> None:
    log = (LOGS / "vllm/prompt-over-max-len-v0.6.3.log").read_text(encoding="utf-8")
    body = json.dumps({"error": {"message": log, "type": "BadRequestError", "code": 400}})
    pasted = normalise_paste(f"curl said:\n{body}\nthat was all\n".encode())
    assert pasted is not None
    lines = pasted.data.decode().splitlines()
    assert lines[0] == "curl said:" and lines[-1] == "that was all"
    assert lines[2:-1] == log.splitlines()  # the record (its message lifted out), then the message's lines
    assert json.loads(lines[1])["error"]["type"] == "BadRequestError"
    assert set(pasted.physical[1:-1]) == {2} and pasted.physical[-1] == 3 and pasted.lines == 3


@pytest.mark.parametrize(("text", "want"), [
    # a Python repr: the apostrophe escaped, a bytes literal of UTF-8
    (r"""openai.BadRequestError: 'This model\'s maximum context length is 8192 tokens.\nHowever'""",
     "openai.BadRequestError: 'This model's maximum context length is 8192 tokens.\nHowever'"),
    (r"b'ggml_cuda_init: found 1 CUDA devices \xe2\x80\x94 ok\n'",
     "'ggml_cuda_init: found 1 CUDA devices \u2014 ok\n'"),
    # JSON: \u escapes, a surrogate pair, an escaped slash; a body inside a body (escaped twice)
    (r'{"detail": "na\u00efve \ud83d\ude00 a\/b\nnext"}', '{"detail": "na\u00efve \U0001f600 a/b\nnext"}'),
    (r'{"msg": "upstream: {\"message\": \"line a\\nline b\"}"}', '{"msg": "upstream: {"message": "line a\nline b"}"}'),
    # an escaped message printed without its quotes
    (r"Traceback (most recent call last):\n  File x\nValueError: boom",
     "Traceback (most recent call last):\n  File x\nValueError: boom"),
])
def test_string_escapes_are_decoded(text: str, want: str) -> None:
    assert decode_spans(text) == want


@pytest.mark.parametrize("text", [
    r'llama_model_load: loading model from "C:\Users\me\models\llama-3-8b.Q4_K_M.gguf"',  # \U, \m: no escapes
    "the model's context is 4096 and it's full",  # apostrophes, no escape
    r"C:\new\models: one \n only",  # bare, a single \n
])
def test_what_is_not_an_escaped_string_is_left_alone(text: str) -> None:
    assert decode_spans(text) is None


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("bom", [True, False])
def test_utf16_and_utf32_are_read_as_text(codec: str, bom: bool) -> None:
    log = (LOGS / "llama.cpp/cuda-oom-kv.log").read_text(encoding="utf-8")
    data = (("\ufeff" if bom else "") + log.replace("\n", "\r\n")).encode(codec)
    assert sniff_encoding(data[:4096]) is not None
    got, want = analyze_bytes(data), analyze_bytes(log.encode())
    assert got.value("run.log_lines") == want.value("run.log_lines")
    assert got.event_counts == want.event_counts and got.value("engine.name") == want.value("engine.name")


def test_the_log_pane_shows_a_utf16_log_as_text(tmp_path: Path) -> None:
    log = (LOGS / "llama.cpp/cuda-oom-kv.log").read_text(encoding="utf-8")
    path = tmp_path / "ps.log"
    path.write_bytes(("\ufeff" + log.replace("\n", "\r\n")).encode("utf-16-le"))
    shown = [line.text for line in LogSource.from_path(path).read(1, 1000)]
    assert shown == [line.expandtabs(4) for line in log.splitlines()]


def test_nul_bytes_that_are_no_utf16_still_read_as_binary() -> None:
    """Binary data stays refused (one line, exit 2), even data whose every other byte is NUL (an array
    of small numbers) that has the NUL pattern of UTF-16 but decodes to no text."""
    from doctor.core.errors import InputError

    rng = random.Random(7)
    for data in (b"\x00\x01\x02\x03" * 4000, bytes(rng.randrange(256) if i % 2 else 0 for i in range(200000))):
        with pytest.raises(InputError, match="binary"):
            analyze_stream(io.BytesIO(data))


def test_a_truncated_utf16_log_is_read_up_to_its_cut() -> None:
    """A UTF-16 file cut in the middle of a character, with a lone surrogate: read, U+FFFD for what is
    not text, nothing refused, the lines before the cut all read."""
    log = (LOGS / "llama.cpp/cuda-oom-kv.log").read_text(encoding="utf-8")
    data = ("\ufeff" + log).encode("utf-16-le")[:-1] + b"\x00\xd8"
    assert analyze_stream(io.BytesIO(data)).event_counts == analyze_bytes(log.encode()).event_counts


def test_a_json_log_quoting_an_escaped_error_is_read_where_the_scan_selects_it(monkeypatch) -> None:
    """A log too large to be a paste (here: PASTE_MAX made small), an application's JSON log holding a
    client's repr of vLLM's error (`This model\\'s`, escaped once more by JSON) in a message of several
    lines: the scan's triggers match the escaped quote (the head shows them), the message is decoded
    where the line is read, and each of its lines is read."""
    error = next(t for t in (LOGS / "vllm/prompt-over-max-len-v0.6.3.log").read_text(encoding="utf-8").splitlines()
                 if "maximum context length" in t).split("ValueError: ", 1)[1]
    quoted = repr(error.replace("the messages", 'the "messages"'))  # both quotes: repr escapes the apostrophe
    assert "model\\'s" in quoted
    record = json.dumps({"level": "error", "msg": f"request failed\nBadRequestError: {quoted}"})
    line = make_line(7, record.encode())
    assert line.text == "request failed | level=error"
    assert line.more is not None
    assert [m.text for m in line.more] == ["BadRequestError: '" + error.replace("the messages", 'the "messages"') + "'"]
    assert "This model's maximum context length is 8192 tokens" in line.more[0].text
    assert {m.number for m in line.more} == {7}
    # the scan: an escaped quote no longer hides a line from its trigger, where the head shows them
    real = next(t for t in (LOGS / "ollama/healthy-v0.12.11-ollama-engine.log").read_bytes().splitlines()
                if b'msg="loading model"' in t)
    escaped = real.replace(b'"', b'\\"')
    assert LogAnalyzer("x", escaped=True).scanner.trigger.search(escaped) is not None
    assert LogAnalyzer("x").scanner.trigger.search(escaped) is None
    filler = json.dumps({"level": "info", "msg": "GET /health 200"})
    monkeypatch.setattr(entry_module, "PASTE_MAX", 1000)
    facts = analyze_stream(io.BytesIO(("\n".join([record] + [filler] * 50) + "\n").encode()))
    assert facts.event_counts.get("prompt_too_long") == 1, facts.event_counts
