"""The model's size from its Ollama name, when the paste gives nothing else.

An `ollama run --verbose` block (or geerlingguy's obench.sh) prints the speeds but no model size; the
command above it names the model (`ollama run --verbose llama3.2:3b`, `... using model: gemma3:27b`).
Ollama's names carry the parameter count in the tag (`:3b`, `:27b`, `:1.1b`, `:14b-instruct-q8_0`)
and, where the tag names none, the library's default quantisation, Q4_K_M (ollama.com/library: a
model's `latest` and size tags point at its `...-q4_K_M` build). The weights are then parameters x
the type's bits per weight (llama.cpp's quantize table: Q4_K_M 4.85, Q4_0 4.55, Q8_0 8.5, ...),
set as estimates whose Source says so; a file's or a log's own size always wins. Only names of
Ollama's `model:tag` form are read.

Derive floor, pure. The strings are written here.
"""

from __future__ import annotations

import re

from doctor.core.facts import Facts
from doctor.derive.source import step_src

TAG = re.compile(r"^[\w.-]+(?:/[\w.-]+)*:(?P<tag>[\w.-]+)$")
PARAMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)([bm])(?![a-z])", re.IGNORECASE)
QUANT = re.compile(r"(?:^|-)(q\d_k_[sml]|q\d_k|q\d_[01]|iq\d_\w+|fp16|f16|bf16|q8_0)(?:$|-)", re.IGNORECASE)
BITS = {"q2_k": 3.35, "q3_k_s": 3.5, "q3_k_m": 3.91, "q3_k_l": 4.27, "q4_0": 4.55, "q4_1": 5.0, "q4_k_s": 4.58,
        "q4_k_m": 4.85, "q5_0": 5.54, "q5_1": 6.0, "q5_k_s": 5.54, "q5_k_m": 5.69, "q6_k": 6.56, "q8_0": 8.5,
        "fp16": 16.0, "f16": 16.0, "bf16": 16.0}
DEFAULT_QUANT = "q4_k_m"


def guess(name: str) -> tuple[int, int, str] | None:
    """(parameters, weight bytes, the quantisation taken) from an Ollama `model:tag`, or None."""
    m = TAG.match(name.strip())
    if not m:
        return None
    tag = m.group("tag").lower()
    size = PARAMS.search(tag) or PARAMS.search(name.split(":")[0])
    if not size:
        return None
    params = float(size.group(1)) * (1e9 if size.group(2).lower() == "b" else 1e6)
    q = QUANT.search(tag)
    quant = q.group(1).lower() if q else DEFAULT_QUANT
    bits = BITS.get(quant)
    if bits is None or params <= 0:
        return None
    return int(params), int(params * bits / 8), quant


def derive_model_guess(facts: Facts) -> None:
    """model.n_params and model.weights_bytes from an Ollama name, where nothing gave them."""
    name = facts.value("model.name")
    if not isinstance(name, str) or not (facts.has("run.decode_tps") or facts.has("run.prefill_tps")):
        return
    if facts.has("model.weights_bytes") or facts.has("model.file_bytes") or facts.has("model.n_params"):
        return
    found = guess(name)
    if found is None:
        return
    params, weights, quant = found
    why = "Ollama's default tag" if quant == DEFAULT_QUANT and quant not in name.lower() else "the tag"
    src = step_src("model", f"from the model's name {name}: {params / 1e9:g} B parameters at {quant.upper()} ({why}), "
                            f"{BITS[quant]:g} bits a weight - an estimate: the file's size would settle it")
    facts.set("model.n_params", params, src)
    facts.set("model.weights_bytes", weights, src)
