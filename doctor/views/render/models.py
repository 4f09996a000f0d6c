"""The models list (`llm-doctor models`): one row per model found on this machine, with the fit verdict
the command computed. Text and JSON here; the TUI list is doctor/views/tui/models_screen.py.

Room: views (imports core only). The rows are made by doctor/commands/models.py; the strings here
are the view's own.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from doctor.core.sanitize import inert

VERDICTS = ("fits on GPU", "partly on GPU", "CPU only", "does not fit", "unknown", "unreadable")


@dataclass(frozen=True)
class ModelRow:
    name: str  # the name `scan -m` takes
    store: str
    path: str
    size: int
    arch: str | None = None
    quant: str | None = None
    n_ctx_train: int | None = None
    verdict: str = "unknown"
    plan_ctx: int | None = None  # the context the verdict is for
    gpu_layers: int | None = None  # layers that fit on the GPU (partly on GPU), else None
    total_layers: int | None = None
    max_ctx: int | None = None  # the largest context that fits where it runs
    mmproj: str | None = None
    why: str = ""  # one line: what decided the verdict, or why it is unknown


@dataclass
class ModelsView:
    machine: str  # one line: RAM, GPUs
    rows: list[ModelRow] = field(default_factory=list)
    searched: list[tuple[str, str, bool]] = field(default_factory=list)  # (store, folder, exists)

    def to_json(self) -> dict[str, Any]:
        return {"machine": self.machine, "models": [asdict(r) for r in self.rows],
                "searched": [{"store": s, "folder": f, "exists": e} for s, f, e in self.searched]}


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.2f} {unit}" if unit == "GiB" else f"{n / (1 << shift):.0f} {unit}"
    return f"{n} B"


def ctx_text(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def verdict_text(row: ModelRow) -> str:
    if row.verdict == "partly on GPU" and row.gpu_layers is not None and row.total_layers:
        return f"partly on GPU ({row.gpu_layers}/{row.total_layers} layers)"
    return row.verdict


def columns(row: ModelRow) -> list[str]:
    return [inert(row.name, 120), row.store, size_text(row.size), inert(row.arch or "?", 24),
            inert(row.quant or "?", 16), ctx_text(row.n_ctx_train), verdict_text(row), ctx_text(row.max_ctx)]


HEADER = ["model", "store", "size", "arch", "quant", "train ctx", "fit here", "max ctx"]


def table_lines(rows: list[ModelRow]) -> list[str]:
    cells = [HEADER] + [columns(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    return ["  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells]


def render_models_text(view: ModelsView, verbose: bool = False) -> str:
    out = [f"llm-doctor models · {inert(view.machine, 200)}", ""]
    if not view.rows:
        out.append("No models found. Looked in:")
        out += [f"  {store:<12} {inert(folder, 200)}{'' if there else '  (not there)'}"
                for store, folder, there in view.searched]
        return "\n".join(out) + "\n"
    out += table_lines(view.rows)
    out.append("")
    if verbose:
        for row in view.rows:
            out.append(f"{inert(row.name, 120)}: {inert(row.path, 300)}")
            if row.mmproj:
                out.append(f"  projector: {inert(row.mmproj, 300)}")
            if row.why:
                out.append(f"  {inert(row.why, 300)}")
        out.append("")
    out.append("fit here: the plan `scan -m NAME` makes (the training context up to 4096, or the Modelfile's "
               "num_ctx; every layer on the GPU where there is one); max ctx: the largest context that fits there.")
    out.append("Scan one: llm-doctor scan -m NAME" + ("" if verbose else " · files and reasons: -v"))
    return "\n".join(out) + "\n"


def render_models_json(view: ModelsView) -> str:
    return json.dumps(view.to_json(), indent=2) + "\n"
