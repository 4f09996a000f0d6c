"""KV cache bytes equal llama.cpp's own allocation, to the byte where the log shows it exactly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from doctor.core.facts import Facts
from doctor.core.vocab import KV_TYPES
from doctor.derive import derive
from doctor.derive.memory import KvShape, kv_bytes, kv_bytes_per_token, kv_cells, pad
from doctor.sources.logs.entry import analyze_bytes

LCP = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "llama-cpp-python"
SIZE_LINE = re.compile(r"size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\), "
                       r"K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB")
SMOL = KvShape.uniform(30, 3, 64, 64)


def test_type_sizes_match_ggml() -> None:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    for name, (block, size) in KV_TYPES.items():
        assert GGML_QUANT_SIZES[GGMLQuantizationType[name.upper()]] == (block, size), name


@pytest.mark.parametrize("log", sorted(p.name for p in LCP.glob("*.log") if "cells," in p.read_text()))
def test_estimate_equals_the_kv_line_of_every_recorded_run(log: str) -> None:
    text = (LCP / log).read_text()
    m = SIZE_LINE.search(text)
    assert m is not None
    total_mib, cells, layers, _seqs, streams, tk, k_mib, tv, _v_mib = m.groups()
    n_ctx = int(re.search(r"llama_context: n_ctx\s*=\s*(\d+)", text).group(1))
    assert int(cells) == kv_cells(n_ctx)[0] and int(layers) == SMOL.n_layer
    total = kv_bytes(SMOL, n_ctx, tk, tv, int(streams))
    assert f"{total / 2**20:.2f}" == total_mib
    k_only = kv_bytes(KvShape(SMOL.n_layer, SMOL.n_head_kv, SMOL.head_dim_k, 0), n_ctx, tk, tv)
    assert f"{k_only / 2**20:.2f}" == k_mib


def test_derive_from_a_parsed_log_matches_the_buffer_it_printed() -> None:
    facts = derive(analyze_bytes((LCP / "healthy.log").read_bytes()))
    assert facts.value("derived.kv_bytes") == 47_185_920 == 45 * 2**20
    assert facts.value("derived.kv_bytes_per_token") == 23_040
    assert round(facts.value("run.kv_bytes") / 2**20, 2) == 45.00


def test_llama3_8b_is_128_kib_per_token_not_the_articles_1_mib() -> None:
    llama3 = KvShape.uniform(32, 8, 128, 128)
    assert kv_bytes_per_token(llama3) == 131_072
    assert kv_bytes(llama3, 8192) == 2**30


def test_olmoe_q8_0_doc_example() -> None:
    # llama.cpp docs: "size =  544.00 MiB (  8192 cells,  16 layers,  1/1 seqs),
    #                  K (q8_0):  272.00 MiB, V (q8_0):  272.00 MiB"
    olmoe = KvShape.uniform(16, 16, 128, 128)
    assert kv_bytes(olmoe, 8192, "q8_0", "q8_0") == 544 * 2**20


def test_padding_and_parallel_streams() -> None:
    assert pad(1) == 256 and pad(256) == 256 and pad(257) == 512
    assert kv_cells(1000) == (1024, 1)
    assert kv_cells(4096, 4) == (1024, 4)
    assert kv_cells(4096, 4, unified=True) == (4096, 1)
    assert kv_bytes(SMOL, 4096, n_seq=4) == kv_bytes(SMOL, 4096)
    assert kv_cells(1000, 3) == (512, 3)  # pad(1000)=1024, /3 = 341, pad -> 512 per stream
    assert kv_bytes(SMOL, 1000, n_seq=3) == kv_bytes(SMOL, 1536)


def test_quantised_cache_needs_whole_blocks() -> None:
    with pytest.raises(ValueError):
        kv_bytes(KvShape.uniform(1, 1, 40, 40), 256, "q8_0", "q8_0")


def test_unmodelled_architecture_says_unknown() -> None:
    facts = Facts.from_values({"model.arch": "mamba", "model.n_layer": 64, "model.n_head_kv": 0,
                               "config.n_ctx": 4096, "config.type_k": "f16", "config.type_v": "f16"})
    derive(facts)
    assert not facts.has("derived.kv_bytes")
    assert "not modelled" in (facts.get("derived.kv_bytes").unknown or "")
