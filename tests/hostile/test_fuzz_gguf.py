"""The GGUF reader on hostile files: truncated at every boundary, wrong magic and version, counts
and lengths up to 2**64 - 1, offsets that overflow or point past the end, unknown types, nested
arrays, headers built from nothing.

Each file ends in a clean `model.corrupt` with a one-line reason, or a clean read whose every tensor
lies inside the file; never a traceback, never a hang, and memory stays far below what the header
claims (the lie is refused before anything is allocated for it).
"""

from __future__ import annotations

import itertools
import os
import struct
import tracemalloc
from pathlib import Path
from random import Random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.judge.evaluate import diagnose
from doctor.sources.probes.gguf_header import GgufCorrupt, check_gguf
from doctor.sources.probes.gguf_model import collect_model

from .fuzz_targets import (
    U32_EXTREMES,
    U64_EXTREMES,
    gen_gguf,
    gguf_fields,
    gguf_seeds,
    gguf_target,
    render_all,
    rulebase,
    time_limit,
)

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
SECONDS = 20
PEAK_LIMIT = 64 << 20  # bytes Python may allocate for one hostile header (the real ones here need < 4 MiB)
_paths = itertools.count()


def fresh(tmp: Path) -> Path:
    return tmp / f"f{next(_paths)}.gguf"


def bounded(fn, *args):
    """Run fn under a time limit and tracemalloc; return (result, peak bytes)."""
    tracemalloc.start()
    try:
        with time_limit(SECONDS):
            result = fn(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def seed(name: str) -> tuple[bytes, int]:
    return next((data, size) for n, data, size in gguf_seeds() if n.startswith(name))


@FUZZ
@given(st.randoms(use_true_random=False))
def test_generated_files(tmp_path: Path, rng: Random) -> None:
    data, sparse = gen_gguf(rng)
    outcome, peak = bounded(gguf_target, data, fresh(tmp_path), sparse)
    assert outcome in ("ok", "refused")
    assert peak < PEAK_LIMIT, peak


@FUZZ
@given(st.sampled_from(["small", "llama-3", "gemma-2", "mamba"]), st.data())
def test_one_lie_in_any_field(tmp_path: Path, name: str, data: st.DataObject) -> None:
    header, size = seed(name)
    fields = gguf_fields(header)
    pos, fmt = data.draw(st.sampled_from(fields))
    limit = 32 if fmt == "I" else 64
    value = data.draw(st.one_of(st.sampled_from(U32_EXTREMES if fmt == "I" else U64_EXTREMES),
                                st.integers(0, (1 << limit) - 1)))
    buf = bytearray(header)
    struct.pack_into("<" + fmt, buf, pos, value)
    outcome, peak = bounded(gguf_target, bytes(buf), fresh(tmp_path), size)
    assert outcome in ("ok", "refused")
    assert peak < PEAK_LIMIT, (pos, fmt, value, peak)


@pytest.mark.parametrize("name", ["small", "llama-3"])
def test_truncated_at_every_field_boundary(tmp_path: Path, name: str) -> None:
    header, _ = seed(name)
    cuts = sorted({c for pos, fmt in gguf_fields(header) for c in (pos, pos + 1, pos + struct.calcsize(fmt) - 1)})
    if name == "small":
        cuts = list(range(len(header)))  # every byte
    for cut in cuts:
        path = fresh(tmp_path)
        path.write_bytes(header[:cut])
        with pytest.raises(GgufCorrupt) as err:
            check_gguf(path)
        reason = str(err.value)
        assert "\n" not in reason
        assert any(word in reason for word in ("too short", "file ends", "truncated", "more than a")), (cut, reason)
        path.unlink()


def test_a_copy_cut_short_in_the_tensor_data(tmp_path: Path) -> None:
    header, size = seed("llama-3")
    path = fresh(tmp_path)
    path.write_bytes(header)
    os.truncate(path, size - 1)
    facts = collect_model(str(path))
    assert facts.value("model.corrupt") is True
    assert "truncated download or copy" in facts.value("model.corrupt_reason")


@pytest.mark.parametrize("magic", [b"GGML", b"GGJT", b"ggug", b"\x00\x00\x00\x00", b"PK\x03\x04", b"\x7fELF"])
def test_wrong_magic(tmp_path: Path, magic: bytes) -> None:
    header, _ = seed("small")
    path = fresh(tmp_path)
    path.write_bytes(magic + header[4:])
    facts = collect_model(str(path))
    assert facts.value("model.corrupt") is True and "not a GGUF" in facts.value("model.corrupt_reason")


@pytest.mark.parametrize("version", [0, 1, 4, 0xFFFFFFFF, 0x00000300])
def test_unreadable_versions(tmp_path: Path, version: int) -> None:
    header, _ = seed("small")
    path = fresh(tmp_path)
    path.write_bytes(header[:4] + struct.pack("<I", version) + header[8:])
    facts = collect_model(str(path))
    assert facts.value("model.corrupt") is True and "version" in facts.value("model.corrupt_reason")


# -- what the fuzzing found, and the lies the issue names ------------------------------------------

def write_gguf(path: Path, kv: dict[str, tuple[str, object]], arch: str = "llama") -> Path:
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), arch)
    for key, (kind, value) in kv.items():
        getattr(w, f"add_{kind}")(key, value)
    for i in range(2):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.zeros(64, dtype=np.float32))
    w.add_tensor("token_embd.weight", np.zeros((4, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("block_count", [2**32 - 1, 2**40, 300_000_000, 513])
def test_a_block_count_no_model_has(tmp_path: Path, block_count: int, memory_cap: int) -> None:
    """The file is well formed, but per-layer lists sized by block_count would need up to 8 TiB."""
    path = write_gguf(tmp_path / "m.gguf", {
        "llama.block_count": ("uint64", block_count), "llama.embedding_length": ("uint32", 64),
        "llama.attention.head_count": ("uint32", 4), "llama.context_length": ("uint32", 4096),
        "llama.attention.sliding_window": ("uint32", 128)})
    with time_limit(SECONDS):
        facts = collect_model(str(path))
        report = diagnose(facts, rulebase(), command="scan", mode="scan")
        render_all(report)
    assert facts.value("model.corrupt") is False  # the header itself is consistent
    unknown = facts.get("model.n_layer")
    assert unknown is not None and not unknown.known and "512" in (unknown.unknown or "")


def test_a_lying_count_over_a_zero_filled_region_is_refused_at_once(tmp_path: Path) -> None:
    """A preallocated download is zeros after its header: a lying key/value count plus a first key
    whose length jumps into the zeros used to walk 13-byte empty entries for minutes."""
    header, size = seed("llama-3")
    buf = bytearray(header)
    struct.pack_into("<Q", buf, 16, 10**8)  # n_kv
    struct.pack_into("<Q", buf, 24, 1 << 20)  # the first key's length: 1 MiB into the hole
    path = fresh(tmp_path)
    path.write_bytes(buf)
    os.truncate(path, size)
    with time_limit(5), pytest.raises(GgufCorrupt, match="metadata entries"):
        check_gguf(path)


def test_a_huge_array_of_empty_strings_is_refused(tmp_path: Path) -> None:
    """An array of 2**21 strings over zeros fits the file (8 bytes each) but no tokenizer has that
    many, and gguf.GGUFReader would spend ~1.5 KB and ~60 µs on each."""
    path = fresh(tmp_path)
    body = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 20) + b"tokenizer.ggml.tokens"[:20]
            + struct.pack("<IIQ", 9, 8, 1 << 21))
    path.write_bytes(body)
    os.truncate(path, len(body) + 8 * (1 << 21) + 64)
    with time_limit(5), pytest.raises(GgufCorrupt, match="no model has that many"):
        check_gguf(path)


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("offset", (1 << 64) - 32, "data ends at byte"),  # offset + size overflows 64 bits
    ("offset", 31, "not aligned"),
    ("dim", (1 << 64) - 1, "far more than the file holds"),
    ("dim", 0, "dimension of 0"),
    ("type", 4242, "unknown to the installed gguf"),
    ("n_dims", 0xFFFFFFFF, "dimensions"),
])
def test_tensor_entries_that_lie(tmp_path: Path, field: str, value: int, reason: str) -> None:
    header, size = seed("small")
    buf = bytearray(header)
    fields = gguf_fields(header)
    # the last tensor entry is: name length (Q), n_dims (I), dims (Q each), type (I), offset (Q)
    offset_pos, type_pos = fields[-1][0], fields[-2][0]
    i = len(fields) - 3
    while fields[i][1] == "Q":
        i -= 1
    n_dims_pos = fields[i][0]
    target = {"offset": (offset_pos, "Q"), "type": (type_pos, "I"), "dim": (n_dims_pos + 4, "Q"),
              "n_dims": (n_dims_pos, "I")}[field]
    struct.pack_into("<" + target[1], buf, target[0], value)
    path = fresh(tmp_path)
    path.write_bytes(buf)
    os.truncate(path, size)
    facts = collect_model(str(path))
    assert facts.value("model.corrupt") is True
    assert reason in facts.value("model.corrupt_reason")


@pytest.mark.parametrize(("kind", "value", "reason"), [
    ("uint32", 0, "alignment"), ("uint32", 3, "alignment"), ("int32", -32, "alignment"), ("string", "32", "alignment"),
    ("float32", 32.0, "alignment"), ("bool", True, "alignment"),
    ("uint64", 1 << 63, "data ends at byte"),  # a power of two: the data section then starts past the end
])
def test_alignment_values_no_reader_can_use(tmp_path: Path, kind: str, value: object, reason: str) -> None:
    path = write_gguf(tmp_path / "a.gguf", {"general.alignment": (kind, value)})
    facts = collect_model(str(path))
    assert facts.value("model.corrupt") is True
    assert reason in facts.value("model.corrupt_reason")


def test_escape_sequences_in_metadata_never_reach_the_report(tmp_path: Path) -> None:
    bad = "\x1b]0;pwned\x07\x1b[2J\u202e"
    path = write_gguf(tmp_path / "e.gguf", {"general.name": ("string", f"evil{bad}model"),
                                            f"llama{bad}.block_count": ("uint32", 2)}, arch=f"llama{bad}")
    facts = collect_model(str(path))
    assert facts.value("model.name") == "evilmodel"  # escape sequences stripped where the probe reads them
    render_all(diagnose(facts, rulebase(), command="scan", mode="scan"))
