"""The memory estimate against llama.cpp's own figures on every architecture, with a peer beside it.

For each spec in fixtures/gguf/arch/ (Llama 3 8B/70B, Qwen2.5, Qwen3 dense and MoE, Mixtral,
Gemma 2/3 with sliding windows, DeepSeek-V2-Lite with MLA, Mamba, the LFM2 hybrid) and each
setting of fixtures/record_arch.py's grid, llama.cpp's figures come from a `no_alloc` load of a
sparse GGUF with the real shapes - run now in this benchmark (default) or read from the logs
recorded in fixtures/ (`--recorded`). llm-doctor reads the same file with its GGUF probe and
derives the budget (doctor/derive/ with doctor/derive/arch.py). Two peers beside it:

- `llama-fit-params --fit-print on` (llama.cpp's own projection, built from the vendored source by
  scripts/build_llama_server.sh; bench/common.py finds it) on the same sparse GGUF with the same
  settings. It loads with no_alloc and load mode none, so it reads the header only (about 10 ms a
  call), and prints model, context and compute MiB (each rounded down; on this CPU-only build all
  of it on the `Host` line). Its total is compared with llama.cpp's actual sums, its fit verdict is
  that total against the budget, and its time is the wall time of one call. It has no
  `--kv-unified`, so the unified 4-sequence setting cannot be asked of it (its cell says so). When
  the binary is absent the column says "not built"; under `--recorded` it is not run (the logs in
  fixtures/ may come from another llama.cpp than the binary) and says "not run".
- `hf-mem` (`--peer-wheel`, when importable: it estimates weights and KV from a GGUF header with
  one formula, no compute buffer; where it cannot read an architecture its column says why).

Terms: weights = llama_model_size() (bytes of every tensor llama.cpp created); KV = the sum of
every `llama_kv_cache: size` line plus `llama_memory_recurrent: size` (recurrent state); compute
= `compute buffer size`; total = the three. Fit column: does the total fit BUDGET (default 8 GiB) -
per llama.cpp's sums, llm-doctor's, llama-fit-params's and hf-mem's (weights + KV).

Vision projectors (fixtures/gguf/arch/mmproj/: Gemma 3's): llama.cpp's figures are clip.cpp's own
`model size` and warmup `compute buffer size` for one image, with flash attention on and off;
llm-doctor's come from the projector's header (doctor/sources/probes/gguf_mmproj.py, doctor/derive/mmproj.py).
The image-token count is llm-doctor's alone (clip.cpp prints none without an image to tokenize).

Run:  python -m bench.arch_table [--recorded] [--budget-gib 16]
Writes bench/results/arch_table.md.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "fixtures" / "gguf") not in sys.path:
    sys.path.insert(0, str(ROOT / "fixtures" / "gguf"))

from doctor.core.facts import Facts, Source  # noqa: E402
from doctor.derive import derive  # noqa: E402

ARCH_LOGS = ROOT / "fixtures" / "logs" / "llama-cpp-python" / "arch"
RESULTS = ROOT / "bench" / "results" / "arch_table.md"
MIB = 1 << 20

KV_SIZE = re.compile(r"^llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\)",
                     re.M)
RS_SIZE = re.compile(r"^llama_memory_recurrent: size =\s*([\d.]+) MiB", re.M)
COMPUTE = re.compile(r"^sched_reserve:\s+\S+ compute buffer size =\s*([\d.]+) MiB", re.M)
MODEL_SIZE = re.compile(r"^record_arch: llama_model_size = (\d+)", re.M)
PARAM = re.compile(r"^llama_context: (n_ctx|n_seq_max|n_batch|n_ubatch|flash_attn|kv_unified)\s*=\s*(\w+)", re.M)
TYPES = re.compile(r"K \((\w+)\):\s*[\d.]+ MiB, V \((\w+)\)")


@dataclass(frozen=True, slots=True)
class Reference:
    """What llama.cpp printed for one load."""

    kv_mib: float  # KV caches + recurrent state, as printed (2 decimals each)
    compute_mib: float
    weights_bytes: int
    n_ctx: int
    n_seq: int
    n_batch: int
    n_ubatch: int
    flash_attn: bool
    unified: bool
    swa_full: bool
    type_k: str
    type_v: str


def reference(text: str) -> Reference:
    params = dict(PARAM.findall(text))
    kv = [float(m.group(1)) for m in KV_SIZE.finditer(text)] + [float(m) for m in RS_SIZE.findall(text)]
    compute, model = COMPUTE.findall(text), MODEL_SIZE.search(text)
    if not compute or not model or not params:
        raise ValueError("buffer lines missing")
    types = TYPES.search(text)
    return Reference(kv_mib=round(sum(kv), 2), compute_mib=float(compute[-1]), weights_bytes=int(model.group(1)),
                     n_ctx=int(params["n_ctx"]), n_seq=int(params.get("n_seq_max", 1)),
                     n_batch=int(params["n_batch"]), n_ubatch=int(params["n_ubatch"]),
                     flash_attn=params.get("flash_attn") == "enabled", unified=params.get("kv_unified") == "true",
                     swa_full="using full-size SWA cache" in text,
                     type_k=types.group(1) if types else "f16", type_v=types.group(2) if types else "f16")


def estimate(model: Facts, ref: Reference) -> Facts:
    """llm-doctor's derived facts for the model at the reference's settings (CPU only)."""
    facts = Facts()
    facts.merge(model)
    src = Source("config", "the settings llama.cpp printed")
    for name, value in {"config.n_ctx": ref.n_ctx, "config.n_parallel": ref.n_seq, "config.kv_unified": ref.unified,
                        "config.n_batch": ref.n_batch, "config.n_ubatch": ref.n_ubatch,
                        "config.flash_attn": "enabled" if ref.flash_attn else "disabled",
                        "config.type_k": ref.type_k, "config.type_v": ref.type_v, "config.n_gpu_layers": 0,
                        "config.swa_full": ref.swa_full, "config.engine": "llama-cpp-python"}.items():
        facts.set(name, value, src)
    return derive(facts)


@dataclass(frozen=True, slots=True)
class FitProjection:
    """llama-fit-params's projection for one row: its Host line (MiB, each part rounded down), or why none."""

    model_mib: int = 0
    context_mib: int = 0
    compute_mib: int = 0
    seconds: float | None = None  # wall time of the call; None when not run or failed
    why: str = ""  # set when there is no projection

    @property
    def total_mib(self) -> int | None:
        return None if self.why else self.model_mib + self.context_mib + self.compute_mib


FIT_NOT_BUILT = "not built (scripts/build_llama_server.sh)"
FIT_NOT_RUN = "not run (--recorded)"
FIT_NO_UNIFIED = "can't ask: no --kv-unified flag"


def fit_params(binary: Path | None, gguf: Path | None, ref: Reference, absent: str = FIT_NOT_BUILT) -> FitProjection:
    """Run `llama-fit-params --fit-print on` at the reference's settings on the same sparse GGUF."""
    from bench.common import fit_params_cmd, fit_print_failure, parse_fit_print

    if binary is None or gguf is None:
        return FitProjection(why=absent)
    if ref.unified and ref.n_seq > 1:
        return FitProjection(why=FIT_NO_UNIFIED)
    cmd = fit_params_cmd(binary, gguf, ref.n_ctx, ref.n_seq, ref.type_k, ref.flash_attn, kv_v=ref.type_v,
                         n_batch=ref.n_batch, n_ubatch=ref.n_ubatch, swa_full=ref.swa_full)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return FitProjection(why=f"fails: {type(exc).__name__}")
    took = time.perf_counter() - start
    host = parse_fit_print(proc.stdout) if proc.returncode == 0 else None
    if host is None:
        return FitProjection(why=f"fails: {fit_print_failure(proc.stderr, proc.returncode)}"[:80])
    return FitProjection(*host, seconds=took)


@dataclass(frozen=True, slots=True)
class Row:
    spec: str
    setting: str
    ref: Reference
    kv_est: float | None  # MiB
    weights_est: int | None
    compute_est: float | None  # MiB
    n_kv_lines: int = 1
    peer_weights: int | None = None
    peer_kv: int | None = None
    peer_error: str = ""
    fit: FitProjection = FitProjection(why=FIT_NOT_RUN)

    @property
    def ref_total_mib(self) -> float:
        return self.ref.weights_bytes / MIB + self.ref.kv_mib + self.ref.compute_mib

    @property
    def est_total_mib(self) -> float | None:
        if self.kv_est is None or self.weights_est is None or self.compute_est is None:
            return None
        return self.weights_est / MIB + self.kv_est + self.compute_est

    @property
    def peer_total_mib(self) -> float | None:
        return None if self.peer_weights is None or self.peer_kv is None else (self.peer_weights + self.peer_kv) / MIB

    def total_err(self, total: float | None) -> float | None:
        return None if total is None else (total - self.ref_total_mib) / self.ref_total_mib

    def fit_fits(self, budget: int) -> bool | None:
        total = self.fit.total_mib
        return None if total is None else total * MIB <= budget

    @property
    def kv_exact(self) -> bool:
        return self.kv_est is not None and abs(self.kv_est - self.ref.kv_mib) <= 0.011 * max(1, self.n_kv_lines)


    @property
    def weights_err(self) -> float | None:
        if self.weights_est is None:
            return None
        return (self.weights_est - self.ref.weights_bytes) / self.ref.weights_bytes

    @property
    def compute_err(self) -> float | None:
        return None if self.compute_est is None else (self.compute_est - self.ref.compute_mib) / self.ref.compute_mib

    def total(self, budget: int) -> tuple[bool, bool | None]:
        ref = self.ref.weights_bytes + (self.ref.kv_mib + self.ref.compute_mib) * MIB
        if self.kv_est is None or self.weights_est is None or self.compute_est is None:
            return ref <= budget, None
        est = self.weights_est + (self.kv_est + self.compute_est) * MIB
        return ref <= budget, est <= budget

    def peer_fits(self, budget: int) -> bool | None:
        if self.peer_weights is None or self.peer_kv is None:
            return None
        return self.peer_weights + self.peer_kv <= budget

    @property
    def peer_kv_err(self) -> float | None:
        if self.peer_kv is None or not self.ref.kv_mib:
            return None
        return (self.peer_kv / MIB - self.ref.kv_mib) / self.ref.kv_mib


def _mib(facts: Facts, name: str) -> float | None:
    value = facts.value(name)
    return value / MIB if isinstance(value, int) else None


def model_facts(path: Path) -> Facts:
    from doctor.sources.probes.gguf_model import collect_model

    return collect_model(str(path))


def compare(spec: str, setting: str, text: str, model: Facts, gguf: Path | None = None, peer: bool = True,
            fit_binary: Path | None = None, fit_absent: str = FIT_NOT_RUN) -> Row:
    ref = reference(text)
    facts = estimate(model, ref)
    kv = facts.value("derived.kv_bytes")
    state = facts.value("derived.state_bytes")
    kv_est = None
    if isinstance(kv, int) or isinstance(state, int):
        kv_est = ((kv if isinstance(kv, int) else 0) + (state if isinstance(state, int) else 0)) / MIB
    weights = facts.value("derived.weights_bytes")
    lines = len(KV_SIZE.findall(text)) + len(RS_SIZE.findall(text))
    result = None
    if gguf is not None and peer:
        from bench.peer_hf_mem import estimate as peer_estimate

        result = peer_estimate(gguf, ref.n_ctx, ref.n_seq, ref.unified, ref.type_k)
    return Row(spec, setting, ref, kv_est, weights if isinstance(weights, int) else None,
               _mib(facts, "derived.compute_bytes"), lines, result.weights if result else None,
               result.kv if result else None, result.error if result else "",
               fit_params(fit_binary, gguf, ref, fit_absent))


def rows_from(folder: Path, gguf_dir: Path, peer: bool = False, fit_binary: Path | None = None,
              fit_absent: str = FIT_NOT_RUN) -> list[Row]:
    from make_arch_gguf import build, load_arch_spec

    index = json.loads((folder / "index.json").read_text())
    models: dict[str, Facts] = {}
    paths: dict[str, Path] = {}
    rows = []
    for key, run in sorted(index["runs"].items()):
        if key in index.get("failed", {}):
            continue
        spec = run["spec"]
        if spec not in models:
            paths[spec] = build(load_arch_spec(spec), gguf_dir / f"{spec}.gguf")
            models[spec] = model_facts(paths[spec])
        text = (folder / f"{key}.log").read_text(encoding="utf-8")
        rows.append(compare(spec, run["setting"], text, models[spec], paths[spec], peer, fit_binary, fit_absent))
    return rows


MODEL_SIZE_MMPROJ = re.compile(r"^load_hparams: model size:\s*([\d.]+) MiB", re.M)
COMPUTE_MMPROJ = re.compile(r"^reserve_compute_meta:\s+\S+ compute buffer size =\s*([\d.]+) MiB", re.M)
FA_MMPROJ = re.compile(r"^warmup: flash attention is (enabled|disabled)", re.M)


@dataclass(frozen=True, slots=True)
class ProjectorRow:
    spec: str
    setting: str
    weights_mib: float  # clip.cpp's `model size`
    compute_mib: float  # its warmup's compute buffer
    flash_attn: bool
    weights_est: float  # MiB
    compute_est: float | None
    image_tokens: int | None

    @property
    def weights_err(self) -> float:
        return (self.weights_est - self.weights_mib) / self.weights_mib

    @property
    def compute_err(self) -> float | None:
        return None if self.compute_est is None else (self.compute_est - self.compute_mib) / self.compute_mib


def projector_row(spec: str, setting: str, text: str, facts: Facts) -> ProjectorRow:
    from doctor.derive.mmproj import projector

    size, compute, fa = MODEL_SIZE_MMPROJ.search(text), COMPUTE_MMPROJ.findall(text), FA_MMPROJ.search(text)
    if not size or not compute or not fa:
        raise ValueError("clip.cpp's size lines missing")
    flash = fa.group(1) == "enabled"
    proj = projector(facts, flash)
    if proj is None:
        raise ValueError("llm-doctor did not read a projector")
    return ProjectorRow(spec, setting, float(size.group(1)), float(compute[-1]), flash, proj.weights / MIB,
                        None if proj.compute is None else proj.compute / MIB, proj.image_tokens)


def projector_rows(folder: Path, gguf_dir: Path) -> list[ProjectorRow]:
    from make_arch_gguf import build, load_arch_spec

    from doctor.sources.probes.gguf_mmproj import collect_mmproj

    index = json.loads((folder / "index.json").read_text()).get("mmproj", {})
    facts: dict[str, Facts] = {}
    rows = []
    for key, run in sorted(index.get("runs", {}).items()):
        if key in index.get("failed", {}):
            continue
        spec = run["spec"]
        if spec not in facts:
            facts[spec] = collect_mmproj(str(build(load_arch_spec(spec), gguf_dir / f"{spec}.gguf")))
        text = (folder / "mmproj" / f"{key}.log").read_text(encoding="utf-8")
        rows.append(projector_row(spec, run["setting"], text, facts[spec]))
    return rows


def projector_table(rows: list[ProjectorRow]) -> str:
    if not rows:
        return ""
    out = ["", "## Vision projectors (mmproj): tools/mtmd/clip.cpp's own figures for one image", "",
           "| projector | setting | weights MiB llama.cpp / est. (err) | compute MiB llama.cpp / est. (err) |"
           " image tokens (est.) |", "|---|---|---|---|---|"]
    for r in rows:
        c = "n/a" if r.compute_est is None else f"{r.compute_est:.2f}"
        out.append(f"| {r.spec} | {r.setting} (flash attention {'on' if r.flash_attn else 'off'}) |"
                   f" {r.weights_mib:.2f} / {r.weights_est:.2f} ({_pct(r.weights_err)}) |"
                   f" {r.compute_mib:.2f} / {c} ({_pct(r.compute_err)}) | {r.image_tokens or 'n/a'} |")
    ok = sum(r.compute_err is not None and abs(r.compute_err) <= 0.05 for r in rows)
    worst = max(abs(r.weights_err) for r in rows)
    out += ["", f"Projector weights worst error: {worst * 100:.2f}%. Compute within 5%: {ok}/{len(rows)}. "
                "Charged beside the text model in the budget (on the GPU when layers are offloaded)."]
    return "\n".join(out) + "\n"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.2f}%"


def _yn(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "no"


def _total(value: float | None, err: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ({_pct(err)})"


def _fit_cell(r: Row) -> str:
    if r.fit.total_mib is None:
        return r.fit.why
    return f"{r.fit.total_mib} ({_pct(r.total_err(r.fit.total_mib))})"


def table(rows: list[Row], budget: int, how: str, version: str, peer_note: str, fit_note: str = "") -> str:
    out = [f"# Memory estimate vs llama.cpp, per architecture (llama-cpp-python {version}, CPU backend, {how})", "",
           f"Budget for the fit columns: {budget / (1 << 30):.0f} GiB (weights + KV/state + compute). "
           f"Peers: llama-fit-params {fit_note}; hf-mem: {peer_note}", "",
           "| model | setting | KV+state MiB llama.cpp / est. / hf-mem (err) |"
           " weights GiB llama.cpp / est. (err) / hf-mem |"
           " compute MiB llama.cpp / est. (err) |"
           " total MiB llama.cpp / est. (err) / llama-fit-params (err) / hf-mem (err) |"
           " fits: llama.cpp / est. / fit-params / hf-mem | fit-params ms |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fit_ref, fit_est = r.total(budget)
        kv = "n/a" if r.kv_est is None else f"{r.kv_est:.2f}"
        mark = "=" if r.kv_exact else "≠"
        w = "n/a" if r.weights_est is None else f"{r.weights_est / (1 << 30):.3f}"
        c = "n/a" if r.compute_est is None else f"{r.compute_est:.1f}"
        pkv = (f"{r.peer_kv / MIB:.2f} ({_pct(r.peer_kv_err)})" if r.peer_kv is not None
               else f"fails: {r.peer_error}" if r.peer_error else "-")
        pw = "-" if r.peer_weights is None else f"{r.peer_weights / (1 << 30):.3f}"
        ms = "-" if r.fit.seconds is None else f"{r.fit.seconds * 1000:.0f}"
        out.append(f"| {r.spec} | {r.setting} | {r.ref.kv_mib:.2f} / {kv} {mark} / {pkv} |"
                   f" {r.ref.weights_bytes / (1 << 30):.3f} / {w} ({_pct(r.weights_err)}) / {pw} |"
                   f" {r.ref.compute_mib:.1f} / {c} ({_pct(r.compute_err)}) |"
                   f" {r.ref_total_mib:.0f} / {_total(r.est_total_mib, r.total_err(r.est_total_mib))} /"
                   f" {_fit_cell(r)} / {_total(r.peer_total_mib, r.total_err(r.peer_total_mib))} |"
                   f" {_yn(fit_ref)} / {_yn(fit_est)} / {_yn(r.fit_fits(budget))} / {_yn(r.peer_fits(budget))} |"
                   f" {ms} |")
    kv_ok = sum(r.kv_exact for r in rows)
    w_errs = [abs(r.weights_err) for r in rows if r.weights_err is not None]
    c_errs = [abs(r.compute_err) for r in rows if r.compute_err is not None]
    c_in = sum(e <= 0.05 for e in c_errs)
    fit_est = sum(r.total(budget)[0] == r.total(budget)[1] for r in rows)
    fit_peer = sum(r.total(budget)[0] == r.peer_fits(budget) for r in rows)
    peer_kv = sum(r.peer_kv_err is not None and abs(r.peer_kv_err) <= 0.005 for r in rows)
    est_errs = [abs(e) for r in rows if (e := r.total_err(r.est_total_mib)) is not None]
    out += ["", f"KV exact: {kv_ok}/{len(rows)}. Weights worst error: {max(w_errs, default=0) * 100:.2f}% "
                f"(target 1%). Compute within 5%: {c_in}/{len(rows)}, worst {max(c_errs, default=0) * 100:.1f}%. "
                f"Total within 1%: {sum(e <= 0.01 for e in est_errs)}/{len(rows)}, "
                f"worst {max(est_errs, default=0) * 100:.2f}%.",
            f"Fit verdict agrees with llama.cpp's: llm-doctor {fit_est}/{len(rows)}, hf-mem {fit_peer}/{len(rows)}. "
            f"hf-mem KV exact (within 0.5%): {peer_kv}/{len(rows)}.",
            fit_summary(rows, budget)]
    return "\n".join(out) + "\n"


def fit_summary(rows: list[Row], budget: int) -> str:
    """One line on llama-fit-params: how many rows it answered, its total error, verdicts and time."""
    ran = [r for r in rows if r.fit.total_mib is not None]
    whys: dict[str, int] = {}
    for r in rows:
        if r.fit.total_mib is None:
            whys[r.fit.why] = whys.get(r.fit.why, 0) + 1
    missing = "; ".join(f"{n} {why}" for why, n in sorted(whys.items()))
    if not ran:
        return f"llama-fit-params: no projection ({missing})."
    errs = [abs(r.total_err(r.fit.total_mib) or 0.0) for r in ran]
    agree = sum(r.total(budget)[0] == r.fit_fits(budget) for r in ran)
    times = [r.fit.seconds for r in ran if r.fit.seconds is not None]
    line = (f"llama-fit-params (its MiB figures rounded down): projected {len(ran)}/{len(rows)} rows; total within 1%: "
            f"{sum(e <= 0.01 for e in errs)}/{len(ran)}, within 5%: {sum(e <= 0.05 for e in errs)}/{len(ran)}, "
            f"worst {max(errs) * 100:.2f}%; fit verdict agrees with llama.cpp's: {agree}/{len(ran)}")
    if times:
        line += f"; median {statistics.median(times) * 1000:.0f} ms per call (wall, process start included)"
    return line + (f". Not projected: {missing}." if missing else ".")


def record_now(folder: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "fixtures" / "record_arch.py"), "--out", str(folder)], check=True,
                   timeout=1800)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recorded", action="store_true", help="read the logs recorded in fixtures/ (no llama.cpp run)")
    ap.add_argument("--budget-gib", type=float, default=8.0, help="memory budget for the fit columns")
    ap.add_argument("--peer-wheel", type=Path, help="an hf-mem wheel to import the peer from (pip download hf-mem)")
    args = ap.parse_args()
    from bench.common import fit_params_binary
    from bench.peer_hf_mem import available, peer_note

    peer_version = available(args.peer_wheel)
    budget = int(args.budget_gib * (1 << 30))
    fit_binary = None if args.recorded else fit_params_binary()
    fit_absent = FIT_NOT_RUN if args.recorded else FIT_NOT_BUILT
    fit_note = (f"({fit_absent})" if fit_binary is None else
                f"({fit_binary.parent.parent.name}/bin/llama-fit-params --fit-print on, same sparse GGUF and settings)")
    with tempfile.TemporaryDirectory(prefix="llm-doctor-arch-") as tmp:
        folder = ARCH_LOGS
        if not args.recorded:
            folder = Path(tmp) / "logs"
            record_now(folder)
        rows = rows_from(folder, Path(tmp), peer=peer_version is not None, fit_binary=fit_binary,
                         fit_absent=fit_absent)
        projectors = projector_rows(folder, Path(tmp))
        version = json.loads((folder / "index.json").read_text())["llama_cpp_python"]
    text = table(rows, budget, "recorded in fixtures/" if args.recorded else "run now, in this benchmark",
                 version, peer_note(peer_version), fit_note) + projector_table(projectors)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
