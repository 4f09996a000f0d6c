"""`python -m bench.speed_ranges`: the usual decode range per device class, from the public runs the
sources call normal (bench/data/public_runs.yaml; sources in bench/data/README.md).

For each row on one device (a CPU, a whole-model GPU offload, an Apple chip) with a published
bandwidth in the spec table: efficiency = tg tok/s x the model's bytes / the bandwidth
(doctor/derive/speed_range.py's `efficiency`, the same the doctor computes for a paste), grouped by
`class_key` (kind:backend:band) and by the coarser keys a class with too few rows falls back to.
Left out: rows the source does not call normal, mixtures of experts (their routed share is not in
the data), rows split between GPU and host, multi-node clusters, and the rows the data marks
"historical" (2023 GGML-era builds, several times slower than today's on the same GPU).

Writes doctor/derive/specs/speed_ranges.json (what the doctor reads) and
bench/results/speed_ranges.md (the table, each class with its rows).

    python -m bench.speed_ranges [--check]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATA = ROOT / "bench" / "data" / "public_runs.yaml"
JSON_OUT = ROOT / "doctor" / "derive" / "specs" / "speed_ranges.json"
MD_OUT = ROOT / "bench" / "results" / "speed_ranges.md"


def single_device(row: dict[str, Any]) -> bool:
    device = row.get("device") or {}
    if device.get("kind") == "cpu":
        return True
    layers = str(device.get("layers_on_gpu") or "all")
    if layers == "all":
        return True
    parts = layers.split(" of ")
    return len(parts) == 2 and parts[0].strip() == parts[1].split()[0].strip()


def usable(row: dict[str, Any]) -> str | None:
    """Why a row is left out of the ranges, or None."""
    from doctor.derive.speed_log import MOE_NAME

    if row.get("verdict_expected") != "normal":
        return "not normal per the source"
    if "historical" in str(row.get("note") or ""):
        return "historical build"
    if row.get("multi_node") or (row.get("device") or {}).get("kind") == "cluster":
        return "cluster"
    if row.get("active_params_b") or MOE_NAME.search(str(row.get("model"))) or "gpt-oss" in str(row.get("model")):
        return "mixture of experts"
    if not single_device(row):
        return "split between GPU and host"
    return None


def measure(row: dict[str, Any]) -> tuple[str, float, str] | None:
    """(class key, efficiency, label) of a row, or None without a bandwidth or a size."""
    from bench.speed_public import BACKENDS, _model_bytes
    from doctor.derive.specs import table
    from doctor.derive.speed_range import backend_of, class_key, efficiency

    device = row.get("device") or {}
    spec = table().named(str(device.get("hw_ref") or ""))
    size, _ = _model_bytes(row)
    tg = row.get("tg_tok_s")
    if spec is None or not spec.mem_bw_gbs or not size or not tg:
        return None
    kind = spec.kind
    named = device.get("backend") or (BACKENDS.get(str(spec.vendor), "CUDA") if kind == "gpu" else "CPU")
    backend = backend_of([str(named)], kind, spec.vendor)
    key = class_key(kind, backend, spec.name, float(size))
    label = f"{spec.name} / {row.get('model')} / {float(tg):g} tok/s"
    return key, efficiency(float(tg), float(size), spec.mem_bw_gbs), label


def fit(rows: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, list[tuple[float, str]]]]:
    from doctor.derive.speed_range import fallbacks

    members: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for row in rows:
        if usable(row) is not None:
            continue
        found = measure(row)
        if found is None:
            continue
        key, eff, label = found
        for level in fallbacks(key):
            members[level].append((eff, label))
    classes = {}
    for key, items in sorted(members.items()):
        effs = sorted(e for e, _ in items)
        # the ends rounded outwards: a run at the class's lowest is within its range
        classes[key] = {"low": math.floor(effs[0] * 1000) / 1000, "high": math.ceil(effs[-1] * 1000) / 1000,
                        "median": round(statistics.median(effs), 3), "rows": len(effs)}
    return classes, members


def markdown(classes: dict[str, dict[str, Any]], members: dict[str, list[tuple[float, str]]]) -> str:
    from doctor.derive.speed_range import MIN_ROWS, _describe

    lines = ["# The usual decode range per device class", "",
             "Produced by `python -m bench.speed_ranges` from bench/data/public_runs.yaml (sources: "
             "bench/data/README.md). Efficiency = measured decode tok/s x the model's bytes / the device's "
             "published bandwidth. A run below its class's lowest is \"below the usual range\" "
             f"(doctor/derive/speed_range.py); classes with fewer than {MIN_ROWS} rows fall back to a coarser one.", "",
             "| class | what | rows | low | median | high |", "|---|---|---:|---:|---:|---:|"]
    for key, c in classes.items():
        used = "" if c["rows"] >= MIN_ROWS else " (too few: not used)"
        lines.append(f"| {key} | {_describe(key)}{used} | {c['rows']} | {c['low']:.0%} | {c['median']:.0%} | "
                     f"{c['high']:.0%} |")
    lines += ["", "## Rows per class (the most specific class only)", ""]
    for key, items in members.items():
        if key.count(":") != 2:
            continue
        lines.append(f"- **{key}**: " + "; ".join(f"{label} ({eff:.0%})" for eff, label in sorted(items)))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the stored JSON differs from the data")
    args = parser.parse_args(argv)
    import yaml

    rows = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    classes, members = fit(rows)
    doc = {"_generated": "by bench/speed_ranges.py from bench/data/public_runs.yaml: edit the data and run it",
           "classes": classes}
    text = json.dumps(doc, indent=1) + "\n"
    if args.check:
        same = JSON_OUT.exists() and JSON_OUT.read_text(encoding="utf-8") == text
        print("speed_ranges.json is current" if same else "speed_ranges.json differs: run python -m bench.speed_ranges")
        return 0 if same else 1
    JSON_OUT.write_text(text, encoding="utf-8")
    MD_OUT.write_text(markdown(classes, members), encoding="utf-8")
    print(markdown(classes, members))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
