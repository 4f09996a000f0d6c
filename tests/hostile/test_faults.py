"""Faults: whatever breaks around llm-doctor, the run ends in a report that says what happened, and a
recording that keeps everything up to the fault.

The engine aborting (a child that calls abort(); the real engine given an impossible context), the
model file cut short or deleted under the running engine, a followed log truncated and rotated, a
wrapped command that exits or is killed, NVML missing or failing on every call, /sys and /proc
unreadable, the disk filling up while recording.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from random import Random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.core.events import EndEvent, LogEvent, NoticeEvent, StepEvent
from doctor.judge.evaluate import diagnose
from doctor.judge.live_judge import LiveJudge
from doctor.sources.live.recording import facts_from_recording, read_recording
from doctor.sources.live.session import TraceSession

from .fuzz_targets import render_all, rulebase, time_limit

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "fixtures" / "machines"
SERVER_LOG = ROOT / "fixtures/logs/llama-server/session-slowdown-then-full.log"


def doctor(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*prefix, sys.executable, "-m", "doctor", *args], capture_output=True, cwd=ROOT,
                          check=False, env={**os.environ, "NO_COLOR": "1"}, timeout=300)


def replayed(path: Path) -> tuple[list[Any], int, list[str]]:
    """(events, damaged lines, finding ids when analyze replays the recording)."""
    with path.open("rb") as handle:
        _, events, damaged = read_recording(handle)
    report = diagnose(facts_from_recording(io.BytesIO(path.read_bytes()), path.name), rulebase(),
                      command="analyze", mode="analyze")
    render_all(report)
    return events, damaged, sorted(f.id for f in report.findings)


# -- the engine aborts ----------------------------------------------------------------------------

def test_a_child_that_calls_abort(tmp_path: Path) -> None:
    from doctor.sources.live.embedded.runner import RunSettings, run_embedded

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")  # never read: the stand-in child only speaks the protocol
    record = tmp_path / "run.jsonl"
    with time_limit(60):
        run = run_embedded(RunSettings(model_path=str(model), n_ctx=512), record=str(record),
                           judge=LiveJudge(rulebase()), host=False, timeout_s=60,
                           command=[sys.executable, "-m", "tests.hostile.abort_child"])
    assert run.crashed and run.reason == "crashed" and run.exit_status == -signal.SIGABRT
    assert "SIGABRT" in run.errors[0] and "GGML_ASSERT(n_tokens_all <= cparams.n_batch)" in run.errors[0]
    assert [s.step for s in run.steps] == [1, 2, 3, 4, 5, 6]
    # the assert has a known meaning (the crash table): LD960 names it and explains the generic LD950
    assert run.report is not None and "LD960" in {f.id for f in run.report.findings}
    assert "LD950" in {rule for f in run.report.findings for rule in f.inhibits}
    assert any("SIGABRT" in e for e in run.report.errors)
    events, damaged, ids = replayed(record)
    assert damaged == 0 and isinstance(events[-1], EndEvent) and events[-1].reason == "crashed"
    assert [e.step for e in events if isinstance(e, StepEvent)] == [1, 2, 3, 4, 5, 6]
    assert ids == sorted(f.id for f in run.report.findings)


@pytest.mark.engine
def test_the_real_engine_given_an_impossible_context(tmp_path: Path, smollm2: Path) -> None:
    """n_ctx = 2**31 - 1 on SmolLM2: a KV cache of ~50 TB. llama.cpp throws std::bad_alloc and
    llama-cpp-python raises; the report names the context, the recording keeps the engine's log."""
    from doctor.sources.live.embedded.runner import RunSettings, run_embedded

    record = tmp_path / "run.jsonl"
    run = run_embedded(RunSettings(model_path=str(smollm2), n_ctx=2**31 - 1, max_tokens=8), record=str(record),
                       judge=LiveJudge(rulebase()), timeout_s=240)
    assert run.reason == "error" and not run.crashed
    assert any("Failed to create llama_context" in e for e in run.errors)
    assert any("bad_alloc" in line for line in run.error_lines)
    ids = {f.id for f in run.report.findings}
    # the context could not be created (LD306), and the budget says why: a KV cache of ~46 TB (LD312 explains it)
    assert "LD312" in ids and "LD306" in next(f for f in run.report.findings if f.id == "LD312").inhibits
    kv = next(f for f in run.report.findings if f.id == "LD312").message
    needed = kv.split(" needed")[0].rsplit(" ", 2)[-2]
    assert needed.replace(".", "").isdigit() and f"= {needed[:-3]}" in kv  # the sum is the figure said needed
    events, damaged, replay_ids = replayed(record)
    assert damaged == 0 and events[-1].reason == "error"
    assert any(isinstance(e, LogEvent) and "n_ctx_seq (2147483648)" in e.text for e in events)
    assert replay_ids == sorted(ids)


@pytest.mark.engine
@pytest.mark.parametrize("fault", ["cut", "deleted"])
def test_the_model_file_changes_under_the_running_engine(tmp_path: Path, fault: str, smollm2: Path) -> None:
    from doctor.sources.live.embedded.runner import RunSettings, run_embedded

    model = tmp_path / "model.gguf"
    shutil.copy(smollm2, model)
    record = tmp_path / "run.jsonl"

    def on_event(event: object) -> None:
        if isinstance(event, StepEvent) and event.step == 3 and model.exists():
            if fault == "cut":
                os.truncate(model, 1 << 20)  # the engine maps the weights: its next read past 1 MiB faults
            else:
                model.unlink()  # the engine keeps its open mapping

    run = run_embedded(RunSettings(model_path=str(model), max_tokens=40, seed=1), record=str(record),
                       judge=LiveJudge(rulebase()), on_event=on_event, timeout_s=240)
    events, damaged, ids = replayed(record)
    assert damaged == 0 and isinstance(events[-1], EndEvent)
    steps = [e.step for e in events if isinstance(e, StepEvent)]
    assert steps[:3] == [1, 2, 3] and steps == sorted(steps)
    if fault == "cut":
        assert run.crashed and run.exit_status == -signal.SIGBUS
        assert any("SIGBUS" in e and "memory-mapped file" in e for e in run.errors)
        assert any("cut short during the run" in e for e in run.errors)
        # the ending names its cause (the crash table's bus error: a mapped file cut), not a bare abort
        assert "LD960" in ids and "LD950" not in ids and events[-1].reason == "crashed"
        known = next(f for f in run.report.findings if f.id == "LD960")
        assert "bus error (SIGBUS)" in known.message and "(SIGBUS) (SIGBUS)" not in known.message
        assert "truncated" in known.message
    else:
        assert run.reason == "finished" and not run.crashed and len(run.steps) > 3
        assert any("was deleted during the run" in e for e in run.errors)
        assert any("was deleted during the run" in e for e in run.report.errors)


# -- a followed log truncated and rotated ----------------------------------------------------------

def test_a_followed_log_truncated_then_rotated(tmp_path: Path) -> None:
    from doctor.sources.live.follow.follower import follow_log

    log = tmp_path / "server.log"
    lines = SERVER_LOG.read_bytes().splitlines(keepends=True)
    third = len(lines) // 3
    parts = [lines[:third], lines[third:2 * third], lines[2 * third:]]
    log.write_bytes(b"".join(parts[0]))
    record = tmp_path / "run.jsonl"
    notes: list[str] = []
    session = TraceSession("server.log", source="log", record=str(record), judge=LiveJudge(rulebase()),
                           keep_events=True)

    def writer() -> None:
        time.sleep(0.8)
        log.write_bytes(b"".join(parts[1]))  # copytruncate / `> file`: same inode, smaller
        time.sleep(0.8)
        os.rename(log, tmp_path / "server.log.1")  # logrotate: rename, then create
        log.write_bytes(b"".join(parts[2]))

    thread = threading.Thread(target=writer)
    thread.start()
    with time_limit(60):
        end = follow_log(str(log), session, stop=lambda: False, until_idle_s=2.5, poll_s=0.05, on_note=notes.append)
    thread.join()
    assert any("truncated" in n for n in notes) and any("rotated" in n for n in notes)
    seen = [e.text for e in session.events if isinstance(e, LogEvent)]
    expected = [raw.decode().rstrip("\n") for raw in lines]
    assert seen == expected  # every line of all three files, once, in order
    report = session.report
    assert report is not None and end.reason == "finished"
    # each fault is a notice that begins a new session, numbered from line 1 again: not an error
    notices = [e.session for e in session.events if isinstance(e, NoticeEvent)]
    assert notices == ["truncated", "rotated"] and report.errors == []
    assert [(s.session.first_line, s.session.last_line, s.session.started_by) for s in report.sessions] == [
        (1, len(parts[0]), "input"), (1, len(parts[1]), "truncated"), (1, len(parts[2]), "rotated")]
    numbers = [e.line for e in session.events if isinstance(e, LogEvent)]
    assert numbers == [*range(1, len(parts[0]) + 1), *range(1, len(parts[1]) + 1), *range(1, len(parts[2]) + 1)]
    assert "LD202" in {f.id for f in report.findings}  # the context filled in the last file
    assert all(max(f.lines, default=0) <= len(parts[2]) for f in report.findings)
    events, damaged, ids = replayed(record)
    assert damaged == 0 and ids == sorted(f.id for f in report.findings)
    assert [e.text for e in events if isinstance(e, LogEvent)] == expected


# -- a wrapped command that exits or is killed -----------------------------------------------------

@pytest.mark.parametrize(("how", "reason", "status"), [("exit", "exited", 3), ("kill", "crashed", -9),
                                                        ("segv", "crashed", -11)])
def test_a_wrapped_command_that_dies_mid_output(tmp_path: Path, how: str, reason: str, status: int) -> None:
    from doctor.sources.live.follow.wrapper import wrap_command

    head = b"".join(SERVER_LOG.read_bytes().splitlines(keepends=True)[:200])
    src = tmp_path / "head.log"
    src.write_bytes(head)
    ending = {"exit": "os._exit(3)", "kill": "os.kill(os.getpid(), 9)", "segv": "os.kill(os.getpid(), 11)"}[how]
    code = (f"import os, sys; sys.stdout.buffer.write(open({str(src)!r}, 'rb').read()); sys.stdout.flush(); "
            f"print('last words before the end', file=sys.stderr, flush=True); {ending}")
    record = tmp_path / "run.jsonl"
    session = TraceSession("python", source="command", record=str(record), judge=LiveJudge(rulebase()),
                           keep_events=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with time_limit(60):
            end = wrap_command([sys.executable, "-c", code], session, stop=lambda: False, stdout_fd=devnull,
                               stderr_fd=devnull)
    finally:
        os.close(devnull)
    assert end.reason == reason and end.exit_status == status
    report = session.report
    assert report is not None and report.errors
    assert "last words before the end" in report.errors[0]
    assert ("status 3" if how == "exit" else "killed by SIG") in report.errors[0]
    events, damaged, ids = replayed(record)
    assert damaged == 0 and isinstance(events[-1], EndEvent) and events[-1].reason == reason
    texts = [e.text for e in events if isinstance(e, LogEvent) and e.stream == "stdout"]
    assert texts == [raw.decode().rstrip("\n") for raw in head.splitlines(keepends=True)]
    assert ids == sorted(f.id for f in report.findings)


# -- NVML missing, or failing on every call ---------------------------------------------------------

NVML_CALLS = ["nvmlSystemGetDriverVersion", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName",
              "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates",
              "nvmlDeviceGetPerformanceState", "nvmlDeviceGetComputeRunningProcesses",
              "nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetMaxClockInfo",
              "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
              "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
              "nvmlDeviceGetGpuMaxPcieLinkGeneration", "nvmlDeviceGetPcieReplayCounter"]


def _machine_nvml() -> tuple[Any, dict[str, Any]]:
    from doctor.sources.probes.replay import load_machine

    machine = load_machine(MACHINES / "nvme-workstation-rtx4090")
    return machine, json.loads(json.dumps(machine.meta["nvml"]))


@pytest.mark.parametrize("call", NVML_CALLS)
def test_nvml_failing_on_one_call(call: str) -> None:
    from doctor.sources.probes.base import Roots
    from doctor.sources.probes.gpu import collect_gpus
    from doctor.sources.probes.replay import RecordedNvml

    machine, data = _machine_nvml()
    data["errors"] = {call: "GPU_IS_LOST"}
    facts = collect_gpus(Roots(sysfs=machine.roots.sysfs, nvml=RecordedNvml(data), live=False))
    unknown = [f for f in facts if not f.known]
    if "RunningProcesses" not in call:  # a process list that fails is an empty list, not an unknown fact
        assert unknown and any("GPU is lost" in (f.unknown or "") for f in unknown)
    render_all(diagnose(facts, rulebase(), command="scan", mode="scan"))


class ChaosNvml:
    """An NVML whose every call may raise (NVMLError of any code, OSError, RuntimeError) or answer
    nonsense (None, negative or huge numbers, bytes, wrong shapes)."""

    NVML_CLOCK_MEM = 2
    nvmlMemory_v2 = 0x02000028

    def __init__(self, rng: Random) -> None:
        self.rng = rng

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def call(*args: object) -> Any:
            import pynvml

            r = self.rng.random()
            if r < 0.3:
                raise pynvml.NVMLError(self.rng.choice([1, 2, 3, 9, 12, 15, 999]))
            if r < 0.4:
                raise self.rng.choice([OSError(5, "I/O error"), RuntimeError("driver"), ValueError("x"),
                                       TimeoutError()])
            if name == "nvmlDeviceGetCount":
                return self.rng.choice([0, 1, 2, -1, 2**31, None, "2"])
            from types import SimpleNamespace

            return self.rng.choice([None, -1, 0, 2**64, 1e308, b"\xff\x1b[2J", "NVIDIA \x1b]0;x\x07",
                                    SimpleNamespace(total=-1, free=2**70, used=None, gpu=101, memory=-3, busId=b"zz"),
                                    [SimpleNamespace(pid=1, usedGpuMemory=2**65)], {"a": 1}])

        return call


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_nvml_answering_nonsense_or_failing_at_random(rng: Random) -> None:
    from doctor.sources.probes.base import ProbeContext, Roots, run_probe
    from doctor.sources.probes.gpu import PROBE

    machine, _ = _machine_nvml()
    with time_limit(20):
        facts = run_probe(PROBE, ProbeContext(roots=Roots(sysfs=machine.roots.sysfs, nvml=ChaosNvml(rng),
                                                          live=False)))
        render_all(diagnose(facts, rulebase(), command="scan", mode="scan"))


def test_nvml_missing_or_failing_in_the_watch_sampler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from doctor.sources.live.embedded.sampler import NvmlHandle, ResourceSampler

    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    missing = NvmlHandle.open()
    assert missing.why is not None and missing.process_memory({os.getpid()}) is None
    monkeypatch.undo()
    for rng_seed in range(20):
        handle = NvmlHandle.open(ChaosNvml(Random(rng_seed)))
        sampler = ResourceSampler(os.getpid(), nvml=handle)
        event = sampler.sample(0.0)
        assert event.vram_bytes is None or isinstance(event.vram_bytes, int)
        sampler.close()


def test_scan_on_a_machine_whose_nvml_fails_everything(tmp_path: Path, model_file: Path) -> None:
    machine = tmp_path / "machine"
    shutil.copytree(MACHINES / "nvme-workstation-rtx4090", machine, symlinks=True)
    meta = json.loads((machine / "machine.json").read_text())
    meta["nvml"]["errors"] = {call: "UNKNOWN" for call in NVML_CALLS if call != "nvmlDeviceGetCount"}
    (machine / "machine.json").write_text(json.dumps(meta))
    proc = doctor("scan", "--replay-machine", str(machine), "--model", str(model_file), "--no-trace",
                  "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    facts = json.loads(proc.stdout)["facts"]["facts"]
    assert facts["host.gpu.count"]["value"] == 1
    assert any("Unknown Error" in str(fact.get("unknown")) for fact in facts.values())


# -- /sys and /proc unreadable ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sys.path.insert(0, str(ROOT / "fixtures" / "gguf"))
    try:
        from make_gguf import build_gguf, load_spec
    finally:
        sys.path.pop(0)
    return build_gguf(load_spec("llama-3-8b-instruct-q4_k_m"), tmp_path_factory.mktemp("gguf") / "llama3.gguf")


def _without_read_permission() -> tuple[str, ...]:
    """A command prefix under which chmod 000 really denies reads (root reads anything otherwise)."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a directory unreadable")
    return (setpriv, "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search")


@pytest.mark.parametrize("locked", ["sys", "proc", "both", "files"])
def test_scan_with_sys_or_proc_unreadable(tmp_path: Path, model_file: Path, locked: str) -> None:
    machine = tmp_path / "machine"
    shutil.copytree(MACHINES / "container-quota", machine, symlinks=True)
    targets = {"sys": [machine / "sys"], "proc": [machine / "proc"], "both": [machine / "sys", machine / "proc"],
               "files": [p for p in (machine / "proc").rglob("*") if p.is_file() and not p.is_symlink()]}[locked]
    for target in targets:
        target.chmod(0)
    try:
        proc = doctor("scan", "--replay-machine", str(machine), "--model", str(model_file), "--no-trace",
                      "--format", "json", prefix=_without_read_permission())
    finally:
        for target in targets:
            target.chmod(0o755)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    facts = report["facts"]["facts"]
    if locked == "files":  # each probe says which file it could not read
        denied = [name for name, fact in facts.items() if "permission denied" in str(fact.get("unknown", ""))]
        assert denied, "nothing says it could not read"
    else:  # a whole root: the report says so once (its absence must not read as "no quota", "no disk")
        for root in ("sys", "proc") if locked == "both" else (locked,):
            assert any(f"cannot read /{root}" in e and "Permission denied" in e for e in report["errors"]), root
    assert facts["model.n_layer"]["value"] == 32  # the model still read, the plan still made
    assert report["checks"]


@pytest.mark.parametrize("shape", ["missing", "files-not-dirs", "symlink-loop"])
def test_probe_roots_that_are_not_there_or_loop(tmp_path: Path, shape: str) -> None:
    from doctor.sources.probes import registry
    from doctor.sources.probes.base import ProbeContext, Roots
    from doctor.sources.probes.replay import RecordedNvml, RecordedPsutil

    sysfs, procfs = tmp_path / "sys", tmp_path / "proc"
    if shape == "files-not-dirs":
        sysfs.write_text("x")
        procfs.write_text("x")
    elif shape == "symlink-loop":
        sysfs.symlink_to(tmp_path / "sys")
        procfs.symlink_to(tmp_path / "proc")
    roots = Roots(sysfs=str(sysfs), proc=str(procfs), nvml=RecordedNvml({"init_error": "LIBRARY_NOT_FOUND"}),
                  psutil=RecordedPsutil({}), engine={}, live=False)
    probes = [p for p in registry.select(bench=False) if p.name in ("cpu", "memory", "storage", "gpu")]
    with time_limit(30):
        facts = registry.collect(ProbeContext(roots=roots, model_path="/models/m.gguf"), probes)
    assert any(not f.known for f in facts)
    render_all(diagnose(facts, rulebase(), command="scan", mode="scan"))


# -- the disk fills up while recording -------------------------------------------------------------

@contextlib.contextmanager
def tiny_filesystem(tmp_path: Path, size: str = "48k") -> Iterator[Path | None]:
    """A real, small tmpfs when this process may mount one; None otherwise."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True,
                          check=False) if shutil.which("mount") and os.geteuid() == 0 else None
    if proc is None or proc.returncode != 0:
        yield None
        return
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


class FillsUp(io.StringIO):
    """A text file that takes `room` characters, then fails like a full disk."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, s: str) -> int:
        if self.tell() + len(s) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(s)

    def close(self) -> None:
        self.was_closed = True  # keep what was written readable for the test


def big_log(tmp_path: Path) -> Path:
    """The llama-server session 40 times over (~220 KB): a recording of it outgrows 48 KiB."""
    path = tmp_path / "server.log"
    path.write_bytes(SERVER_LOG.read_bytes() * 40)
    return path


def test_disk_full_mid_recording_in_process(tmp_path: Path) -> None:
    from doctor.sources.live.follow.follower import follow_log

    record = tmp_path / "run.jsonl"
    session = TraceSession("server.log", source="log", record=str(record), judge=LiveJudge(rulebase()),
                           keep_events=False)
    assert session.recorder is not None
    kept = record.read_text()  # the header, on disk
    full = FillsUp(40_000)
    session.recorder.handle.close()
    session.recorder.handle = full
    with time_limit(60):
        end = follow_log(str(big_log(tmp_path)), session, stop=lambda: False, until_idle_s=0.3, poll_s=0.05)
    assert session.recording_problem and "No space left on device" in session.recording_problem
    report = session.report
    assert report is not None and any("No space left on device" in e for e in report.errors)
    assert {"LD202", "LD802"} <= {f.id for f in report.findings}  # watching went on to the end of the log
    assert end.reason == "finished"
    record.write_text(kept + full.getvalue())  # what reached the "disk"
    events, damaged, _ = replayed(record)
    assert damaged <= 1 and events and not any(isinstance(e, EndEvent) for e in events)
    facts = facts_from_recording(io.BytesIO(record.read_bytes()), "run.jsonl")
    assert facts.value("run.recording_complete") is False


def test_disk_full_mid_recording_on_a_real_small_filesystem(tmp_path: Path) -> None:
    with tiny_filesystem(tmp_path) as mount:
        if mount is None:
            pytest.skip("cannot mount a small tmpfs here (the in-process test above covers the logic)")
        record = mount / "run.jsonl"
        proc = doctor("watch", "--log", str(big_log(tmp_path)), "--duration", "1", "--format", "json",
                      "--record", str(record))
        assert proc.returncode == 1, proc.stderr  # the findings' exit code, not a crash
        report = json.loads(proc.stdout)
        assert any("recording stopped (No space left on device)" in e for e in report["errors"])
        assert {"LD202", "LD802"} <= {f["id"] for f in report["findings"]}
        events, damaged, _ = replayed(record)
        assert damaged <= 1 and len(events) > 50
        assert facts_from_recording(io.BytesIO(record.read_bytes()), "r").value("run.recording_complete") is False


def test_a_recording_that_cannot_be_written_at_all() -> None:
    proc = doctor("watch", "--log", str(SERVER_LOG), "--duration", "1", "--format", "json", "--record", "/dev/full")
    assert proc.returncode == 2
    assert proc.stderr.startswith(b"llm-doctor: error: /dev/full: cannot write the recording (No space left")
