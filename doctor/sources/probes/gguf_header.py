"""The GGUF reader of record: a bounded walk of the header that checks every count and keeps
what the scan needs.

It reads the header with `struct` only and checks every count and length against the file size:
magic, version, tensor and key/value counts, string and array lengths, tensor dimensions and
types, and that each tensor's data lies inside the file. It keeps the scalar metadata, the values
of short arrays (per-layer head counts, sliding-window patterns, tags) and the tensor table; the
long arrays (the tokenizer's tokens, scores and merges) are stepped over and only counted.

Why this and not `gguf.GGUFReader`: the reader builds numpy objects for every tokenizer entry
before any metadata can be read (about 2.5 s and 100 MB for SmolLM2's 49k tokens and 48k merges),
and a lying header makes it allocate absurd arrays or fail deep inside numpy. The walk steps over
the same entries in tens of milliseconds, and the scan needs none of them. tests/scan/
test_gguf_probe.py checks the walk against `gguf.GGUFReader` (metadata, tensor names, types, sizes
and offsets) on the default model and on the sparse models of fixtures/gguf, and the tensor type
table below against `gguf.GGML_QUANT_SIZES`; a type this table does not know is looked up in the
installed `gguf` package (imported only then).

Pure apart from reading the one file it is given.
"""

from __future__ import annotations

import functools
import mmap
import os
import struct
from dataclasses import dataclass, field

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
MAX_DIMS = 4
MAX_NESTING = 3
DEFAULT_ALIGNMENT = 32
ARRAY_VALUES_KEPT = 4096  # numeric arrays up to this length keep their values (per-layer head counts)
STRING_VALUES_KEPT = 64  # string arrays up to this length keep their values (tags, languages, ...)
STRING_KEPT_BYTES = 1 << 16  # a kept string is cut here (a chat template is a few KiB)
KEPT_BYTES_TOTAL = 8 << 20  # all kept strings together; past it each is cut to SHORT_KEPT_BYTES (a
SHORT_KEPT_BYTES = 256  # sparse file could otherwise hold 65536 keys of 64 x 64 KiB strings)
# Counts no real model comes near (the largest vocabularies hold ~262k tokens; files hold tens of
# keys and at most tens of thousands of tensors). The file-size checks alone let a lying count walk
# a large zero-filled region (a preallocated download) one 8-byte entry at a time, for minutes.
MAX_KV = 1 << 16
MAX_TENSORS = 1 << 20
# Strings and sub-arrays walked in all metadata arrays (numeric arrays are not walked): the largest
# real tokenizers hold ~410k (Llama 3: 128k tokens + 280k merges), and gguf.GGUFReader then spends
# about 1.5 KB and 60 µs on each, so this also bounds the full read that follows the check.
MAX_ARRAY_ITEMS = 1 << 20

# GGUF value types (gguf.GGUFValueType) -> struct format of one element; 8 = string, 9 = array.
_SCALAR_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

Scalar = int | float | bool | str

# ggml tensor types: id -> (name, elements per block, bytes per block), as gguf.GGML_QUANT_SIZES
# and gguf.GGMLQuantizationType give them (tests check every entry against the installed package).
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40), 10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292), 16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
    28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}


def ggml_type(type_id: int) -> tuple[str, int, int] | None:
    """(name, block, bytes per block) of a tensor type; types newer than the table come from the
    installed gguf package; None if neither knows it."""
    known = GGML_TYPES.get(type_id)
    if known is not None:
        return known
    try:
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

        qtype = GGMLQuantizationType(type_id)
        block, size = GGML_QUANT_SIZES[qtype]
    except (ImportError, ValueError, KeyError):
        return None
    return qtype.name, block, size


class GgufCorrupt(Exception):
    """The file is not a GGUF this tool can read; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class TensorEntry:
    name: str
    dims: tuple[int, ...]
    type_id: int
    type_name: str
    offset: int  # relative to the data section
    n_elements: int
    n_bytes: int


@dataclass(slots=True)
class GgufHeader:
    path: str
    file_bytes: int
    version: int
    byte_order: str  # "<" or ">"
    alignment: int
    data_offset: int
    scalars: dict[str, Scalar] = field(default_factory=dict)
    # key: (element type, count, values): values for numeric arrays up to ARRAY_VALUES_KEPT long and
    # string arrays up to STRING_VALUES_KEPT long, else None (stepped over and counted)
    arrays: dict[str, tuple[int, int, list[Scalar] | None]] = field(default_factory=dict)
    tensors: list[TensorEntry] = field(default_factory=list)

    @property
    def tensor_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)


def check_gguf(path: str | os.PathLike[str]) -> GgufHeader:
    """Walk the header of one GGUF file; raise GgufCorrupt with the reason if anything is off.

    The result is remembered per (path, size, mtime): scan checks the file once to plan and once
    in the GGUF probe."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise GgufCorrupt(f"cannot read: {exc.strerror or exc}") from None
    return _check_cached(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _check_cached(path: str, _size: int, _mtime_ns: int) -> GgufHeader:
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 24:
                raise GgufCorrupt(f"file is {size} bytes, too short for a GGUF header")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _Walker(buf, size, str(path)).walk()
    except GgufCorrupt:
        raise
    except OSError as exc:
        raise GgufCorrupt(f"cannot read: {exc.strerror or exc}") from None


class _Walker:
    def __init__(self, buf: mmap.mmap, size: int, path: str) -> None:
        self.buf = buf
        self.size = size
        self.path = path
        self.pos = 0
        self.bo = "<"
        self.items = 0  # strings and sub-arrays walked inside arrays so far
        self.kept = 0  # bytes of string values kept so far

    # -- primitives ---------------------------------------------------------------------------
    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GgufCorrupt(f"{what} at byte {self.pos} needs {n} bytes but the file ends at {self.size}"
                              " (truncated or not a GGUF)")

    def unpack(self, fmt: str, what: str) -> int | float | bool:
        width = struct.calcsize(fmt)
        self.need(width, what)
        (value,) = struct.unpack_from(self.bo + fmt, self.buf, self.pos)
        self.pos += width
        return value

    def u32(self, what: str) -> int:
        return int(self.unpack("I", what))

    def u64(self, what: str) -> int:
        return int(self.unpack("Q", what))

    def string(self, what: str, keep: bool = True) -> str:
        length = self.u64(f"{what} length")
        self.need(length, f"{what} ({length} bytes)")
        start = self.pos
        self.pos += length
        if not keep:
            return ""
        return self.keep_text(start, length)

    def keep_text(self, start: int, length: int) -> str:
        cap = STRING_KEPT_BYTES if self.kept < KEPT_BYTES_TOTAL else SHORT_KEPT_BYTES
        n = min(length, cap)
        self.kept += n
        return bytes(self.buf[start:start + n]).decode("utf-8", errors="replace")

    def strings(self, key: str, count: int, keep: bool) -> list[Scalar] | None:
        """Step over `count` strings (the tokenizer's ~50k-250k entries: one tight loop, no
        per-entry objects); their values only when `keep`."""
        unpack = struct.Struct(self.bo + "Q").unpack_from
        buf, size, pos = self.buf, self.size, self.pos
        kept: list[Scalar] | None = [] if keep else None
        for j in range(count):
            if pos + 8 > size:
                self.pos = pos
                self.need(8, f"{key!r}[{j}] length")
            (length,) = unpack(buf, pos)
            pos += 8
            if length > size - pos:
                self.pos = pos
                self.need(length, f"{key!r}[{j}] ({length} bytes)")
            if kept is not None:
                kept.append(self.keep_text(pos, length))
            pos += length
        self.pos = pos
        return kept

    # -- structure ----------------------------------------------------------------------------
    def walk(self) -> GgufHeader:
        magic = bytes(self.buf[0:4])
        if magic != GGUF_MAGIC:
            raise GgufCorrupt(f"bad magic {magic!r}: not a GGUF file")
        self.pos = 4
        raw_version = bytes(self.buf[4:8])
        version = struct.unpack("<I", raw_version)[0]
        if version & 0xFFFF == 0 and version != 0:
            self.bo = ">"
            version = struct.unpack(">I", raw_version)[0]
        self.pos = 8
        if version not in SUPPORTED_VERSIONS:
            raise GgufCorrupt(f"GGUF version {version} is not supported (readable: 2, 3)")
        n_tensors = self.u64("tensor count")
        n_kv = self.u64("key/value count")
        # each key/value needs >= 13 bytes and each tensor entry >= 33; more than fits is a lie
        if n_kv > self.size // 13:
            raise GgufCorrupt(f"header claims {n_kv} metadata entries, more than a {self.size}-byte file can hold")
        if n_tensors > self.size // 33:
            raise GgufCorrupt(f"header claims {n_tensors} tensors, more than a {self.size}-byte file can hold")
        if n_kv > MAX_KV:
            raise GgufCorrupt(f"header claims {n_kv} metadata entries; no model has more than {MAX_KV}")
        if n_tensors > MAX_TENSORS:
            raise GgufCorrupt(f"header claims {n_tensors} tensors; no model has more than {MAX_TENSORS}")
        header = GgufHeader(self.path, self.size, version, self.bo, DEFAULT_ALIGNMENT, 0)
        for i in range(n_kv):
            key = self.string(f"metadata key #{i}")
            value_type = self.u32(f"type of {key!r}")
            self.value(header, key, value_type, 0)
        alignment = header.scalars.get("general.alignment", DEFAULT_ALIGNMENT)
        if (not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0
                or alignment & (alignment - 1)):
            raise GgufCorrupt(f"general.alignment {alignment!r} is not a power of two")
        header.alignment = alignment
        raw = [self.tensor_info(i) for i in range(n_tensors)]
        data_offset = (self.pos + alignment - 1) // alignment * alignment
        header.data_offset = data_offset
        header.tensors = [self.sized(name, dims, type_id, offset, data_offset, alignment)
                          for name, dims, type_id, offset in raw]
        return header

    def value(self, header: GgufHeader, key: str, value_type: int, depth: int) -> None:
        if value_type in _SCALAR_FORMATS:
            value = self.unpack(_SCALAR_FORMATS[value_type], f"value of {key!r}")
            if depth == 0:
                header.scalars[key] = value
        elif value_type == _STRING:
            text = self.string(f"value of {key!r}", keep=depth == 0)
            if depth == 0:
                header.scalars[key] = text
        elif value_type == _ARRAY:
            if depth >= MAX_NESTING:
                raise GgufCorrupt(f"{key!r}: arrays nested deeper than {MAX_NESTING}")
            elem_type = self.u32(f"element type of {key!r}")
            count = self.u64(f"length of {key!r}")
            values: list[Scalar] | None = None
            if elem_type in _SCALAR_FORMATS:
                width = struct.calcsize(_SCALAR_FORMATS[elem_type])
                self.need(count * width, f"array {key!r} of {count} elements")
                if depth == 0 and count <= ARRAY_VALUES_KEPT:
                    fmt = f"{self.bo}{count}{_SCALAR_FORMATS[elem_type]}"
                    values = list(struct.unpack_from(fmt, self.buf, self.pos))
                self.pos += count * width
            elif elem_type in (_STRING, _ARRAY) and self.items + count > MAX_ARRAY_ITEMS:
                raise GgufCorrupt(f"array {key!r} claims {count} elements, past {MAX_ARRAY_ITEMS} strings or "
                                  "arrays in all the metadata (no model has that many)")
            elif elem_type == _STRING:
                self.items += count
                self.need(count * 8, f"array {key!r} of {count} strings")
                values = self.strings(key, count, keep=depth == 0 and count <= STRING_VALUES_KEPT)
            elif elem_type == _ARRAY:
                self.items += count
                self.need(count * 12, f"array {key!r} of {count} arrays")
                for _ in range(count):
                    self.value(header, key, _ARRAY, depth + 1)
            else:
                raise GgufCorrupt(f"{key!r}: unknown array element type {elem_type}")
            if depth == 0:
                header.arrays[key] = (elem_type, count, values)
        else:
            raise GgufCorrupt(f"{key!r}: unknown value type {value_type}")

    def tensor_info(self, i: int) -> tuple[str, tuple[int, ...], int, int]:
        name = self.string(f"tensor #{i} name")
        n_dims = self.u32(f"dimension count of tensor {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise GgufCorrupt(f"tensor {name!r} claims {n_dims} dimensions (1..{MAX_DIMS} allowed)")
        dims = tuple(self.u64(f"dimension of tensor {name!r}") for _ in range(n_dims))
        type_id = self.u32(f"type of tensor {name!r}")
        offset = self.u64(f"data offset of tensor {name!r}")
        return name, dims, type_id, offset

    def sized(self, name: str, dims: tuple[int, ...], type_id: int, offset: int, data_offset: int,
              alignment: int) -> TensorEntry:
        known = ggml_type(type_id)
        if known is None:
            raise GgufCorrupt(f"tensor {name!r} has tensor type {type_id}, unknown to the installed gguf package "
                              "(a newer quantisation: upgrade gguf)")
        type_name, block, type_size = known
        n_elements = 1
        for d in dims:
            if d <= 0:
                raise GgufCorrupt(f"tensor {name!r} has a dimension of {d}")
            n_elements *= d
            if n_elements > self.size * 64:
                raise GgufCorrupt(f"tensor {name!r} claims {dims} elements, far more than the file holds")
        if dims[0] % block:
            raise GgufCorrupt(f"tensor {name!r}: row of {dims[0]} is not a whole number of {type_name} blocks")
        n_bytes = n_elements // block * type_size
        if offset % alignment:
            raise GgufCorrupt(f"tensor {name!r} data offset {offset} is not aligned to {alignment}")
        end = data_offset + offset + n_bytes
        if end > self.size:
            raise GgufCorrupt(f"tensor {name!r} data ends at byte {end} but the file has {self.size} bytes "
                              "(truncated download or copy)")
        return TensorEntry(name, dims, type_id, type_name, offset, n_elements, n_bytes)
