"""`python -m bench.speed_public`: the doctor's speed verdict on published measurements of hardware we
do not have (bench/data/public_runs.yaml, each row with its source; bench/data/README.md).

Each row becomes the facts a pasted log of that run gives: the measured decode (and prefill, where
published) tok/s, the device as the source names it (`host.gpu[0].name` or `host.cpu.model`), its
backend, the layers on the GPU, the threads, and the model's size (the GGUF size where the source or
its download script gives it, else parameters x 4.85 bits, Q4_K_M's average, marked "est.") and
parameters. They go through the same derivation and rule base as `llm-doctor analyze`; the table shows
the doctor's ceiling, fraction and bound for decode, whether it flagged the row (a warning or error, or
a speed finding that the phase is below the range this engine usually reaches),
and what the source says: normal rows should not be flagged, slow ones should be, with the source's
cause. Unknown rows (the source's own numbers contradict it) are shown, not scored.

Then the whole posts of bench/data/public_posts, each through `llm-doctor analyze` as a user pastes it
(bench/speed_posts.py). Writes bench/results/speed_public.md (both tables); prints the same.

    python -m bench.speed_public [--data FILE] [--out FILE] [--no-posts]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATA = ROOT / "bench" / "data" / "public_runs.yaml"
OUT = ROOT / "bench" / "results" / "speed_public.md"
GIB = 1 << 30
Q4_K_M_BITS = 4.85  # average bits per weight of a Q4_K_M GGUF (llama.cpp's quantize table)
LAYERS = re.compile(r"^(\d+) of (\d+)")
BACKENDS = {"nvidia": "CUDA", "amd": "ROCm", "intel": "SYCL", "apple": "Metal"}  # where the source names none


@dataclass
class Outcome:
    row: dict[str, Any]
    size_note: str
    decode: dict[str, Any]
    prefill: dict[str, Any]
    flagged: list[str]
    spec: str

    @property
    def expected(self) -> str:
        return str(self.row.get("verdict_expected"))

    @property
    def agrees(self) -> bool | None:
        """Normal and not flagged, or slow and flagged; None for the rows not scored."""
        if self.expected == "normal":
            return not self.flagged
        if self.expected == "slow":
            return bool(self.flagged)
        return None


def _model_bytes(row: dict[str, Any]) -> tuple[int | None, str]:
    if row.get("size_gib"):
        return int(float(row["size_gib"]) * GIB), ""
    hint = row.get("model_file_hint") or {}
    if isinstance(hint, dict) and hint.get("size_gb"):
        return int(float(hint["size_gb"]) * 1e9), ""
    if row.get("params_b"):
        return int(float(row["params_b"]) * 1e9 * Q4_K_M_BITS / 8), "est."
    return None, ""


def facts_of(row: dict[str, Any]) -> tuple[Any, str]:
    """The facts a pasted log of this run would give."""
    from doctor.core.facts import Facts, Source
    from doctor.derive.specs import table

    facts = Facts()
    src = Source("test", "public_runs", text=str(row.get("source"))[:300])
    device = row.get("device") or {}
    name = str(device.get("name") or "")
    if device.get("kind") == "cpu":
        facts.set("host.cpu.model", name, src)
        cpu_row = table().named(str(device.get("hw_ref") or ""))
        if cpu_row is not None and cpu_row.cores:  # the cores a pasted lscpu shows (no affinity or quota)
            facts.set("host.cpu.physical_cores", cpu_row.cores, src)
            facts.set("host.cpu.usable_cores", float(cpu_row.cores), src)
        facts.set("config.n_gpu_layers", 0, src)
        facts.set("engine.backends", ["CPU"], src)
    else:
        facts.set("host.gpu.count", 1, src)
        facts.set("host.gpu[0].name", name, src)
        row_spec = table().named(str(device.get("hw_ref") or ""))
        if row_spec is not None and row_spec.vram_gib:  # what the engine's device line prints beside the name
            facts.set("host.gpu[0].vram_total", int(row_spec.vram_gib * GIB), src)
        host = table().find(str(row.get("machine")), ("cpu",))
        if host is not None and host.mem_bw_gbs:  # the machine's CPU, as a pasted lscpu would name it
            facts.set("host.cpu.model", host.name, src)
        vendor = row_spec.vendor if row_spec is not None else None
        backend = device.get("backend") or BACKENDS.get(str(vendor), "CUDA")
        facts.set("engine.backends", ["CPU", str(backend)], src)
        layers = str(device.get("layers_on_gpu") or "")
        m = LAYERS.match(layers)
        if m:
            facts.set("run.offloaded_layers", int(m.group(1)), src)
            facts.set("run.total_layers", int(m.group(2)), src)
        elif layers == "all":
            facts.set("config.n_gpu_layers", 999, src)
    if isinstance(device.get("threads"), int):
        facts.set("config.n_threads", device["threads"], src)
    size, note = _model_bytes(row)
    if size:
        facts.set("model.weights_bytes", size, src)
    if row.get("params_b"):
        facts.set("model.n_params", int(float(row["params_b"]) * 1e9), src)
    facts.set("model.name", str(row.get("model")), src)  # "gpt-oss-20b (MoE)": a MoE the log does not detail
    for key, fact in (("tg_tok_s", "run.decode_tps"), ("pp_tok_s", "run.prefill_tps")):
        if row.get(key):
            facts.set(fact, float(row[key]), src)
    return facts, note


def judge(row: dict[str, Any], rulebase: Any) -> Outcome:
    from doctor.judge.evaluate import diagnose

    facts, note = facts_of(row)
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    phases = {}
    for phase in ("decode", "prefill"):
        phases[phase] = {k: report.facts.value(f"speed.{phase}.{k}") for k in
                         ("ceiling_tok_s", "fraction", "bound", "ceiling_source", "settle")}
    flagged = [f"{f.id} {f.title}" for f in report.findings
               if str(f.severity) in ("warning", "error") or f.slug.endswith("-below-usual-range")]
    spec = report.facts.get("spec.device")
    spec_text = (str(spec.value) if spec is not None and spec.known else
                 f"? {spec.unknown}" if spec is not None else "-")
    return Outcome(row, note, phases["decode"], phases["prefill"], flagged, spec_text)


def _num(value: Any, fmt: str = "{:.1f}") -> str:
    return fmt.format(value) if isinstance(value, int | float) else "-"


def table(outcomes: list[Outcome]) -> list[str]:
    lines = ["| machine | model | size | measured tg | ceiling | fraction | bound | flagged | source says | agrees |",
             "|---|---|---|---:|---:|---:|---|---|---|---|"]
    for o in outcomes:
        r, d = o.row, o.decode
        says = o.expected + (f": {str(r.get('cause') or r.get('flag'))[:60]}" if o.expected != "normal" else "")
        agrees = {True: "yes", False: "**no**", None: "(not scored)"}[o.agrees]
        size = _model_bytes(r)[0]
        gb = _num(size / 1e9 if size else None, "{:.1f} GB")
        lines.append(
            f"| {r['machine'][:48]} | {str(r['model'])[:32]} | {gb} {o.size_note} "
            f"| {_num(r.get('tg_tok_s'), '{:.2f}')} | {_num(d['ceiling_tok_s'])} | {_num(d['fraction'], '{:.0%}')} "
            f"| {d['bound'] or (d['settle'] or '-')[:50]} | {'; '.join(o.flagged)[:70] or '-'} | {says} | {agrees} |")
    return lines


def summary(outcomes: list[Outcome]) -> list[str]:
    normal = [o for o in outcomes if o.expected == "normal"]
    slow = [o for o in outcomes if o.expected == "slow"]
    judged = [o for o in outcomes if isinstance(o.decode.get("fraction"), int | float)]
    fractions = sorted(float(o.decode["fraction"]) for o in judged if o.expected == "normal")
    lines = [f"- rows: {len(outcomes)} ({len(normal)} normal, {len(slow)} slow, "
             f"{len(outcomes) - len(normal) - len(slow)} unknown per the source)",
             f"- normal rows not flagged: {sum(1 for o in normal if not o.flagged)} / {len(normal)}",
             f"- slow rows flagged: {sum(1 for o in slow if o.flagged)} / {len(slow)}",
             f"- rows with a decode verdict (a ceiling from the spec table): {len(judged)} / {len(outcomes)}"]
    if fractions:
        mid = fractions[len(fractions) // 2]
        lines.append(f"- decode fraction of the ceiling on normal rows: min {fractions[0]:.0%}, median {mid:.0%}, "
                     f"max {fractions[-1]:.0%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-posts", action="store_true", help="only the table rows")
    args = parser.parse_args(argv)
    import yaml

    from doctor.judge.rulebase import load_rulebase

    rows = yaml.safe_load(args.data.read_text(encoding="utf-8"))
    rulebase = load_rulebase()
    outcomes = [judge(row, rulebase) for row in rows if (row.get("device") or {}).get("kind") != "cluster"]
    text = ["# The speed verdict on published figures", "",
            "Produced by `python -m bench.speed_public` (sources: bench/data/README.md).", ""]
    if not args.no_posts:
        from bench import speed_posts

        posts = speed_posts.run_all()
        text += ["## Whole posts, through `llm-doctor analyze` as pasted", "",
                 "bench/data/public_posts: the text each user pasted, with the thread's verdict "
                 "(bench/speed_posts.py says how each figure is counted).", "",
                 *speed_posts.summary(posts), "", *speed_posts.table(posts), ""]
    text += ["## Table rows", "",
             f"Rows: {args.data.relative_to(ROOT) if args.data.is_relative_to(ROOT) else args.data}.", "",
             *summary(outcomes), "", *table(outcomes), ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(text), encoding="utf-8")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
