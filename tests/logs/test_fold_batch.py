"""Folding SGLang's batch lines (doctor/sources/engines/sglang/fold.py) gives the same facts, state and findings
as reading them line by line, and really folds.

The batch lines are built with SGLang's own format strings: 0.4.3 / 0.4.6 srt/managers/scheduler.py
(`log_prefill_stats`: `Prefill batch. #new-seq: .., #new-token: .., #cached-token: .., [cache hit rate: ..%, ]token
usage: .., #running-req: .., #queue-req: ..`; `log_decode_stats`: `Decode batch. #running-req: .., #token: ..,
token usage: .., [accept len: .., ]cuda graph: .., gen throughput (token/s): .., #queue-req: ..`) and 0.5.23
srt/managers/scheduler_components/metrics_reporter.py (`Prefill batch[ [iter]], ..., #pending-token: .., ` then
the graph and the input throughput; the pool's usage parts of pool_stats_observer.py for hybrid SWA / SSM
models; the speculative and disaggregation fields), behind the logger's stamp (srt/utils.py configure_logger:
`[%(asctime)s[.%(msecs)03d][ DPn][ TPn]] `), set inside the real start-up of
fixtures/logs/sglang/v0.4.3-decode-retract-kv-full.log with its real retractions.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from doctor.judge.evaluate import diagnose
from doctor.sources.engines.llamacpp.parser import LlamaCppParser
from doctor.sources.engines.sglang.parser import SglangParser
from doctor.sources.engines.sglang.state import GEN_TPS_KEPT
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.views.render.json import render_json
from tests.logs.test_fold import _analyze, _both, _parser

ROOT = Path(__file__).resolve().parents[2]
REAL = (ROOT / "fixtures" / "logs" / "sglang" / "v0.4.3-decode-retract-kv-full.log").read_text().splitlines()
HEAD = REAL[:10]  # server_args .. the server is fired up
RETRACTS = [line for line in REAL if "Decode out of memory happened" in line]
UNDATED = ("[10:04:05 TP0] Decode batch. #running-req: 3, #token: 812, token usage: 0.01, gen throughput (token/s): "
           "91.40, #queue-req: 0")  # 0.3's stamp: read line by line


def _f(rng: random.Random, digits: int = 2) -> str:
    return f"{rng.uniform(0, 1):.{digits}f}"


def _usage_parts(rng: random.Random, hybrid: str, decode: bool) -> list[str]:
    """pool_stats_observer.py get_prefill_usage_msg_parts / get_decode_usage_msg_parts."""
    used = rng.randrange(0, 300_000)
    if hybrid == "swa":
        if decode:
            return [f"#full token: {used}", f"full token usage: {_f(rng)}", f"#swa token: {used // 3}",
                    f"swa token usage: {_f(rng)}"]
        return [f"full token usage: {_f(rng)}", f"swa token usage: {_f(rng)}"]
    if hybrid == "ssm":
        if decode:
            return [f"#full token: {used}", f"full token usage: {_f(rng)}", f"mamba num: {rng.randrange(64)}",
                    f"mamba usage: {_f(rng)}"]
        return [f"full token usage: {_f(rng)}", f"mamba usage: {_f(rng)}"]
    return [f"#token: {used}", f"token usage: {_f(rng)}"] if decode else [f"token usage: {_f(rng)}"]


def batch_line(rng: random.Random, when: str, version: str, decode: bool, hybrid: str = "", stamp: str = " TP0",
               spec: bool = False, disagg: bool = False) -> str:
    running, queued = rng.randrange(0, 400), rng.choice((0, 0, rng.randrange(0, 200)))
    if version == "0.5":
        iter_msg = rng.choice(("", f" [{rng.randrange(10**6)}]"))
        if decode:
            parts = ", ".join(_usage_parts(rng, hybrid, True))
            msg = f"Decode batch{iter_msg}, #running-req: {running}, {parts}, "
            if spec:
                msg += f"accept len: {rng.uniform(1, 4):.2f}, accept rate: {_f(rng)}, "
            if disagg:
                msg += (f"pre-allocated usage: {_f(rng)}, #prealloc-req: {rng.randrange(9)}, "
                        f"#transfer-req: {rng.randrange(9)}, #retracted-req: {rng.randrange(3)}, ")
            msg += (f"cuda graph: {rng.choice(('True', 'False'))}, gen throughput (token/s): "
                    f"{rng.uniform(0, 5000):.2f}, #queue-req: {queued}")
        else:
            msg = (f"Prefill batch{iter_msg}, #new-seq: {rng.randrange(1, 20)}, #new-token: {rng.randrange(8192)}, "
                   f"#cached-token: {rng.randrange(8192)}, " + ", ".join(_usage_parts(rng, hybrid, False)) + ", "
                   f"#running-req: {running}, #queue-req: {queued}, #pending-token: {rng.randrange(10**5)}, ")
            if disagg:
                msg += f"#bootstrap-req: {rng.randrange(5)}, #inflight-req: {rng.randrange(5)}, "
            msg += f"cuda graph: False, input throughput (token/s): {rng.uniform(0, 90000):.2f}"
    else:  # 0.4.3 / 0.4.6
        if decode:
            msg = (f"Decode batch. #running-req: {running}, #token: {rng.randrange(300_000)}, token usage: {_f(rng)}, ")
            if spec:
                msg += f"accept len: {rng.uniform(1, 4):.2f}, "
            if version == "0.4.6":
                msg += f"cuda graph: {rng.choice(('True', 'False'))}, "
            msg += f"gen throughput (token/s): {rng.uniform(0, 5000):.2f}, #queue-req: {queued}"
        else:
            mixed = rng.choice(("", f"(mixed #running-req: {rng.randrange(50)})")) if version == "0.4.3" else ""
            msg = (f"Prefill batch{mixed}. #new-seq: {rng.randrange(1, 20)}, #new-token: {rng.randrange(8192)}, "
                   f"#cached-token: {rng.randrange(8192)}, ")
            if version == "0.4.3":
                msg += f"cache hit rate: {rng.uniform(0, 100):.2f}%, "
            msg += f"token usage: {_f(rng)}, #running-req: {running}, #queue-req: {queued}"
            if disagg and version == "0.4.6":
                msg = msg.replace("#queue-req:", f"#unbootstrapped-req: {rng.randrange(4)}, #queue-req:")
                msg += f", #transferring-req: {rng.randrange(4)} "
    return f"[{when}{stamp}] {msg}"


def sglang_log(seed: int = 0, lines: int = 3000, breaks: int = 8, crlf: bool = False) -> bytes:
    """The real start-up, then `lines` batch lines of one version (some runs broken by lines read one by one: a
    retraction, 0.3's undated stamp, an `inf` rate), a second server (a new session), and batch lines again."""
    rng = random.Random(seed)
    version = rng.choice(("0.4.3", "0.4.6", "0.5"))
    hybrid = rng.choice(("", "", "swa", "ssm")) if version == "0.5" else ""
    spec, disagg = rng.random() < 0.3, rng.random() < 0.2
    stamp = rng.choice((" TP0", " TP0", "", " DP1 TP3", " TP12 EP12"))
    out = list(HEAD)

    def batches(n: int) -> None:
        for i in range(n):
            ms = f".{rng.randrange(1000):03d}" if version == "0.5" and seed % 2 else ""
            when = f"2025-02-20 14:{10 + i // 3600 % 40:02d}:{i % 60:02d}{ms}"
            out.append(batch_line(rng, when, version, rng.random() < 0.8, hybrid, stamp, spec, disagg))
            if rng.random() < breaks / max(1, n):
                kind = rng.randrange(3)
                if kind == 0:
                    out.append(rng.choice(RETRACTS))
                elif kind == 1:
                    out.append(UNDATED)
                else:
                    out.append(batch_line(rng, when, version, True, hybrid, stamp).replace(
                        "gen throughput (token/s): ", "gen throughput (token/s): inf, x: "))

    batches(lines // 2)
    out += HEAD  # the server again: a new session
    batches(lines // 2)
    end = "\r\n" if crlf else "\n"
    return (end.join(out) + end).encode()


def _sglang(analyzer: LogAnalyzer) -> SglangParser:
    return _parser(analyzer, SglangParser)


def _same(data: bytes, chunk: int = 1 << 22) -> LogAnalyzer:
    folded, line_by_line = _both(data, chunk)
    a, b = _sglang(folded).s, _sglang(line_by_line).s
    assert (a.running, a.queued, a.usage, a.gen_tps) == (b.running, b.queued, b.usage, b.gen_tps)
    assert _sglang(folded).votes == _sglang(line_by_line).votes
    return folded


def test_a_busy_sglang_log_folds_to_the_same_facts_state_and_findings(rulebase) -> None:
    data = sglang_log()
    folded = _same(data)
    assert folded.folders is not None
    folder = folded.folders.of(SglangParser)
    assert folder is not None and folder.runs >= 2
    assert folded.scanner.folded > 0.9 * data.count(b" batch")
    assert {type(p) for p in folder.parsers} >= {SglangParser, LlamaCppParser}  # no gate: it reads them too
    reports = []
    for fold in (True, False):
        analyzer, _ = _analyze(data, fold)
        reports.append(render_json(diagnose(analyzer.snapshot(), rulebase, command="analyze", mode="analyze")))
    assert reports[0] == reports[1]


def test_every_version_and_pool_shape_folds() -> None:
    """Each format (and a hybrid model's pool parts, speculative and disaggregated fields) is a hot line: a log of
    nothing but one of them folds all but its last line, to the same state."""
    rng = random.Random(3)
    for version in ("0.4.3", "0.4.6", "0.5"):
        for hybrid, spec, disagg in (("", False, False), ("swa", True, False), ("ssm", False, True)):
            if version != "0.5" and hybrid:
                continue
            lines = [batch_line(rng, f"2025-02-20 14:10:{i % 60:02d}", version, i % 3 > 0, hybrid, " DP0 TP1", spec,
                                disagg) for i in range(60)]
            folded = _same(("\n".join(lines) + "\n").encode())
            assert folded.scanner.folded >= len(lines) - 2, (version, hybrid, lines[:2])  # all but the first and last


def test_what_the_fold_keeps_is_right() -> None:
    """The parser's own reading: the last `token usage` of a line (a hybrid pool's second), queues of decode
    lines only, the extremes from the first line that holds them, the decode rates in order."""
    rng = random.Random(5)
    lines = [batch_line(rng, "2025-02-20 14:10:00", "0.5", decode, "swa") for decode in (True, False) * 30]
    for at in (17, 41):  # the high, twice
        lines[at] = re.sub(r"#running-req: \d+", "#running-req: 99999", lines[at])
    folded = _same(("\n".join(lines) + "\n").encode())
    s = _sglang(folded).s
    assert s.running.high == 99999 and s.running.high_source is not None
    assert s.running.high_source.line == 18
    assert s.usage.count == 60 and s.queued.count == 30 and len(s.gen_tps) == 30
    swa = [float(line.split("swa token usage: ")[1].split(",")[0]) for line in lines]
    assert s.usage.high == round(max(swa) * 100.0, 1)
    assert folded.folders is not None and folded.folders.runs == 1


def test_the_decode_rates_kept_stop_inside_a_run() -> None:
    """The median reads the first GEN_TPS_KEPT decode rates: a run that crosses that count keeps just them."""
    rng = random.Random(11)
    lines = [batch_line(rng, f"2025-02-20 14:10:{i % 60:02d}", "0.4.6", True) for i in range(GEN_TPS_KEPT + 300)]
    folded = _same(("\n".join(lines) + "\n").encode())
    assert len(_sglang(folded).s.gen_tps) == GEN_TPS_KEPT
    assert folded.scanner.folded > len(lines) - 10  # a run also ends where a block read ends


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [1 << 22, 4096])
def test_random_sglang_logs_fold_the_same(seed: int, chunk: int) -> None:
    rng = random.Random(seed)
    data = sglang_log(seed=seed, lines=rng.randrange(3, 1500), breaks=rng.randrange(0, 30))
    lines = data.split(b"\n")
    for _ in range(rng.randrange(0, 6)):  # a line dropped anywhere: a start line, a retraction, a batch line
        del lines[rng.randrange(len(lines) - 1)]
    _same(b"\n".join(lines), chunk=chunk)


def test_crlf_batch_lines_fold_the_same() -> None:
    folded = _same(sglang_log(seed=5, lines=900, crlf=True), chunk=65_536)
    assert folded.scanner.folded > 800


def test_a_fold_first_needed_in_a_later_session_folds_the_same() -> None:
    """The folder is built when its first line comes: here after another engine's session, with that session's
    parsers and router."""
    queue = (ROOT / "fixtures" / "logs" / "llama-server" / "real-queueing.log").read_bytes()
    folded = _same(queue + sglang_log(seed=2, lines=400, breaks=0))
    assert folded.folders is not None and len(folded.sessions) >= 2
    folder = folded.folders.of(SglangParser)
    assert folder is not None and folder.runs >= 2
