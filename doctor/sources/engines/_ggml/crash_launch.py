"""Crash causes that end a run outside the engine's own code: the GPU's watchdog stops its work, a front-end's
estimate of the model is not a number. Rows of the crash table (crashes.py). Pure data. (A llamafile the system
has no interpreter for is crash_setup.py's.)

Strings: Apple's IOGPUFamily command-buffer
errors as ggml-metal prints a failed command buffer's NSError ("ggml_metal_graph_compute: command buffer %d
failed with status %lu", then "error: %s": kIOGPUCommandBufferCallbackErrorImpactingInteractivity is the
watchdog that stops GPU work which holds up the display); LM Studio's load guardrail ("... this model requires
approximately %s of memory ...", the app's own text, closed source; lmstudio-ai/lmstudio-bug-tracker#1038 for
the NaN estimate, fixed in 0.3.28).
"""

from __future__ import annotations

from doctor.sources.engines._ggml.cause import Cause, Fix

METAL_WATCHDOG = Cause(
    "metal_gpu_watchdog", "macOS stopped a Metal command buffer that ran too long (the GPU watchdog)",
    "macOS aborts GPU work that holds up the display for too long "
    "(kIOGPUCommandBufferCallbackErrorImpactingInteractivity); "
    "ggml-metal then reports the command buffer failed (status 5) and the decode fails. The work per command buffer "
    "grows with the context in use and the batch: a context sized to the model's full limit makes every step "
    "long. Not an out-of-memory.",
    Fix(
        "Make each GPU step shorter: a context sized to what the conversation needs rather than the model's "
        "maximum, a smaller physical batch (n_ubatch), flash attention; update the engine.",
        change=(("n_ctx", "<smaller>"), ("n_ubatch", 256)),
        checked="llama.cpp ggml/src/ggml-metal (ggml_metal_graph_compute: 'command buffer %d failed with status "
        "%lu', 'error: %s'); Apple IOGPUFamily command-buffer errors; aaif-goose/goose#9669 (the corpus's case "
        "1025: the context sized to the turn fixed it)",
    ),
    ("error: Impacting Interactivity (00000009:kIOGPUCommandBufferCallbackErrorImpactingInteractivity)",),
)

ESTIMATE_NAN = Cause(
    "memory_estimate_nan", "The app's memory estimate for this model is not a number",
    "The front-end estimates the memory a model needs before it loads it, and refuses the load when the estimate "
    "is too large for the machine; for an architecture its estimator does not model (a recurrent model such as "
    "RWKV) the estimate came out NaN, and the load was refused whatever the machine has.",
    Fix(
        "Update the app (LM Studio 0.3.28 estimates RWKV models); until then load the model with the guardrail off "
        "or with another front-end.",
        checked="LM Studio's load guardrail text ('this model requires approximately %s of memory'); "
        "lmstudio-ai/lmstudio-bug-tracker#1038 (the corpus's case 1012, fixed in 0.3.28)",
    ),
    ("Error: Model loading was stopped due to insufficient system resources. Under the current settings, this model "
     "requires approximately NaN undefined of memory",),
)

LAUNCH_CAUSES: tuple[Cause, ...] = (METAL_WATCHDOG, ESTIMATE_NAN)
