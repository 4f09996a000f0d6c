"""The long fuzz run: at least 100k log inputs across every parser, 10k GGUF headers, 10k rule
files (and 10k saved scans / watch recordings), then coverage-guided fuzzing with atheris where it
is installed, then the edge inputs the issue names (a 100 MB line, millions of short lines, CR-only
line ends, JSON nested past any limit).

    python -m bench.fuzz_long                      # the full run (about an hour on 2 cores)
    python -m bench.fuzz_long --scale 0.05         # a quick look
    python -m bench.fuzz_long --only gguf,rules

The targets and generators are tests/hostile/fuzz_targets.py (the CI suite runs the same ones,
bounded). Each target runs in worker processes with the data segment capped (a runaway allocation
is a MemoryError, counted as a crash) and every input under a time limit (a hang); a worker that
stops reporting progress is killed, counted as a hang at the input it was on, and restarted after
it. Inputs that crash or hang are written to the crash folder with their tracebacks. The figures
go to stdout and bench/results/fuzz_long.json: inputs per target, outcomes, crashes, hangs, the
slowest input, peak memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
COUNTS = {"logs": 100_000, "gguf": 10_000, "rules": 10_000, "inputs": 10_000}
BUDGET_S = {"logs": 3600.0, "gguf": 900.0, "rules": 1200.0, "inputs": 1800.0}
PER_INPUT_S = 30.0  # an input still running after this is a hang
STALL_S = 120.0  # a worker silent this long is killed (a hang the alarm could not interrupt)
DATA_CAP = 3 << 30  # bytes of heap per worker
PROGRESS_EVERY = 25


# -- worker ----------------------------------------------------------------------------------------

@dataclass
class Shard:
    target: str
    seed: int
    start: int
    stop: int
    deadline: float  # time.time() after which the worker stops early


@dataclass
class WorkerResult:
    done: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    hangs: list[dict[str, Any]] = field(default_factory=list)
    slowest_s: float = 0.0
    slowest_index: int = -1
    maxrss_kib: int = 0
    seconds: float = 0.0


def input_rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index)


def worker(shard: Shard, progress: Path, out: Path, crash_dir: Path) -> int:
    """Run inputs shard.start..stop-1 of one target; write progress and the result as JSON."""
    resource.setrlimit(resource.RLIMIT_DATA, (DATA_CAP, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    sys.path.insert(0, str(ROOT))
    from tests.hostile.fuzz_targets import TARGETS, Hang, time_limit

    run = TARGETS[shard.target]
    result = WorkerResult()
    tmp = Path(tempfile.mkdtemp(prefix=f"fuzz-{shard.target}-"))
    began = time.monotonic()
    try:
        run(input_rng(shard.seed, -1), tmp)  # warm the caches (corpus, rule base, GGUF seeds) outside the count
        for index in range(shard.start, shard.stop):
            if index % PROGRESS_EVERY == 0:
                progress.write_text(str(index))
                if time.time() > shard.deadline:
                    break
            t = time.monotonic()
            try:
                with time_limit(PER_INPUT_S):
                    outcome = run(input_rng(shard.seed, index), tmp)
            except Hang:
                outcome = "hang"
                result.hangs.append({"index": index, "seconds": PER_INPUT_S})
                save_input(crash_dir, shard, index, "hang", f"no result after {PER_INPUT_S} s")
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                outcome = "crash"
                text = traceback.format_exc()
                if len(result.crashes) < 50:
                    result.crashes.append({"index": index, "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                                           "where": _where(text)})
                save_input(crash_dir, shard, index, "crash", text)
            dt = time.monotonic() - t
            if dt > result.slowest_s:
                result.slowest_s, result.slowest_index = round(dt, 3), index
            result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
            result.done += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        result.seconds = round(time.monotonic() - began, 1)
        result.maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out.write_text(json.dumps(asdict(result)))
    return 0


def _where(text: str) -> str:
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', text)
    ours = [f for f in frames if "/doctor/" in f[0] or "/probes/" in f[0] or "/engine_adapter/" in f[0]]
    f = (ours or frames or [("?", "?", "?")])[-1]
    return f"{Path(f[0]).name}:{f[1]} in {f[2]}"


def save_input(crash_dir: Path, shard: Shard, index: int, kind: str, text: str) -> None:
    """Write the input (regenerated from its seed) and the traceback, so it can be replayed."""
    crash_dir.mkdir(parents=True, exist_ok=True)
    from tests.hostile import fuzz_targets as ft

    rng = input_rng(shard.seed, index)
    data: bytes | str
    if shard.target == "logs":
        data = ft.gen_log(rng)
    elif shard.target == "inputs":
        data = ft.gen_input(rng)
    elif shard.target == "gguf":
        data = ft.gen_gguf(rng)[0]
    else:
        data = ft.gen_rules(rng)
    stem = crash_dir / f"{shard.target}-{shard.seed}-{index}-{kind}"
    Path(f"{stem}.input").write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    Path(f"{stem}.txt").write_text(f"target {shard.target} seed {shard.seed} index {index}\n{text}")


# -- parent ----------------------------------------------------------------------------------------

@dataclass
class Running:
    shard: Shard
    proc: subprocess.Popen[bytes]
    progress: Path
    out: Path
    last_seen: int
    last_change: float


def spawn(shard: Shard, work: Path, crash_dir: Path) -> Running:
    tag = f"{shard.target}-{shard.start}"
    progress, out = work / f"{tag}.progress", work / f"{tag}.json"
    progress.write_text(str(shard.start))
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    cmd = [sys.executable, "-m", "bench.fuzz_long", "--worker", json.dumps(asdict(shard)), "--progress", str(progress),
           "--out", str(out), "--crash-dir", str(crash_dir)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return Running(shard, proc, progress, out, shard.start, time.monotonic())


def run_target(target: str, count: int, budget_s: float, jobs: int, seed: int, work: Path,
               crash_dir: Path) -> dict[str, Any]:
    """Run `count` inputs of one target over `jobs` workers; restart past anything that kills a worker."""
    deadline = time.time() + budget_s
    per = -(-count // jobs)
    pending = [Shard(target, seed, i * per, min(count, (i + 1) * per), deadline) for i in range(jobs)
               if i * per < count]
    running: list[Running] = []
    totals = WorkerResult()
    peak_kib = 0
    started = time.monotonic()
    while pending or running:
        while pending and len(running) < jobs:
            running.append(spawn(pending.pop(0), work, crash_dir))
        time.sleep(0.5)
        for r in list(running):
            seen = _read_int(r.progress, r.last_seen)
            if seen != r.last_seen:
                r.last_seen, r.last_change = seen, time.monotonic()
            code = r.proc.poll()
            stalled = code is None and time.monotonic() - r.last_change > STALL_S
            if code is None and not stalled:
                continue
            if stalled:
                r.proc.kill()
                r.proc.wait()
            running.remove(r)
            part = _read_result(r.out)
            if part is not None and code == 0:
                _add(totals, part)
                peak_kib = max(peak_kib, part.maxrss_kib)
                continue
            # the worker died or hung where the alarm could not reach: find the input and go on after it
            at = _first_unfinished(r, part)
            kind = "hang" if stalled else "crash"
            stderr = (r.proc.stderr.read() if r.proc.stderr else b"").decode("utf-8", "replace")[-2000:]
            entry = {"index": at, "error": f"worker {'stalled' if stalled else f'exited {code}'}",
                     "where": stderr.strip().splitlines()[-1] if stderr.strip() else ""}
            (totals.hangs if stalled else totals.crashes).append(entry)
            totals.outcomes[kind] = totals.outcomes.get(kind, 0) + 1
            totals.done += 1
            if part is not None:
                _add(totals, part)
            with contextlib.suppress(Exception):
                save_input(crash_dir, r.shard, at, kind, stderr)
            if at + 1 < r.shard.stop and time.time() < deadline:
                pending.append(Shard(target, seed, at + 1, r.shard.stop, deadline))
    seconds = time.monotonic() - started
    return {
        "inputs": totals.done,
        "outcomes": dict(sorted(totals.outcomes.items())),
        "crashes": totals.outcomes.get("crash", 0),
        "hangs": totals.outcomes.get("hang", 0),
        "crash_examples": totals.crashes[:10],
        "hang_examples": totals.hangs[:10],
        "slowest_input_s": totals.slowest_s,
        "slowest_input_index": totals.slowest_index,
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "seconds": round(seconds, 1),
        "inputs_per_s": round(totals.done / seconds, 1) if seconds else None,
        "workers": jobs,
        "seed": seed,
    }


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text() or default)
    except (OSError, ValueError):
        return default


def _read_result(path: Path) -> WorkerResult | None:
    try:
        return WorkerResult(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _first_unfinished(r: Running, part: WorkerResult | None) -> int:
    """The input a dead worker was on: after its last progress mark, replay one by one in a fresh
    process until one kills it again (inputs are regenerated from their seed)."""
    start = r.last_seen
    if part is not None:
        return r.shard.start + part.done
    for index in range(start, min(start + PROGRESS_EVERY, r.shard.stop)):
        probe = Shard(r.shard.target, r.shard.seed, index, index + 1, time.time() + PER_INPUT_S * 2)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "one.json"
            cmd = [sys.executable, "-m", "bench.fuzz_long", "--worker", json.dumps(asdict(probe)),
                   "--progress", str(Path(tmp) / "p"), "--out", str(out), "--crash-dir", tmp]
            try:
                done = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=PER_INPUT_S * 3, check=False)
                ok = done.returncode == 0 and out.exists()
            except subprocess.TimeoutExpired:
                ok = False
        if not ok:
            return index
    return start


def _add(total: WorkerResult, part: WorkerResult) -> None:
    total.done += part.done
    for k, v in part.outcomes.items():
        total.outcomes[k] = total.outcomes.get(k, 0) + v
    total.crashes += part.crashes
    total.hangs += part.hangs
    if part.slowest_s > total.slowest_s:
        total.slowest_s, total.slowest_index = part.slowest_s, part.slowest_index
    total.maxrss_kib = max(total.maxrss_kib, part.maxrss_kib)


# -- atheris (coverage-guided) ---------------------------------------------------------------------

ATHERIS_TARGETS = ("logs", "gguf")


def atheris_main(target: str) -> None:
    """libFuzzer entry: `python -m bench.fuzz_long --atheris logs CORPUS -max_total_time=...`."""
    import atheris

    sys.path.insert(0, str(ROOT))
    with atheris.instrument_imports(include=["doctor", "probes"]):
        import io

        from doctor.core.errors import InputError
        from doctor.derive import derive
        from doctor.sources.logs.entry import analyze_stream
        from doctor.sources.probes.gguf_header import GgufCorrupt, _Walker
        from tests.hostile.fuzz_targets import check_inert_facts, check_one_line

    def one_log(data: bytes) -> None:
        try:
            facts = analyze_stream(io.BytesIO(data), "fuzz", chunk=4096)
        except InputError as exc:
            check_one_line(exc.one_line())
            return
        derive(facts)
        check_inert_facts(facts)

    def one_gguf(data: bytes) -> None:
        # the header walk on the bytes themselves (check_gguf caches by path, size and mtime, and
        # refuses files under 24 bytes before it walks)
        if len(data) < 24:
            return
        try:
            header = _Walker(data, len(data), "fuzz").walk()
        except GgufCorrupt as exc:
            check_one_line(str(exc))
            return
        for t in header.tensors:
            assert header.data_offset + t.offset + t.n_bytes <= len(data)

    atheris.Setup(sys.argv[:1] + sys.argv[3:], one_log if target == "logs" else one_gguf)
    atheris.Fuzz()


def atheris_corpus(target: str, folder: Path) -> Path | None:
    """Seeds (fixture log chunks with trigger lines; the GGUF seed headers) and, for logs, a
    dictionary of the words the parsers look for."""
    sys.path.insert(0, str(ROOT))
    from tests.hostile import fuzz_targets as ft

    folder.mkdir(parents=True, exist_ok=True)
    if target == "gguf":
        for name, data, _ in ft.gguf_seeds():
            (folder / f"{name}.gguf").write_bytes(data[:65536])
        return None
    lines = ft.trigger_lines()
    rng = random.Random(7)
    for i in range(300):
        (folder / f"seed{i}").write_bytes(b"\n".join(rng.sample(lines, min(len(lines), rng.randrange(1, 8)))) + b"\n")
    words: set[bytes] = set()
    for line in lines:
        for w in re.findall(rb"[A-Za-z_][\w.]{3,30}[:=]?", line):
            words.add(w)
    dict_path = folder.parent / f"{target}.dict"
    dict_path.write_text("".join(f'"{w.decode("ascii", "ignore")}"\n' for w in sorted(words)[:3000]
                                 if b'"' not in w and b"\\" not in w))
    return dict_path


def run_atheris(target: str, seconds: int, work: Path, crash_dir: Path) -> dict[str, Any]:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return {"skipped": "atheris is not installed (pip install atheris)"}
    corpus = work / f"atheris-{target}"
    dict_path = atheris_corpus(target, corpus)
    artifacts = crash_dir / f"atheris-{target}-"
    crash_dir.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "bench.fuzz_long", "--atheris", target, str(corpus),
            f"-max_total_time={seconds}", f"-timeout={int(PER_INPUT_S)}", "-rss_limit_mb=3072",
            "-max_len=65536", f"-artifact_prefix={artifacts}", "-print_final_stats=1"]
    if dict_path is not None:
        args.append(f"-dict={dict_path}")
    started = time.monotonic()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, timeout=seconds + 300, check=False)
    text = proc.stderr.decode("utf-8", "replace")
    runs = re.findall(r"Done (\d+) runs in (\d+) second", text)
    cov = re.findall(r"cov: (\d+) ft: (\d+)", text)
    rss = re.findall(r"rss: (\d+)Mb", text)
    crashed = proc.returncode != 0 and not runs
    return {
        "runs": int(runs[-1][0]) if runs else None,
        "seconds": round(time.monotonic() - started, 1),
        "coverage_edges": int(cov[-1][0]) if cov else None,
        "features": int(cov[-1][1]) if cov else None,
        "corpus_files": len(list(corpus.iterdir())),
        "crashes": 1 if crashed or "ERROR: libFuzzer" in text or "Uncaught Python exception" in text else 0,
        "hangs": 1 if "ERROR: libFuzzer: timeout" in text else 0,
        "peak_rss_mib": int(rss[-1]) if rss else None,
        "tail": text.strip().splitlines()[-3:] if proc.returncode else [],
    }


# -- the edge inputs -----------------------------------------------------------------------------

def run_edges(work: Path, scale: float) -> dict[str, Any]:
    """The shapes the issue names, at full size, each through `llm-doctor analyze` in a child:
    time and peak RSS (wait4)."""
    sys.path.insert(0, str(ROOT))
    from tests.hostile.load_tools import log_block, run_measured

    mb = max(1, int(100 * scale))
    short_lines = max(1000, int(20_000_000 * scale))
    block = log_block()
    cases: dict[str, bytes | None] = {
        f"a single {mb} MB line": None,
        f"{short_lines} short lines": None,
        f"CR-only line ends, {mb} MB": None,
        "JSON nested 5 000 000 deep in one line": None,
        f"NUL bytes every 100 bytes, {mb} MB": None,
    }
    out: dict[str, Any] = {}
    for name in cases:
        path = work / "edge.log"
        with path.open("wb") as handle:
            if name.startswith("a single"):
                handle.write(b"llama_context: n_ctx = ")
                piece = b"9" * (1 << 20)
                for _ in range(mb):
                    handle.write(piece)
                handle.write(b"\nllama_context: n_ctx = 4096\n")
            elif "short lines" in name:
                for _ in range(short_lines // 100_000):
                    handle.write(b"x\n" * 100_000)
                handle.write(b"x\n" * (short_lines % 100_000))
                handle.write(b"decode: failed to find a memory slot for batch of size 1\n")
            elif name.startswith("CR-only"):
                chunk = block.replace(b"\r\n", b"\n").replace(b"\n", b"\r")
                for _ in range(max(1, (mb << 20) // len(chunk))):
                    handle.write(chunk)
            elif name.startswith("JSON"):
                depth = 5_000_000
                handle.write(b'{"log": ' + b"[" * depth + b"]" * depth
                             + b', "msg": "decode: failed to find a memory slot for batch of size 1"}\n')
            else:
                spaced = b"".join(block[i:i + 100] + b"\x00" for i in range(0, len(block), 100))
                for _ in range(max(1, (mb << 20) // len(spaced))):
                    handle.write(spaced)
        m = run_measured(["analyze", str(path), "--format", "json"], timeout=1800)
        result: dict[str, Any] = {"bytes": path.stat().st_size, "exit_code": m.returncode,
                                  "seconds": round(m.seconds, 2), "peak_rss_mib": round(m.maxrss_kib / 1024, 1)}
        if m.returncode in (0, 1):
            facts = json.loads(m.stdout)["facts"]["facts"]
            result["log_lines"] = facts.get("run.log_lines", {}).get("value")
            result["outcome"] = "report"
        elif m.returncode == 2:
            result["outcome"] = "refused: " + m.stderr.decode("utf-8", "replace").strip()[:200]
        else:
            result["outcome"] = "CRASH: " + m.stderr.decode("utf-8", "replace").strip()[-300:]
        out[name] = result
        path.unlink()
        print(f"  edge  {name}: {result}", flush=True)
    return out


# -- main ------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fuzz_long", description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="multiply every count and budget (0.05: a quick look)")
    p.add_argument("--only", default="", help="comma list: logs,inputs,gguf,rules,atheris,edges")
    p.add_argument("--jobs", type=int, default=max(1, min(os.cpu_count() or 1, 4)))
    p.add_argument("--seed", type=int, default=20251202)
    p.add_argument("--atheris-seconds", type=int, default=300)
    p.add_argument("--crash-dir", default=None, help="where crashing inputs go (default: a temp folder)")
    p.add_argument("--out", default=str(RESULTS / "fuzz_long.json"))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--progress", help=argparse.SUPPRESS)
    p.add_argument("--atheris", help=argparse.SUPPRESS)
    args, rest = p.parse_known_args(argv)
    if args.atheris:
        atheris_main(args.atheris)
        return 0
    crash_dir = Path(args.crash_dir or tempfile.mkdtemp(prefix="llm-doctor-fuzz-crashes-"))
    if args.worker:
        return worker(Shard(**json.loads(args.worker)), Path(args.progress), Path(args.out), crash_dir)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    work = Path(tempfile.mkdtemp(prefix="llm-doctor-fuzz-"))
    report: dict[str, Any] = {
        "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
        "scale": args.scale, "per_input_limit_s": PER_INPUT_S, "data_cap_gib": DATA_CAP >> 30,
        "crash_dir": str(crash_dir), "targets": {},
    }
    print(f"fuzz_long: {args.jobs} workers, crashes and hangs saved to {crash_dir}", flush=True)
    try:
        for target, count in COUNTS.items():
            if only and target not in only:
                continue
            n = max(1, int(count * args.scale))
            print(f"  {target}: {n} inputs ...", flush=True)
            res = run_target(target, n, BUDGET_S[target] * max(args.scale, 0.05), args.jobs, args.seed, work,
                             crash_dir)
            report["targets"][target] = res
            print(f"  {target}: {res['inputs']} inputs, {res['crashes']} crashes, {res['hangs']} hangs, "
                  f"peak {res['peak_rss_mib']} MiB, {res['inputs_per_s']}/s, slowest {res['slowest_input_s']} s",
                  flush=True)
        if not only or "atheris" in only:
            report["atheris"] = {}
            for target in ATHERIS_TARGETS:
                seconds = max(10, int(args.atheris_seconds * min(1.0, args.scale * 4)))
                print(f"  atheris {target}: {seconds} s ...", flush=True)
                res = run_atheris(target, seconds, work, crash_dir)
                report["atheris"][target] = res
                print(f"  atheris {target}: {res}", flush=True)
        if not only or "edges" in only:
            report["edges"] = run_edges(work, args.scale)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    totals = report["targets"].values()
    crashes = sum(t["crashes"] for t in totals) + sum(a.get("crashes") or 0 for a in report.get("atheris", {}).values())
    hangs = sum(t["hangs"] for t in totals) + sum(a.get("hangs") or 0 for a in report.get("atheris", {}).values())
    edge_fail = [k for k, v in report.get("edges", {}).items() if str(v.get("outcome", "")).startswith("CRASH")]
    print(f"fuzz_long: {crashes} crashes, {hangs} hangs, {len(edge_fail)} edge failures -> {args.out}")
    del rest
    return 1 if crashes or hangs or edge_fail else 0


if __name__ == "__main__":
    sys.exit(main())
