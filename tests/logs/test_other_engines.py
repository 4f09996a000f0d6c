"""Engines without a parser of their own (LMDeploy, MLX and mlx-lm, DeepSpeed, ExLlamaV2, LightLLM) and what
users paste around them, on real lines: the catalogue's sentences (doctor/sources/catalogue/messages/*.yaml, each
quoted from the engine's format string), LMDeploy's KV share against a failed request (LD376), a reply that stopped
for length with nothing generated (LD266, doctor/sources/clients/parser.py), a pasted chat transcript read as the
output (doctor/sources/logs/pasted.py) and a traceback whose source line allocates the KV cache
(doctor/sources/engines/_torch/pytorch.py KV_ALLOC). Lines from fit-split corpus cases are cited by number.
"""

from __future__ import annotations

import pytest

from doctor.judge.evaluate import diagnose
from doctor.sources.logs.entry import analyze_bytes


def _report(text: str, rulebase):
    return diagnose(analyze_bytes(text.encode()), rulebase, command="analyze", mode="analyze")


def _ids(text: str) -> list[str]:
    return [e.data["id"] for e in analyze_bytes(text.encode()).events("message")]


# -- catalogued sentences, each in the form a user posted or in another release's form ------------------------

LINES = [
    # LMDeploy async_engine.py v0.7-v0.11 (corpus/1211) and serve/core/async_engine.py v0.12+ (the status first)
    ('2025-03-19 04:28:52,017 - lmdeploy - ERROR - async_engine.py:777 - session 85 finished, reason "error"',
     "lmdeploy.session_finished_error"),
    ("2025-11-02 10:01:02,003 - lmdeploy - ERROR - async_engine.py:515 - session 7 finished, "
     'ResponseType.INTERNAL_ENGINE_ERROR, reason "error"', "lmdeploy.session_finished_error"),
    # LMDeploy async_engine.py: a warning with session_id= in v0.2.6, an error with session= from v0.5
    ("2024-02-01 08:00:00,000 - lmdeploy - WARNING - run out of tokens. session_id=3",
     "lmdeploy.run_out_of_tokens"),
    # LMDeploy benchmark/profile_serving.py's assert, as corpus/1300 posted it behind a progress bar
    (" 54%|#####     | 1386/2584 [05:06<03:49,  5.22it/s]AssertionError: Error. session_id(7) request 2321 "
     "tokens, but generate 0 tokens.", "lmdeploy.benchmark_generated_zero"),
    # TurboMind LlamaBatch.cc v0.2.6 (request_output_len) and v0.9 (max_new_tokens)
    ("[TM][WARNING] [ProcessInferRequests] [1] total sequence length (4000 + 512) exceeds `session_len` (4096), "
     "`max_new_tokens` is truncated to 96", "lmdeploy.tm_sequence_exceeds_session_len"),
    # TurboMind's check() v0.9: the logger's prefix with a rank
    ("[TM][ERROR][0] CUDA runtime error: cudaErrorMemoryAllocation /lmdeploy/src/turbomind/models/llama/"
     "LlamaBatch.cc:912", "lmdeploy.tm_cuda_memory_allocation"),
    # MLX allocator.cpp through libc++abi, as corpus/1262 posted it
    ("libc++abi: terminating due to uncaught exception of type std::runtime_error: [malloc_or_wait] Unable to "
     "allocate 124367104 bytes.", "mlx.unable_to_allocate"),
    # mlx-lm cache.py, inside a server's JSON error body as ../shared/corpus/560 posted it
    ('    500 {"error":{"type":"server_error",\n                  "message":"RotatingKVCache Quantization NYI"}}',
     "mlx_lm.rotating_kv_quantization_nyi"),
    # mlx-lm utils.py _get_classes (v0.22 .. v0.31), behind its traceback's last frame
    ("    raise ValueError(msg)\nValueError: Model type qwen3_next not supported.", "mlx_lm.model_type_not_supported"),
    # DeepSpeed engine.py v0.11+
    ("RuntimeError: Input with size 2048 exceeds maximum length of 1024. Please increase `max_tokens` in the "
     "DeepSpeed Inference Config.", "deepspeed.input_exceeds_max_tokens"),
    # ExLlamaV2 model.py load_autosplit_gen
    ("RuntimeError: Insufficient VRAM for model and cache", "exllamav2.insufficient_vram_model_and_cache"),
]


@pytest.mark.parametrize(("text", "entry"), LINES, ids=[e for _, e in LINES])
def test_the_engines_sentence_is_catalogued(text: str, entry: str) -> None:
    assert entry in _ids(text + "\n")


def test_a_length_stop_of_another_kind_is_not_lmdeploys_session() -> None:
    # "run out of tokens" without LMDeploy's session= is another program's sentence
    assert "lmdeploy.run_out_of_tokens" not in _ids("the model ran out of tokens.\n")
    # mlx-lm's fuse.py refuses a GGUF export of other architectures: not a model it cannot load
    gguf = "ValueError: Model type gemma2 not supported for GGUF conversion.\n"
    assert "mlx_lm.model_type_not_supported" not in _ids(gguf)


# -- LMDeploy's KV share against a failed request (corpus/1211: the error line and the launch command) --------

SESSION_ERROR = ('2025-03-19 04:28:52,017 - lmdeploy - ERROR - async_engine.py:777 - session 85 finished, '
                 'reason "error"\n')
LAUNCH = ("lmdeploy serve api_server Qwen2.5-VL-7B-Instruct/ --server-port 23333 --model-name Qwen2.5-VL-7B-Instruct "
          "--tp 1 --session-len 32768 --eager-mode --cache-max-entry-count {share}\n")


def test_a_kv_share_near_one_and_a_failed_request(rulebase) -> None:
    facts = analyze_bytes((SESSION_ERROR + "\n" + LAUNCH.format(share="0.99")).encode())
    assert facts.value("server.lmdeploy.cache_max_entry_count") == pytest.approx(0.99)
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert report.assessment is not None and report.assessment.id == "LD376"
    assert report.assessment.cls == "oom.compute"


def test_the_default_share_leaves_the_failed_request_unexplained(rulebase) -> None:
    report = _report(SESSION_ERROR + "\n" + LAUNCH.format(share="0.8"), rulebase)
    assert "LD376" not in {f.id for f in report.findings}


def test_the_engine_config_line_gives_the_share() -> None:
    # lmdeploy/serve/async_engine.py __init__: logger.info(f'updated backend_config={self.backend_config}')
    line = ("2025-03-19 04:21:40,118 - lmdeploy - INFO - async_engine.py:283 - updated backend_config="
            "PytorchEngineConfig(dtype='auto', tp=1, session_len=32768, max_batch_size=128, "
            "cache_max_entry_count=0.95, prefill_interval=16, block_size=64)\n")
    assert analyze_bytes(line.encode()).value("server.lmdeploy.cache_max_entry_count") == pytest.approx(0.95)


# -- a reply that stopped for length with nothing generated (corpus/1289, LMDeploy's api_server) ----------------

REPLY = """{
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": ""
      },
      "finish_reason": "length"
    }
  ],
  "usage": {
    "prompt_tokens": 23,
    "total_tokens": %d,
    "completion_tokens": %d
  }
}
"""


def test_an_empty_length_stop_with_a_kept_history(rulebase) -> None:
    facts = analyze_bytes((REPLY % (8223, 0)).encode())
    assert facts.value("client.replies_empty_length") == 1
    assert facts.value("client.history_tokens") == 8200
    assert not facts.has("client.reply_cap")  # a cap of 0 tokens is no reply budget
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert report.assessment is not None and report.assessment.id == "LD266"
    assert report.assessment.cls == "context.overflow" and report.assessment.confidence == "high"


def test_a_reply_cut_by_its_budget_is_not_an_empty_stop() -> None:
    facts = analyze_bytes((REPLY % (535, 512)).encode())
    assert facts.value("client.replies_empty_length") == 0
    assert not facts.has("client.history_tokens")
    assert facts.value("client.reply_cap") == 512


# -- a pasted transcript: the model's turns are the output (corpus/1282, mlx-lm's server) -----------------------

def test_a_transcript_that_loops_is_read_as_output(rulebase) -> None:
    loop = ", ".join(["the"] * 40)
    text = ("USER: What is the best way to use a blender?\n"
            "ASSISTANT: The best to use blender, you add the combination of the ingredients, the needed, the, and "
            "the butter.\n\nUSER: What is the best to make of the butter, the sugar, the, the sugar, the, the sugar "
            f"the, {loop}\n")
    facts = analyze_bytes(text.encode())
    assert "the, the, the" in facts.value("run.output_text")
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert report.assessment is not None and report.assessment.cls == "sampling.repetition"


def test_one_speaker_is_no_transcript() -> None:
    text = "User: my server stops after the first request\nUser: here is the log\n"
    assert not analyze_bytes(text.encode()).has("run.output_text")


# -- a traceback whose source line allocates the KV cache (corpus/1255, LightLLM's mem_manager.py) --------------

def test_an_oom_raised_where_the_kv_buffers_are_made(rulebase) -> None:
    text = ('self.value_buffer = [torch.empty((size, head_num, head_dim), dtype=dtype, device="cuda") for _ in '
            "range(layer_num)]\n\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.14 GiB (GPU 0; "
            "79.35 GiB total capacity; 77.83 GiB already allocated; 711.19 MiB free; 77.83 GiB reserved in total by "
            "PyTorch)\n")
    report = _report(text, rulebase)
    assert report.assessment is not None and report.assessment.cls == "oom.kv_cache"


@pytest.mark.parametrize("source", [
    # ExLlamaV2 v0.0.10 exllamav2/cache.py ExLlamaV2Cache.create_state_tensors
    "p_key_states = torch.zeros(self.batch_size, self.max_seq_len, self.num_key_value_heads, self.head_dim, "
    "dtype = self.dtype, device = self.model.cache_map[i]).contiguous()",
    # LightLLM lightllm/common/int8kv_mem_manager.py (2024): one tensor for all layers
    'self.kv_buffer = torch.empty((layer_num, size + 1, 2 * head_num, head_dim), dtype=torch.int8, device="cuda")',
], ids=["exllamav2-cache", "lightllm-kv-buffer"])
def test_the_kv_allocation_lines_of_other_engines(source: str) -> None:
    text = (f"    {source}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
            "capacity of 23.64 GiB of which 1.02 GiB is free.\n")
    [oom] = analyze_bytes(text.encode()).events("oom")
    assert oom.phase == "kv_cache" and oom.data["step"] == "kv_cache_alloc"


def test_a_weights_buffer_is_no_kv_allocation() -> None:
    text = ("    self.weight_buffer = torch.empty((rows, cols), dtype=dtype, device=\"cuda\")\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    [oom] = analyze_bytes(text.encode()).events("oom")
    assert oom.phase != "kv_cache"


# -- a file that is not a GGUF (corpus/1042, ChatterUI on cui-llama.rn's LlamaContext.java check) ---------------

def test_a_file_without_the_gguf_magic_is_a_model_problem(rulebase) -> None:
    text = ('N/A "model is invalid"\n'
            "Failed to create data: java.lang.IllegalArgumentException: File is not in GGUF format\n")
    report = _report(text, rulebase)
    assert report.assessment is not None and report.assessment.cls == "model.corrupt"
    lead = next(f for f in report.findings if f.id == report.assessment.id)
    assert "download" in lead.fix.text.lower() and "again" in lead.fix.text


@pytest.mark.parametrize(("text", "entry"), [
    # a terminal's wrap at 80 columns cut the last word of ChatterUI's line (corpus/1042)
    ("Failed to create data: java.lang.IllegalArgumentException: File is not in GGUF f\normat\n",
     "cui_llama_rn.not_gguf"),
    # a notification's word wrap put NYI on the next line (../shared/corpus/560)
    ('    500 {"error":{"type":"server_error",\n                  "message":"RotatingKVCache Quantization\nNYI"}}\n',
     "mlx_lm.rotating_kv_quantization_nyi"),
], ids=["wrap80", "word-wrap"])
def test_a_sentence_cut_by_a_wrap_is_still_known(text: str, entry: str) -> None:
    assert entry in _ids(text)
