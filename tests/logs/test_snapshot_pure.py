"""A snapshot taken mid-way changes nothing: `watch --log` asks for one after every read, the parallel path
(doctor/sources/logs/parallel.py) asks a speculation for its state, and both must end where one analysis of the
whole log ends. Every fixture and corpus log, cut in two (a parser that changed its own state while summarising,
as the crash parser's DeepSpeed and context words once did, reads differently here)."""

from __future__ import annotations

import json

from doctor.sources.logs.analyze import LogAnalyzer
from tests.logs.test_parallel import LOGS


def _facts(data: bytes, cuts: tuple[int, ...], snapshots: bool) -> str:
    analyzer = LogAnalyzer("input")
    at = 0
    for cut in cuts:
        analyzer.feed(data[at:cut])
        if snapshots:
            analyzer.snapshot()
        at = cut
    analyzer.feed(data[at:])
    return json.dumps(analyzer.finish().to_json(), sort_keys=True)


def test_a_snapshot_mid_way_changes_no_log_s_facts() -> None:
    differ = []
    for log in LOGS:
        data = log.read_bytes()
        third = len(data) // 3
        cuts = (third, 2 * third)  # the same reads both ways: only the snapshots differ
        if _facts(data, cuts, snapshots=False) != _facts(data, cuts, snapshots=True):
            differ.append(log.name)
    assert len(LOGS) > 500 and not differ, f"a snapshot changed the facts of {differ[:10]}"
