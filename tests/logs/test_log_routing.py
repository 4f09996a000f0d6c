"""The fast paths of the log analysis find exactly what the plain paths find.

- literal gates (matcher.gated): a regex runs only where one of the literals read from its own syntax
  is in the text, so every match must contain one of them; and it begins at the first of its leading
  literals less their lead (matcher.leading_literals), so the match is the same one, groups and all;
- the literal index and the llama.cpp dispatch routing: the same facts as trying every line kind;
- the analyzer's router: the same facts as giving every line to every parser;
- chunked input and the direct RE2 calls: the same candidates, line numbers and facts.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import doctor.sources.engines.llamacpp.patterns as llamacpp_module
from doctor.sources.engines._ggml import oom
from doctor.sources.engines.llama_cpp_python import patterns as lcp
from doctor.sources.engines.ollama import patterns as ollama
from doctor.sources.engines.tgi import patterns as tgi
from doctor.sources.engines.vllm import patterns as vllm
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.entry import analyze_stream
from doctor.sources.logs.line import make_line
from doctor.sources.logs.matcher import (
    GatedPattern,
    LiteralIndex,
    compile_triggers,
    gated,
    leading_literals,
    required_literals,
    span_finder,
    text_filter,
    verdict,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
LOGS = sorted(FIXTURES.rglob("*.log")) + sorted(FIXTURES.rglob("*.md"))
MODULES = (llamacpp_module, lcp, vllm, ollama, tgi, oom)


def _gated_patterns() -> list[tuple[str, GatedPattern]]:
    found = []
    for module in MODULES:
        for name, value in vars(module).items():
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                item = item[0] if isinstance(item, tuple) and item else item
                if isinstance(item, GatedPattern):
                    found.append((f"{module.__name__}.{name}", item))
    return found


GATED = _gated_patterns()


def _fixture_texts() -> list[str]:
    texts = []
    for path in LOGS:
        for raw in path.read_bytes().splitlines():
            texts.append(make_line(1, raw[:16384]).text)
    return texts


TEXTS = _fixture_texts()


def test_every_parser_pattern_is_gated_and_compiles() -> None:
    assert len(GATED) > 150
    for name, pattern in GATED:
        assert isinstance(pattern.regex, re.Pattern), name  # compiles (lazily, so check here)


@pytest.mark.parametrize("name,pattern", GATED, ids=[n for n, _ in GATED])
def test_a_gate_never_hides_a_match_in_the_fixtures(name: str, pattern: GatedPattern) -> None:
    regex = pattern.regex
    for text in TEXTS:
        plain = regex.search(text)
        assert _same(pattern.search(text), plain), (name, text[:200])
        if plain is not None and pattern.literals:
            assert any(lit in text for lit in pattern.literals), (name, text[:200])
        assert pattern.findall(text) == regex.findall(text), name


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_gate_never_hides_a_match_in_generated_text(data: st.DataObject) -> None:
    name, pattern = data.draw(st.sampled_from(GATED))
    # text made of the pattern's own literals, digits and separators: where matches are likely
    pieces = [*(pattern.literals or ()), "0", "12", " = ", ": ", "(", ")", ",", " ", "MiB", "\n", "é", "x"]
    text = "".join(data.draw(st.lists(st.sampled_from(pieces), max_size=12)))
    pos = data.draw(st.integers(min_value=-2, max_value=len(text) + 1))
    assert _same(pattern.search(text), pattern.regex.search(text)), (name, text)
    assert _same(pattern.search(text, pos), pattern.regex.search(text, pos)), (name, text, pos)


def _same(got: re.Match[str] | None, plain: re.Match[str] | None) -> bool:
    """The very match: the same span and the same groups (a search begun later must not find a later one)."""
    if got is None or plain is None:
        return got is plain
    return got.span() == plain.span() and got.groups() == plain.groups() and got.lastindex == plain.lastindex


@pytest.mark.parametrize("source,expected", [
    (r"\bseed\s*=\s*(\d+)|sampler seed:\s*(\d+)", (0, ("sampler seed:", "seed"))),  # not simplified: offsets
    (r"""['"]?(prompt_tokens|prompt_eval_count)['"]?\s*[:=]\s*(\d+)""", (1, ("prompt_eval_count", "prompt_tokens"))),
    (r"(?<![\w-])x=(\d+)", (0, ("x=",))),  # look-behind reads before the start: no width
    (r"\d{1,3} MiB", (3, (" MiB",))),
    (r"(?:foo|bar)\d+ baz", (0, ("bar", "foo"))),
    (r"(?:foo|bar)x|-ngl|--gpu-layers", (0, ("--gpu-layers", "-ngl", "bar", "foo"))),
    (r"-ngl|--gpu-layers", None),  # a literal first: `re` finds its starts itself
    (r"(?:abc)\d", None),
    (r"\s*x", None),  # unbounded before any literal
    (r"(\w+) = (\d+)", None),
    (r"(?i)abc", None),
])
def test_leading_literals(source: str, expected: tuple[int, tuple[str, ...]] | None) -> None:
    assert leading_literals(source) == expected


def test_a_search_begins_at_the_lead_and_finds_the_same_match() -> None:
    """On a long text (a shorter one is searched whole: matcher._LONG) the regex is tried only near the marks."""
    pad = "x" * 300 + " "
    p = gated(r"\btemperature['\"]?\s*[=:]\s*(-?\d+(?:\.\d+)?)|--temp(?:erature)?[ =](\d+)")
    prompt = "x" * 5000 + " top temperature is hot, temperature=0.7, --temp 3"
    for text in (prompt, "temperature=1", "--temperature 2 temperature=3", "atemperature=1 temperature=4"):
        for padded in (text, pad + text, text + " " + pad):
            assert _same(p.search(padded), p.regex.search(padded)), padded
    assert p.search(prompt).group(1) == "0.7"
    assert p.search(prompt, 5040) is not None and p.search(prompt, 5040).group(2) == "3"
    assert p.search(pad + "temperature", -3) is None and p.search(pad + "temperature=5", -3).group(1) == "5"
    # many places to try (one search from the first instead), and windows that overlap (a lead of 3)
    many = pad + "temperature " * 20 + "temperature: 9"
    assert p.search(many).group(1) == "9" and p.search(many).start() == p.regex.search(many).start()
    r = gated(r"a=(\d)|b=(\d)")  # two marks: one found often, the other (earlier) not looked for after the cap
    for text in ("b=1" + " a=" * 20, " a=" * 20 + "b=2", "a=" * 3 + "b=3"):
        assert _same(r.search(pad + text), r.regex.search(pad + text)), text
    q = gated(r"\d{1,3} MiB")
    for text in ("1 MiB", "12 MiB 345 MiB", "x1234 MiB", "MiB 7 MiB", " MiB MiB 1 MiB", "99" + " MiB" * 12 + "5 MiB"):
        for padded in (pad + text, text + pad):
            assert _same(q.search(padded), q.regex.search(padded)), text
            assert _same(q.search(padded, 302), q.regex.search(padded, 302)), text


@pytest.mark.parametrize("source,expected", [
    (r"abc|abd", ("ab",)),
    (r"(?:foo|bar)\d+ baz", (" baz",)),
    (r"(?:foo|bar)\d+", ("bar", "foo")),
    (r"x*y?", None),
    (r"(?i)needle", None),
    (r"(?:print_info|llm_load_print_meta)\s*:\s+(\w+)", ("llm_load_print_meta", "print_info")),
    (r"(?:a+|b)c", ("c",)),
    (r"(?:slot|all slots are idle)", ("slot",)),
])
def test_required_literals(source: str, expected: tuple[str, ...] | None) -> None:
    assert required_literals(re.compile(source)) == expected


def test_gated_keeps_the_rest_of_the_pattern_api() -> None:
    p = gated(r"n_ctx\s*=\s*(\d+)")
    assert p.match("n_ctx = 4") is not None and p.groups == 1 and p.sub("N", "n_ctx = 4") == "N"
    assert list(m.group(1) for m in p.finditer("n_ctx = 1, n_ctx = 2")) == ["1", "2"]
    assert p.findall("nothing here") == [] and p.search("nothing here") is None
    compiled = re.compile("x")
    assert gated(compiled) is compiled
    assert gated("case", re.IGNORECASE).search("CASE") is not None  # no gate where `in` would miss
    # an inline (?i) in the source string is case-insensitive too (read from the parsed pattern)
    assert required_literals("(?i)out of memory") is None
    assert gated(r"(?i)out of memory").search("CUDA OUT OF MEMORY") is not None
    assert gated(r"x(?i:abc)").search("xABC") is not None


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from([*"abc =:_0119(),\t", "\ud800", "é", "字"]), max_size=40))
def test_literal_index_is_exact(text: str) -> None:
    literals = ["a", "ab", "c =", ":_", "(1", "b)", "\t"]
    index = LiteralIndex(literals)
    assert index.bits(text) == sum(1 << i for i, s in enumerate(literals) if s in text)


def test_primed_bits_are_used_only_for_that_very_text() -> None:
    index = LiteralIndex(["ab", "cd"])
    text = "".join(["x", "ab"])  # a distinct str object
    index.prime(text, [1])  # deliberately not the true bits, to see where they are used
    assert index.bits(text) == 0b10
    assert index.bits("xab") == 0b01  # an equal but other object: computed
    assert index.bits("cd") == 0b10


def test_literal_index_of_the_llama_parser_matches_plain_search() -> None:
    index = llamacpp_module.INDEX
    for text in TEXTS[::7]:
        assert index.bits(text) == sum(1 << i for i, s in enumerate(index.literals) if s in text)


def _facts_of(data: bytes, chunk: int | None = None, analyzer: LogAnalyzer | None = None) -> str:
    if chunk is None and analyzer is None:
        facts = analyze_stream(io.BytesIO(data), "x")
    else:
        a = analyzer or LogAnalyzer("x")
        step = chunk or len(data) or 1
        for i in range(0, len(data), step):
            a.feed(data[i:i + step])
        facts = a.finish()
    return json.dumps(facts.to_json(), sort_keys=True, default=str)


def _variants(data: bytes) -> dict[str, bytes]:
    lines = data.split(b"\n")
    return {
        "plain": data,
        "quoted": b"\n".join(b"> " + ln for ln in lines),
        "json": b"\n".join(json.dumps({"log": ln.decode("utf-8", "replace") + "\n"}).encode() for ln in lines),
        "wrapped": b"\n".join(ln[i:i + 80] for ln in lines for i in range(0, max(len(ln), 1), 80)),
    }


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_dispatch_routing_finds_what_trying_every_step_finds(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, data in _variants(path.read_bytes()).items():
        routed = _facts_of(data)
        with monkeypatch.context() as m:
            m.setattr(llamacpp_module.INDEX, "bits", lambda text: -1)  # every literal "present"
            assert _facts_of(data) == routed, name


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_the_router_finds_what_every_parser_on_every_line_finds(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole input's path both ways (a quoted, JSON or wrapped variant is read as a paste, normalised
    first: doctor/core/paste.py), once with the router and once giving every line to every parser."""
    variants = _variants(path.read_bytes())
    routed = {name: _facts_of(data) for name, data in variants.items()}
    build = LogAnalyzer.__init__

    def without_router(self: LogAnalyzer, *args: object, **kwargs: object) -> None:
        build(self, *args, **kwargs)  # type: ignore[arg-type]
        self.router = None

    monkeypatch.setattr(LogAnalyzer, "__init__", without_router)
    for name, data in variants.items():
        assert _facts_of(data) == routed[name], name


def _candidates(data: bytes, chunk: int, capture: bool) -> tuple[list[tuple[int, bytes]], int]:
    analyzer = LogAnalyzer("x", fold=False)  # every candidate line handed on (a folded run is no line each)
    scanner = analyzer.scanner
    scanner.capture = capture
    got = []
    for i in range(0, len(data), chunk):
        got += [(r.number, r.text) for r in scanner.feed(data[i:i + chunk]) if r.text is not None]
    got += [(r.number, r.text) for r in scanner.finish() if r.text is not None]
    return got, scanner.lines


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_candidate_lines_and_numbers_do_not_depend_on_chunking(path: Path) -> None:
    data = path.read_bytes()[:300_000]
    pattern = LogAnalyzer("x").scanner.trigger
    lines = data.replace(b"\r\n", b"\n").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    expected = [(i + 1, ln.rstrip(b"\r")[:16384]) for i, ln in enumerate(lines) if pattern.search(ln)]
    for chunk in (7, 4096, 1 << 22):
        for capture in (False, True):
            got, total = _candidates(data, chunk, capture)
            assert got == expected, (chunk, capture)
            assert total == len(lines), (chunk, capture)


def test_span_finder_agrees_with_search() -> None:
    from doctor.sources.logs.registry import parser_classes

    fragments = [f for cls in parser_classes() for f in cls.triggers]
    pattern = compile_triggers(fragments)
    find = span_finder(pattern)
    data = b"".join(p.read_bytes() for p in LOGS[:20])
    pos = 0
    while True:
        m = pattern.search(data, pos)
        span = find(data, pos, len(data))
        assert (span is None) == (m is None)
        if m is None:
            break
        assert span == m.span()
        pos = m.end() + 1
    assert find(data, 0, 0) is None


def test_a_gate_verdict_holds_for_that_very_text_only() -> None:
    fragments = ("needle \\d+",)
    test = text_filter(fragments)
    text = "".join(["hay", "stack"])
    assert not test(text)
    verdict(fragments).passed = text  # as the router says after its own match of the raw bytes
    assert test(text)
    assert not test("haystack")  # an equal but other object: searched
    assert test("a needle 42")


def test_text_filter_agrees_with_a_plain_search() -> None:
    test = text_filter(vllm.TRIGGERS)
    plain = re.compile("|".join(f"(?:{f})" for f in vllm.TRIGGERS))
    for text in TEXTS[::3]:
        assert bool(test(text)) == bool(plain.search(text)), text[:200]
    with pytest.raises(UnicodeEncodeError):  # as the RE2 binding does with a lone surrogate
        test("CUDA out of memory \ud800")
