"""Mixed and partial input: issue pastes, terminal-wrapped lines, another tool's logger, docker JSON.

The diagnosis must survive the framing: a quoted or wrapped line still gives its numbers, a vLLM line
under an application's logger still counts for vLLM, and a paste with two engines says both.
"""

from __future__ import annotations

from pathlib import Path

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
MIXED = LOGS / "mixed"


def test_issue_paste_from_a_wrapping_terminal(analyze) -> None:
    report = analyze(MIXED / "ollama-issue-terminal-wrapped.md")
    assert report.engine == "ollama"
    assert report.assessment is not None and report.assessment.id == "LD252"
    event = next(e for e in report.facts.events("truncation") if e.source == "ollama")
    # the record was cut at column 120 inside "prompt=5120"; the tail on the next line is rejoined
    assert (event.data["n_tokens"], event.data["n_ctx"], event.data["n_keep"]) == (5120, 2048, 4)
    assert event.line in report.findings[0].lines
    # the offload estimate was wrapped over four lines and still reads whole
    assert report.facts.value("server.ollama.layers_model") == 33
    assert report.facts.value("server.ollama.memory_required_full") == int(6.2 * (1 << 30))


def test_vllm_under_an_application_logger(analyze) -> None:
    report = analyze(MIXED / "vllm-under-app-logger.log")
    assert report.engine == "vllm"
    assert report.assessment is not None and report.assessment.id == "LD350"
    assert report.facts.value("config.max_model_len") == 131072
    assert "--max-model-len 29440" in (report.findings[0].fix.command or "")
    assert 11 in report.findings[0].lines


def test_two_engines_in_one_paste(analyze) -> None:
    report = analyze(MIXED / "llamacpp-and-vllm-comparison.md")
    detected = report.facts.value("engine.detected")
    assert set(detected) == {"llama.cpp", "vllm"}
    assert report.facts.value("engine.detect_confidence") != "high"
    ids = {f.id for f in report.findings}
    assert "LD750" in ids  # the vLLM half: preemption
    assert ids & {"LD201", "LD203"}  # the llama-server half: the truncated prompt
    preemption = next(f for f in report.findings if f.id == "LD750")
    assert "vllm" in preemption.fix.by_engine


def test_a_few_quoted_lines(analyze) -> None:
    report = analyze(MIXED / "vllm-quoted-lines.md")
    assert report.engine == "vllm"
    assert report.assessment is not None and report.assessment.id == "LD750"
    assert report.facts.value("server.preemptions") == 1
    assert 5 in report.findings[0].lines


def test_docker_json_file_framing(analyze) -> None:
    report = analyze(MIXED / "tgi-docker-json-file.log")
    assert report.engine == "tgi"
    assert report.assessment is not None and report.assessment.id == "LD352"
    assert "--max-batch-prefill-tokens 2048" in (report.findings[0].fix.command or "")
    assert report.facts.value("config.max_batch_prefill_tokens") == 4096


def test_each_serving_class_fires_on_a_fixture(analyze) -> None:
    """Across the Ollama, vLLM, TGI and mixed fixtures, every class these engines can show is found."""
    fired: dict[str, list[str]] = {}
    for folder in ("ollama", "vllm", "tgi", "mixed"):
        for path in sorted((LOGS / folder).iterdir()):
            if path.suffix not in (".log", ".md") or path.name == "README.md":
                continue
            for finding in analyze(path).findings:
                fired.setdefault(finding.cls, []).append(path.name)
    expected = {"context.overflow", "context.oversized", "kv.preemption", "kv.dtype", "oom.weights", "oom.kv_cache",
                "oom.compute", "oom.runtime", "offload.partial", "offload.none"}
    assert expected <= set(fired), sorted(expected - set(fired))
