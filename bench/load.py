"""Load: analyze on a 1 GB log with flat memory, watch following a log that grows at 50 MB/s, and
watch -- CMD with a command that writes faster than the terminal can show.

    python -m bench.load                 # the full sizes (1 GB, 50 MB/s for 20 s, a 400 MB flood)
    python -m bench.load --scale 0.1     # a quick look

Every figure comes from the process under load, seen from outside: peak RSS from wait4, RSS over
time from /proc/PID/status, and for the follower the read position of its open log file from
/proc/PID/fdinfo (so "behind" is measured, not inferred). Writes bench/results/load.json.
The bounded versions of the same checks are tests/hostile/test_load.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile.load_tools import RateWriter, log_block, run_measured, slow_reader, write_log  # noqa: E402

MB = 1_000_000
MIB = 1 << 20


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def read_pos(pid: int, path: Path) -> int | None:
    """Where process `pid` is reading `path` (its open descriptor's offset), from /proc."""
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as handle:
                        return int(handle.readline().split()[1])
            except OSError:
                continue
    except OSError:
        return None
    return None


class Sampler(threading.Thread):
    """RSS (and, with a log, the read position) of a process every `interval` s."""

    def __init__(self, pid: int, log: Path | None = None, writer: RateWriter | None = None,
                 interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.pid, self.log, self.writer, self.interval = pid, log, writer, interval
        self.samples: list[dict[str, float]] = []
        self.stop = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.stop.is_set():
            rss = rss_kib(self.pid)
            if rss is None:
                break
            sample: dict[str, float] = {"t": round(time.monotonic() - self.t0, 2), "rss_mib": round(rss / 1024, 1)}
            if self.log is not None:
                pos = read_pos(self.pid, self.log)
                size = self.log.stat().st_size if self.log.exists() else 0
                sample["size_mb"] = round(size / MB, 1)
                if pos is not None:
                    sample["read_mb"] = round(pos / MB, 1)
                    sample["behind_mb"] = round((size - pos) / MB, 1)
            self.samples.append(sample)
            self.stop.wait(self.interval)


def bench_analyze(work: Path, scale: float) -> dict[str, Any]:
    """analyze on 100 MB and on 1 GB (scaled): time, throughput, peak RSS, RSS over the run."""
    out: dict[str, Any] = {}
    for size_mb in (max(10, int(100 * scale)), max(20, int(1000 * scale))):
        path = work / f"analyze-{size_mb}.log"
        lines = write_log(path, size_mb * MB)
        proc = subprocess.Popen([sys.executable, "-m", "doctor", "analyze", str(path), "--format", "json"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sampler = Sampler(proc.pid)
        sampler.start()
        started = time.monotonic()
        stdout, stderr = _communicate_wait4(proc)
        seconds = time.monotonic() - started
        sampler.stop.set()
        report = json.loads(stdout[0]) if proc.returncode in (0, 1) else None
        rss = [s["rss_mib"] for s in sampler.samples]
        size = path.stat().st_size
        out[f"{size_mb} MB"] = {
            "bytes": size, "lines": lines, "exit_code": proc.returncode, "seconds": round(seconds, 1),
            "mb_per_s": round(size / MB / seconds, 1),
            "lines_read": report["facts"]["facts"]["run.log_lines"]["value"] if report else None,
            "peak_rss_mib": round(stdout[1] / 1024, 1),
            "rss_mib_at_10_50_90_pct": [rss[int(len(rss) * q)] for q in (0.1, 0.5, 0.9)] if rss else None,
            "stderr": stderr.decode("utf-8", "replace")[-300:] if proc.returncode not in (0, 1) else "",
        }
        path.unlink()
        print(f"  analyze {size_mb} MB: {out[f'{size_mb} MB']}", flush=True)
    small, big = out.values()
    out["peak_rss_growth_mib"] = round(big["peak_rss_mib"] - small["peak_rss_mib"], 1)
    return out


def _communicate_wait4(proc: subprocess.Popen[bytes]) -> tuple[tuple[bytes, int], bytes]:
    """Read both pipes, reap with wait4; ((stdout, peak RSS KiB), stderr)."""
    got: dict[str, bytes] = {}
    threads = [threading.Thread(target=lambda n=n, h=h: got.__setitem__(n, h.read()))
               for n, h in (("out", proc.stdout), ("err", proc.stderr))]
    for t in threads:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in threads:
        t.join()
    return (got.get("out", b""), usage.ru_maxrss), got.get("err", b"")


def source_lines(source: str) -> tuple[bytes, bytes]:
    """(head, block) a growing log is written from: `mixed`, real lines of every kind (tests/hostile/load_tools.py
    log_block); `queue`, `ollama`, `vllm` and `sglang`, a busy server's real request lines after its real
    start-up, as bench/analyze_real.py builds them (real-queueing.log's request block; the real `[GIN]` access
    lines; vLLM's request lines; SGLang's batch lines)."""
    if source == "mixed":
        return b"", log_block()
    from bench.analyze_real import PARTS

    head, block, _ = PARTS[source]()
    return head, block


def bench_follow(work: Path, scale: float, rates_mb: tuple[float, ...], source: str = "mixed") -> dict[str, Any]:
    """watch --log on a file that grows at each rate for `seconds` (from `source`: source_lines); how far behind
    the reader is (measured from its descriptor's offset), how long it needs to catch up, and its memory."""
    head, block = source_lines(source)
    seconds = max(3.0, 20.0 * scale)
    out: dict[str, Any] = {}
    for rate in rates_mb:
        log = work / f"grow-{rate}.log"
        log.write_bytes(b"")
        proc = subprocess.Popen([sys.executable, "-m", "doctor", "watch", "--log", str(log), "--format", "json",
                                 "--duration", "3600"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.5)  # let it start and open the file
        writer = RateWriter(log, rate * MB, seconds, block, head)
        sampler = Sampler(proc.pid, log, writer)
        sampler.start()
        writer.start()
        writer.join()
        wrote_at = time.monotonic()
        caught_up = None
        while time.monotonic() - wrote_at < 600:
            pos = read_pos(proc.pid, log)
            if pos is not None and pos >= log.stat().st_size:
                caught_up = time.monotonic() - wrote_at
                break
            time.sleep(0.2)
        time.sleep(1.0)  # the last chunk read is parsed
        proc.send_signal(signal.SIGINT)  # Ctrl-C: watch stops and prints its report
        (stdout, peak), stderr = _communicate_wait4(proc)
        sampler.stop.set()
        report = json.loads(stdout) if proc.returncode in (0, 1) else None
        behind = [s.get("behind_mb", 0.0) for s in sampler.samples if "behind_mb" in s]
        rss = [s["rss_mib"] for s in sampler.samples]
        size = log.stat().st_size
        out[f"{rate:g} MB/s"] = {
            "source": source,
            "written_mb": round(size / MB, 1), "write_seconds": seconds, "lines_written": writer.lines,
            "lines_read": report["facts"]["facts"]["run.log_lines"]["value"] if report else None,
            "exit_code": proc.returncode,
            "max_behind_mb": max(behind) if behind else None,
            "behind_at_end_of_writing_mb": behind[-1] if behind else None,
            "catch_up_s": round(caught_up, 1) if caught_up is not None else None,
            "kept_up": bool(behind) and max(behind) <= 2 * MIB / MB + rate * 0.5,
            "read_mb_per_s": round(size / MB / (seconds + (caught_up or 0.0)), 1),
            "peak_rss_mib": round(peak / 1024, 1),
            "rss_mib_min_max": [min(rss), max(rss)] if rss else None,
            "stderr": stderr.decode("utf-8", "replace")[-300:] if proc.returncode not in (0, 1) else "",
        }
        log.unlink()
        print(f"  follow {rate:g} MB/s: {out[f'{rate:g} MB/s']}", flush=True)
    return out


def bench_flood(work: Path, scale: float) -> dict[str, Any]:
    """watch -- CMD where CMD writes as fast as it can: to a terminal draining 20 MB/s, and to one
    that keeps up. Bytes through, lines read, peak memory, time."""
    block = log_block()
    copies = max(1, int(400 * MB * scale) // len(block))
    src = work / "block.log"
    src.write_bytes(block)
    code = (f"import sys; b = open({str(src)!r}, 'rb').read(); w = sys.stdout.buffer.write\n"
            f"for _ in range({copies}): w(b)\n")
    out: dict[str, Any] = {"command_writes_mb": round(copies * len(block) / MB, 1)}
    for label, rate in (("terminal drains 20 MB/s", 20 * MB), ("terminal keeps up", 10_000 * MB)):
        m = run_measured(["watch", "--format", "json", "--", sys.executable, "-c", code],
                         readers={"stderr": slow_reader(rate)}, timeout=1800)
        report = json.loads(m.stdout) if m.returncode in (0, 1) else None
        out[label] = {
            "exit_code": m.returncode, "seconds": round(m.seconds, 1),
            "bytes_to_terminal": int(m.stderr) if m.stderr.isdigit() else None,
            "bytes_expected": copies * len(block),
            "lines_read": report["facts"]["facts"]["run.log_lines"]["value"] if report else None,
            "lines_expected": copies * block.count(b"\n"),
            "peak_rss_mib": round(m.maxrss_kib / 1024, 1),
            "mb_per_s": round(copies * len(block) / MB / m.seconds, 1),
        }
        print(f"  flood, {label}: {out[label]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--only", default="", help="comma list: analyze,follow,flood")
    p.add_argument("--rates", default="10,25,50", help="follow rates in MB/s")
    p.add_argument("--source", default="mixed", choices=("mixed", "queue", "ollama", "vllm", "sglang"),
                   help="the lines a followed log grows with (bench.load source_lines)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "load.json"))
    args = p.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    result: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count(), "scale": args.scale}
    with tempfile.TemporaryDirectory(prefix="llm-doctor-load-") as tmp:
        work = Path(tmp)
        if not only or "analyze" in only:
            result["analyze"] = bench_analyze(work, args.scale)
        if not only or "follow" in only:
            result["follow"] = bench_follow(work, args.scale, tuple(float(r) for r in args.rates.split(",")),
                                            args.source)
        if not only or "flood" in only:
            result["flood"] = bench_flood(work, args.scale)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"load: -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
