"""The KV pools of the other PyTorch servers, placed from a traceback (doctor/sources/engines/_torch/pytorch.py):
LightLLM's buffer allocation as corpus/1255 kept it (ModelTC/lightllm: the source line of the value buffer, then
PyTorch's OOM; the maintainer: --max_total_token_num too large), and the frames of LightLLM's
MemoryManager._init_buffers, LMDeploy's CacheEngine.allocate_gpu_cache and SGLang's MHATokenToKVPool._create_buffers
in Python's traceback format.
"""

from __future__ import annotations

import pytest

from doctor.judge.evaluate import diagnose
from doctor.sources.logs.entry import analyze_bytes

OOM = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.14 GiB (GPU 0; 79.35 GiB total "
       "capacity; 77.83 GiB already allocated; 711.19 MiB free; 77.83 GiB reserved in total by PyTorch) If reserved "
       "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for "
       "Memory Management and PYTORCH_CUDA_ALLOC_CONF\n")
LIGHTLLM_LINE = ('self.value_buffer = [torch.empty((size, head_num, head_dim), dtype=dtype, device="cuda") for _ in '
                 "range(layer_num)]\n\n")


@pytest.mark.parametrize("frame", [
    LIGHTLLM_LINE,
    'Traceback (most recent call last):\n  File "/lightllm/lightllm/common/mem_manager.py", line 84, in '
    "_init_buffers\n",
    'Traceback (most recent call last):\n  File "/opt/lmdeploy/lmdeploy/pytorch/engine/cache_engine.py", line 121, in '
    "allocate_gpu_cache\n",
    'Traceback (most recent call last):\n  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/memory_pool.py", '
    "line 512, in _create_buffers\n",
], ids=["lightllm-source-line", "lightllm-frame", "lmdeploy-frame", "sglang-frame"])
def test_an_oom_in_a_kv_pool_allocation_is_the_kv_cache(rulebase, frame: str) -> None:
    facts = analyze_bytes((frame + OOM).encode())
    [oom] = facts.events("oom")
    assert (oom.phase, oom.data["step"], oom.data["phase_from"]) == ("kv_cache", "kv_cache_alloc", "message")
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert report.assessment is not None and report.assessment.cls == "oom.kv_cache"


def test_the_bare_oom_is_not_placed_in_the_kv_pool() -> None:
    [oom] = analyze_bytes(OOM.encode()).events("oom")
    assert oom.phase != "kv_cache"
