"""`llm-doctor models`: every model on this machine (Ollama, the Hugging Face and llama.cpp caches,
LM Studio) with the fit verdict for this machine and the largest context that still fits.

Room: commands. The models come from doctor/sources/models/resolve.py; each is read by its GGUF
header only (doctor/sources/probes/gguf_model.py, cached on disk), planned as `scan -m NAME` would
plan it (doctor/commands/scan.py make_plan, with an Ollama Modelfile's PARAMETERs), and budgeted by
the estimator (doctor/derive/: derive(facts)). Nothing is loaded and no engine runs. On a terminal the
list is a TUI; Enter scans the chosen model.
"""

from __future__ import annotations

import argparse
from typing import Any

from doctor.core.facts import Facts

HELP = "list the models on this machine (Ollama, Hugging Face, llama.cpp, LM Studio) and whether each fits here"
MACHINE_PROBES = {"cpu", "memory", "gpu"}  # the hardware: not the embedded engine's build (a model may run in Ollama)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help=HELP, description=HELP + ". The verdict is for the plan `scan -m NAME` "
                       "makes; Enter in the list (on a terminal) scans the model.")
    p.add_argument("folders", nargs="*", metavar="DIR",
                   help="list the GGUF files in these folders (and 4 folders down) instead of the model stores")
    p.add_argument("--format", choices=("text", "json"), default=None,
                   help="output format (default: the TUI list on a terminal when installed, else text)")
    p.add_argument("-v", "--verbose", action="store_true", help="each model's file, projector and why its verdict")
    p.add_argument("--ram", metavar="SIZE", help="what-if: plan for this much RAM (e.g. 16G) instead of this machine's")
    p.add_argument("--vram", metavar="SIZE[,SIZE]", help="what-if: plan for GPUs with this much free VRAM each")
    p.add_argument("--tui", action="store_true", default=None, help="force the interactive list")
    p.add_argument("--no-tui", dest="tui", action="store_false", help="never open the interactive list")
    p.set_defaults(run="doctor.commands.pick:run_models")  # the list, the scans it opens (pick.py)


def machine_facts(args: argparse.Namespace) -> Facts:
    from doctor.derive.whatif import Budgets, apply_budgets, parse_size, parse_sizes
    from doctor.sources.probes import registry
    from doctor.sources.probes.base import ProbeContext

    budgets = Budgets(parse_size(args.ram, "--ram") if args.ram else None,
                      tuple(parse_sizes(args.vram, "--vram")) if args.vram else None)
    probes = registry.select(False, MACHINE_PROBES, None)
    return apply_budgets(registry.collect(ProbeContext(), probes), budgets)


def machine_line(facts: Facts) -> str:
    from doctor.views.render.models import size_text

    ram = facts.value("host.ram.available")
    parts = [f"RAM {size_text(ram)} available" if isinstance(ram, int) else "RAM unknown"]
    count = facts.value("host.gpu.count")
    if isinstance(count, int) and count > 0:
        free = [facts.value(f"host.gpu[{i}].vram_free") for i in range(count)]
        parts.append(f"{count} GPU(s), " + ", ".join(size_text(f) if isinstance(f, int) else "?" for f in free)
                     + " free")
    else:
        parts.append("no GPU")
    return ", ".join(parts)


def plan_args() -> argparse.Namespace:
    """The options `scan` has when none is given (its own defaults, from the option table)."""
    from doctor.commands.options import add_options

    parser = argparse.ArgumentParser(add_help=False)
    add_options(parser, "scan")
    return parser.parse_args([])


def judge_model(found: Any, machine: Facts, base_args: argparse.Namespace) -> Any:
    """One row: the model's header facts + the scan's plan + the estimator's budget."""
    from doctor.commands.scan import make_plan
    from doctor.core import engines
    from doctor.derive import derive
    from doctor.sources.models.resolve import preset as store_preset
    from doctor.sources.probes.gguf_model import collect_model
    from doctor.views.render.models import ModelRow

    model = collect_model(found.path)
    row = {"name": found.name, "store": found.store, "path": found.path, "size": found.size, "mmproj": found.mmproj,
           "arch": model.value("model.arch"), "quant": model.value("model.file_type"),
           "n_ctx_train": model.value("model.n_ctx_train")}
    if model.value("model.corrupt") is True:
        return ModelRow(**row, verdict="unreadable", why=str(model.value("model.corrupt_reason", "")))
    preset = store_preset(found)
    header = {"n_ctx_train": row["n_ctx_train"]}
    gpu = isinstance(machine.value("host.gpu.count"), int) and machine.value("host.gpu.count") > 0

    def budget(n_gpu_layers: int | None) -> Facts:
        args = argparse.Namespace(**vars(base_args))
        if n_gpu_layers is not None:
            args.n_gpu_layers = n_gpu_layers
        plan = make_plan(args, engines.EMBEDDED, header, machine, preset)
        facts = Facts()
        facts.merge(machine)
        facts.merge(model)
        facts.merge(plan.facts())
        derive(facts)
        return facts

    first = budget(None)
    ctx = first.value("config.n_ctx_requested")
    total = first.value("derived.total_layers")
    verdict, chosen, why = _verdict(first, gpu, budget)
    max_ctx = chosen.value("derived.max_ctx_fit")
    return ModelRow(**row, verdict=verdict, plan_ctx=ctx if isinstance(ctx, int) else None,
                    gpu_layers=chosen.value("derived.gpu_layers") if verdict == "partly on GPU" else None,
                    total_layers=total if isinstance(total, int) else None,
                    max_ctx=max_ctx if isinstance(max_ctx, int) and max_ctx > 0 else None, why=why)


def _verdict(first: Facts, gpu: bool, budget: Any) -> tuple[str, Facts, str]:
    """(verdict, the facts of the placement it is for, why)."""
    ctx = first.value("config.n_ctx_requested")
    if gpu and first.value("config.n_gpu_layers") != 0:
        if first.value("derived.fits_vram") is True and first.value("derived.fits_ram") is not False:
            layers, total = first.value("derived.gpu_layers"), first.value("derived.total_layers")
            if isinstance(layers, int) and isinstance(total, int) and layers < total:  # a Modelfile's num_gpu
                return "partly on GPU", first, f"{layers} of {total} layers on the GPU as planned, at n_ctx {ctx}"
            return "fits on GPU", first, f"every layer on the GPU at n_ctx {ctx}"
        best = first.value("derived.max_gpu_layers")
        if isinstance(best, int) and best > 0:
            part = budget(best)
            if part.value("derived.fits_ram") is True:
                return "partly on GPU", part, f"{best} layers on the GPU, the rest in RAM, at n_ctx {ctx}"
    cpu = budget(0) if first.value("config.n_gpu_layers") != 0 else first
    if cpu.value("derived.fits_ram") is True:
        return "CPU only", cpu, f"all in RAM at n_ctx {ctx}"
    if cpu.value("derived.fits_ram") is False:
        short = cpu.value("derived.host_short_bytes")
        return "does not fit", cpu, (f"{short / (1 << 20):.0f} MiB more RAM needed at n_ctx {ctx}"
                                     if isinstance(short, int) else f"too large at n_ctx {ctx}")
    return "unknown", cpu, "the estimator has no model of this architecture's memory"


def build_view(args: argparse.Namespace) -> Any:
    import os
    from pathlib import Path

    from doctor.core.errors import UsageError
    from doctor.sources.models.folder import STORE, models_in
    from doctor.sources.models.resolve import find_all, searched
    from doctor.views.render.models import ModelsView

    folders = list(getattr(args, "folders", None) or [])
    for folder in folders:
        if not Path(folder).expanduser().is_dir():
            raise UsageError(f"{folder}: no such folder" if not Path(folder).expanduser().exists()
                             else f"{folder}: not a folder (give folders of GGUF files; scan -m takes one file)")
    found = [m for folder in folders for m in models_in(Path(folder))] if folders else find_all()
    where = [(STORE, f, True) for f in folders] if folders else [(s.store, s.folder, s.exists)
                                                                 for s in searched(os.environ)]
    machine = machine_facts(args)
    base = plan_args()
    rows = [judge_model(f, machine, base) for f in found]
    return ModelsView(machine_line(machine), rows, where)


def scan_target(row: Any) -> str:
    """What `scan -m` gets for a listed model: its name where the name finds this very file (an Ollama
    name brings its Modelfile's settings), else the file."""
    from doctor.core.errors import UsageError
    from doctor.sources.models.resolve import resolve

    try:
        return str(row.name) if resolve(row.name).path == row.path else str(row.path)
    except UsageError:
        return str(row.path)
