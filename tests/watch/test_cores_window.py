"""watch's /proc/stat window (doctor/sources/probes/cpustat.py through doctor/sources/live/session.py):
the other processes' share of the cores over the traced run, as scan has it around its trace. A
followed log's engine is not our child: the busiest process of the window is taken as it. A finished
log read back says nothing of this machine's cores now."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from doctor.core.events import FactsEvent, LiveEvent
from doctor.core.facts import Facts, Source
from doctor.sources.live.follow.follower import follow_log
from doctor.sources.live.session import TraceSession
from doctor.sources.probes import cpustat


def _proc(root: Path, busy: int, idle: int, procs: dict[int, int]) -> None:
    (root / "stat").write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 0 0 0 0\ncpu1 0 0 0 0\n")
    for pid, ticks in procs.items():
        (root / str(pid)).mkdir(exist_ok=True)
        fields = ["S"] + ["0"] * 10 + [str(ticks), "0"] + ["0"] * 20
        (root / str(pid) / "stat").write_text(f"{pid} (llama-server) {' '.join(fields)}\n")


def test_a_followed_engine_is_the_busiest_process_not_another_s_work(tmp_path: Path) -> None:
    _proc(tmp_path, 1000, 1000, {101: 0, 202: 0})
    window = cpustat.CpuWindow(str(tmp_path), engine_not_ours=True).start()
    # 4 s of 2 CPUs (800 ticks): the engine (101) used 300 ticks, a build (202) 100, idle 400
    _proc(tmp_path, 1400, 1400, {101: 300, 202: 100})
    share = window.stop()
    assert share is not None
    assert share.other_busy == pytest.approx(100 / 800, abs=0.01)  # the build's, not the engine's
    plain = cpustat.CpuWindow(str(tmp_path)).start()
    _proc(tmp_path, 1800, 1800, {101: 600, 202: 200})
    assert plain.stop().other_busy == pytest.approx(400 / 800, abs=0.01)  # not ours: all of it counts
    assert cpustat.process_seconds(str(tmp_path / "nowhere")) == {}


def _follow(path: Path, lines: list[bytes], live: bool, machine: Facts | None = None) -> list[LiveEvent]:
    events: list[LiveEvent] = []
    session = TraceSession("x.log", source="log", on_event=events.append, machine=machine,
                           cores=cpustat.CpuWindow(engine_not_ours=True).start())
    path.write_bytes(b"".join(lines if not live else lines[:1]))
    left = [] if not live else list(lines[1:])
    polls = {"n": 0}

    def stop() -> bool:
        polls["n"] += 1
        time.sleep(0.03)  # a window of some clock ticks (/proc/stat counts in 10 ms): a faster follow measures none
        if left and polls["n"] > 2:  # the engine writes on after we caught up
            with path.open("ab") as handle:
                handle.write(left.pop(0))
        return not left and polls["n"] > 4

    follow_log(str(path), session, stop=stop, poll_s=0.0)
    return events


def test_a_live_log_gets_the_share_and_a_finished_one_read_back_none(tmp_path: Path) -> None:
    lines = [f"line {i}\n".encode() for i in range(6)]
    live = [e for e in _follow(tmp_path / "live.log", lines, live=True) if isinstance(e, FactsEvent)]
    assert live and "host.cpu.other_busy" in live[-1].facts
    old = [e for e in _follow(tmp_path / "old.log", lines, live=False) if isinstance(e, FactsEvent)]
    assert not any("host.cpu.other_busy" in e.facts for e in old)


def test_kept_figures_go_out_with_a_live_window_only(tmp_path: Path) -> None:
    """watch --log / a wrapped command: the read bandwidth an earlier scan kept here says something of the
    run only where it ran here while traced - with the cores' share, never for a log read back."""
    kept = Facts()
    kept.set("host.ram.read_bw_all_gbs", 28.0, Source("probe", "probe.ceilings", text="kept"))
    lines = [f"line {i}\n".encode() for i in range(6)]
    for live in (True, False):
        events = _follow(tmp_path / f"{live}.log", lines, live, kept)
        sent = any("host.ram.read_bw_all_gbs" in e.facts for e in events if isinstance(e, FactsEvent))
        assert sent is live
