"""Configuration errors that end a PyTorch server's start-up or its first batches, rows of the crash table
(crashes.py): a tensor-parallel size that does not divide the attention heads, NCCL failing a system call
(in a container: /dev/shm too small for its shared-memory transport), a kernel launched with a grid larger
than the device allows. Pure data.

Strings: vLLM vllm/config.py (0.6.3.post1) and vllm/config/model.py (0.11.0) verify_with_parallel_config
("Total number of attention heads ({n}) must be divisible by tensor parallel size ({tp})."); TGI
server/text_generation_server/models/custom_modeling/*_modeling.py (v1.0.0-v2.4.0: "`num_heads` must be
divisible by `num_shards` (got `num_heads`: {n} and `num_shards`: {m}"); DeepSpeed-Inference
deepspeed/module_inject/replace_module.py (v0.9.2: "num_heads ({}) must be divisible by mp_size ({})", v0.10.0:
"{param} ({param_val}) must be divisible by mp_size ({mp_size})"), tp_shard.py (v0.12.0: "Number of attention heads
({total_size}) must be divisible by mp_size ({mp_size})"), containers/base.py ("the attention_heads require to be
divisible by the world_size!"); NCCL's ncclGetErrorString
(ncclSystemError: "unhandled system error (run with NCCL_DEBUG=INFO for details)") as PyTorch's
ProcessGroupNCCL quotes it ("NCCL error in: FILE:LINE, unhandled system error ...") and NCCL's own
shared-memory warnings (src/misc/shmutils.cc, include/shm.h: "Error while creating shared memory segment
/dev/shm/nccl-...", "failed to extend /dev/shm/nccl-...", "Call to posix_fallocate failed : No space left on
device"); CUDA's cudaGetErrorString(cudaErrorInvalidConfiguration) "invalid configuration argument"; the
Ascend runtime's kernel-launch check as a vLLM-Ascend user pasted it ("KernelLaunch failed because value N
for parameter coreDim is invalid. Expected value: less than or equal to 65535.",
vllm-project/vllm-ascend#10138).
"""

from __future__ import annotations

from doctor.sources.engines._ggml.cause import Cause, Fix

TP_HEADS = Cause(
    "tp_heads_indivisible", "The tensor-parallel size does not divide the model's attention heads",
    "Tensor parallelism gives every GPU the same number of attention heads, so the number of GPUs it splits "
    "the model over must divide the model's head count; the engine refuses any other size before loading. "
    "Nothing is wrong with the GPUs, the memory or the model.",
    Fix(
        "Use a tensor-parallel size that divides the attention heads (the error names both numbers; with 12 "
        "heads: 4, 3, 2 or 1 GPUs, not 8), making only that many GPUs visible (CUDA_VISIBLE_DEVICES), and "
        "use pipeline parallelism for the rest if the model needs more GPUs.",
        checked="vLLM vllm/config.py 0.6.3.post1 and vllm/config/model.py 0.11.0 (verify_with_parallel_config); "
        "TGI v1.0.0-v2.4.0 custom_modeling (`num_heads` must be divisible by `num_shards`); the FSDrive "
        "maintainer's answer (MIV-XJTU/FSDrive#21: 12 heads, use 4 GPUs); DeepSpeed v0.9.2-v0.12.0 module_inject "
        "(mp_size must divide the heads; deepspeedai/DeepSpeed#3634, the maintainer: by design)",
    ),
    ("ValueError: Total number of attention heads (12) must be divisible by tensor parallel size (8).",
     "ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: 40 and `num_shards`: 3",
     "AssertionError: num_heads (52) must be divisible by mp_size (8)"),
)

NCCL_SYSTEM = Cause(
    "nccl_system_error", "NCCL failed a system call between the GPU workers (in a container: /dev/shm)",
    "The workers of a multi-GPU run talk through NCCL, which uses shared memory in /dev/shm between GPUs of "
    "one machine; a Docker container's /dev/shm is 64 MB unless it is started with more, so NCCL's segments do "
    "not fit and it reports an 'unhandled system error' as the workers start. Outside a container the system "
    "call that failed is named with NCCL_DEBUG=INFO (a socket, an InfiniBand device, a file limit).",
    Fix(
        "Give the container shared memory: docker run --shm-size 16g (or --ipc=host; on Kubernetes an emptyDir "
        "with medium: Memory mounted at /dev/shm); elsewhere run with NCCL_DEBUG=INFO to see which call failed "
        "(NCCL_SHM_DISABLE=1 works around a shared-memory failure at some speed).",
        checked="NCCL src/misc/shmutils.cc and include/shm.h (its /dev/shm segments), ncclGetErrorString; vLLM "
        "docs/deployment/docker (--ipc=host or --shm-size for the workers' shared memory); the Xinference "
        "maintainer's answer (xorbitsai/inference#2836: --shm-size=128g)",
    ),
    ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system "
     "error, NCCL version 2.18.1",
     "torch.distributed.DistBackendError: NCCL error ...: unhandled system error (run with NCCL_DEBUG=INFO for "
     "details)",
     "misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-tyjPbR to 9637892 bytes",
     "include/shm.h:48 NCCL WARN Call to posix_fallocate failed : No space left on device"),
)

KERNEL_GRID = Cause(
    "kernel_grid_too_large", "A GPU kernel was launched with more blocks than the device allows",
    "A kernel's launch grid grows with its input (sequences in the batch times the longest prompt, for a "
    "sampling-penalty kernel), and the device caps it (CUDA: 65535 blocks in the y and z dimensions; Ascend: a "
    "coreDim of 65535), so a large batch with a long prompt makes the launch fail. It is an engine bug in that "
    "kernel, not a lack of memory; the request itself is within the limits.",
    Fix(
        "Make the batch that reaches the kernel smaller - fewer sequences at once, shorter prompts - or avoid the "
        "feature whose kernel it is (the operator the error names: repetition / frequency / presence penalties "
        "for a bincount kernel), and update the engine (the fix splits the grid).",
        checked="CUDA cudaErrorInvalidConfiguration ('invalid configuration argument'); vllm-project/vllm-ascend "
        "PR 10138 (the token_bin_counts_and_mask kernel's grid num_seqs x ceil(prompt_len/256) over the 65535 "
        "coreDim; fixed by bounding the grid)",
    ),
    ("KernelLaunch failed because value 74688 for parameter coreDim is invalid.",
     "RuntimeError: CUDA error: invalid configuration argument"),
)

CONFIG_CAUSES: tuple[Cause, ...] = (TP_HEADS, NCCL_SYSTEM, KERNEL_GRID)


def heads_detail(heads: int, size: int) -> str:
    """The numbers of a tensor-parallel refusal, with the sizes that would divide the heads (up to the size
    asked for: the GPUs there are)."""
    fits = [n for n in range(size, 0, -1) if heads % n == 0]
    sizes = ", ".join(str(n) for n in fits[:3])
    return f"{heads} attention heads over {size} GPUs; sizes that divide them: {sizes}"
