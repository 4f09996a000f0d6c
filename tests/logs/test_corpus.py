"""The real-log corpus (../shared/corpus): every case named right as the root cause, healthy ones clean.

Each case is a log users posted in a public issue thread with the diagnosis the thread reached
(its .yaml). bench/corpus_score.py scores a case the way this test asserts it: the report's likely
root cause has the expected class, and a healthy log has no warning or error. Skipped, with the
reason, where the corpus folder is not beside the checkout.
"""

from __future__ import annotations

import pytest

from bench.corpus_score import default_dir, score_case

CORPUS = default_dir()
LOGS = sorted(CORPUS.glob("*.log")) if CORPUS.is_dir() else []


@pytest.mark.skipif(not LOGS, reason=f"no corpus at {CORPUS} (set LLM_DOCTOR_CORPUS to run it)")
@pytest.mark.parametrize("log", LOGS, ids=[p.stem[:40] for p in LOGS])
def test_case_named_right(log) -> None:
    result = score_case(log)
    assert result.error is None, result.error
    assert result.right, (f"expected {result.expected} ({result.wanted or 'no warning or error'}), root cause "
                          f"{result.got}; findings {result.findings}")
