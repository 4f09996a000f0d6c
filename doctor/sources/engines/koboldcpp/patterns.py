"""KoboldCpp's own lines, as its launcher and adapter print them (LostRuins/koboldcpp, read at v1.35,
v1.50.1, v1.65, v1.76): koboldcpp.py `print(f"***\\nWelcome to KoboldCpp - Version {KcppVersion}")` (all),
`print("Initializing dynamic library: " + libname)` (libname koboldcpp_default / _cublas / _vulkan /
_clblast / _failsafe ... .so|.dll|.dylib, all), `print(f"Starting Kobold API on port {args.port} at
{epurl}/api/")` (v1.65..), and gpttype_adapter.cpp's
`printf("\\nCtxLimit:%d/%d, Amt:%d/%d, ...")` after each generation (v1.76; its numbers are the catalogue's:
doctor/sources/catalogue/messages/koboldcpp.yaml). Their words are only read for identity: the llama.cpp
lines of the same log are the llama.cpp parser's. A request's progress, gpttype_adapter.cpp
`printf("\\rProcessing Prompt%s (%d / %zu tokens)", (blasmode ? " [BLAS]" : ""), ...)` and
`printf("\\rGenerating (%d / %d tokens)", ...)` (v1.35 to the latest), marks the run's timeline
(doctor/sources/logs/timeline.py: a failure in a request is the runtime's) and is its identity too.

Pure.
"""

from __future__ import annotations

from doctor.sources.logs.base import LineKind, LineKinds
from doctor.sources.logs.matcher import gated

WELCOME = gated(r"Welcome to KoboldCpp - Version \S+")
LIBRARY = gated(r"Initializing dynamic library: koboldcpp_\w+\.(?:so|dll|dylib)")
API = gated(r"Starting Kobold API on port \d+")
CTX_LIMIT = gated(r"CtxLimit:\s*\d+/\d+, Amt:\s*\d+/\d+")
PROCESSING = gated(r"Processing Prompt(?: \[BLAS\])? \(\d+ / \d+ tokens\)")
GENERATING = gated(r"Generating \(\d+ / \d+ tokens\)")

IDENTITY_KIND = LineKind("identity", (WELCOME, LIBRARY, API, CTX_LIMIT),
                         (r"Welcome to KoboldCpp - Version", r"Initializing dynamic library: koboldcpp_",
                          r"Starting Kobold API on port", r"CtxLimit:\s*\d+/\d+, Amt:"))

PROGRESS_KIND = LineKind("progress", (PROCESSING, GENERATING),
                         (r"Processing Prompt(?: \[BLAS\])? \(\d+ / \d+ tokens\)", r"Generating \(\d+ / \d+ tokens\)"))

KINDS = LineKinds(IDENTITY_KIND, PROGRESS_KIND)
