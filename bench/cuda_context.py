"""VRAM one CUDA context takes on this machine's first GPU: nvidia-smi's memory.used before and while a
child process holds a bare driver-API context (cuInit + cuCtxCreate through ctypes; no toolkit, no
torch), with CUDA_MODULE_LOADING=LAZY and EAGER, and a torch context for comparison.

This is the per-GPU figure doctor/derive/memory.py (GPU_RUNTIME_OVERHEAD) charges on top of llama.cpp's
buffers. Needs only python3 and nvidia-smi; prints one JSON object.

    python3 bench/cuda_context.py
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time

CHILD = ("import ctypes,os,sys\nos.environ['CUDA_MODULE_LOADING']='%s'\ncu=ctypes.CDLL('libcuda.so.1')\n"
         "assert cu.cuInit(0)==0\nd=ctypes.c_int();cu.cuDeviceGet(ctypes.byref(d),0)\n"
         "c=ctypes.c_void_p();assert cu.cuCtxCreate_v2(ctypes.byref(c),0,d)==0\nprint('READY',flush=True)\n"
         "sys.stdin.readline()\n")
TORCH = "import torch,sys;torch.zeros(1,device='cuda');print('READY',flush=True);sys.stdin.readline()"


def used_mib() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def held(code: str) -> int:
    before = used_mib()
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    child.stdout.readline()
    time.sleep(1.0)
    during = used_mib()
    child.stdin.write("\n")
    child.stdin.flush()
    child.wait()
    return during - before


def main() -> int:
    result = {f"driver_context_{mode.lower()}_mib": held(CHILD % mode) for mode in ("LAZY", "EAGER")}
    with contextlib.suppress(AssertionError, OSError):
        result["torch_context_mib"] = held(TORCH)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
