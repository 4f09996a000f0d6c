"""The repacked weight copy (doctor/derive/repack.py) against the AMX buffers llama.cpp printed on a
real Intel Xeon with AMX (fixtures/logs/llama-cpp-python/repack/, recorded by fixtures/record_repack.py),
and against the AMD log of the same model where llama.cpp makes no copy. The models are sparse GGUFs
with the recorded files' own tensor tables, read by the real GGUF probe; host facts come from recorded
machines (fixtures/machines), never from the machine the tests run on."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from doctor.core.facts import Facts, Source
from doctor.derive import derive
from doctor.derive import repack as estimate_repack
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.logs.entry import analyze_bytes
from doctor.sources.probes.base import Roots
from doctor.sources.probes.cpu import INFERENCE_FLAGS, cpuinfo
from doctor.sources.probes.gguf_model import collect_model

ROOT = Path(__file__).resolve().parents[2]
REPACK = ROOT / "fixtures" / "logs" / "llama-cpp-python" / "repack"
BUFFERS = ROOT / "fixtures" / "logs" / "llama-cpp-python" / "buffers"
CRASHES = ROOT / "fixtures" / "logs" / "crashes"
MACHINES = ROOT / "fixtures" / "machines"
INDEX = json.loads((REPACK / "index.json").read_text())
MIB = 1 << 20
AMX_LINE = re.compile(r"AMX model buffer size =\s+([\d.]+) MiB")
TEST = Source("test", "recorded machine")

# SmolLM2-135M's llama.* keys, as the recorded logs' `Model metadata` line prints them
SMOLLM2 = {"arch": "llama", "name": "SmolLM2-135M-Instruct", "n_embd": 576, "n_vocab": 49152,
           "kv": {"block_count": 30, "context_length": 8192, "feed_forward_length": 1536,
                  "attention.head_count": 9, "attention.head_count_kv": 3, "rope.dimension_count": 64,
                  "attention.layer_norm_rms_epsilon": 1e-05, "rope.freq_base": 100000.0}}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Facts]:
    """The GGUF probe's facts for each recorded file: a sparse GGUF with that file's tensor table."""
    sys.path.insert(0, str(ROOT / "fixtures" / "gguf"))
    from make_arch_gguf import build

    folder = tmp_path_factory.mktemp("repack")
    out = {}
    for run, info in INDEX["runs"].items():
        spec = {**SMOLLM2, "recipe": "table", "tensors": info["tensors"]}
        out[run] = collect_model(str(build(spec, folder / f"{run}.gguf")))
    return out


def fresh(model: Facts) -> Facts:
    """A copy to add facts to (the module's models are shared)."""
    out = Facts()
    out.merge(model)
    return out


def host_flags(machine: str) -> list[str]:
    _, flags = cpuinfo(Roots(proc=str(MACHINES / machine / "proc")))
    return sorted(f for f in flags if f in INFERENCE_FLAGS)


def analyzed(log: Path, model: Facts, **extra: object) -> Facts:
    facts = analyze_bytes(log.read_bytes())
    facts.merge(model)
    for name, value in extra.items():
        facts.set(name.replace("__", "."), value, TEST)
    return derive(facts)


def ld315(facts: Facts) -> list[str]:
    report = diagnose(facts, load_rulebase(), command="analyze", mode="analyze")
    return [" ".join(f.message.split()) for f in report.findings if f.id == "LD315"]


@pytest.mark.parametrize("run", sorted(INDEX["runs"]))
def test_the_copy_equals_the_amx_buffer_llama_cpp_printed(run: str, models: dict[str, Facts]) -> None:
    log = REPACK / f"{run}.log"
    printed = float(AMX_LINE.search(log.read_text()).group(1))
    facts = analyzed(log, models[run])
    assert facts.value("derived.weights_repack_buffers") == "AMX"
    assert round(facts.value("derived.weights_repack_bytes") / MIB, 2) == printed
    assert facts.value("derived.alloc_off_term") == "none", facts.value("derived.alloc_compare")
    assert "weights" in facts.value("derived.alloc_compare")
    assert ld315(facts) == []


def test_without_the_copy_the_same_log_is_95_mib_off(models: dict[str, Facts]) -> None:
    """What the estimate said before it knew the copy: the engine's AMX buffer unexplained."""
    model = fresh(models["xeon-amx-q4_1"])
    model.set("model.matmul_weights", [], TEST)  # no matrix weights known: no copy sized
    facts = analyzed(REPACK / "xeon-amx-q4_1.log", model, engine__cpu_repack=False,
                     engine__cpu_features=["AVX2"])
    assert facts.value("derived.weights_repack_bytes") == 0
    assert facts.value("derived.alloc_off_term") == "weights"
    assert round(facts.value("derived.alloc_off_bytes") / MIB, 2) == -95.34
    assert ld315(facts) and "weights" in ld315(facts)[0]


def test_without_mmap_the_copy_replaces_the_layers(models: dict[str, Facts]) -> None:
    """use_mmap=False: CPU 28.82 MiB (token_embd and norms) + AMX 95.34 MiB; the tied output's copy
    replaces nothing (token_embd stays for the input)."""
    facts = analyzed(REPACK / "xeon-amx-q4_1-no-mmap.log", models["xeon-amx-q4_1-no-mmap"])
    assert facts.value("config.use_mmap") is False
    copy, replaced = facts.value("derived.weights_repack_bytes"), facts.value("derived.weights_repack_replaced_bytes")
    assert round(copy / MIB, 2) == 95.34
    assert round((facts.value("derived.weights_bytes") - replaced) / MIB, 2) == 28.82  # what stays in CPU
    assert facts.value("derived.alloc_off_term") == "none"


def test_host_flags_decide_when_the_log_has_no_system_line(models: dict[str, Facts]) -> None:
    """No `CPU : ... AMX_INT8 = 1` line: the host's flags (the AMX Xeon recorded as h200-vm) stand in."""
    text = b"".join(ln for ln in (REPACK / "xeon-amx-q4_1.log").read_bytes().splitlines(keepends=True)
                    if not ln.startswith(b"CPU : "))
    facts = analyze_bytes(text)
    assert not facts.has("engine.cpu_features")
    facts.merge(models["xeon-amx-q4_1"])
    facts.set("host.cpu.flags", host_flags("h200-vm"), TEST)
    derive(facts)
    assert round(facts.value("derived.weights_repack_bytes") / MIB, 2) == 95.34
    assert "this CPU's flags" in facts.get("derived.weights_repack_bytes").source.text
    assert ld315(facts) == []


def test_amd_without_amx_gets_no_copy_and_the_estimate_stays_exact(models: dict[str, Facts]) -> None:
    """The buffers/ logs: an AVX512 CPU without AMX; CPU_REPACK has no Q4_1 (nor, on x86, Q8_0) kernel."""
    facts = analyzed(BUFFERS / "ctx128_f16.log", models["xeon-amx-q4_1"], host__cpu__flags=host_flags("vm-virtio"))
    assert "AMX_INT8" not in facts.value("engine.cpu_features")
    assert facts.value("derived.weights_repack_bytes") == 0
    assert facts.value("derived.weights_repack_buffers") == "none"
    assert facts.value("derived.alloc_off_term") == "none"


def test_repacking_off_charges_no_copy_on_an_amx_host(models: dict[str, Facts]) -> None:
    """The real run with use_extra_bufts=False on the AMX Xeon (crashes/amx-ok-no-extra-bufts.log)."""
    facts = analyzed(CRASHES / "amx-ok-no-extra-bufts.log", models["xeon-amx-q4_1"], config__use_extra_bufts=False,
                     host__cpu__flags=host_flags("h200-vm"))
    assert "AMX_INT8" in facts.value("engine.cpu_features")
    assert facts.value("derived.weights_repack_bytes") == 0
    assert "repacking off" in facts.get("derived.weights_repack_bytes").source.text
    assert facts.value("derived.weights_host_bytes") == facts.value("derived.weights_bytes")
    assert facts.value("derived.alloc_off_term") == "none"


def test_a_log_without_a_repacked_buffer_was_a_run_with_repacking_off(models: dict[str, Facts]) -> None:
    """The same log, the setting not known (a log does not print -nr): model buffers printed and no
    repacked one, so the copy is not set against them."""
    facts = analyzed(CRASHES / "amx-ok-no-extra-bufts.log", models["xeon-amx-q4_1"])
    assert facts.value("derived.weights_repack_bytes") > 90 * MIB  # the plan for these settings has one
    assert facts.value("derived.alloc_off_term") == "none"


def test_the_plan_holds_the_copy_in_ram(models: dict[str, Facts]) -> None:
    """Scan's memory budget on an AMX host: the RAM the plan needs holds the copy in place of the
    originals it stands in for (their mapped pages are clean and droppable): the 210 Q4_1 layer
    matrices repack to their own size, the tied output (token_embd, Q8_0) adds its 32.06 MiB copy.
    -nr takes it away."""
    def plan(**extra: object) -> Facts:
        facts = fresh(models["xeon-amx-q4_1"])
        for name, value in {"config.n_ctx": 128, "config.type_k": "f16", "config.type_v": "f16",
                            "host.ram.available": 8 << 30, "host.gpu.count": 0,
                            "host.cpu.flags": host_flags("h200-vm"), **extra}.items():
            facts.set(name, value, TEST)
        return derive(facts)

    on, off = plan(), plan(**{"config.use_extra_bufts": False})
    copy, extra = on.value("derived.weights_repack_bytes"), on.value("derived.weights_repack_extra_bytes")
    assert round(copy / MIB, 2) == 95.34
    assert extra == copy - on.value("derived.weights_repack_replaced_bytes")
    assert extra == 49152 * 576 // 32 * 38  # the output's AMX copy: Q8_0 blocks of 34 + 4 bytes
    assert on.value("derived.host_need_bytes") - off.value("derived.host_need_bytes") == extra
    assert on.value("derived.weights_host_bytes") == on.value("derived.weights_bytes") + extra
    # the resident memory the process shows holds both: the mapped file and the whole copy
    assert on.value("derived.host_peak_bytes") - off.value("derived.host_peak_bytes") == copy
    assert off.value("derived.weights_repack_bytes") == 0


def test_cpu_repack_on_avx2_takes_q4_0_at_its_own_size(models: dict[str, Facts]) -> None:
    """An AVX2 build without AMX: CPU_REPACK takes the Q4_0 matrices (rows a multiple of 8), not the
    Q8_0 tied output; the copy is ggml_nbytes of each."""
    facts = fresh(models["xeon-amx-q4_0"])
    facts.set("engine.cpu_features", ["AVX", "AVX2", "FMA"], TEST)
    facts.set("engine.cpu_repack", True, TEST)
    repack = estimate_repack.plan_from_facts(facts, 30, gpu=False)
    assert repack is not None and dict(repack.buffers).keys() == {"CPU_REPACK"}
    q4_0 = sum(w[4] * w[5] for w in facts.value("model.matmul_weights") if w[2] == "Q4_0")
    assert sum(repack.copy) == q4_0 and repack.tensors == 210
    facts.set("engine.cpu_repack", False, TEST)  # a build without REPACK
    assert sum(estimate_repack.plan_from_facts(facts, 30, gpu=False).copy) == 0
    facts.set("engine.cpu_features", ["NEON", "DOTPROD", "KLEIDIAI"], TEST)  # its own buffer type: not sized
    assert estimate_repack.plan_from_facts(facts, 30, gpu=False) is None


def test_a_gpu_host_buffer_comes_first_metal_has_none(models: dict[str, Facts]) -> None:
    facts = fresh(models["xeon-amx-q4_1"])
    facts.set("engine.cpu_features", ["AMX_INT8", "AVX512_VNNI", "AVX2"], TEST)
    facts.set("engine.backends", ["CPU", "CUDA"], TEST)
    assert sum(estimate_repack.plan_from_facts(facts, 30, gpu=True).copy) == 0
    facts.set("engine.backends", ["CPU", "Metal"], TEST)
    repack = estimate_repack.plan_from_facts(facts, 30, gpu=True)
    assert repack is not None
    # 10 layers offloaded (20..29 and the output layer on the GPU): only layers 0..19 keep a copy
    first_gpu, output_on_gpu = 20, True
    per_layer = repack.copy[0]
    assert estimate_repack.on_host(repack.copy, first_gpu, output_on_gpu) == 20 * per_layer


@pytest.mark.parametrize(("name", "expected"), [
    ("blk.0.attn_q.weight", ("mul_mat", 0)), ("blk.12.ffn_down.weight", ("mul_mat", 12)),
    ("blk.3.ffn_up_exps.weight", ("mul_mat_id", 3)), ("output.weight", ("mul_mat", None)),
    ("blk.0.attn_q.bias", None), ("token_embd.weight", None), ("blk.0.attn_norm.weight", None),
    ("enc.blk.2.attn_q.weight", ("mul_mat", None)),
])
def test_which_tensors_are_matrix_weights(name: str, expected: object) -> None:
    assert estimate_repack.matmul_op(name) == expected


def test_the_log_names_the_repacked_buffer_and_repack_feature() -> None:
    facts = analyze_bytes((REPACK / "xeon-amx-q4_1.log").read_bytes())
    assert facts.value("engine.cpu_repack") is True
    assert round(facts.value("run.weights_repack_bytes") / MIB, 2) == 95.34
    assert round(facts.value("run.weights_host_bytes") / MIB, 2) == round(95.34 + 92.10, 2)


def test_where_the_copy_cannot_be_sized_the_engine_s_copy_is_left_out() -> None:
    """watch's own run: the engine reports its model size (llama_model_size), no GGUF tensor table is
    read, so llm-doctor cannot size the copy: the weights term compares the rest instead of calling
    the AMX buffer a 95 MiB drift."""
    facts = analyze_bytes((REPACK / "xeon-amx-q4_1.log").read_bytes())
    facts.set("model.weights_bytes", 96576768, Source("trace", "model_bytes as the engine reports"))
    derive(facts)
    assert not facts.has("derived.weights_repack_bytes")
    assert facts.value("derived.alloc_compare").startswith("weights 92.1 vs 92.1 MiB")
    assert facts.value("derived.alloc_off_term") == "none"
