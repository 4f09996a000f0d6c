"""The settings a launch command sets, per engine family: each flag's spellings across versions, the fact it
sets and how its value reads. Pure data for doctor/sources/logs/launch.py.

Spellings: the engine table's forms (doctor/core/engines.py: each engine's Spelling, read backwards) and the
engines' own argument definitions: llama.cpp common/arg.cpp (b5000, b10573: `{"-c", "--ctx-size"}`, `{"-ngl",
"--gpu-layers", "--n-gpu-layers"}`, `{"-fa", "--flash-attn"}` [on|off|auto] since 2025 and a bare switch
before, `{"-cram", "--cache-ram"}` MiB, `{"-kvu", "--kv-unified"}`, `--no-mmap`, `--mlock`) and common/common.cpp
of early 2024 (b2002: `-c`, `-t`, `-tb`, `-b`, `-ngl`, `-np`, `--no-mmap`, `--mlock`); KoboldCpp's
koboldcpp.py (--contextsize, --gpulayers, --threads, --blasbatchsize); vLLM's EngineArgs (vllm/engine/
arg_utils.py: --max-model-len, --gpu-memory-utilization, --max-num-seqs, --max-num-batched-tokens,
--tensor-parallel-size / -tp, --kv-cache-dtype); SGLang's ServerArgs (--context-length, --tp-size / --tp,
--max-running-requests, --chunked-prefill-size, --kv-cache-dtype); TGI's launcher (launcher/src/main.rs:
--max-total-tokens, --max-input-tokens / --max-input-length, --max-batch-prefill-tokens, --num-shard,
--cuda-memory-fraction); Ollama's server environment (envconfig/config.go: OLLAMA_CONTEXT_LENGTH,
OLLAMA_NUM_PARALLEL, OLLAMA_FLASH_ATTENTION, OLLAMA_KV_CACHE_TYPE); docker run's options (docs.docker.com
reference: --gpus, --runtime, --device, --cpus, --cpuset-cpus, --memory, --shm-size, --ipc).
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Flag:
    """What one flag sets: `fact` from its value read as `kind` (int | float | str | mib | onoff), or the
    constant `const` for a switch that takes no value."""

    fact: str
    kind: str = "int"
    const: object = None

    @property
    def switch(self) -> bool:
        return self.const is not None


def _same(flag: Flag, *names: str) -> dict[str, Flag]:
    return dict.fromkeys(names, flag)


LLAMA_CPP: dict[str, Flag] = {
    **_same(Flag("config.n_ctx"), "-c", "--ctx-size"),
    **_same(Flag("config.n_threads"), "-t", "--threads"),
    **_same(Flag("config.n_threads_batch"), "-tb", "--threads-batch"),
    **_same(Flag("config.n_batch"), "-b", "--batch-size"),
    **_same(Flag("config.n_ubatch"), "-ub", "--ubatch-size"),
    **_same(Flag("config.n_gpu_layers"), "-ngl", "--gpu-layers", "--n-gpu-layers"),
    **_same(Flag("config.n_parallel"), "-np", "--parallel"),
    **_same(Flag("config.type_k", "str"), "-ctk", "--cache-type-k"),
    **_same(Flag("config.type_v", "str"), "-ctv", "--cache-type-v"),
    **_same(Flag("config.flash_attn", "onoff"), "-fa", "--flash-attn"),
    **_same(Flag("config.cache_ram", "mib"), "-cram", "--cache-ram"),
    **_same(Flag("config.kv_unified", const=True), "-kvu", "--kv-unified"),
    "--numa": Flag("config.numa", "str"),
    "--no-mmap": Flag("config.use_mmap", const=False),
    "--mmap": Flag("config.use_mmap", const=True),
    "--mlock": Flag("config.use_mlock", const=True),
}
KOBOLDCPP: dict[str, Flag] = {
    "--contextsize": Flag("config.n_ctx"), "--gpulayers": Flag("config.n_gpu_layers"),
    "--threads": Flag("config.n_threads"), "--blasbatchsize": Flag("config.n_batch"),
}
VLLM: dict[str, Flag] = {
    "--max-model-len": Flag("config.max_model_len"),
    "--gpu-memory-utilization": Flag("config.gpu_memory_utilization", "float"),
    "--max-num-seqs": Flag("config.max_num_seqs"),
    "--max-num-batched-tokens": Flag("config.max_num_batched_tokens"),
    **_same(Flag("config.tensor_parallel_size"), "--tensor-parallel-size", "-tp"),
    "--kv-cache-dtype": Flag("config.kv_cache_dtype", "str"),
}
SGLANG: dict[str, Flag] = {
    "--context-length": Flag("config.max_model_len"),
    **_same(Flag("config.tensor_parallel_size"), "--tp-size", "--tp"),
    "--max-running-requests": Flag("config.max_num_seqs"),
    "--chunked-prefill-size": Flag("config.max_num_batched_tokens"),
    "--kv-cache-dtype": Flag("config.kv_cache_dtype", "str"),
}
TGI: dict[str, Flag] = {
    "--max-total-tokens": Flag("config.max_total_tokens"),
    **_same(Flag("config.max_input_tokens"), "--max-input-tokens", "--max-input-length"),
    "--max-batch-prefill-tokens": Flag("config.max_batch_prefill_tokens"),
    "--num-shard": Flag("config.num_shard"),
    "--cuda-memory-fraction": Flag("config.gpu_memory_utilization", "float"),
}
OLLAMA_ENV: dict[str, Flag] = {
    "OLLAMA_CONTEXT_LENGTH": Flag("config.num_ctx"), "OLLAMA_NUM_PARALLEL": Flag("config.n_parallel"),
    "OLLAMA_FLASH_ATTENTION": Flag("config.flash_attn", "onoff"), "OLLAMA_KV_CACHE_TYPE": Flag("config.type_k", "str"),
}
# family -> its flags (and the engine its facts speak of: engine.name's spelling)
FAMILIES: dict[str, dict[str, Flag]] = {
    "llama.cpp": LLAMA_CPP, "koboldcpp": KOBOLDCPP, "vllm": VLLM, "sglang": SGLANG, "tgi": TGI, "ollama": {},
}

# docker run's options that take a value (the next token, or after `=`); the others are switches
DOCKER_VALUED = frozenset({
    "-e", "--env", "-v", "--volume", "-p", "--publish", "--name", "--gpus", "--cpus", "--cpuset-cpus", "-m",
    "--memory", "--memory-swap", "--shm-size", "--ipc", "--runtime", "--device", "--network", "--net",
    "--entrypoint", "-w", "--workdir", "--env-file", "--restart", "-u", "--user", "--mount", "-l", "--label",
    "--ulimit", "--cap-add", "--cap-drop", "--security-opt", "--platform", "--pull", "--add-host", "-h",
    "--hostname", "--log-driver", "--log-opt", "--group-add", "--tmpfs", "--health-cmd", "--stop-signal",
    "--pid", "--cgroupns",
})
# the image names of each family's published containers, and the GPU backend a tag names
IMAGES: tuple[tuple[str, str], ...] = (
    ("llama.cpp", "llama.cpp"), ("ollama/ollama", "ollama"), ("vllm-openai", "vllm"), ("rocm/vllm", "vllm"),
    ("lmsysorg/sglang", "sglang"), ("text-generation-inference", "tgi"), ("koboldcpp", "koboldcpp"),
)
# image tag words -> the backend the build has (llama.cpp: server-cuda, full-rocm, server-vulkan, ...)
TAG_BACKENDS: tuple[tuple[str, str], ...] = (
    ("cuda", "CUDA"), ("rocm", "ROCm"), ("vulkan", "Vulkan"), ("musa", "MUSA"), ("intel", "SYCL"),
)
# the families whose default image is a CUDA build whatever its tag says (vLLM's, SGLang's, TGI's, Ollama's)
GPU_BY_DEFAULT = frozenset({"vllm", "sglang", "tgi", "ollama"})
