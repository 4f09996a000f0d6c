"""An engine is a folder plus an entry point: the engine table (doctor/core/engines.py) is read from the
entry-point group `llm_doctor.engine`, and nothing else holds an engine list.

The toy engine (tests/logs/toy_engine/: its row, its parser and its rules folder) is added here the
way a third-party engine is: one entry point in a distribution of its own (made in tmp_path, a
`*.dist-info` folder on sys.path, as pip would install it), touching no other file; `analyze` then
detects it, runs its parser, fires its rule, splits its sessions at its start line and takes
`--engine toy`. The rest checks that nothing else holds an engine list of its own: the rules, the
`--engine` choices, the parsers the analyzer runs, the engines the parsers vote for, the session
start lines and the metric families all name the table's engines.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from doctor.cli import build_parser, main
from doctor.core import engines
from doctor.sources.logs import analyze as analyze_mod
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.detect import Detection
from doctor.sources.logs.entry import analyze_bytes, analyze_stream
from doctor.sources.logs.registry import engine_parser_classes, parser_classes
from doctor.sources.logs.sessions import start_lines
from tests.logs.toy_engine.parser import ToyParser

ROOT = Path(__file__).resolve().parents[2]

TOY_LOG = """\
toyd 0.3.1 listening on :9000
toyd: context window 2048 tokens
toyd: request 7: prompt of 3100 tokens cut to the window of 2048
"""


def install_distribution(site: Path, name: str, entry_points: dict[str, str]) -> None:
    """A distribution as pip leaves it in site-packages: NAME-VERSION.dist-info with its METADATA and
    entry_points.txt (what importlib.metadata reads)."""
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{engines.GROUP}]\n{lines}")


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[engines.Engine]:
    """The toy engine installed: one entry point naming its folder's row."""
    install_distribution(tmp_path / "site", "llm-doctor-toy", {"toy": "tests.logs.toy_engine.engine:ENGINE"})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    engines.reload()
    try:
        engine = engines.get("toy")
        assert engine is not None, "the toy's entry point was not found"
        yield engine
    finally:
        monkeypatch.undo()  # the distribution leaves sys.path ...
        importlib.invalidate_caches()
        engines.reload()  # ... and the table


def _analyze_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["analyze", *argv, "--format", "json", "--no-tui"])
    return code, json.loads(capsys.readouterr().out)


def test_a_toy_engine_added_as_one_folder_and_one_entry_point_is_analyzed(
        toy: engines.Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "toyd.log"
    log.write_text(TOY_LOG)
    assert ToyParser in parser_classes()

    code, report = _analyze_json(capsys, str(log))
    assert code == 1  # the built-in rules read the toy's facts and events too: LD201 (error) fires on its cut
    assert {f["id"] for f in report["findings"]} >= {"TOY001", "LD201"}
    assert report["engine"] == "toy"  # detected from the toy parser's votes (no --engine given)
    facts = report["facts"]["facts"]
    assert facts["config.n_ctx"]["value"] == 2048
    assert facts["config.n_ctx"]["source"] == {"kind": "log", "name": "toy", "line": 2,
                                               "text": "toyd: context window 2048 tokens"}  # the toy parser's
    toy_finding = next(f for f in report["findings"] if f["id"] == "TOY001")
    assert "3100 tokens to its window of 2048" in toy_finding["message"]
    assert toy_finding["fix"]["by_engine"] == {"toy": "toyd --window 3100"}
    assert toy_finding["fix"]["engine"] == "toy"

    code, report = _analyze_json(capsys, str(log), "--engine", "toy", "--fail-on", "none")  # a table engine
    assert code == 0
    assert report["engine"] == "toy"
    assert any(f["id"] == "TOY001" for f in report["findings"])


def test_the_toy_engine_is_detected_with_high_confidence(toy: engines.Engine) -> None:
    facts = analyze_bytes(TOY_LOG.encode(), "toyd.log")
    assert facts.value("engine.name") == "toy"
    assert facts.value("engine.detect_confidence") == "high"
    assert facts.value("engine.detected") == ["toy"]
    assert facts.value("engine.version") == "0.3.1"
    assert facts.value("run.recognised") is True


def test_the_toy_rule_stays_out_of_another_engines_report(toy: engines.Engine,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    log = ROOT / "fixtures/logs/ollama/healthy-v0.5.7-journald.log"
    _, report = _analyze_json(capsys, str(log))
    assert report["engine"] == "ollama"
    assert not any(c["id"] == "TOY001" for c in [*report["findings"], *report["checks"]])


def test_the_toy_engine_splits_its_log_at_its_start_line(toy: engines.Engine) -> None:
    facts = analyze_bytes((TOY_LOG + TOY_LOG.replace("0.3.1", "0.3.2")).encode(), "toyd.log")
    assert [s.started_by for s in facts.sessions] == ["input", "engine start"]  # the row's start line
    assert facts.value("engine.version") == "0.3.2"


def test_the_entry_point_group_is_the_table(toy: engines.Engine) -> None:
    from importlib.metadata import entry_points

    found = {ep.name: ep.value for ep in entry_points(group=engines.GROUP)}
    assert found["toy"] == "tests.logs.toy_engine.engine:ENGINE"
    assert engines.names()[-1] == "toy" and toy.rules == ROOT / "tests/logs/toy_engine/rules"
    # llm-doctor's own rows are the entry points its pyproject.toml declares, in that order
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][engines.GROUP]
    assert len(declared) == len(engines.names()) - 1
    assert [engines._import(v).name for v in declared.values()] == list(engines.names()[:-1])


def test_unregister_takes_an_added_engine_out_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.logs.toy_engine.engine import ENGINE

    before = engines.names()
    engines.register(ENGINE)
    try:
        assert engines.names() == (*before, "toy")
        assert ToyParser in parser_classes()
    finally:
        engines.unregister("toy")
    assert engines.names() == before
    assert ToyParser not in parser_classes()
    with pytest.raises(SystemExit) as exited:
        main(["analyze", str(tmp_path / "x.log"), "--engine", "toy"])
    assert exited.value.code == 2
    assert "invalid choice: 'toy'" in capsys.readouterr().err


def test_register_refuses_a_name_or_alias_already_in_the_table() -> None:
    with pytest.raises(ValueError, match="llama-server already in the engine table"):
        engines.register(engines.Engine("toy", "Toy", aliases=("llama-server",)))
    with pytest.raises(ValueError, match="not in the engine table"):
        engines.register(engines.Engine("toy", "Toy", wraps="nope"))
    with pytest.raises(ValueError, match="built in"):
        engines.unregister("ollama")
    assert "toy" not in engines.names()


# -- nothing else holds an engine list --------------------------------------------------------

def test_every_engine_a_rule_names_is_in_the_table() -> None:
    named: set[str] = set()
    for path in sorted((ROOT / "rules").glob("*.yaml")):
        for rule in yaml.safe_load(path.read_text()) or []:
            named |= set(rule.get("engines") or ())
            if isinstance(rule.get("fix"), dict):
                named |= set(rule["fix"]) - {"text", "change"}
    assert named, "the rules name no engine: this test reads them wrongly"
    assert named <= set(engines.names()), named - set(engines.names())


def test_the_engine_choices_are_the_table_names() -> None:
    for command in ("analyze", "scan", "watch"):
        parser = build_parser([command])
        sub = next(a for a in parser._actions if a.dest == "command")
        action = next(a for a in sub.choices[command]._actions if a.dest == "engine")
        assert tuple(action.choices) == engines.names(), command


def test_the_analyzer_runs_the_table_parsers_and_only_engine_less_parsers_besides() -> None:
    table_parsers = [engines.load(spec) for spec in engines.parser_specs()]
    assert engine_parser_classes() == table_parsers
    run = [type(p) for p in LogAnalyzer().parsers]
    assert run == parser_classes()
    assert set(table_parsers) <= set(run)
    # every engine's parser is one the analyzer runs; the others read no engine of their own
    for engine in engines.table():
        assert engine.parser is not None and engines.load(engine.parser) in run, engine.name
    others = [cls for cls in run if cls not in table_parsers]
    # llama-bench: a llama.cpp tool's results (votes llama.cpp); devices: hardware pasted beside a speed;
    # client: request budgets and reply bodies; hostinfo: the machine's own tools pasted beside a result
    # (nvidia-smi, lscpu, system_profiler, fastfetch); meaning: the vocabulary's reading of any program's words;
    # launch: launch commands (votes the engine they start); host_oom: the host's out-of-memory kill;
    # unexplained: error lines nothing else read
    assert {cls.name for cls in others} == {"crashes", "pasted", "devices", "llama-bench", "client", "catalogue",
                                            "hostinfo", "meaning", "launch", "host_oom", "unexplained"}


def test_every_engine_the_parsers_vote_for_on_the_fixture_logs_is_in_the_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    votes: Counter[str] = Counter()
    real_detect = analyze_mod.detect

    def spy(counted: Counter[str]) -> Detection:
        votes.update(k for k, v in counted.items() if v > 0)
        return real_detect(counted)

    monkeypatch.setattr(analyze_mod, "detect", spy)
    logs = [p for p in sorted((ROOT / "fixtures/logs").rglob("*")) if p.is_file() and p.suffix != ".md"]
    for path in logs:
        with path.open("rb") as stream:
            analyze_stream(stream, path.name)
    assert {engines.canonical(k) for k in votes} == set(engines.names())  # each engine is voted for somewhere
    assert all(engines.canonical(k) is not None for k in votes), [k for k in votes if engines.canonical(k) is None]


def test_session_start_lines_and_metric_families_come_from_the_rows() -> None:
    from doctor.sources.live.metrics import endpoint, prometheus

    markers = start_lines().markers
    assert [(f, o, frag) for f, o, frag in markers] == [
        (e.name, i, frag) for e in engines.table() for i, frag in enumerate(e.starts.lines)]
    assert {f for f, _, _ in markers} == {e.name for e in engines.table() if e.starts.lines}
    served = prometheus.served()
    assert [name for name, _ in served] == [e.name for e in engines.table() if e.metrics is not None]
    assert len(served) >= 3 and all(m.queries and m.gauge for _, m in served)
    # watch --metrics knows a page by its rows' prefixes, and reads /props where a row says so
    for engine in engines.table():
        if engine.metrics is not None and engine.metrics.prefix:
            assert endpoint._engine_of({engine.metrics.prefix + "x": 1.0}) == engine.name
            assert endpoint._answers_props(engine.name) is engine.metrics.props
    assert endpoint._engine_of({"go_goroutines": 1.0}) is None


def test_a_new_engine_brings_its_start_lines_and_metrics(toy: engines.Engine) -> None:
    from doctor.sources.live.metrics import endpoint, prometheus

    assert ("toy", 0, toy.starts.lines[0]) in start_lines().markers
    assert "toy" not in dict(prometheus.served())  # the toy publishes no metrics
    row = engines.register(engines.Engine("toyd-metrics", "Toyd", metrics=engines.Metrics(
        "toyd_.+", "toyd_busy", (engines.MetricQuery("server.running_max", "max(toyd_busy{{{sel}}})", "int"),),
        prefix="toyd_")))
    try:
        assert dict(prometheus.served())[row.name] is row.metrics
        assert endpoint._engine_of({"toyd_busy": 2.0}) == row.name
    finally:
        engines.unregister(row.name)


def test_wrapped_engines_and_aliases_resolve_in_the_table() -> None:
    assert engines.canonical("llama-server") == "llama.cpp"
    assert engines.canonical("nope") is None
    for wrapper, inner in engines.wrappers().items():
        assert wrapper in engines.names() and inner in engines.names()


def test_llama_cpp_python_spells_sampling_in_the_completion_call_and_types_with_their_module() -> None:
    """Sampling settings are arguments of each completion call in llama-cpp-python (llama_cpp/llama.py:
    create_completion / create_chat_completion), not of Llama(); a KV type is llama_cpp.GGML_TYPE_*."""
    from doctor.core import engines

    row = engines.get("llama-cpp-python")
    assert row is not None
    text = row.spelling.spell({"n_ctx": 2048, "temperature": 0.7, "repeat_penalty": 1.1, "type_k": "q8_0"})
    assert text == ("Llama(..., n_ctx=2048, type_k=llama_cpp.GGML_TYPE_Q8_0); "
                    "llm.create_chat_completion(..., temperature=0.7, repeat_penalty=1.1)")
    assert row.spelling.spell({"top_k": 40}) == "llm.create_chat_completion(..., top_k=40)"
    assert row.spelling.spell({"n_threads": 2}) == "Llama(..., n_threads=2)"
