"""Speed verdict against measured speed on real-shape models (issue 26 validation).

Each model is a GGUF with the exact tensor shapes and types of the real model and random weights
(valid blocks: a small f16 scale and random quants; F16 matrices N(0, 0.02); norms 1), written with
the `gguf` package: Llama-3.2-1B and Qwen2.5-3B at Q4_0, Q8_0 and F16 (3B F16 left out by default:
its 6 GiB and minutes of prefill do not fit the time budget), OLMoE-1B-7B at Q4_0, and the default
SmolLM2-135M (real weights) for the per-token overhead. Each runs in a fresh child process through
llama-cpp-python's low-level binding (weight repacking off: the AMX kernel crashes on this Xeon,
bench/common.py), at 1 and 2 threads: a prefill of P tokens and 16 decode steps at depth ~P, then a
second prefill to depth D and 16 more decode steps. The doctor's verdict is derived from the same
facts scan would have (the GGUF probe, the ceilings probe, the thread count, /proc/stat during the
run) - measured tok/s, ceiling, fraction, bound and expected tok/s per row.

Run:  python -m bench.speed_table [--models llama-1b-q4_0,...] [--threads 1,2] [--keep DIR]
      python -m bench.speed_table --rejudge A.json[,B.json] --keep DIR [--note TEXT]  (no engine run:
      the stored rows judged again by the current model, with the ceilings stored with each row)
Writes bench/results/speed_table.md and speed_table.json (the rows, for docs/speed.md). The summary
splits the rows in the half the cost model's constants were fitted on (1 thread) and the validation
half (2 threads), as doctor/derive/speed_cost.py says.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import repack_crashes_here  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ALIGN = 32

LLAMA_1B = {"arch": "llama", "name": "Llama 3.2 1B", "n_layer": 16, "n_embd": 2048, "n_ff": 8192, "n_head": 32,
            "n_head_kv": 8, "head_dim": 64, "n_vocab": 128256, "tied": True, "ctx": 131072, "rope_base": 500000.0}
QWEN_3B = {"arch": "qwen2", "name": "Qwen2.5 3B", "n_layer": 36, "n_embd": 2048, "n_ff": 11008, "n_head": 16,
           "n_head_kv": 2, "head_dim": 128, "n_vocab": 151936, "tied": True, "qkv_bias": True, "ctx": 32768,
           "rope_base": 1000000.0}
OLMOE = {"arch": "olmoe", "name": "OLMoE 1B 7B", "n_layer": 16, "n_embd": 2048, "n_ff": 1024, "n_head": 16,
         "n_head_kv": 16, "head_dim": 128, "n_vocab": 50304, "tied": False, "n_expert": 64, "n_expert_used": 8,
         "qk_norm_full": True, "ctx": 4096, "rope_base": 10000.0}
# name -> (spec, matrix type, prompt tokens P, second depth D)
MODELS: dict[str, tuple[dict[str, Any] | None, str, int, int]] = {
    "smollm2-135m-q4_1": (None, "Q4_1", 128, 512),
    "llama-1b-q4_0": (LLAMA_1B, "Q4_0", 64, 256),
    "llama-1b-q8_0": (LLAMA_1B, "Q8_0", 64, 256),
    "llama-1b-f16": (LLAMA_1B, "F16", 64, 256),
    "qwen-3b-q4_0": (QWEN_3B, "Q4_0", 32, 128),
    "qwen-3b-q8_0": (QWEN_3B, "Q8_0", 32, 128),
    "olmoe-1b-7b-q4_0": (OLMOE, "Q4_0", 64, 256),
}
# the default runs: every model at 1 thread, the default model at 2 as well (the 10-minute budget)
DEFAULT_RUNS = ("smollm2-135m-q4_1:1/2,llama-1b-q4_0:1,llama-1b-q8_0:1,llama-1b-f16:1,qwen-3b-q4_0:1,"
                "qwen-3b-q8_0:1,olmoe-1b-7b-q4_0:1")
FILE_TYPES = {"Q4_0": 2, "Q8_0": 7, "F16": 1}
DECODE_STEPS = 16

Tensor = tuple[str, tuple[int, ...], str]


def tensors(spec: dict[str, Any], mat: str) -> list[Tensor]:
    """llama.cpp's tensor names and shapes (ne0 first) for the three architectures."""
    e, f, nh, nkv, hd, v = (spec[k] for k in ("n_embd", "n_ff", "n_head", "n_head_kv", "head_dim", "n_vocab"))
    head = "Q8_0" if mat != "F16" else "F16"
    out: list[Tensor] = [("token_embd.weight", (e, v), mat), ("output_norm.weight", (e,), "F32")]
    if not spec.get("tied"):
        out.append(("output.weight", (e, v), head))
    for i in range(spec["n_layer"]):
        p = f"blk.{i}"
        out += [(f"{p}.attn_norm.weight", (e,), "F32"), (f"{p}.attn_q.weight", (e, nh * hd), mat),
                (f"{p}.attn_k.weight", (e, nkv * hd), mat), (f"{p}.attn_v.weight", (e, nkv * hd), mat),
                (f"{p}.attn_output.weight", (nh * hd, e), mat), (f"{p}.ffn_norm.weight", (e,), "F32")]
        if spec.get("qkv_bias"):
            out += [(f"{p}.attn_q.bias", (nh * hd,), "F32"), (f"{p}.attn_k.bias", (nkv * hd,), "F32"),
                    (f"{p}.attn_v.bias", (nkv * hd,), "F32")]
        if spec.get("qk_norm_full"):
            out += [(f"{p}.attn_q_norm.weight", (e,), "F32"), (f"{p}.attn_k_norm.weight", (e,), "F32")]
        if spec.get("n_expert"):
            n = spec["n_expert"]
            out += [(f"{p}.ffn_gate_inp.weight", (e, n), "F32"), (f"{p}.ffn_gate_exps.weight", (e, f, n), mat),
                    (f"{p}.ffn_down_exps.weight", (f, e, n), mat), (f"{p}.ffn_up_exps.weight", (e, f, n), mat)]
        else:
            out += [(f"{p}.ffn_gate.weight", (e, f), mat), (f"{p}.ffn_up.weight", (e, f), mat),
                    (f"{p}.ffn_down.weight", (f, e), mat)]
    return out


def _tile(type_name: str, nbytes: int = 1 << 20) -> bytes:
    """A block-aligned run of valid random blocks of the type (repeated over each tensor)."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    rng = np.random.default_rng(7)
    _, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    n_blocks = nbytes // size
    if type_name == "F32":
        return np.ones(n_blocks, dtype=np.float32).tobytes()
    if type_name == "F16":
        return (rng.standard_normal(n_blocks) * 0.02).astype(np.float16).tobytes()
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    scale = (rng.uniform(0.002, 0.01, n_blocks)).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    raw[:, :2] = scale
    if type_name == "Q4_1":
        raw[:, 2:4] = np.zeros((n_blocks, 2), dtype=np.uint8)
    return raw.tobytes()


def build(spec: dict[str, Any], mat: str, path: Path) -> Path:
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quant_shape_to_byte_shape

    arch = spec["arch"]
    writer = GGUFWriter(str(path), arch)
    writer.add_name(spec["name"])
    writer.add_file_type(FILE_TYPES[mat])
    writer.add_string("tokenizer.ggml.model", "none")
    kv: dict[str, Any] = {"vocab_size": spec["n_vocab"], "embedding_length": spec["n_embd"],
                          "block_count": spec["n_layer"], "context_length": spec["ctx"],
                          "feed_forward_length": spec["n_ff"], "attention.head_count": spec["n_head"],
                          "attention.head_count_kv": spec["n_head_kv"], "rope.dimension_count": spec["head_dim"]}
    for key, value in kv.items():
        writer.add_uint32(f"{arch}.{key}", value)
    writer.add_float32(f"{arch}.rope.freq_base", spec["rope_base"])
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    if spec.get("n_expert"):
        writer.add_uint32(f"{arch}.expert_count", spec["n_expert"])
        writer.add_uint32(f"{arch}.expert_used_count", spec["n_expert_used"])
    table = tensors(spec, mat)
    sizes = []
    for name, shape, type_name in table:
        qtype = GGMLQuantizationType[type_name]
        nbytes = math.prod(quant_shape_to_byte_shape(tuple(reversed(shape)), qtype))  # gguf's own size rule
        sizes.append(nbytes)
        writer.add_tensor_info(name, tuple(reversed(shape)), np.dtype(np.float32), nbytes, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    tiles = {t: _tile(t) for t in {t for _, _, t in table}}
    with open(path, "r+b") as handle:
        handle.seek(0, os.SEEK_END)
        handle.write(b"\0" * (-handle.tell() % ALIGN))
        for (_, _, type_name), nbytes in zip(table, sizes, strict=True):
            tile, left = tiles[type_name], nbytes
            while left > 0:
                chunk = tile[: min(left, len(tile))]
                handle.write(chunk)
                left -= len(chunk)
            handle.write(b"\0" * (-nbytes % ALIGN))
    return path


CHILD = r"""
import json, sys, time, ctypes, random
path, (threads, prompt, depth, steps), extra = sys.argv[1], map(int, sys.argv[2:6]), sys.argv[6] == "1"
import llama_cpp
llama_cpp.llama_backend_init()
mp = llama_cpp.llama_model_default_params()
mp.use_extra_bufts = extra
model = llama_cpp.llama_model_load_from_file(path.encode(), mp)
cp = llama_cpp.llama_context_default_params()
cp.n_ctx = 1024; cp.n_batch = 512; cp.n_ubatch = 512; cp.n_threads = threads; cp.n_threads_batch = threads
ctx = llama_cpp.llama_init_from_model(model, cp)
n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
rng = random.Random(1)
batch = llama_cpp.llama_batch_init(512, 0, 1)
def run(tokens, pos0):
    batch.n_tokens = len(tokens)
    for i, t in enumerate(tokens):
        batch.token[i] = t; batch.pos[i] = pos0 + i; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = 0
        batch.logits[i] = i == len(tokens) - 1
    t0, c0 = time.perf_counter(), time.process_time()
    rc = llama_cpp.llama_decode(ctx, batch)
    llama_cpp.llama_get_logits_ith(ctx, -1)
    llama_cpp.llama_synchronize(ctx)
    if rc != 0: raise SystemExit(f"decode {rc}")
    dt = time.perf_counter() - t0
    cpu[0] += time.process_time() - c0; cpu[1] += dt
    return dt
cpu = [0.0, 0.0]
tok = lambda n: [rng.randrange(10, n_vocab - 1) for _ in range(n)]
run(tok(8), 0); run(tok(1), 8)  # warm-up: every weight page touched
llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
out = {}
pos = 0
for label, target in (("a", prompt), ("b", depth)):
    n = target - pos
    dt = run(tok(n), pos); pos += n
    out[f"prefill_{label}_tokens"] = n; out[f"prefill_{label}_tps"] = n / dt
    times = []
    for _ in range(steps):
        times.append(run(tok(1), pos)); pos += 1
    out[f"decode_{label}_tps"] = steps / sum(times); out[f"depth_{label}"] = pos - steps // 2
out["engine_cores"] = cpu[0] / cpu[1]
print(json.dumps(out))
"""


def measure(path: Path, threads: int, prompt: int, depth: int) -> dict[str, Any]:
    from doctor.sources.probes.cpustat import CpuWindow

    window = CpuWindow().start()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(threads), str(prompt), str(depth),
                           str(DECODE_STEPS), "0" if repack_crashes_here() else "1"],
                          capture_output=True, text=True, timeout=900, check=False)
    busy = window.stop()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"{path.name}: exit {proc.returncode}: {' '.join(proc.stderr.split()[-40:])}")
    answer: dict[str, Any] = json.loads(lines[-1])
    answer["other_busy"] = busy.other_busy if busy else None
    answer["steal_pct"] = busy.steal_pct if busy else None
    return answer


CEILING_FACTS = ("host.ram.read_bw_gbs", "host.ram.read_bw_all_gbs", "host.cpu.matmul_gflops",
                 "host.cpu.matmul_all_gflops")


def verdict(path: Path, threads: int, prompt: int, prefill_tps: float, decode_tokens: int, decode_tps: float,
            other_busy: float | None, engine_cores: float | None,
            stored: dict[str, float] | None = None) -> dict[str, Any]:
    """The doctor's speed facts for one measured phase pair, from the facts a scan would have (the
    ceilings measured now, or `stored`: those measured with the row, for --rejudge)."""
    from doctor.core.facts import Facts, Source
    from doctor.derive import derive
    from doctor.sources.probes.base import ProbeContext, run_probe
    from doctor.sources.probes.ceilings import PROBE as CEILINGS
    from doctor.sources.probes.gguf_model import PROBE as GGUF

    facts = Facts()
    facts.merge(run_probe(GGUF, ProbeContext(model_path=str(path))))
    src = Source("config", "bench")
    if stored:
        for name, value in stored.items():
            facts.set(name, value, src)
    else:
        facts.merge(run_probe(CEILINGS, ProbeContext(threads=threads)))
    cores = os.cpu_count() or 1
    for name, value in (("config.n_threads", threads), ("config.n_ctx", 1024), ("config.n_batch", 512),
                        ("config.n_gpu_layers", 0), ("host.cpu.usable_cores", float(cores)),
                        ("host.cpu.logical_cores", cores), ("run.prompt_tokens", prompt),
                        ("run.decode_tokens", decode_tokens), ("run.prefill_tps", prefill_tps),
                        ("run.decode_tps", decode_tps), ("host.cpu.other_busy", other_busy),
                        ("host.cpu.engine_cores", engine_cores)):
        if value is not None:
            facts.set(name, value, src)
    derive(facts)
    keys = ("tok_s", "ceiling_tok_s", "fraction", "bound", "expected_tok_s")
    out: dict[str, Any] = {phase: {k: facts.value(f"speed.{phase}.{k}") for k in keys}
                           for phase in ("prefill", "decode")}
    out["raw"] = {k: facts.value(k) for k in ("derived.decode_bytes_per_token_cpu", "derived.prefill_flops_per_token",
                                              "model.n_layer", *CEILING_FACTS)}
    return out


def default_model() -> Path:
    from doctor.sources.models.default import default_model_path

    return default_model_path()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=DEFAULT_RUNS,
                        help="NAME[:THREADS/THREADS...],... (threads default: --threads)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--keep", help="folder to keep the GGUFs in (built once)")
    parser.add_argument("--out", default=str(RESULTS / "speed_table.md"))
    parser.add_argument("--rejudge", metavar="JSON[,JSON]", help="judge the measured rows of earlier runs again "
                        "(the GGUFs kept with --keep, the ceilings stored with the rows): the engine is not run")
    parser.add_argument("--note", default="", help="a sentence on where and when the rows were measured")
    args = parser.parse_args()
    if args.rejudge:
        rejudge([Path(p) for p in args.rejudge.split(",")], Path(args.keep or "."), Path(args.out), args.note)
        return
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="speed-table-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for entry in args.models.split(","):
        name, _, counts = entry.partition(":")
        spec, mat, prompt, depth = MODELS[name]
        if spec is None:  # a private copy: tests elsewhere may rewrite the installed file while it is mapped
            path = folder / "smollm2-135m-q4_1.gguf"
            if not path.exists():
                shutil.copyfile(default_model(), path)
        else:
            path = folder / f"{name}.gguf"
            if not path.exists():
                t0 = time.perf_counter()
                build(spec, mat, path)
                print(f"built {path.name} ({path.stat().st_size / 2**30:.2f} GiB, {time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr)
        for threads in (int(t) for t in (counts.replace("/", ",") or args.threads).split(",")):
            t0 = time.perf_counter()
            m = measure(path, threads, prompt, depth)
            for label in ("a", "b"):
                n_prompt = m[f"prefill_{label}_tokens"]
                v = verdict(path, threads, n_prompt if label == "a" else depth, m[f"prefill_{label}_tps"],
                            DECODE_STEPS, m[f"decode_{label}_tps"], m["other_busy"], m["engine_cores"])
                rows.append({"model": name, "threads": threads, "depth": m[f"depth_{label}"],
                             "prefill_tokens": n_prompt, "other_busy": m["other_busy"],
                             "engine_cores": m["engine_cores"], "type": mat, **v.pop("raw"), **{
                                 f"{phase}_{k}": v[phase][k] for phase in v for k in v[phase]}})
            print(f"{name} t={threads}: {time.perf_counter() - t0:.0f} s, others {m['other_busy']}", file=sys.stderr)
        if spec is not None and not args.keep:
            path.unlink()
    write(rows, Path(args.out), time.perf_counter() - started)


def rejudge(sources: list[Path], folder: Path, out: Path, note: str = "") -> None:
    rows = [row for source in sources for row in json.loads(source.read_text(encoding="utf-8"))]
    cores = max(row["threads"] for row in rows)
    all_cores = {f.replace("_gbs", "_all_gbs").replace("_gflops", "_all_gflops"): row[f] for row in rows
                 if row["threads"] == cores for f in CEILING_FACTS[::2]}  # older rows: the all-core run's figures
    for row in rows:
        _, _, prompt, depth = MODELS[row["model"]]
        at = prompt if row["prefill_tokens"] == prompt else depth
        stored = {f: row.get(f) or all_cores.get(f) for f in CEILING_FACTS}
        v = verdict(folder / f"{row['model']}.gguf", row["threads"], at, row["prefill_tok_s"], DECODE_STEPS,
                    row["decode_tok_s"], row["other_busy"], row["engine_cores"],
                    {k: float(x) for k, x in stored.items() if isinstance(x, int | float)})
        row.update(v.pop("raw"))
        row.update({f"{phase}_{k}": v[phase][k] for phase in v for k in v[phase]})
    write(rows, out, 0.0, f"judged again from {', '.join(s.name for s in sources)}", note)


FIT_HALF = "1-thread rows"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return "this machine"


def half(row: dict[str, Any]) -> str:
    """Which half of the table a row is in: the constants were fitted on the 1-thread rows."""
    return "fit (1 thread)" if row["threads"] == 1 else "validation (2 threads)"


def _f(value: Any, fmt: str = "{:.1f}") -> str:
    return fmt.format(value) if isinstance(value, int | float) else "-"


def write(rows: list[dict[str, Any]], out: Path, seconds: float, how: str = "", note: str = "") -> None:
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    lines = ["# Speed verdict vs measured speed (bench/speed_table.py)", "",
             f"{len(rows)} rows {how or f'in {seconds:.0f} s'} on {cpu_model()}, {os.cpu_count()} CPUs; weight "
             f"repacking {'off (AMX)' if repack_crashes_here() else 'on'}. \"others\": the share of the cores other "
             "processes used while the row ran (/proc/stat). expected/measured within ±20% is the goal.", "",
             *([note, ""] if note else []),
             "| model | threads | depth | others | phase | measured tok/s | ceiling | fraction | bound | expected | "
             "expected/measured |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        for phase in ("prefill", "decode"):
            got, exp = r[f"{phase}_tok_s"], r[f"{phase}_expected_tok_s"]
            ratio = exp / got if isinstance(got, int | float) and isinstance(exp, int | float) and got else None
            if ratio is not None:
                ratios.setdefault((half(r), phase), []).append(ratio)
                ratios.setdefault(("all", phase), []).append(ratio)
            others = _f(r['other_busy'], '{:.0%}')
            lines.append(f"| {r['model']} | {r['threads']} | {r['depth']} | {others} | {phase} | "
                         f"{_f(got)} | {_f(r[f'{phase}_ceiling_tok_s'])} | {_f(r[f'{phase}_fraction'], '{:.0%}')} | "
                         f"{r[f'{phase}_bound']} | {_f(exp)} | {_f(ratio, '{:.2f}')} |")
    lines += ["", f"The cost model's constants (doctor/derive/speed_cost.py) were fitted on the {FIT_HALF}; the "
              "other rows are the validation.", ""]
    for (which, phase), values in sorted(ratios.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        inside = sum(1 for v in values if 0.8 <= v <= 1.2)
        lines.append(f"- {which}, {phase}: expected/measured median {statistics.median(values):.2f}, range "
                     f"{min(values):.2f}-{max(values):.2f}, {inside}/{len(values)} rows within ±20%")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
