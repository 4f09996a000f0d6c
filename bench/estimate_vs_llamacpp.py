"""The estimate against llama.cpp's own figures: KV cache, weights and compute buffer for SmolLM2-135M
at every setting of the grid in fixtures/record_buffers.py.

By default llama.cpp is run now, in this run: each setting in a fresh llama-cpp-python child
(model and context created, nothing generated), its log kept in a scratch folder (`--recorded`
reads the logs recorded in fixtures/ instead). For each log the settings come from the log itself
(n_ctx after padding, n_seq_max, n_batch, n_ubatch, flash attention, K/V types) and the model from
the GGUF (doctor/sources/probes/gguf_model.py); doctor/derive/ then predicts the buffers and the table shows
them next to the MiB llama.cpp printed. KV must match to the printed 2 decimals (and in cells),
weights within 2%, compute within 10%. Prints the table and writes it to
bench/results/estimate_vs_llamacpp.md.

Run:  python bench/estimate_vs_llamacpp.py [--recorded] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import Row as BenchRow  # noqa: E402
from doctor.core.facts import Facts, Source  # noqa: E402
from doctor.derive import derive  # noqa: E402

BUFFERS = ROOT / "fixtures" / "logs" / "llama-cpp-python" / "buffers"
RESULTS = ROOT / "bench" / "results" / "estimate_vs_llamacpp.md"
MIB = 1 << 20

KV_LINE = re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*\d+ layers,\s*(\d+)/(\d+) seqs\)")
# the weights' own buffer (the mapped file, or CPU without mmap); an AMX / CPU_REPACK "model buffer" on
# CPUs that repack is a second, repacked copy, estimated and checked on its own (doctor/derive/repack.py,
# tests/scan/test_estimate_repack.py against real loads)
MODEL_LINE = re.compile(r"\b(?:CPU_Mapped|CPU) model buffer size =\s*([\d.]+) MiB")
COMPUTE_LINE = re.compile(r"sched_reserve:\s+\S+ compute buffer size =\s*([\d.]+) MiB")
PARAM = re.compile(r"llama_context: (n_ctx|n_seq_max|n_batch|n_ubatch|flash_attn|kv_unified)\s*=\s*(\w+)")
TYPES = re.compile(r"K \((\w+)\):\s*[\d.]+ MiB, V \((\w+)\)")


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    settings: str
    kv_llama: str  # as printed (MiB, 2 decimals)
    kv_est: str
    cells_llama: int
    cells_est: int
    weights_llama: float
    weights_est: float
    compute_llama: float
    compute_est: float

    @property
    def kv_ok(self) -> bool:
        return self.kv_llama == self.kv_est and self.cells_llama == self.cells_est

    @property
    def weights_err(self) -> float:
        return abs(self.weights_est - self.weights_llama) / self.weights_llama

    @property
    def compute_err(self) -> float:
        return abs(self.compute_est - self.compute_llama) / self.compute_llama


def log_settings(text: str) -> dict[str, str]:
    return dict(PARAM.findall(text))


def compare(log: Path, model: Facts) -> Row:
    text = log.read_text(encoding="utf-8")
    params = log_settings(text)
    kv = KV_LINE.search(text)
    types = TYPES.search(text)
    model_mib = MODEL_LINE.search(text)
    compute = COMPUTE_LINE.search(text)
    if not (kv and types and model_mib and compute):
        raise ValueError(f"{log.name}: buffer lines missing")
    facts = Facts()
    facts.merge(model)
    src = Source("config", "recorded settings")
    n_seq = int(params.get("n_seq_max", "1"))
    unified = params.get("kv_unified", "false") == "true"
    values = {"config.n_ctx": int(params["n_ctx"]), "config.n_parallel": n_seq, "config.kv_unified": unified,
              "config.n_batch": int(params["n_batch"]), "config.n_ubatch": int(params["n_ubatch"]),
              "config.flash_attn": params.get("flash_attn", "disabled"), "config.type_k": types.group(1),
              "config.type_v": types.group(2), "config.n_gpu_layers": 0, "config.engine": "llama-cpp-python"}
    for name, value in values.items():
        facts.set(name, value, src)
    derive(facts)
    settings = (f"n_ctx {params['n_ctx']}, {types.group(1)}/{types.group(2)}, fa {params.get('flash_attn')}, "
                f"ub {params['n_ubatch']}, seqs {n_seq}{' unified' if unified else ''}")
    return Row(
        name=log.stem, settings=settings,
        kv_llama=kv.group(1), kv_est=f"{facts.value('derived.kv_bytes') / MIB:.2f}",
        cells_llama=int(kv.group(2)) * (1 if unified else n_seq), cells_est=int(facts.value("derived.kv_cells")),
        weights_llama=float(model_mib.group(1)), weights_est=facts.value("derived.weights_host_bytes") / MIB,
        compute_llama=float(compute.group(1)), compute_est=facts.value("derived.compute_bytes") / MIB,
    )


def model_facts() -> Facts:
    from doctor.sources.models.default import default_model_path
    from doctor.sources.probes.gguf_model import collect_model

    return collect_model(str(default_model_path()))


def compare_all(folder: Path = BUFFERS) -> list[Row]:
    model = model_facts()
    return [compare(log, model) for log in sorted(folder.glob("*.log"))]


def record_now(folder: Path, jobs: int = 2) -> str:
    """Run llama.cpp at every setting of the grid now; its logs go to `folder`. Returns the version."""
    from concurrent.futures import ThreadPoolExecutor
    from importlib.metadata import version

    from doctor.sources.models.default import default_model_path
    from fixtures.record_buffers import CHILD, DROP_PREFIXES, GRID

    model = str(default_model_path())
    folder.mkdir(parents=True, exist_ok=True)

    def one(item: tuple[str, dict[str, object]]) -> None:
        name, settings = item
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(settings), model],
                              capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: llama-cpp-python exited {proc.returncode}: {proc.stderr[-600:]}")
        lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith(DROP_PREFIXES)]
        (folder / f"{name}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, GRID.items()))
    return version("llama_cpp_python")


def table(rows: list[Row], engine_version: str | None = None, live: bool = False) -> str:
    if engine_version is None:
        engine_version = json.loads((BUFFERS / "index.json").read_text())["llama_cpp_python"]
    how = "run now, in this benchmark" if live else "recorded in fixtures/"
    head = [f"Estimate vs llama.cpp, SmolLM2-135M-Instruct Q4_1, llama-cpp-python {engine_version} (CPU), "
            f"llama.cpp {how}",
            "",
            "| setting | KV llama.cpp MiB | KV estimate MiB | cells | weights MiB (llama.cpp / est.) |"
            " compute MiB (llama.cpp / est.) | compute error |",
            "|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = "=" if r.kv_ok else "≠"
        head.append(f"| {r.settings} | {r.kv_llama} | {r.kv_est} {mark} | {r.cells_llama} / {r.cells_est} |"
                    f" {r.weights_llama:.2f} / {r.weights_est:.2f} | {r.compute_llama:.2f} / {r.compute_est:.2f} |"
                    f" {r.compute_err * 100:.1f}% |")
    kv_ok = sum(r.kv_ok for r in rows)
    head += ["", f"KV exact: {kv_ok}/{len(rows)}; weights worst error {max(r.weights_err for r in rows) * 100:.2f}%;"
                 f" compute worst error {max(r.compute_err for r in rows) * 100:.1f}%."]
    return "\n".join(head) + "\n"


def measure(live: bool = True, jobs: int = 2) -> tuple[list[BenchRow], str]:
    """The three rows of the summary table, and the full per-setting table."""
    if live:
        with tempfile.TemporaryDirectory(prefix="llm-doctor-buffers-") as tmp:
            engine_version = record_now(Path(tmp), jobs)
            rows = compare_all(Path(tmp))
    else:
        engine_version, rows = None, compare_all()
    text = table(rows, engine_version, live)
    kv_ok = sum(r.kv_ok for r in rows)
    w = max(r.weights_err for r in rows)
    c = max(r.compute_err for r in rows)
    ref = f"llama.cpp buffer lines, {len(rows)} settings, {'same run' if live else 'recorded'}"
    summary = [
        BenchRow("KV cache estimate", ref, "exact", f"{kv_ok}/{len(rows)} exact", "-", f"{kv_ok}/{len(rows)}",
                 kv_ok == len(rows), "MiB to the printed 2 decimals, and cells"),
        BenchRow("weights estimate", ref, "within 2%", f"worst {w:.2%}", "-", f"worst {w:.2%}", w <= 0.02),
        BenchRow("compute buffer estimate", ref, "within 10%", f"worst {c:.1%}", "-", f"worst {c:.1%}", c <= 0.10,
                 "full table: bench/results/estimate_vs_llamacpp.md"),
    ]
    return summary, text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recorded", action="store_true", help="read the logs recorded in fixtures/ (no llama.cpp run)")
    ap.add_argument("--jobs", type=int, default=2, help="llama.cpp children at once (default 2)")
    args = ap.parse_args()
    summary, text = measure(live=not args.recorded, jobs=args.jobs)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    return 0 if all(r.met for r in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
