"""Why a GPU backend did not start, read from the driver's and runtime's own error strings.

The same failure reaches a log in several wordings: a CUDA error code in Ollama's discovery
(`cudart init failure: 999`, `cuda driver library init failure: 35`, `cudaSetDevice err: 999`,
`version mismatch between driver and cuda driver library`), or `cudaGetErrorString`'s text behind
llama.cpp's `ggml_cuda_init: failed to initialize CUDA: ...` and `CUDA error: ...`. Each is mapped
to one cause, because each cause has another fix:

- `unknown` (CUDA error 999, CUDA_ERROR_UNKNOWN): the driver is loaded but the device is unusable,
  typically after suspend/resume (nvidia_uvm left broken); reload nvidia_uvm or reboot.
- `driver_old` (35 insufficient driver, 803 unsupported driver/CUDA combination, 222 PTX built by a
  newer toolchain, NVML's driver/library mismatch): the driver is older than the CUDA runtime the
  engine was built with; update the driver (or reboot after an update).
- `forward_compat` (804): the CUDA forward-compatibility libraries (cuda-compat) are on the library
  path of a consumer card, where they do not work; remove them.
- `no_device` (100): no device visible (container without --gpus, CUDA_VISIBLE_DEVICES).
- `not_loaded`: the backend library itself did not load (missing file or dependency).

Pure.
"""

from __future__ import annotations

import re

CODES = {"999": "unknown", "35": "driver_old", "803": "driver_old", "222": "driver_old", "804": "forward_compat",
         "100": "no_device"}
# (pattern, cause): cudaGetErrorString / cuGetErrorString texts and the engines' own wordings
_TEXTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"CUDA driver version is insufficient for CUDA runtime version|CUDA_ERROR_INSUFFICIENT_DRIVER"
                r"|unsupported display driver / cuda driver combination|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
                r"|version mismatch between driver and cuda driver library"
                r"|PTX was compiled with an unsupported toolchain|CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
                r"|Driver/library version mismatch", re.IGNORECASE), "driver_old"),
    (re.compile(r"forward compatibility was attempted on non supported HW|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
                re.IGNORECASE), "forward_compat"),
    (re.compile(r"no CUDA-capable device is detected|CUDA_ERROR_NO_DEVICE|no nvidia devices detected", re.IGNORECASE),
     "no_device"),
    (re.compile(r"unknown error initializing cuda|CUDA_ERROR_UNKNOWN|failed to initialize (?:CUDA|ROCm): unknown error",
                re.IGNORECASE), "unknown"),
)
_CODE = re.compile(r"(?:init failure|cudaSetDevice err|cuInit err|cudaGetDeviceCount err|error code)[:=]?\s*(-?\d+)")


def gpu_failure_cause(text: str) -> tuple[str, str | None]:
    """(cause, CUDA error code or None) for a line that says a GPU backend failed to start; cause is
    `other` when the text names none of the known ones."""
    m = _CODE.search(text)
    code = m.group(1) if m else None
    if code in CODES:
        return CODES[code], code
    for pattern, cause in _TEXTS:
        if pattern.search(text):
            return cause, code
    return "other", code
