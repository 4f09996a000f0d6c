"""bench/speed_table.py's tables: one per CPU kind (its rows side by side with llama-bench), and the index
of every kind recorded, with the other kind's record where no run of it is kept yet.

The rows of a kind are bench/results/speed_table_<kind>.json; bench/data/speed_amd_issue36.json is
what issue 36 recorded on an AMD EPYC (Zen 4, 2 cores): llama-bench and the earlier scan's figures for
SmolLM2, no kernel probe - the AMD side of the table rests on it until a session there runs the bench.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from doctor.derive.speed import CEILING_NOISE as NOISE  # no measured speed above its ceiling by more than this

ROOT = Path(__file__).resolve().parent.parent
AMD_RECORD = ROOT / "bench" / "data" / "speed_amd_issue36.json"
WITHIN = 0.2  # expected within ±20% of llama-bench


def _f(value: Any, fmt: str = "{:.1f}") -> str:
    return fmt.format(value) if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _ratio(a: Any, b: Any) -> float | None:
    ok = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
    return a / b if ok and b else None


def summary(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for phase in ("prefill", "decode"):
        mine = [r for r in rows if r["phase"] == phase]
        exp = [x for r in mine if (x := _ratio(r.get("expected_tok_s"), r.get("llama_bench"))) is not None]
        inside = sum(1 for x in exp if abs(x - 1) <= WITHIN)
        over_ours = sum(1 for r in mine if (x := _ratio(r["measured"], r.get("ceiling_tok_s"))) and x > NOISE)
        over_ref = sum(1 for r in mine if (x := _ratio(r.get("llama_bench"), r.get("ceiling_tok_s"))) and x > NOISE)
        fractions = [x for r in mine if (x := _ratio(r["measured"], r.get("ceiling_tok_s"))) is not None]
        if exp:
            lines.append(f"- {phase}: expected / llama-bench median {statistics.median(exp):.2f}, range "
                         f"{min(exp):.2f}-{max(exp):.2f}; **{inside}/{len(exp)} within ±20%**")
        lines.append(f"- {phase}: measured above 1.05 x its ceiling: the engine {over_ours}/{len(mine)}, llama-bench "
                     f"{over_ref}/{len(mine)}" + (f"; measured / ceiling min {min(fractions):.2f}, median "
                                                  f"{statistics.median(fractions):.2f}, max {max(fractions):.2f}"
                                                  if fractions else ""))
    return lines


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| model | threads | depth | phase | others | ceiling | expected | measured | llama-bench | "
             "expected / llama-bench | measured / ceiling | llama-bench / ceiling | bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['threads']} | {r['depth']} | {r['phase']} | {_f(r.get('other_busy'), '{:.0%}')} | "
            f"{_f(r.get('ceiling_tok_s'))} | {_f(r.get('expected_tok_s'))} | {_f(r['measured'])} | "
            f"{_f(r.get('llama_bench'))} | {_f(_ratio(r.get('expected_tok_s'), r.get('llama_bench')), '{:.2f}')} | "
            f"{_f(_ratio(r['measured'], r.get('ceiling_tok_s')), '{:.2f}')} | "
            f"{_f(_ratio(r.get('llama_bench'), r.get('ceiling_tok_s')), '{:.2f}')} | {r.get('bound')} |")
    return lines


def write(rows: list[dict[str, Any]], meta: dict[str, Any], stem: Path) -> None:
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    bw = ", ".join(f"{v:.1f} GB/s at {k} thread(s)" for k, v in sorted(meta["bandwidth"].items()))
    busy = meta.get("bandwidth_other_busy")
    lines = [f"# Speed verdict vs llama-bench: {meta['cpu']} ({meta['kind']})", "",
             f"{len(rows)} rows, {meta['cpus']} CPUs, weight repacking {'on' if meta['repack'] else 'off (AMX)'}, "
             f"measured {meta['date']} in {meta['seconds']} s by bench/speed_table.py: a prompt of {meta['prompt']} "
             f"tokens and {meta['steps']} decode steps at each depth, median of {meta['reps']} runs, both sides. "
             f"Read bandwidth (numpy): {bw}" + (f" (others used {busy:.0%} of the cores meanwhile)"
                                                if isinstance(busy, int | float) else "") + ". \"others\": the share "
             "of the cores other processes used while the engine ran (/proc/stat).", ""]
    if meta.get("note"):
        lines += [meta["note"], ""]
    lines += ["Goals (issue 36): expected within ±20% of llama-bench; no measured speed above 1.05 x its ceiling.", "",
              *summary(rows), "", *table(rows), ""]
    stem.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


def write_index(results: Path) -> None:
    """bench/results/speed_table.md: each recorded CPU kind's summary, and the AMD record of issue 36."""
    lines = ["# Speed verdict vs llama-bench, per CPU kind (bench/speed_table.py)", "",
             "Each kind's rows are in speed_table_<kind>.md; the summaries:", ""]
    for path in sorted(results.glob("speed_table_*.json")):
        if path.stem in ("speed_table_calibration",):
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "meta" not in data:
            continue
        meta = data["meta"]
        lines += [f"## {meta['cpu']} ({meta['kind']}), {meta['date']} ({path.with_suffix('.md').name})", "",
                  *([meta["note"], ""] if meta.get("note") else []), *summary(data["rows"]), ""]
    if AMD_RECORD.exists():
        record = json.loads(AMD_RECORD.read_text(encoding="utf-8"))
        lines += [f"## {record['cpu']} (recorded from {record['source']}, not measured by this bench)", "",
                  record["note"], "", "| model | threads | phase | llama-bench | earlier scan measured | earlier "
                  "ceiling | earlier fraction |", "|---|---|---|---|---|---|---|"]
        for r in record["rows"]:
            lines.append(f"| {r['model']} | {r['threads']} | {r['phase']} | {_f(r.get('llama_bench'))} | "
                         f"{_f(r.get('scan_measured'))} | {_f(r.get('old_ceiling'))} | "
                         f"{_f(_ratio(r.get('scan_measured'), r.get('old_ceiling')), '{:.0%}')} |")
        lines.append("")
    (results / "speed_table.md").write_text("\n".join(lines), encoding="utf-8")


def rejudge(source: Path, folder: Path, note: str, verdict: Callable[..., dict[str, Any]],
            scan_facts: Callable[..., Any]) -> None:
    """Judge stored rows again with the current model (the GGUFs kept in `folder`; the kernel probe and
    read bandwidth measured now, on this machine: the measured speeds are the stored ones)."""
    import tempfile

    data = json.loads(source.read_text(encoding="utf-8"))
    meta, rows = data["meta"], data["rows"]
    cache = tempfile.mkdtemp(prefix="speed-table-kernels-")
    usable = max(int(k) for k in meta["bandwidth"])
    bases: dict[str, Any] = {}
    for r in rows:
        if r["model"] not in bases:
            bases[r["model"]] = scan_facts(folder / f"{r['model']}.gguf", cache, meta["repack"], usable)
        r.update(verdict(bases[r["model"]], meta["bandwidth"], r["phase"], r["threads"], r["depth"], r["measured"],
                         r.get("share"), r.get("other_busy"), usable))
    meta["note"] = (meta.get("note", "") + " " + note).strip()
    write(rows, meta, source.with_suffix(""))
    write_index(source.parent)
