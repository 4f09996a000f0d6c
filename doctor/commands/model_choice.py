"""Which model a scan checks and with which given settings: -m (a path or a name the user knows),
the default model, or the model a running server has loaded (--url), and the settings that come with
it (its store's: an Ollama Modelfile's PARAMETERs; the server's own) as a preset the plan takes where no option
says otherwise.

Room: commands (brings sources/models and sources/live/metrics/server_plan together for scan).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

from doctor.core import engines
from doctor.core.errors import UsageError
from doctor.core.facts import Facts


@dataclass
class ModelChoice:
    path: str
    mmproj: str | None = None
    engine: str | None = None  # the server's engine (--url), when --engine does not name one
    preset: dict[str, tuple[Any, str]] = field(default_factory=dict)  # option dest -> (value, why)
    facts: Facts = field(default_factory=Facts)  # what the server reports
    notes: list[str] = field(default_factory=list)


def choose_model(args: argparse.Namespace) -> ModelChoice:
    from doctor.sources.models.default import default_model_path
    from doctor.sources.models.resolve import preset, resolve

    if getattr(args, "url", None):
        return _from_server(args)
    if args.model is None:
        return ModelChoice(str(default_model_path()))
    found = resolve(args.model)
    notes = [f"{args.model}: {found.store} model {found.name}, file {found.path}"] if found.store != "file" else []
    return ModelChoice(found.path, found.mmproj, preset=preset(found), notes=notes)


def _from_server(args: argparse.Namespace) -> ModelChoice:
    from doctor.sources.live.metrics.server_plan import read_server
    from doctor.sources.models.resolve import resolve

    server = read_server(args.url)
    engine = server.engine if server.engine in engines.names() else server.stands_in
    notes = [f"the plan is what {server.url} runs ({server.engine}): {server.model}", *server.notes]
    if args.model is not None:
        path, mmproj = resolve(args.model).path, None
    elif server.model_path and os.path.isfile(server.model_path):
        path, mmproj = server.model_path, None
    else:
        try:
            found = resolve(server.model)
        except UsageError:
            raise UsageError(f"--url {args.url}: the server runs {server.model!r}, which is not a GGUF file "
                             "or a model name found here; pass -m with its GGUF file") from None
        path, mmproj = found.path, found.mmproj
    return ModelChoice(path, mmproj, engine, dict(server.settings), server.facts, notes)


def claim_vs_machine(facts: Facts) -> str | None:
    """What `ollama ps` claims in VRAM against this plan's estimate and what the GPUs show in use."""
    claimed, size = facts.value("server.ollama.ps_vram_bytes"), facts.value("server.ollama.ps_size_bytes")
    if not isinstance(claimed, int) or not isinstance(size, int):
        return None
    gib = 1 << 30
    text = f"`ollama ps` claims {claimed / gib:.2f} of {size / gib:.2f} GiB in VRAM"
    need = facts.value("derived.gpu_need_bytes")
    if isinstance(need, int):
        text += f"; this plan's estimate puts {need / gib:.2f} GiB on the GPU"
    count = facts.value("host.gpu.count")
    used = [facts.value(f"host.gpu[{i}].vram_used") for i in range(count)] if isinstance(count, int) else []
    if used and all(isinstance(u, int) for u in used):
        total = sum(used)
        text += f"; the GPU(s) show {total / gib:.2f} GiB in use"
        if claimed > total:
            text += " - less than Ollama claims: it may not be on the GPU at all (check its log)"
    elif claimed:
        text += "; no GPU is seen here"
    return text
