"""The parsers' declared line kinds (doctor/sources/logs/base.py) and the per-analysis state they share.

- every parser gets its triggers, gate and literal index from its one table of line kinds;
- routing by literal finds what trying every kind of every parser finds (all parsers, not only
  llama.cpp's: tests/logs/test_log_routing.py checks that one on more input variants);
- a literal-less kind (case-insensitive pattern, or one that reads more than the line) is tried on
  every line;
- two analyses at once, or two sessions of one, keep their PyTorch OOMs apart (AnalysisState).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from doctor.sources.engines._torch.pytorch import TorchOomBoard
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.base import AnalysisState, LineKind, LineKinds, LogParser, reads
from doctor.sources.logs.entry import analyze_stream
from doctor.sources.logs.line import make_line
from doctor.sources.logs.matcher import FragmentIndex, LiteralIndex, gated
from doctor.sources.logs.registry import parser_classes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
LOGS = sorted(FIXTURES.rglob("*.log"))
VLLM_OOM = FIXTURES / "vllm" / "oom-cuda-graphs-v0.11.log"


def _facts(data: bytes) -> str:
    return json.dumps(analyze_stream(io.BytesIO(data), "x").to_json(), sort_keys=True, default=str)


def test_every_parser_takes_triggers_gate_and_index_from_its_kinds() -> None:
    from doctor.sources.catalogue.parser import AloneReader

    for cls in parser_classes():
        if issubclass(cls, AloneReader):  # its lines are its index's: the message catalogue's
            continue  # (tests/logs/test_catalogue.py) or the vocabulary's (tests/logs/test_meaning.py)
        kinds = cls.kinds
        assert isinstance(kinds, LineKinds), cls.__name__
        assert cls.triggers == kinds.triggers, cls.__name__
        if cls.alone:  # no gate: its lines are those an index of its triggers finds something in (logs/router.py)
            assert cls.gate is None, cls.__name__
            assert isinstance(cls.literal_index, FragmentIndex), cls.__name__
            assert cls.literal_index.patterns == list(kinds.triggers), cls.__name__
        else:
            assert cls.gate == kinds.gate, cls.__name__
            assert cls.literal_index is kinds.index, cls.__name__
        for kind in kinds.kinds:
            handler = kinds.handler(kind)  # the method marked @reads(kind), bound when the class was made
            assert (handler is None) == (not kind.handled), (cls.__name__, kind.name)
            assert handler is None or kind in getattr(handler, "__line_kinds__", ()), (cls.__name__, kind.name)


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_routing_of_every_parser_finds_what_trying_every_kind_finds(path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    plain = path.read_bytes()
    as_json = b"\n".join(json.dumps({"log": ln.decode("utf-8", "replace")}).encode() for ln in plain.split(b"\n"))
    for data in (plain, as_json):
        routed = _facts(data)
        with monkeypatch.context() as m:
            m.setattr(LiteralIndex, "bits", lambda self, text: -1)  # every literal of every parser "present"
            m.setattr(LiteralIndex, "prime_bits", lambda self, text, bits: None)
            assert _facts(data) == routed


NEEDLE = LineKind("needle", (gated(r"needle (\d+)"),), (r"needle",))
SHOUT = LineKind("shout", (gated(r"SHOUT", re.IGNORECASE),), (r"(?i)shout",))
BOTH = LineKind("both", ("needle", gated(r"hay\w+")), (r"hay",), scan=())


class _Probe(LogParser):
    name = "probe"
    kinds = LineKinds(NEEDLE, SHOUT, BOTH)

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def feed(self, line):
        if self.passes_gate(line.text):
            self.dispatch(line)

    @reads(NEEDLE)
    def _needle(self, line) -> bool:
        self.seen.append("needle")
        return "stop" in line.text

    @reads(SHOUT)
    def _shout(self, line) -> bool:
        self.seen.append("shout")
        return False

    @reads(BOTH)
    def _both(self, line) -> bool:
        self.seen.append("both")
        return False


def test_kinds_are_tried_in_order_where_their_literals_are() -> None:
    assert _Probe.triggers == ("needle", "(?i)shout")  # "hay" is read (gate) but not scanned for
    assert _Probe.gate == ("needle", "(?i)shout", "hay")
    seen = []
    for text in (b"a needle 1", b"a needle stop", b"only hay here", b"nothing", b"SHOUT"):
        probe = _Probe()
        probe.feed(make_line(1, text))
        seen.append(probe.seen)
    # the case-insensitive kind names no literal: tried on every line that passes the gate; a kind
    # that took the line ends its phase
    assert seen == [["needle", "shout", "both"], ["needle"], ["shout", "both"], [], ["shout"]]


def test_a_kind_without_a_handler_fails_at_class_creation() -> None:
    with pytest.raises(TypeError, match="line kind 'x' has no handler"):
        type("Broken", (LogParser,), {"kinds": LineKinds(LineKind("x", (), ("x",)))})


def test_a_handler_is_bound_by_reference_and_an_override_keeps_its_place() -> None:
    kinds = _Probe.kinds
    assert kinds.handler(NEEDLE) is _Probe._needle and kinds.handler(BOTH) is _Probe._both

    class _Louder(_Probe):
        kinds = LineKinds(NEEDLE, SHOUT, BOTH)

        def _shout(self, line) -> bool:  # overrides the marked method: the kind binds to this one
            self.seen.append("SHOUT")
            return True

    assert _Louder.kinds.handler(SHOUT) is _Louder._shout
    probe = _Louder()
    probe.feed(make_line(1, b"SHOUT hay"))
    assert probe.seen == ["SHOUT"]


def test_two_analyses_at_once_keep_their_torch_ooms_apart() -> None:
    data = VLLM_OOM.read_bytes()
    one, two = LogAnalyzer("one"), LogAnalyzer("two")
    assert one.state is not two.state
    one.feed(data)
    two.feed(b"INFO 05-22 02:20:59 [api_server.py:1] vLLM API server version 0.11.0\n")
    assert len(one.finish().events("oom")) == 1
    assert two.finish().events("oom") == []
    assert one.state.part(TorchOomBoard) is one.parsers[0].state.part(TorchOomBoard)


def test_a_new_session_starts_with_a_new_state() -> None:
    analyzer = LogAnalyzer("s")
    analyzer.feed(VLLM_OOM.read_bytes())
    first = analyzer.state
    assert first.part(TorchOomBoard).ooms
    analyzer.new_session("truncated", restart_lines=True)
    assert analyzer.state is not first and not analyzer.state.part(TorchOomBoard).ooms
    assert all(p.state is analyzer.state for p in analyzer.parsers)


def test_analysis_state_makes_each_part_once() -> None:
    state = AnalysisState()
    assert state.part(TorchOomBoard) is state.part(TorchOomBoard)
    assert AnalysisState().part(TorchOomBoard) is not state.part(TorchOomBoard)
