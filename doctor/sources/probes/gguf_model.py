"""The GGUF probe: what the model file says about itself, read by our bounded header walk.

Each file (and each shard of a split model, `name-00001-of-00003.gguf`) is walked by
doctor/sources/probes/gguf_header.py, the reader of record: a file that fails is `model.corrupt` with the reason.
The walk gives the metadata (architecture, layers, heads, KV heads - possibly per layer -, head
dims, training context, sliding window, experts) and the tensor table, whose byte sizes are summed
per repeating layer, for the input (token embedding) and for the output layer: llama.cpp places
weights by layer, so the memory budget needs them per layer, not the file-type label. The
tokenizer's long arrays are stepped over and counted (`tokenizer.ggml.tokens#count`), never
materialised; tests check all of it against `gguf.GGUFReader`.

What was read is remembered: in the process, and on disk under the user's cache folder
(`$XDG_CACHE_HOME/llm-doctor/gguf`, else `~/.cache/llm-doctor/gguf`) as plain JSON, keyed by each
shard's path, size, mtime, inode and device, and the reader's own source. An entry that does not
match its key or does not parse as a ModelFile is ignored and rewritten; only files whose metadata
arrays hold CACHE_MIN_ITEMS entries or more are kept (the others read fast), and the folder keeps
the CACHE_KEEP newest entries. `LLM_DOCTOR_NO_CACHE=1` turns the disk cache off. The walk reads
the default model in tens of milliseconds, so the cache saves little; it is not what makes a
first scan fast.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from doctor.core.facts import Facts
from doctor.core.json_cache import store_text
from doctor.core.vocab import MAX_LAYERS
from doctor.derive import repack as estimate_repack
from doctor.derive.repack import Weight, weights_table
from doctor.sources.probes import gguf_header
from doctor.sources.probes.base import Probe, ProbeContext, Reporter
from doctor.sources.probes.gguf_header import GgufCorrupt, GgufHeader, check_gguf

SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")
LAYER_NAME = re.compile(r"^blk\.(\d+)\.")
OUTPUT_TENSORS = ("output.weight", "output.bias", "output_norm.weight", "output_norm.bias")
EXPERT_TENSOR = re.compile(r"^blk\.\d+\.ffn_(?:gate|up|down|gate_up)_exps\.")

# Sliding-window layer patterns llama.cpp applies when the file has no pattern key
# (src/models/<arch>.cpp: load_swa_pattern(ml, n, dense_first)).
SWA_DEFAULT_PATTERN: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False), "gemma3": (6, False), "cohere2": (4, False), "olmo2": (4, False),
    "gpt-oss": (2, False), "exaone4": (4, False),
}


@dataclass(slots=True)
class ModelFile:
    """The numbers the estimator needs, per file set (all shards)."""

    path: str
    shards: list[str]
    file_bytes: int
    metadata: dict[str, Any] = field(default_factory=dict)
    layer_bytes: list[int] = field(default_factory=list)
    input_bytes: int = 0
    output_bytes: int = 0
    output_tied: bool = False
    expert_bytes: int = 0
    tensor_bytes: int = 0
    n_params: int = 0
    matmul: list[list[Any]] = field(default_factory=list)  # matrix weights (doctor/estimate_repack.Weight rows)


def shard_paths(path: str) -> list[str]:
    """All files of a split model (in order), or just the file. Missing shards raise GgufCorrupt."""
    p = Path(path)
    m = SPLIT_NAME.match(p.name)
    if not m:
        return [str(p)]
    count = int(m.group("count"))
    if count < 1 or count > 4096:
        raise GgufCorrupt(f"split name says {count} files")
    paths = [p.with_name(f"{m.group('stem')}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [q.name for q in paths if not q.is_file()]
    if missing:
        raise GgufCorrupt(f"split model: {len(missing)} of {count} files missing ({', '.join(missing[:3])})")
    return [str(q) for q in paths]


def read_model(path: str, cache_dir: str | None = None) -> ModelFile:
    """Walk every shard's header (doctor/sources/probes/gguf_header.py). Raises GgufCorrupt.

    Remembered per (shards, sizes, mtimes, inodes): in the process, and on disk (see the module
    docstring); `cache_dir` overrides the disk cache folder."""
    shards = shard_paths(path)
    try:
        stamp = tuple(_stamp(s) for s in shards)
    except OSError as exc:
        raise GgufCorrupt(f"cannot read: {exc.strerror or exc}") from None
    return _read_remembered(str(path), stamp, cache_dir)


def _stamp(shard: str) -> tuple[str, int, int, int, int]:
    st = os.stat(shard)
    return shard, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev


@functools.lru_cache(maxsize=4)
def _read_remembered(path: str, stamp: tuple[tuple[str, int, int, int, int], ...], cache_dir: str | None) -> ModelFile:
    folder = cache_folder(cache_dir)
    key = _cache_key(path, stamp) if folder is not None else None
    shards = [s for s, _, _, _, _ in stamp]
    if folder is not None and key is not None:
        cached = load_cached(folder, key)
        if cached is not None:
            cached.path, cached.shards = path, shards  # as asked this time (the key holds absolute paths)
            return cached
    model = _read(path, shards)
    if folder is not None and key is not None and array_items(model) >= CACHE_MIN_ITEMS:
        store_cached(folder, key, model)
    return model


def array_items(model: ModelFile) -> int:
    """Entries of the metadata arrays the reader skipped over (tokens, merges, ...): its cost."""
    return sum(v for k, v in model.metadata.items() if k.endswith("#count") and isinstance(v, int))


# -- the disk cache ---------------------------------------------------------------------------------
CACHE_VERSION = 2
CACHE_MIN_ITEMS = 4096  # a file with fewer array entries reads in well under a second: not kept
CACHE_KEEP = 32


def cache_folder(override: str | None = None) -> str | None:
    """Where read models are kept, or None when the disk cache is off."""
    if override is not None:
        return override
    if os.environ.get("LLM_DOCTOR_NO_CACHE", "").strip() not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llm-doctor", "gguf")


@functools.lru_cache(maxsize=1)
def _code_stamp() -> str:
    """The reader's source (this module, the header walk, and doctor/derive/repack.py, which lists
    the matrix weights): a change in how files are read invalidates entries."""
    digest = hashlib.sha256()
    for module in (__file__, gguf_header.__file__, estimate_repack.__file__):
        with contextlib.suppress(OSError):
            digest.update(Path(module).read_bytes())
    return f"{CACHE_VERSION}:{digest.hexdigest()[:16]}"


def _cache_key(path: str, stamp: tuple[tuple[str, int, int, int, int], ...]) -> dict[str, Any]:
    return {"code": _code_stamp(), "path": os.path.abspath(path),
            "shards": [[os.path.abspath(s), *rest] for s, *rest in stamp]}


def _entry_path(folder: str, key: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return os.path.join(folder, f"{digest}.json")


def load_cached(folder: str, key: dict[str, Any]) -> ModelFile | None:
    """The ModelFile stored under `key`, or None (absent, unreadable, for another key, malformed)."""
    try:
        with open(_entry_path(folder, key), encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, dict) or data.get("key") != json.loads(json.dumps(key)):
            return None
        return _model_from_json(data["model"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


def store_cached(folder: str, key: dict[str, Any], model: ModelFile) -> None:
    """Write the entry atomically; a cache that cannot be written is simply not used."""
    try:
        text = json.dumps({"key": key, "model": asdict(model)}, sort_keys=True)
        store_text(folder, _entry_path(folder, key), text, CACHE_KEEP)
    except (OSError, TypeError, ValueError):
        return


_INT_FIELDS = ("file_bytes", "input_bytes", "output_bytes", "expert_bytes", "tensor_bytes", "n_params")


def _model_from_json(data: Any) -> ModelFile:
    """A ModelFile from its stored form, checking every field's type (ValueError/TypeError if off)."""
    if not isinstance(data, dict):
        raise TypeError("entry is not an object")

    def is_int(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if not isinstance(data["path"], str) or not all(isinstance(x, str) for x in data["shards"]):
        raise TypeError("path")
    if not all(is_int(data[name]) and data[name] >= 0 for name in _INT_FIELDS):
        raise TypeError("sizes")
    if not all(is_int(x) and x >= 0 for x in data["layer_bytes"]) or len(data["layer_bytes"]) > MAX_LAYERS:
        raise TypeError("layer_bytes")
    if not isinstance(data["output_tied"], bool) or not isinstance(data["metadata"], dict):
        raise TypeError("metadata")
    def plain(value: Any, depth: int = 0) -> bool:  # what fld.contents() gives: scalars, (nested) lists
        if isinstance(value, list):
            return depth < 4 and all(plain(x, depth + 1) for x in value)
        return isinstance(value, str | int | float | bool)

    if not all(isinstance(k, str) and plain(v) for k, v in data["metadata"].items()):
        raise TypeError("metadata value")
    matmul = [Weight.from_row(row) for row in data["matmul"]]
    if not all(matmul):
        raise TypeError("matmul")
    return ModelFile(path=data["path"], shards=list(data["shards"]), metadata=dict(data["metadata"]),
                     layer_bytes=list(data["layer_bytes"]), output_tied=data["output_tied"],
                     matmul=[w.row() for w in matmul if w is not None], **{name: data[name] for name in _INT_FIELDS})


def header_metadata(head: GgufHeader) -> dict[str, Any]:
    """The metadata of one header as plain values: scalars, and arrays the walk kept; an array it
    stepped over (the tokenizer's tokens, scores, merges) as `<key>#count`."""
    metadata: dict[str, Any] = dict(head.scalars)
    for key, (_elem, count, values) in head.arrays.items():
        if values is None:
            metadata[key + "#count"] = count
        else:
            metadata[key] = values
    return metadata


def _read(path: str, shards: list[str]) -> ModelFile:
    headers = [check_gguf(s) for s in shards]
    model = ModelFile(path=str(path), shards=shards, file_bytes=sum(h.file_bytes for h in headers))
    model.metadata = header_metadata(headers[0])
    arch = model.metadata.get("general.architecture")
    n_layer_hint = model.metadata.get(f"{arch}.block_count")
    names = set()
    table: list[tuple[str, str, tuple[int, ...], int]] = []
    for head in headers:
        for tensor in head.tensors:
            name = tensor.name
            names.add(name)
            table.append((name, tensor.type_name, tensor.dims, tensor.n_bytes))
            n_bytes = tensor.n_bytes
            model.tensor_bytes += n_bytes
            model.n_params += tensor.n_elements
            m = LAYER_NAME.match(name)
            if m:
                layer = int(m.group(1))
                if layer >= len(model.layer_bytes):
                    if layer >= MAX_LAYERS:
                        raise GgufCorrupt(f"tensor {name!r} names layer {layer}; llama.cpp allows {MAX_LAYERS}")
                    model.layer_bytes.extend([0] * (layer + 1 - len(model.layer_bytes)))
                model.layer_bytes[layer] += n_bytes
                if EXPERT_TENSOR.match(name):
                    model.expert_bytes += n_bytes
            elif name in OUTPUT_TENSORS:
                model.output_bytes += n_bytes
            else:
                model.input_bytes += n_bytes
    if isinstance(n_layer_hint, int) and len(model.layer_bytes) < n_layer_hint <= MAX_LAYERS:
        model.layer_bytes.extend([0] * (n_layer_hint - len(model.layer_bytes)))
    if "output.weight" not in names and "token_embd.weight" in names:
        model.output_tied = True  # llama.cpp duplicates token_embd as the output on the output layer's device
    model.matmul = [w.row() for w in weights_table(table, len(model.layer_bytes), model.output_tied)]
    return model


# general.file_type -> label, as gguf.LlamaFileType names them without MOSTLY_ (tests check the
# table against the installed package; a newer value is looked up there)
FILE_TYPES = {
    0: "ALL_F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0",
}


def file_type_label(file_type: int) -> str:
    if file_type in FILE_TYPES:
        return FILE_TYPES[file_type]
    try:
        from gguf import LlamaFileType

        return LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except (ImportError, ValueError):
        return f"type {file_type}"


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _per_layer(value: Any, n_layer: int) -> list[int] | None:
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return [int(v) for v in value[:n_layer]] if len(value) >= n_layer else None
    if _int(value) is not None:
        return [int(value)] * n_layer
    return None


def model_facts(model: ModelFile, rep: Reporter) -> None:
    """Write the model.* facts for a read ModelFile."""
    md = model.metadata
    arch = str(md.get("general.architecture", "")) or None
    rep.set("model.path", model.path)
    rep.set("model.file_bytes", model.file_bytes, text=f"{len(model.shards)} file(s)")
    rep.set("model.split_count", len(model.shards))
    rep.set("model.weights_bytes", model.tensor_bytes, text="sum of per-tensor sizes")
    rep.set("model.n_params", model.n_params)
    rep.set("model.arch", arch, text="general.architecture")
    if isinstance(md.get("general.name"), str):
        rep.set("model.name", md["general.name"])
    file_type = _int(md.get("general.file_type"))
    if file_type is not None:
        label = file_type_label(file_type)
        rep.set("model.file_type", label, text="general.file_type (a label; sizes come from the tensors)")
    if arch is None:
        rep.unknown("model.n_layer", "general.architecture missing")
        return

    def key(name: str) -> Any:
        return md.get(f"{arch}.{name}")

    n_layer = _int(key("block_count"))
    if n_layer is None:
        rep.unknown("model.n_layer", f"{arch}.block_count missing")
        return
    if n_layer > MAX_LAYERS:  # a damaged or hostile header: per-layer lists would not fit in memory
        rep.unknown("model.n_layer", f"{arch}.block_count is {n_layer}; llama.cpp loads 1 to {MAX_LAYERS} layers")
        return
    rep.set("model.n_layer", n_layer, text=f"{arch}.block_count")
    n_embd = _int(key("embedding_length"))
    rep.set("model.n_embd", n_embd, text=f"{arch}.embedding_length")
    heads = _per_layer(key("attention.head_count"), n_layer)
    kv_heads = _per_layer(key("attention.head_count_kv"), n_layer) or heads  # llama.cpp: defaults to head_count
    if heads:
        rep.set("model.n_head", max(heads), text=f"{arch}.attention.head_count")
    else:
        rep.unknown("model.n_head", f"{arch}.attention.head_count missing")
    if kv_heads:
        rep.set("model.n_head_kv", max(kv_heads), text=f"{arch}.attention.head_count_kv")
        if len(set(kv_heads)) > 1:
            rep.set("model.n_head_kv_per_layer", kv_heads, text="per-layer KV heads")
    n_head0 = max(heads) if heads else None
    hd_k = _int(key("attention.key_length"))
    hd_v = _int(key("attention.value_length"))
    if hd_k is None and n_embd and n_head0:
        hd_k = n_embd // n_head0  # llama.cpp's default: n_embd / n_head
    if hd_v is None:
        hd_v = hd_k
    rep.set("model.head_dim_k", hd_k, text=f"{arch}.attention.key_length or n_embd / n_head")
    rep.set("model.head_dim_v", hd_v, text=f"{arch}.attention.value_length or key length")
    rep.set("model.n_ctx_train", _int(key("context_length")), text=f"{arch}.context_length")
    n_vocab = _int(key("vocab_size")) or _int(md.get("tokenizer.ggml.tokens#count"))
    rep.set("model.n_vocab", n_vocab, text="vocab_size or the tokenizer's token list")
    n_swa = _int(key("attention.sliding_window")) or 0
    rep.set("model.n_swa", n_swa, text=f"{arch}.attention.sliding_window")
    if n_swa > 0:
        mask = _swa_mask(key("attention.sliding_window_pattern"), arch, n_layer)
        if mask is None:
            rep.unknown("model.swa_per_layer", f"{arch}: which layers use the sliding window is not in the file")
        else:
            rep.set("model.swa_per_layer", [int(b) for b in mask], text="sliding_window_pattern")
            rep.set("model.swa_layers", sum(mask))
    else:
        rep.set("model.swa_layers", 0)
    rep.set("model.n_expert", _int(key("expert_count")) or 0, text=f"{arch}.expert_count")
    rep.set("model.n_expert_used", _int(key("expert_used_count")) or 0, text=f"{arch}.expert_used_count")
    from doctor.sources.probes.gguf_arch import arch_facts  # [arch hook] MLA, recurrent state, expert widths (issue 16)

    arch_facts(md, arch, rep)
    if model.expert_bytes:
        rep.set("model.expert_bytes", model.expert_bytes, text="ffn_*_exps tensors")
    if len(model.layer_bytes) == n_layer:
        rep.set("model.layer_bytes", model.layer_bytes, text="blk.N.* tensors per layer")
    else:
        rep.unknown("model.layer_bytes", f"tensors name {len(model.layer_bytes)} layers, metadata says {n_layer}")
    rep.set("model.input_bytes", model.input_bytes, text="token embedding and other non-layer tensors")
    rep.set("model.output_bytes", model.output_bytes, text="output and output_norm tensors")
    rep.set("model.nonrepeating_bytes", model.input_bytes + model.output_bytes)
    if model.matmul:
        rep.set("model.matmul_weights", model.matmul,
                text="matrix weights: [layer, op, type, ne, bytes, count] (llama.cpp may repack them)")
    rep.set("model.output_tied", model.output_tied,
            text="no output.weight: token_embd is reused (and duplicated on the GPU) as the output")


def _swa_mask(pattern: Any, arch: str, n_layer: int) -> list[bool] | None:
    """Which layers use the sliding window, as llama.cpp's llama_hparams::set_swa_pattern decides."""
    if isinstance(pattern, list) and len(pattern) >= n_layer:
        return [bool(v) for v in pattern[:n_layer]]
    dense_first = False
    if _int(pattern) is not None:
        n = int(pattern)
    elif arch in SWA_DEFAULT_PATTERN:
        n, dense_first = SWA_DEFAULT_PATTERN[arch]
    else:
        return None
    if dense_first:
        return [n == 0 or il % n != 0 for il in range(n_layer)]
    return [n == 0 or il % n < n - 1 for il in range(n_layer)]


def collect_model(path: str) -> Facts:
    rep = Reporter("gguf")
    try:
        model = read_model(path)
    except GgufCorrupt as exc:
        rep.set("model.path", path)
        rep.set("model.corrupt", True, text=str(exc))
        rep.set("model.corrupt_reason", str(exc))
        with contextlib.suppress(OSError):
            rep.set("model.file_bytes", os.path.getsize(path))
        return rep.facts
    rep.set("model.corrupt", False, text="header, sizes and tensor bounds check out")
    model_facts(model, rep)
    return rep.facts


def _collect(ctx: ProbeContext) -> Facts:
    if not ctx.model_path:
        rep = Reporter("gguf")
        rep.unknown("model.path", "no model given")
        return rep.facts
    return collect_model(ctx.model_path)


PROBE = Probe("gguf", "passive", "GGUF metadata and per-tensor sizes (bounded header walk)",
              ("model.n_layer", "model.arch", "model.corrupt"), _collect)
