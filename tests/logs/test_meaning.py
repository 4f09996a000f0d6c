"""The meaning layer (doctor/sources/catalogue/vocabulary.yaml, meaning.py, meaning_parser.py): a failure said
in another program's words becomes the typed event an engine parser makes, and the same rules judge it.

Every line here is real: the vocabulary's own examples (each cites a public thread or an engine's format
string with its file), the catalogue's samples (built from the engines' format strings, messages/*.yaml
cites the file and release of each), and the fixtures' engine lines (fixtures/logs/*/README.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from doctor.core.errors import RuleError
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.catalogue import meaning, store, vocabulary
from doctor.sources.catalogue.meaning_parser import MeaningParser
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.entry import analyze_bytes

V = vocabulary.builtin()
ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def _meaning(line: str) -> dict[str, object]:
    """What a line reads as, before the rest of a log is asked ({}: nothing)."""
    if V.launch_re.search(line):
        return {"launch": True}
    reading = meaning.read(V, line)
    found = meaning.meaning_of(V, reading) if reading is not None else None
    if found is None:
        return {}
    return {"event": found.kind, **({"phase": found.phase} if found.phase else {}), **found.data}


def _report(data: bytes):
    return diagnose(analyze_bytes(data), load_rulebase(None), command="analyze", mode="analyze")


def _log(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("example", V.examples, ids=[e.line[:48] for e in V.examples])
def test_every_example_reads_as_it_says(example: vocabulary.Example) -> None:
    got = _meaning(example.line)
    assert bool(got) == bool(example.reads), (example.source, got)
    for key, value in example.reads.items():
        assert got.get(key) == value, (example.source, key, got)


def test_every_entry_of_the_vocabulary_is_tested_on_a_real_line() -> None:
    seen: set[tuple[str, str]] = set()
    for example in V.examples:
        seen.update(("launch", w) for _, w in V.launches if re.search(w, example.line, re.IGNORECASE))
        reading = meaning.read(V, example.line)
        if reading is None:
            continue
        seen.update({("relation", reading.relation), ("resource", reading.resource),
                     *(("modifier", m) for m in reading.modifiers)})
        if reading.step:
            seen.add(("step", reading.step))
        rule = meaning.event_for(V, reading)
        if rule is not None:
            seen.add(("event", str(rule.line)))
    wanted = {*(("relation", g.id) for g in V.relations), *(("resource", g.id) for g in V.resources),
              *(("modifier", g.id) for g in V.modifiers), *(("step", g.id) for g in V.steps),
              *(("event", str(r.line)) for r in V.events), *(("launch", w) for _, w in V.launches)}
    assert wanted - seen == set()


# catalogued sentences the layer reads into another class, and why that is no contradiction
AGREED = {
    "llama_cpp.srv_prompt_too_big_for_kv": "llama-server's KV size is its context: a prompt too big for a KV cache "
                                           "reads as the KV cache's, as vLLM's block-manager sentence is catalogued",
    "llama_cpp.srv_task_error": "catalogued as info (another entry gives the class): the overflow it reads is right",
    "ollama.runner_terminated": "the runner crashed of an out-of-memory error: the OOM is what the layer reads",
    "ollama.runner_no_longer_running": "the same, in Ollama's other wording",
}


def _class(found: meaning.Meaning) -> str:
    kind = found.kind
    if kind in ("prompt_too_long", "truncation"):
        return "context.overflow"
    if kind == "preempted":
        return "kv.preemption"
    if kind == "kv_capacity":
        return "oom.kv_cache"
    return "oom"


def test_the_catalogues_format_strings_are_never_read_against_their_class() -> None:
    read = 0
    for entry in store.entries():
        reading = meaning.read(V, entry.sample)
        found = meaning.meaning_of(V, reading) if reading is not None else None
        if found is None:
            continue
        read += 1
        got = _class(found)
        if entry.id in AGREED:
            continue
        # an out-of-memory reading agrees with any oom.* class (the phase is the run's timeline's to say)
        assert got == entry.meaning or (got == "oom" and entry.meaning.startswith("oom.")) or (
            got == "oom.kv_cache" and entry.meaning.startswith("oom.")), (entry.id, entry.meaning, got)
    assert read >= 50  # the words are general enough to read most of the engines' own failure sentences


def test_a_bad_vocabulary_is_refused_with_its_line(tmp_path: Path) -> None:
    text = vocabulary.VOCABULARY.read_text()
    bad = tmp_path / "v.yaml"
    bad.write_text(text.replace("event: preempted\n", "event: preemption\n", 1))
    with pytest.raises(RuleError, match="unknown event kind 'preemption'"):
        vocabulary.load(bad)
    bad.write_text(text.replace("'\\bnot enough\\b'", "'(?<=x)not enough'", 1))
    with pytest.raises(RuleError, match="RE2 lacks"):
        vocabulary.load(bad)


# -- in a log: the same events and rules as an engine parser's ----------------------------------------
def test_a_test_harness_preemption_names_the_kv_pool() -> None:
    report = _report(_log("AssertionError: Preemptions detected: 24. KV Cache size likely needs to be increased."))
    first = report.findings[0]
    assert (first.id, first.cls) == ("LD750", "kv.preemption")
    [event] = report.facts.events("preempted")
    assert event.data["count"] == 24 and event.source == "meaning"


def test_a_front_ends_prompt_limit_is_a_context_overflow() -> None:
    line = "ValueError: This prompt (length 2185) exceeds the model's maximum allowed prompt length (2048)."
    report = _report(_log("ERROR:    Exception raised in generate thread: " + line[len("ValueError: "):], line))
    first = report.findings[0]
    assert (first.id, first.cls) == ("LD201", "context.overflow")
    assert report.facts.value("derived.tokens_needed") == 2185  # the rule's numbers come from the event


def test_a_tokenizer_limit_below_the_runs_own_window_is_no_overflow() -> None:
    warning = ("Token indices sequence length is longer than the specified maximum sequence length for this model "
               "(5000 > 2048). Running this sequence through the model will result in indexing errors")
    alone = analyze_bytes(_log(warning))
    assert [e.data["n_tokens"] for e in alone.events("prompt_too_long")] == [5000]
    vllm = (ROOT / "vllm" / "healthy-v0.34.log").read_text().splitlines()
    facts = analyze_bytes(_log(*vllm, warning))
    assert facts.value("config.max_model_len") == 16384 and facts.events("prompt_too_long") == []


def test_a_request_the_context_holds_but_a_capacity_refuses_is_the_kv_pools() -> None:
    # SGLang's server_args (v0.4.3 fixture's line, with --context-length given), then its refusal in words the
    # 0.4.3 parser does not know: the limit is below the context the server was started with
    args = next(t for t in (ROOT / "sglang" / "v0.4.3-decode-retract-kv-full.log").read_text().splitlines()
                if "server_args=" in t).replace("context_length=None", "context_length=163840")
    refusal = ("[2025-03-03 06:49:28 TP5] Input length (160062 tokens) exceeds the maximum allowed length (59862 "
               "tokens). Use a shorter input or enable --allow-auto-truncate.")
    report = _report(_log(args, refusal))
    [event] = report.facts.events("kv_capacity")
    assert event.data["reason"] == "prompt" and event.data["kv_tokens"] == 59862
    assert report.findings[0].cls == "oom.kv_cache"


def test_a_memory_ceiling_hit_in_prefill_is_placed_by_its_own_words() -> None:
    report = _report(_log("omlx.scheduler - WARNING - Prefill force-stopped at 1441 tokens: memory 42.8GB exceeds "
                          "ceiling 42.0GB",
                          "omlx.scheduler - ERROR   - Prefill failed for <id>: Memory limit exceeded during prefill"))
    events = report.facts.events("oom")
    assert {(e.phase, e.data["step"]) for e in events} == {("runtime", "prefill")}
    assert events[0].data["bytes"] == 42_800_000_000 and events[0].data["available"] == 42_000_000_000
    assert report.findings[0].cls == "oom.runtime"


def test_a_plugins_oom_is_placed_by_the_engines_timeline() -> None:
    # vLLM's start-up lines up to the weights (fixture), then torch_npu's wording, which no vLLM pattern reads
    vllm = (ROOT / "vllm" / "healthy-v0.34.log").read_text().splitlines()
    head = vllm[:next(n for n, t in enumerate(vllm, 1) if "Model loading took" in t)]
    npu = ("RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 0; 60.97 GiB total capacity; 58.92 GiB "
           "already allocated; 58.92 GiB current active; 1.66 GiB free; 58.95 GiB reserved in total by PyTorch)")
    facts = analyze_bytes(_log(*head, npu))
    [oom] = facts.events("oom")
    assert (oom.source, oom.phase, oom.data["step"]) == ("meaning", "compute", "profile_run")
    assert [n for n, _ in oom.placed_by] == [len(head)]


def test_a_ggml_era_scratch_pool_says_the_fix_in_llama_cpps_words() -> None:
    head = (ROOT / "llama.cpp" / "pasted-issue-crlf.log").read_text().splitlines()[:14]
    line = "ggml_new_tensor_impl: not enough space in the scratch memory pool (needed 1048576000, available 536870912)"
    report = _report(_log(*head, line))
    first = report.findings[0]
    assert report.engine == "llama.cpp" and (first.id, first.cls) == ("LD303", "oom.compute")
    assert first.fix.command is not None and "-ub" in first.fix.command


def test_what_an_engine_parser_or_the_catalogue_read_is_not_read_again() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity " \
          "of 79.10 GiB of which 1.02 GiB is free."
    facts = analyze_bytes(_log(oom))
    assert facts.events("oom") and all(e.source != "meaning" for e in facts.events())
    # a catalogued sentence (Ollama's, and one the engine coped with) makes no event of the layer's
    facts = analyze_bytes(_log("2023/11/22 11:37:02 llama.go:290: not enough VRAM available, falling back to CPU only"))
    assert all(e.source != "meaning" for e in facts.events())


def test_the_layer_reads_only_the_lines_its_words_select(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = meaning.read
    monkeypatch.setattr(meaning, "read", lambda v, text: calls.append(text) or real(v, text))
    data = (ROOT / "llama-server" / "real-queueing.log").read_bytes()
    analyzer = LogAnalyzer("queue.log")
    analyzer.feed(data)
    analyzer.finish()
    assert any(isinstance(p, MeaningParser) for p in analyzer.parsers)
    assert calls == []  # a healthy server log holds none of its words: not one line was read
