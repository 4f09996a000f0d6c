"""The kernel probe's times turned into what is kept: rates of the engine's kernels and costs of attention.

The child (kernel_child.py) prints, per job, each timed call's wall time and the share of its threads'
time it got. Here each becomes its time on owned cores (wall x share: what the kernels take when the
cores are theirs, as the bandwidth probe counts it; the verdict scales it back by the run's own share),
and the job's figures are worked out: a best (the fastest call: the ceiling's) and a typical (the
median: the expected speed's) for

- a weight type (dense): weights / a decode step's time (the first step left out), 2 x weights x tokens /
  a prompt's time with its head (run for its last token only, at the decode rate) taken out;
- its experts (MUL_MAT_ID): the routed weights over what is left once the probe's dense part is paid at
  the type's dense rates;
- attention: the difference of two depths `CELLS` cells apart over layers x cells (decode), x the
  prompt's tokens (prefill), and what a shallow decode step costs per layer beyond its weights and cells.

Pure (numbers in, numbers out). Strings: none shown to users.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from doctor.sources.live.embedded import kernel_gguf as kg

BUSY_SHARE = 0.8  # the probe's threads got less than this share of their time: measured on busy cores
STALL_S = 0.25  # a run longer than this with its threads idle a fifth of it: stalled (left out); the budget of
# a thread count's runs in the probe child
PROMPT = 32  # tokens of the timed prompts
REPS = 2  # timed prompts per thread count
STEPS = 6  # decode steps per thread count (the first is left out)
CELLS = 256  # the attention probe's two depths are this many KV cells apart


@dataclass(frozen=True, slots=True)
class Heads:
    n_head: int
    n_head_kv: int
    head_dim: int

    def label(self) -> str:
        return f"h{self.n_head}k{self.n_head_kv}d{self.head_dim}"


@dataclass
class Job:
    spec: dict[str, Any]
    kind: str  # dense | moe | attn
    type_name: str
    table: list[kg.Tensor]
    shape: kg.Shape
    kv: str = ""  # attention: the KV types and flash-attention setting it ran with
    rows: str = ""  # the row widths the probe's matrices have (`rows_label`): part of every key


def rows_label(n_embd: int, n_ff: int) -> str:
    """The row widths of a probe's matrices, as its keys carry them (a dot product's length decides its kernel's
    efficiency: SmolLM2's rows of 576 run slower per weight than rows of 2048)."""
    return f"r{n_embd}x{n_ff}"


def dense_id(type_name: str, rows: str) -> str:
    """The key prefix of a weight type's figures at those row widths."""
    return f"dense/{type_name}/{rows}"


def _walls(runs: Any) -> tuple[list[float], float]:
    """Each run's time on owned cores (its wall time x the share of its threads' time it got: what the
    kernels take when the cores are theirs, as the bandwidth probe counts it; the run's own share scales
    it back in the verdict), and the lowest share among them. A stalled run is left out: past STALL_S with
    its threads idle a fifth of it or more, a barrier waited for other processes' time slices (a 32-token
    prompt of 25 ms took 0.8-3.8 s here), which says nothing of the kernels."""
    if not isinstance(runs, list):
        return [], 1.0
    good = [(float(r[0]), min(1.0, max(0.05, float(r[1])))) for r in runs
            if isinstance(r, list) and len(r) == 2 and r[0] > 0 and isinstance(r[1], int | float)
            and not (r[0] > STALL_S and r[1] < BUSY_SHARE)]
    return [wall * share for wall, share in good], min((share for _, share in good), default=1.0)


def _best_typ(walls: list[float], steady_from: int = 0) -> tuple[float, float] | None:
    steady = walls[steady_from:] if len(walls) > steady_from + 1 else walls
    return (min(steady), statistics.median(steady)) if steady else None


def figures_from(job: Job, result: dict[str, Any], dense: dict[str, dict[str, Any]], when: float,
                 other_busy: float | None) -> dict[str, dict[str, Any]]:
    """The kept figures of one job's result (rates for dense and experts, costs for attention)."""
    out: dict[str, dict[str, Any]] = {}
    per = kg.weights(job.table)
    w_all = float(sum(per.values()))
    head = float(sum(math.prod(ne) for name, ne, _ in job.table if name == "output.weight"))
    experts = float(sum(math.prod(ne) for name, ne, _ in job.table if "_exps" in name))
    active = experts * (job.shape.n_expert_used / job.shape.n_expert) if job.shape.n_expert else 0.0
    others_busy = isinstance(other_busy, int | float) and other_busy > 0.25
    base = dense_id(job.type_name, job.rows)

    def entry(best: float, typ: float, share: float, **more: Any) -> dict[str, Any]:
        return {"best": best, "typ": typ, "when": when, "busy": share < BUSY_SHARE or others_busy,
                "share": round(share, 3), **more}

    for t, runs in (result.get("decode") or {}).items():
        walls, share = _walls(runs)
        bt = _best_typ(walls, 1)
        if bt is None:
            continue
        if job.kind == "dense":
            out[f"{base}/decode/{t}"] = entry(w_all / bt[0], w_all / bt[1], share)
        elif job.kind == "moe":
            rate = dense.get(f"{base}/decode/{t}")
            if rate:
                rest = w_all - experts
                out[f"{job.spec['id']}/e{job.shape.n_expert}u{job.shape.n_expert_used}/decode/{t}"] = entry(
                    active / max(1e-9, bt[0] - rest / rate["best"]), active / max(1e-9, bt[1] - rest / rate["typ"]),
                    share)
    for t, runs in (result.get("prefill") or {}).items():
        walls, share = _walls(runs)
        bt = _best_typ(walls)
        if bt is None:
            continue
        flops = 2.0 * (w_all - head) * PROMPT
        if job.kind == "dense":
            # the head runs for the prompt's last token only (a decode token's worth of it)
            rate = dense.get(f"{base}/decode/{t}") or {}
            h = (head / rate["best"], head / rate["typ"]) if rate else (0.0, 0.0)
            out[f"{base}/prefill/{t}"] = entry(flops / max(1e-9, bt[0] - h[0]),
                                                              flops / max(1e-9, bt[1] - h[1]), share)
        elif job.kind == "moe":
            rate = dense.get(f"{base}/prefill/{t}")
            if rate:
                rest = 2.0 * (w_all - experts - head) * PROMPT
                moe_flops = 2.0 * active * PROMPT
                out[f"{job.spec['id']}/e{job.shape.n_expert}u{job.shape.n_expert_used}/prefill/{t}"] = entry(
                    moe_flops / max(1e-9, bt[0] - rest / rate["best"]),
                    moe_flops / max(1e-9, bt[1] - rest / rate["typ"]), share)
    if job.kind == "attn":
        out.update(_attention(job, result, dense, entry, w_all))
    return out


def _attention(job: Job, result: dict[str, Any], dense: dict[str, dict[str, Any]], entry: Callable[..., Any],
               w_all: float) -> dict[str, dict[str, Any]]:
    """Per layer per KV cell (decode), per layer per cell per prompt token (prefill), and the per-layer
    cost of a decode step that is neither the weights nor the cells (graph, barriers, norms, rope)."""
    out = {}
    layers = job.shape.n_layer
    heads = Heads(job.shape.n_head, job.shape.n_head_kv, job.shape.head_dim)
    base = f"attn/{heads.label()}/{job.kv}/{job.type_name}/{job.rows}"
    rates = dense_id(job.type_name, job.rows)
    for t in result.get("decode") or {}:
        shallow, s1 = _walls(result["decode"].get(t))
        deep, s2 = _walls((result.get("decode_deep") or {}).get(t))
        a, b = _best_typ(shallow, 1), _best_typ(deep, 1)
        rate = dense.get(f"{rates}/decode/{t}")
        if a is None or b is None or not rate:
            continue
        cell = tuple(max(0.0, (b[i] - a[i]) / (layers * CELLS)) for i in (0, 1))
        layer = tuple(max(0.0, (a[i] - w_all / rate[("best", "typ")[i]] - layers * CELLS * cell[i]) / layers)
                      for i in (0, 1))
        out[f"{base}/decode/{t}"] = entry(cell[0], cell[1], min(s1, s2), layer_best=layer[0], layer_typ=layer[1])
    for t in result.get("prefill") or {}:
        shallow, s1 = _walls(result["prefill"].get(t))
        deep, s2 = _walls((result.get("prefill_deep") or {}).get(t))
        a, b = _best_typ(shallow), _best_typ(deep)
        if a is None or b is None:
            continue
        cell = tuple(max(0.0, (b[i] - a[i]) / (layers * CELLS * PROMPT)) for i in (0, 1))
        out[f"{base}/prefill/{t}"] = entry(cell[0], cell[1], min(s1, s2))
    return out
