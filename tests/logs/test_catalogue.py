"""The message catalogue (doctor/sources/catalogue): every entry recognised by the analyzer.

For EVERY entry, two lines built from the entry itself (doctor/sources/catalogue/samples.py): its
sample, and the sample with other values in the same format (each number the pattern reads changed).
Each goes through `analyze` as a one-line log: the catalogue must recognise it and read the numbers
put there, and a warning or error with a diagnosis class must become a `message` event. A catalogue
entry nothing recognises fails here. Besides: the files load with the rule families' classes, every
pattern joins the one RE2 set, a bad entry is refused with file:line, and a line no engine parser
reads reaches a finding of its class while one a parser reads is not reported twice.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from doctor.core.errors import RuleError
from doctor.judge.evaluate import diagnose
from doctor.judge.families import builtin as builtin_families
from doctor.sources.catalogue import loader, samples, store
from doctor.sources.catalogue.coverage import analyze_line, check
from doctor.sources.catalogue.parser import catalogue_set

ENTRIES = store.entries()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_entry_sample_recognised(entry: loader.Entry) -> None:
    problem = check(entry, samples.sample(entry))
    assert problem is None, problem


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_entry_other_values_recognised(entry: loader.Entry) -> None:
    built = samples.variant(entry)
    assert built.text != entry.sample or entry.pattern.startswith("^")
    problem = check(entry, built)
    assert problem is None, problem


def test_an_entry_nothing_recognises_fails() -> None:
    stranger = dataclasses.replace(ENTRIES[0], id="vllm.not_in_the_catalogue", pattern="no engine prints (?P<n>\\d+)",
                                   sample="no engine prints 12", numbers={"n": "count"})
    problem = check(stranger, samples.sample(stranger))
    assert problem is not None and "did not recognise" in problem


def test_every_engine_is_catalogued() -> None:
    by_engine = loader.load()
    for engine in ("llama_cpp", "lcp", "ollama", "vllm", "tgi", "sglang", "koboldcpp", "lmstudio",
                   "textgen_webui", "llama_box"):
        assert len(by_engine[engine]) >= 7, engine
    assert sum(map(len, by_engine.values())) == len(ENTRIES) >= 290


def test_classes_are_the_rule_families() -> None:
    classes = frozenset(builtin_families().classes)
    assert loader.load(classes=classes)  # raises on a class families.yaml does not know
    assert {e.meaning for e in ENTRIES} <= classes | loader.PLAIN


def test_one_re2_set_holds_every_pattern() -> None:
    messages = catalogue_set()
    assert messages.compiled, "a catalogue pattern RE2 refuses: the set fell back to one regex per entry"
    assert len(messages.entries) == len(ENTRIES)


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "vllm.yaml"
    path.write_text(body)
    return path


GOOD = """- id: vllm.x
  level: error
  pattern: 'out of (?P<n>\\d+) blocks'
  numbers: {n: count}
  sample: 'out of 12 blocks'
  meaning: oom.kv_cache
  versions: {first: v1, last: null}
  source: a.py
  fix: fewer blocks
"""


@pytest.mark.parametrize(("change", "line", "field", "words"), [
    (("meaning: oom.kv_cache", "meaning: oom.everything"), 1, "meaning", "unknown class"),
    (("sample: 'out of 12 blocks'", "sample: 'out of blocks'"), 1, "sample", "does not match"),
    (("{n: count}", "{n: furlongs}"), 1, "numbers", "unknown unit"),
    (("{n: count}", "{m: count}"), 1, "numbers", "not a named group"),
    (("(?P<n>\\d+) blocks", "(?P<n>\\d+)(?= blocks)"), 1, "pattern", "RE2 lacks"),
    (("id: vllm.x", "id: tgi.x"), 1, "id", "the file's engine"),
])
def test_bad_entries_are_refused_with_file_and_line(tmp_path: Path, change: tuple[str, str], line: int,
                                                    field: str, words: str) -> None:
    path = _write(tmp_path, "# a comment\n" + GOOD.replace(*change))
    with pytest.raises(RuleError) as caught:
        loader.load_file(path, frozenset(builtin_families().classes))
    assert (caught.value.line, caught.value.field) == (line + 1, field)
    assert words in caught.value.message and str(path) in str(caught.value)


def test_duplicate_ids_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match=r"vllm.yaml:11 \[id\]: vllm.x is also at line 1"):
        loader.load_file(_write(tmp_path, GOOD + "\n" + GOOD))
    with pytest.raises(RuleError, match="not valid YAML"):
        loader.load_file(_write(tmp_path, "- id: [unclosed\n"))
    with pytest.raises(RuleError, match="a list of entries"):
        loader.load_file(_write(tmp_path, "id: vllm.x\n"))
    with pytest.raises(RuleError, match=r"unknown fact"):
        loader.load_file(_write(tmp_path, GOOD + "  facts: {n: run.no_such_fact}\n"))


def test_a_line_no_parser_reads_is_judged_by_its_class(rulebase) -> None:
    # koboldcpp refusing a request longer than its context: catalogued, no engine parser reads it
    entry = next(e for e in ENTRIES if e.id == "koboldcpp.request_exceeds_ctx")
    facts, _ = analyze_line(entry.sample)
    event = next(e for e in facts.events("message") if e.data["id"] == entry.id)
    assert event.data["known"] is False
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    found = [f for f in report.findings if f.cls == entry.meaning]
    assert found and entry.fix in found[0].fix.text, report.findings


def test_a_line_a_parser_reads_is_not_reported_twice(rulebase) -> None:
    line = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4507.00 MiB on device 0: "
            "cudaMalloc failed: out of memory")
    facts, _ = analyze_line(line)
    messages = facts.events("message")
    assert messages and all(e.data["known"] is True for e in messages), messages
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert not [f for f in report.findings if "catalogued" in f.slug], report.findings


def test_numbers_become_facts_where_the_entry_names_them() -> None:
    facts, _ = analyze_line("Using gpu_layers=33 | ctx_size=8192 | cache_type=fp16")
    assert (facts.value("config.n_ctx"), facts.value("config.n_gpu_layers")) == (8192, 33)
    assert facts.get("config.n_ctx").source.name == "catalogue"
    # a fact an engine parser set stays its own: the llama.cpp parser reads n_ctx_train from its header
    facts, _ = analyze_line("print_info: n_ctx_train      = 4096\n"
                            "llama_init_from_model: n_ctx_per_seq (512) < n_ctx_train (8192) -- the full capacity "
                            "of the model will not be utilized")
    assert facts.value("model.n_ctx_train") == 4096 and facts.get("model.n_ctx_train").source.name != "catalogue"


def test_the_coverage_table_in_the_docs_is_current() -> None:
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("catalogue_coverage", root / "scripts" / "catalogue_coverage.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    found = [script.coverage(entry) for entry in ENTRIES]
    doc = (root / "docs" / "catalogue.md").read_text()
    stale = "docs/catalogue.md is stale: python scripts/catalogue_coverage.py --write"
    assert "\n".join(script.table(found)) in doc, stale
    # every catalogued warning or error is recognised and tested (the table's two columns equal the first)
    assert all(c.recognised and c.tested for c in found if c.entry.level != "info")
