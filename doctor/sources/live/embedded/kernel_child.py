"""The kernel probe's child process: llama-cpp-python times its own kernels on small real-shape GGUFs.

Started by doctor/sources/live/embedded/kernels.py as `python -m doctor.sources.live.embedded.kernel_child`
with the jobs as JSON on stdin; prints one JSON line per finished job (flushed, so a crash keeps what
was measured before it) and a last line with the engine's system info. Through llama-cpp-python's
low-level binding, as llama.cpp's own llama-bench does: one decode call per prompt batch (logits of
its last token only) and per generated token, llama_synchronize after each, the time of each call.

Per job (one GGUF): after a warm-up (a prompt, or a token where none is timed), for each prefill thread
count, a batch of `batch` tokens at depth 0, `reps` times (2 unless the job says); then, for each
decode thread count, `steps` single-token steps after it (`decode_after_prompt` false: from the
depth itself, as llama-bench's tg runs; bench/speed_table.py). With `depth`, the cache is filled to
that depth (on `fill_threads`, as is the warm-up) and the same is measured there (the prompt and the steps removed
again after each count, so each starts at the same depth). Each time comes with the share of its
threads' time the process got (CPU time / wall time x threads): on busy cores the parent keeps such
figures for an hour only.

Past `count_budget_s` a thread count's prompts and steps stop at the fewest that give a figure (1
prompt, 2 steps) without a stall, and past three budgets at once: on cores so busy that each thread
barrier waits for a time slice, a 32-token prompt at 2 threads took 0.8-3.8 s here instead of 25 ms,
its threads idle half of it; the parent leaves such runs out. A job's `optional` thread counts (per phase: those
beyond the planned ones) are measured after its planned ones and left out once the child has run
past `target_s` or one of its runs took longer than the budget (its line says which were `skipped`
and why: their figures would say nothing of the cores, and be kept an hour only). Such a job (the
probe's) measures its planned decode steps first (at each depth: cheap on any cores at 1 thread),
then its planned prompts, then the optional counts, and prints its line after each stage, the
parent keeping the last.

Machine access (the engine). Strings: none shown to users.
"""

from __future__ import annotations

import ctypes
import json
import random
import sys
import time
from typing import Any

FILL_CHUNK = 512
STALL_SHARE = 0.8  # a run past the count budget whose threads had less than this share of its time stalled


def _log_sink(level: int, text: bytes, user: Any) -> None:  # the engine's log: not wanted here
    return None


def run_job(llama_cpp: Any, job: dict[str, Any], common: dict[str, Any], late_at: float | None = None,
            emit: Any = None) -> dict[str, Any]:
    mp = llama_cpp.llama_model_default_params()
    mp.use_extra_bufts = bool(common.get("extra_bufts", True))
    mp.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(str(job["path"]).encode(), mp)
    if not model:
        raise RuntimeError(f"cannot load {job['path']}")
    batch_n, steps, depth = int(job["batch"]), int(job["steps"]), int(job.get("depth", 0))
    threads = sorted({int(t) for t in job["prefill_threads"] + job["decode_threads"]})
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = (depth + 2 * batch_n + steps + 16 + 255) // 256 * 256
    cp.n_batch = cp.n_ubatch = max(FILL_CHUNK, batch_n)
    cp.n_threads = cp.n_threads_batch = max(threads)
    cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if common.get("flash_attn") \
        else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    kv_types = {"f16": 1, "f32": 0, "bf16": 30, "q8_0": 8, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "iq4_nl": 20}
    cp.type_k = kv_types.get(str(common.get("type_k", "f16")).lower(), 1)
    cp.type_v = kv_types.get(str(common.get("type_v", "f16")).lower(), 1)
    ctx = llama_cpp.llama_init_from_model(model, cp)
    if not ctx:
        raise RuntimeError("cannot create a context")
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    mem = llama_cpp.llama_get_memory(ctx)
    batch = llama_cpp.llama_batch_init(max(FILL_CHUNK, batch_n), 0, 1)
    rng = random.Random(1)

    def decode(n: int, pos0: int, n_threads: int) -> tuple[float, float]:
        batch.n_tokens = n
        for i in range(n):
            batch.token[i] = rng.randrange(1, max(2, n_vocab - 1))
            batch.pos[i] = pos0 + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i == n - 1
        t0, c0 = time.perf_counter(), time.process_time()
        rc = llama_cpp.llama_decode(ctx, batch)
        llama_cpp.llama_synchronize(ctx)
        wall = time.perf_counter() - t0
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        return wall, min(1.0, (time.process_time() - c0) / max(wall * n_threads, 1e-9))

    reps, after_prompt = int(job.get("reps", 2)), bool(job.get("decode_after_prompt", True))

    optional = job.get("optional") or {}

    stalled: list[float] = common.setdefault("_stalled", [])  # runs past the count budget, in any job

    def wanted(phase: str, planned: bool) -> list[int]:
        """The phase's planned counts, or its optional ones (none once past the target, nor on cores so busy
        that a run stalled: their figures would say nothing of the cores and be kept an hour only)."""
        counts = [int(t) for t in job[f"{phase}_threads"] if (int(t) in optional.get(phase, [])) != planned]
        late = late_at is not None and time.perf_counter() > late_at
        if not planned and counts and (late or stalled):
            out.setdefault("skipped", {})[phase] = counts
            out["skipped_why"] = "target" if late else "busy"
            return []
        return counts

    budget = float(job.get("count_budget_s") or 0.0)

    def timed(n: int, least: int, one: Any) -> list[tuple[float, float]]:
        """Up to n runs; past the count's budget only until `least` of them ran without a stall (a barrier
        that waited a time slice: longer than the budget with its threads idle a fifth of it), and past
        three budgets not at all (the parent leaves stalled runs out: they time the other processes)."""
        runs: list[tuple[float, float]] = []
        t0, clean = time.perf_counter(), 0
        for i in range(n):
            spent = time.perf_counter() - t0
            if budget and spent > budget and (clean >= least or spent > 3 * budget):
                break
            runs.append(one(i))
            if budget and runs[-1][0] > budget and runs[-1][1] < STALL_SHARE:
                stalled.append(runs[-1][0])
            else:
                clean += 1
        return runs

    def prompt(at: int, t: int) -> tuple[float, float]:
        run = decode(batch_n, at, t)
        llama_cpp.llama_memory_seq_rm(mem, 0, at, -1)
        return run

    def measure(at: int, label: str, out: dict[str, Any], planned: bool = True,
                phases: tuple[str, ...] = ("prefill", "decode")) -> None:
        if not any(wanted(phase, planned) for phase in phases):
            return
        for t in wanted("prefill", planned) if "prefill" in phases else []:
            llama_cpp.llama_set_n_threads(ctx, t, t)
            out[f"prefill{label}"][str(t)] = timed(reps, 1, lambda _, t=t: prompt(at, t))
        first = at
        if after_prompt:  # the steps follow a prompt, as in a run (llama-bench's tg starts at the depth)
            decode(batch_n, at, max(threads))
            first = at + batch_n
        for t in wanted("decode", planned) if "decode" in phases else []:
            llama_cpp.llama_set_n_threads(ctx, t, t)
            out[f"decode{label}"][str(t)] = timed(steps, 2, lambda i, t=t: decode(1, first + i, t))
            llama_cpp.llama_memory_seq_rm(mem, 0, first, -1)
        llama_cpp.llama_memory_seq_rm(mem, 0, at, -1)

    out: dict[str, Any] = {"id": job["id"], "prefill": {}, "decode": {}, "prefill_deep": {}, "decode_deep": {}}
    # warm-up: every weight page touched and, where prompts are timed, a prompt's buffers too (the first
    # 32-token prompts of an 8 MiB probe took 1.5-2x the later ones; 64 MiB prompts hid it); the probe's on
    # 1 thread (no barriers to wait at on busy cores)
    warm = int(job.get("fill_threads") or max(threads))
    llama_cpp.llama_set_n_threads(ctx, warm, warm)
    decode(batch_n if job["prefill_threads"] else 1, 0, warm)
    llama_cpp.llama_memory_clear(mem, True)

    def fill() -> None:
        n_fill = int(job.get("fill_threads") or max(threads))  # untimed: the probe fills on 1 (no barriers)
        llama_cpp.llama_set_n_threads(ctx, n_fill, n_fill)
        pos = 0
        while pos < depth:
            n = min(FILL_CHUNK, depth - pos)
            decode(n, pos, n_fill)
            pos += n

    if "optional" not in job:  # a bench run: every count at depth 0, then at the depth
        measure(0, "", out)
        if depth:
            fill()
            measure(depth, "_deep", out)
    else:  # the probe: the planned decode steps (cheap on any cores) at each depth, then the planned prompts,
        # then the optional counts; each stage printed as it ends
        stages = [(0, True, "decode"), (depth, True, "decode"), (depth, True, "prefill"), (depth, False, "decode"),
                  (depth, False, "prefill"), (0, True, "prefill"), (0, False, "decode"), (0, False, "prefill")] \
            if depth else [(0, True, "decode"), (0, True, "prefill"), (0, False, "decode"), (0, False, "prefill")]
        filled = False
        for at, planned, phase in stages:
            if not wanted(phase, planned):
                continue
            if at and not filled:
                fill()
                filled = True
            elif not at and filled:  # back to an empty cache
                llama_cpp.llama_memory_clear(mem, True)
                filled = False
            measure(at, "_deep" if at else "", out, planned, (phase,))
            if emit is not None:
                emit(out)  # what is measured so far: kept should the probe be stopped later
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    return out


def main() -> int:
    spec = json.loads(sys.stdin.read())
    import llama_cpp

    sink = llama_cpp.llama_log_callback(_log_sink)  # kept referenced while the engine runs
    llama_cpp.llama_log_set(sink, ctypes.c_void_p())
    llama_cpp.llama_backend_init()
    target = spec.get("target_s")
    late_at = time.perf_counter() + target if isinstance(target, int | float) else None
    for job in spec["jobs"]:
        try:
            result = run_job(llama_cpp, job, spec, late_at,
                             lambda partial: print(json.dumps(partial), flush=True))
        except RuntimeError as exc:
            result = {"id": job["id"], "error": str(exc)}
        print(json.dumps(result), flush=True)
    info = llama_cpp.llama_print_system_info()
    text = info.decode("utf-8", "replace").strip() if isinstance(info, bytes) else str(info)
    print(json.dumps({"system_info": text}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
