"""The estimate against llama.cpp's own figures: KV cache, weights and compute buffer for SmolLM2-135M
at every setting recorded by fixtures/record_buffers.py.

For each recorded log the settings come from the log itself (n_ctx after padding, n_seq_max,
n_batch, n_ubatch, flash attention, K/V types) and the model from the GGUF (probes/gguf_model.py);
doctor/estimate.py then predicts the buffers and the table shows them next to the MiB llama.cpp
printed. KV must match to the printed 2 decimals (and in cells), weights within 2%, compute within
10%. Prints the table and writes it to bench/results/estimate_vs_llamacpp.md.

Run:  python bench/estimate_vs_llamacpp.py
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.estimate import derive  # noqa: E402
from doctor.facts import Facts, Source  # noqa: E402

BUFFERS = ROOT / "fixtures" / "logs" / "llama-cpp-python" / "buffers"
RESULTS = ROOT / "bench" / "results" / "estimate_vs_llamacpp.md"
MIB = 1 << 20

KV_LINE = re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*\d+ layers,\s*(\d+)/(\d+) seqs\)")
MODEL_LINE = re.compile(r"model buffer size =\s*([\d.]+) MiB")
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
    from engine_adapter.models import default_model_path
    from probes.gguf_model import collect_model

    return collect_model(str(default_model_path()))


def compare_all() -> list[Row]:
    model = model_facts()
    return [compare(log, model) for log in sorted(BUFFERS.glob("*.log"))]


def table(rows: list[Row]) -> str:
    index = json.loads((BUFFERS / "index.json").read_text())
    head = [f"Estimate vs llama.cpp, SmolLM2-135M-Instruct Q4_1, llama-cpp-python {index['llama_cpp_python']} (CPU)",
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


def main() -> int:
    rows = compare_all()
    text = table(rows)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    return 0 if all(r.kv_ok and r.weights_err <= 0.02 and r.compute_err <= 0.10 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
