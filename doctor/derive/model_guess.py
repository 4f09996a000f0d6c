"""The model's size from its name (an Ollama tag, a GGUF file, a name in a post's prose), when the paste gives
nothing else.

An `ollama run --verbose` block (or geerlingguy's obench.sh) prints the speeds but no model size; the
command above it names the model (`ollama run --verbose llama3.2:3b`, `... using model: gemma3:27b`).
Ollama's names carry the parameter count in the tag (`:3b`, `:27b`, `:1.1b`, `:14b-instruct-q8_0`)
and, where the tag names none, the library's default quantisation, Q4_K_M (ollama.com/library: a
model's `latest` and size tags point at its `...-q4_K_M` build). The weights are then parameters x
the type's bits per weight (llama.cpp's quantize table: Q4_K_M 4.85, Q4_0 4.55, Q8_0 8.5, ...),
set as estimates whose Source says so; a file's or a log's own size always wins. Other names are
read where they carry both the parameter count and the quantisation: a GGUF file's name
(`Qwen2.5-14B-Instruct-Q4_K_M.gguf`, `llama-2-7b-chat.Q4_K_M.gguf`) or a name as a post writes it
(`Llama 3.1 8B Q4_K_M`, `llama3 8b Q6`: a bare `Q6` / `Q4` is read as the K-quant people mean by it,
Q6_K / Q4_K_M); without a quantisation only Ollama's names have a default.

Derive floor, pure. The strings are written here.
"""

from __future__ import annotations

import re

from doctor.core.facts import Facts
from doctor.derive.source import step_src

TAG = re.compile(r"^[\w.-]+(?:/[\w.-]+)*:(?P<tag>[\w.-]+)$")
MAX_PARAMS = 1e15  # parameters: far above any model, far below a float's infinity
PARAMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)([bm])(?![a-z])", re.IGNORECASE)
QUANT = re.compile(r"(?:^|[-._ ])(q\d_k_[sml]|q\d_k_xl|q\d_k|q\d_[01]|iq\d_[a-z]+|fp16|f16|bf16|q8_0|q\d)"
                   r"(?:$|[-._ ])", re.IGNORECASE)
# llama.cpp's quantize table (tools/quantize/quantize.cpp: bits per weight of each type on a 7B model)
BITS = {"q2_k": 3.35, "q3_k_s": 3.5, "q3_k_m": 3.91, "q3_k_l": 4.27, "q4_0": 4.55, "q4_1": 5.0, "q4_k_s": 4.58,
        "q4_k_m": 4.85, "q5_0": 5.54, "q5_1": 6.0, "q5_k_s": 5.54, "q5_k_m": 5.69, "q6_k": 6.56, "q8_0": 8.5,
        "iq4_xs": 4.25, "iq4_nl": 4.5, "iq3_xxs": 3.06, "iq3_s": 3.44, "iq3_m": 3.66, "iq2_xxs": 2.06,
        "iq2_xs": 2.31, "iq2_s": 2.5, "iq2_m": 2.7, "iq1_s": 1.56, "fp16": 16.0, "f16": 16.0, "bf16": 16.0}
# what a short or a dynamic name is taken for ("Q6" is Q6_K, unsloth's "Q4_K_XL" about Q4_K_M)
ALIASES = {"q2": "q2_k", "q3": "q3_k_m", "q4": "q4_k_m", "q5": "q5_k_m", "q6": "q6_k", "q8": "q8_0", "q4_k": "q4_k_m",
           "q5_k": "q5_k_m", "q3_k": "q3_k_m", "q2_k_xl": "q2_k", "q3_k_xl": "q3_k_m", "q4_k_xl": "q4_k_m",
           "q5_k_xl": "q5_k_m", "q6_k_xl": "q6_k", "q8_k_xl": "q8_0"}
DEFAULT_QUANT = "q4_k_m"


def _quant(text: str) -> str | None:
    q = QUANT.search(text)
    if q is None:
        return None
    quant = q.group(1).lower()
    return ALIASES.get(quant, quant)


def guess(name: str) -> tuple[int, int, str] | None:
    """(parameters, weight bytes, the quantisation taken) from an Ollama `model:tag`, a GGUF file's name or
    a name with its size and quantisation, or None."""
    name = name.strip()
    m = TAG.match(name)
    if m:
        tag = m.group("tag").lower()
        size = PARAMS.search(tag) or PARAMS.search(name.split(":")[0])
        quant = _quant(tag) or DEFAULT_QUANT
    else:
        stem = name.rsplit("/", 1)[-1]
        stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
        size = PARAMS.search(stem.replace("_", "-"))
        quant = _quant(stem) or ""
    if not size:
        return None
    params = float(size.group(1)) * (1e9 if size.group(2).lower() == "b" else 1e6)
    bits = BITS.get(quant)
    if bits is None or not 0 < params < MAX_PARAMS:  # a number no model has (a fuzzed or garbled name)
        return None
    return int(params), int(params * bits / 8), quant


def derive_model_guess(facts: Facts) -> None:
    """model.n_params and model.weights_bytes from the model's name, where nothing gave them."""
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
