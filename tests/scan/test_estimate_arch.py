"""The estimate against llama.cpp's own figures on every architecture (fixtures/record_arch.py).

Each recorded no_alloc load (11 real model shapes x 6 settings) is compared with what llm-doctor
derives from the same sparse GGUF read by its own probe: KV cache plus recurrent state exact to the
printed MiB, weights within 1%, compute buffer within 5% - except the settings named in
COMPUTE_MISSES, whose figure is not yet explained (and which must stay within 15%).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fixtures" / "gguf"))

from make_arch_gguf import build, load_arch_spec  # noqa: E402

from bench.arch_table import ARCH_LOGS, compare, model_facts, reference  # noqa: E402

INDEX = json.loads((ARCH_LOGS / "index.json").read_text())
RUNS = sorted(INDEX["runs"].items())
# MLA's compute peak (DeepSeek-V2-Lite) is ~28 MiB above the logits peak at 4096+ cells and not at
# 2048; Gemma 3 with a q8_0 cache and flash attention at 32k; LFM2 at 4096 with flash attention.
COMPUTE_MISSES = {"deepseek-v2-lite__c32768_fa", "deepseek-v2-lite__c32768_q8_fa", "deepseek-v2-lite__c4096",
                  "deepseek-v2-lite__c4096_swa", "deepseek-v2-lite__c8192_par4_unified",
                  "gemma-3-4b__c32768_q8_fa", "lfm2-1.2b__c4096_swa"}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("arch")
    specs = sorted({run["spec"] for _, run in RUNS})
    return {s: model_facts(build(load_arch_spec(s), folder / f"{s}.gguf")) for s in specs}


def test_every_architecture_of_the_issue_was_loaded_by_llama_cpp() -> None:
    archs = {load_arch_spec(run["spec"])["arch"] for _, run in RUNS}
    assert {"llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "deepseek2", "mamba", "lfm2"} <= archs
    assert not INDEX["failed"]
    assert len(RUNS) == 66


@pytest.mark.parametrize("key", [k for k, _ in RUNS])
def test_estimate_matches_llama_cpp(key: str, models: dict[str, object]) -> None:
    run = INDEX["runs"][key]
    row = compare(run["spec"], run["setting"], (ARCH_LOGS / f"{key}.log").read_text(), models[run["spec"]])
    assert row.kv_est is not None and row.kv_exact, (row.kv_est, row.ref.kv_mib)
    assert row.weights_err is not None and abs(row.weights_err) <= 0.01
    assert row.compute_err is not None
    if key in COMPUTE_MISSES:
        assert 0.05 < abs(row.compute_err) <= 0.15, row.compute_err
    else:
        assert abs(row.compute_err) <= 0.05, row.compute_err


def test_mla_caches_the_latent_only() -> None:
    text = (ARCH_LOGS / "deepseek-v2-lite__c4096.log").read_text()
    ref = reference(text)
    # 27 layers x (kv_lora_rank 512 + rope 64) x 4096 cells x f16, and no V
    assert ref.kv_mib == 27 * 576 * 4096 * 2 / (1 << 20)
    assert "V (f16):    0.00 MiB" in text


def test_recurrent_state_grows_with_sequences_not_context() -> None:
    one = reference((ARCH_LOGS / "mamba-1.4b__c32768_fa.log").read_text())
    four = reference((ARCH_LOGS / "mamba-1.4b__c8192_par4.log").read_text())
    assert one.kv_mib == 48 * (3 * 4096 + 16 * 4096) * 4 / (1 << 20)
    assert four.kv_mib == 4 * one.kv_mib


def test_a_layer_count_no_model_can_have_is_not_expanded() -> None:
    """A log line claiming 10**12 layers (found by the log fuzzer: MemoryError) gives no state, not a list of 10**12."""
    from doctor.estimate_arch import state_per_layer
    from doctor.facts import Facts

    facts = Facts.from_values({"model.arch": "mamba", "model.n_layer": 10**12, "model.n_embd": 768})
    assert state_per_layer(facts) is None
