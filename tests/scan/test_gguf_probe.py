"""The GGUF probe: metadata and per-tensor sizes from our header walk (checked against
gguf.GGUFReader), split files, and refusal of truncated or lying files before anything absurd is
allocated."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from doctor.sources.probes.gguf_header import GGML_TYPES, GgufCorrupt, check_gguf
from doctor.sources.probes.gguf_model import FILE_TYPES, collect_model, header_metadata, read_model, shard_paths
from tests.scan.conftest import build_gguf, load_spec


def test_smollm2_facts_match_the_engines_own_metadata(smollm2: Path) -> None:
    facts = collect_model(str(smollm2))
    # the values llama.cpp prints for this file (print_info in the recorded logs)
    assert facts.value("model.arch") == "llama"
    assert (facts.value("model.n_layer"), facts.value("model.n_head"), facts.value("model.n_head_kv")) == (30, 9, 3)
    assert (facts.value("model.head_dim_k"), facts.value("model.head_dim_v")) == (64, 64)
    assert facts.value("model.n_ctx_train") == 8192 and facts.value("model.n_vocab") == 49152
    assert facts.value("model.n_params") == 134_515_008  # "model params = 134.52 M"
    assert round(facts.value("model.weights_bytes") / 2**20, 2) == 92.10  # "CPU_Mapped model buffer size = 92.10 MiB"
    assert facts.value("model.file_type") == "Q4_1"
    assert facts.value("model.output_tied") is True  # no output.weight: token_embd is the lm head
    assert facts.value("model.corrupt") is False
    layers = facts.value("model.layer_bytes")
    assert len(layers) == 30
    assert sum(layers) + facts.value("model.nonrepeating_bytes") == facts.value("model.weights_bytes")


SPARSE_MODELS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "fixtures" / "gguf").glob("*.json"))


def _walk_vs_reader(path: Path) -> None:
    """Our header walk (the reader of record) against gguf.GGUFReader on one file: every metadata
    key it keeps has the reader's value, every array it steps over has the reader's length, and the
    tensor table is the same (names, types, shapes, offsets, sizes)."""
    from gguf import GGUFReader

    head = check_gguf(path)
    reader = GGUFReader(path)
    assert [(t.name, t.type_id, t.type_name, t.offset, t.n_elements, t.n_bytes) for t in head.tensors] == [
        (t.name, int(t.tensor_type), t.tensor_type.name, int(t.data_offset) - reader.data_offset,
         int(t.n_elements), int(t.n_bytes)) for t in reader.tensors]
    assert [t.dims for t in head.tensors] == [tuple(int(d) for d in t.shape) for t in reader.tensors]
    assert head.data_offset == reader.data_offset
    metadata = header_metadata(head)
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert {k.removesuffix("#count") for k in metadata} == set(fields)
    for key, value in metadata.items():
        if key.endswith("#count"):
            assert len(fields[key.removesuffix("#count")].data) == value, key
        elif isinstance(value, float):
            assert fields[key].contents() == pytest.approx(value), key
        else:
            assert fields[key].contents() == value, key


def test_the_header_walk_agrees_with_gguf_reader_on_the_default_model(smollm2: Path) -> None:
    _walk_vs_reader(smollm2)
    model = read_model(str(smollm2))
    assert model.metadata["tokenizer.ggml.tokens#count"] == 49152  # counted, never materialised
    assert model.metadata["tokenizer.ggml.merges#count"] == 48900
    assert model.metadata["general.languages"] == ["en"]  # short string arrays keep their values


@pytest.mark.parametrize("name", SPARSE_MODELS)
def test_the_header_walk_agrees_with_gguf_reader_on_the_sparse_models(model_files, name: str) -> None:
    _walk_vs_reader(model_files(name))


def test_the_type_tables_match_the_gguf_package() -> None:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

    for qtype, (block, size) in GGML_QUANT_SIZES.items():
        assert GGML_TYPES[qtype.value] == (qtype.name, block, size)
    assert set(GGML_TYPES) <= {q.value for q in GGMLQuantizationType}
    for ftype in LlamaFileType:
        if ftype.name != "GUESSED":
            assert FILE_TYPES[ftype.value] == ftype.name.removeprefix("MOSTLY_")


def test_a_type_newer_than_the_table_is_looked_up_in_the_gguf_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import doctor.sources.probes.gguf_header as gh

    monkeypatch.delitem(gh.GGML_TYPES, 12)
    assert gh.ggml_type(12) == ("Q4_K", 256, 144)
    assert gh.ggml_type(9999) is None


def test_sizes_come_from_tensors_not_the_label(model_files) -> None:
    model = read_model(str(model_files("llama-3-8b-instruct-q4_k_m")))
    # Q4_K_M mixes Q4_K and Q6_K: layers that get Q6_K for attn_v / ffn_down are larger
    assert model.layer_bytes[0] > model.layer_bytes[4]  # layer 0 < n/8 uses more bits, layer 4 does not
    assert model.output_bytes > model.input_bytes  # output.weight is Q6_K, token_embd Q4_K
    assert abs(model.tensor_bytes - 4_920_734_016) / 4_920_734_016 < 0.01  # the published file's size


def test_split_files_are_summed_and_a_missing_shard_is_refused(tmp_path: Path) -> None:
    spec = load_spec("llama-3-8b-instruct-q4_k_m")
    first = build_gguf(spec, tmp_path / "llama-00001-of-00002.gguf", subset=slice(0, 150),
                       extra_kv={"split.no": 0, "split.count": 2})
    with pytest.raises(GgufCorrupt, match="1 of 2 files missing"):
        shard_paths(str(first))
    second = build_gguf(spec, tmp_path / "llama-00002-of-00002.gguf", subset=slice(150, None),
                        extra_kv={"split.no": 1, "split.count": 2})
    whole = read_model(str(build_gguf(spec, tmp_path / "whole.gguf")))
    split = read_model(str(first))
    assert split.shards == [str(first), str(second)]
    assert split.tensor_bytes == whole.tensor_bytes and split.layer_bytes == whole.layer_bytes
    facts = collect_model(str(first))
    assert facts.value("model.split_count") == 2 and facts.value("model.n_layer") == 32


@pytest.mark.parametrize(("how", "reason"), [
    ("truncated", "truncated download"),
    ("bad-magic", "not a GGUF"),
    ("lying-tensor-count", "more than a"),
    ("huge-string", "file ends at"),
    ("unknown-type", "unknown to the installed gguf"),
    ("empty", "too short"),
])
def test_corrupt_files_are_refused_with_the_reason(tmp_path: Path, how: str, reason: str) -> None:
    path = build_gguf(load_spec("llama-3-8b-instruct-q4_k_m"), tmp_path / f"{how}.gguf", corrupt=how)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    facts = collect_model(str(path))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert facts.value("model.corrupt") is True
    assert reason in facts.value("model.corrupt_reason")
    assert not facts.has("model.n_layer")  # nothing read from a refused file
    assert grown_kib < 200_000  # the lie (2**40 tensors, a 2**60-byte string) allocated nothing absurd


def test_a_corrupt_file_fires_the_model_rule(tmp_path: Path, rulebase) -> None:
    from doctor.judge.evaluate import diagnose

    path = build_gguf(load_spec("llama-3-8b-instruct-q4_k_m"), tmp_path / "cut.gguf", corrupt="truncated")
    report = diagnose(collect_model(str(path)), rulebase, command="scan", mode="scan")
    finding = next(f for f in report.findings if f.id == "LD901")
    assert "truncated" in finding.message and finding.severity == "error"


def test_per_layer_kv_heads(tmp_path: Path) -> None:
    """head_count_kv may be an array (one entry per layer); 0 marks a layer without KV."""
    import numpy as np
    from gguf import GGUFWriter

    path = tmp_path / "perlayer.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 4)
    w.add_uint32("llama.embedding_length", 256)
    w.add_uint32("llama.attention.head_count", 4)
    w.add_array("llama.attention.head_count_kv", [2, 0, 2, 1])
    w.add_uint32("llama.context_length", 4096)
    for i in range(4):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.zeros(256, dtype=np.float32))
    w.add_tensor("token_embd.weight", np.zeros((32, 256), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    facts = collect_model(str(path))
    assert facts.value("model.n_head_kv_per_layer") == [2, 0, 2, 1]
    assert facts.value("model.n_head_kv") == 2 and facts.value("model.head_dim_k") == 64


def test_kept_metadata_strings_are_bounded_in_all(tmp_path: Path) -> None:
    """A (sparse) file of many 64 KiB string values: past 8 MiB kept, each value is cut short, so a
    header of 65536 such keys cannot make the walk hold gigabytes."""
    import struct

    from doctor.sources.probes import gguf_header as gh

    path = tmp_path / "strings.gguf"
    n, length = 300, 1 << 16
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n))
        for i in range(n):
            key = f"general.k{i:04d}".encode()
            f.write(struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, length))
            f.seek(length, 1)  # the value: a hole of zero bytes
        f.write(b"\0" * 64)
    head = check_gguf(path)
    texts = [v for v in head.scalars.values() if isinstance(v, str)]
    assert len(texts) == n
    assert sum(len(t) for t in texts) <= gh.KEPT_BYTES_TOTAL + gh.STRING_KEPT_BYTES + n * gh.SHORT_KEPT_BYTES
    assert len(texts[0]) == length and len(texts[-1]) == gh.SHORT_KEPT_BYTES
