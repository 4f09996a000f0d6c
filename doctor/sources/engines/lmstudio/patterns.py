"""LM Studio's lines: what `lms load` prints (lmstudio-ai/lms src/subcommands/load.ts, 2025-2026:
`Context Length: N`, `GPU Offload: P%`, `Estimated GPU Memory: S`, `Estimate: This model will fail to load
based on your resource guardrails settings.`) and its model and runtime paths in llama.cpp's lines
(~/.lmstudio/models and ~/.lmstudio/extensions/backends since 0.3, ~/.cache/lm-studio/models before).

Pure.
"""

from __future__ import annotations

from doctor.sources.logs.base import LineKind, LineKinds
from doctor.sources.logs.matcher import gated

PATH = gated(r"[/\\]\.lmstudio[/\\](?:models|extensions|\.internal)[/\\]|[/\\]\.cache[/\\]lm-studio[/\\]"
             r"|LM Studio\.app[/\\]|[/\\]Programs[/\\]LM Studio[/\\]")
CONTEXT_LENGTH = gated(r"^\s*Context Length: ([\d,]+)\s*$")
GPU_OFFLOAD = gated(r"^\s*GPU Offload: ([\d.]+)%\s*$")
GUARDRAIL = gated(r"This model will fail to load based on your resource guardrails settings")

PATH_KIND = LineKind("path", (PATH,),
                     (r"\.lmstudio[/\\]|\.cache[/\\]lm-studio|LM Studio\.app|Programs[/\\]LM Studio",))
LOAD_KIND = LineKind("load", (CONTEXT_LENGTH, GPU_OFFLOAD, GUARDRAIL),
                     (r"^\s*Context Length: [\d,]+", r"^\s*GPU Offload: [\d.]+%", r"resource guardrails settings"))

KINDS = LineKinds(PATH_KIND, LOAD_KIND)
