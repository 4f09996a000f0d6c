"""Fact names for the published specs of the hardware a log names, and for llama-bench tables.

`spec.*` are set by doctor/derive/spec_lookup.py from the published-spec table
doctor/derive/specs/hardware.yaml (each row with its source), for the device the log says ran the
model: a GPU by name (CUDA / ROCm / Vulkan / Metal device lines), else the CPU (system info, a
llama-bench CSV/JSON `cpu_info`). doctor/derive/speed.py holds measured speed against them.
When the log does not say enough, `spec.device` is unknown and its reason is the one fact that
would settle it ("which GPU ran this? the log does not name it").

`bench.*` are what a pasted llama-bench table holds besides the representative speeds (those go to
`run.prefill_tps` / `run.decode_tps`): every row stays as evidence.
"""

FACTS: list[tuple[str, str, str | None, str]] = [
    ("spec.device", "str", None, "the hardware whose published spec the speed verdict uses (its spec-table row)"),
    ("spec.kind", "str", None, "what that device is: cpu | gpu | apple (unified memory)"),
    ("spec.log_name", "str", None, "the device name as the log printed it (what the spec row matched)"),
    ("spec.mem_bw_gbs", "float", "GB/s", "published peak memory bandwidth of that device"),
    ("spec.fp16_tflops", "float", "TFLOPS", "published dense FP16 matrix throughput (FP32 accumulate where "
     "the vendor gives both)"),
    ("spec.int8_tops", "float", "TOPS", "published dense INT8 matrix throughput (tensor / matrix cores; what "
     "llama.cpp's MMQ kernels run a quantized model's prompt on)"),
    ("spec.bf16_tflops", "float", "TFLOPS", "published dense BF16 matrix throughput"),
    ("spec.fp32_tflops", "float", "TFLOPS", "published FP32 throughput (non-tensor)"),
    ("spec.cpu_gflops", "float", "GFLOP/s", "a CPU's vector peak: cores x clock x FP32 FLOPs a cycle of its "
     "widest vector unit, where the spec table gives them"),
    ("spec.pcie_gbs", "float", "GB/s", "one-way PCIe bandwidth of the device's link (generation x width, "
     "PCI-SIG per-lane rate)"),
    ("spec.cores", "int", "cores", "published physical core count of the CPU the log names"),
    ("spec.perf_cores", "int", "cores", "published performance cores (P-cores, big cores) of a hybrid or "
     "big.LITTLE CPU the log names"),
    ("spec.source", "str", None, "the document the spec row cites"),
    ("spec.confidence", "str", None, "how sure the spec row is: high (a vendor figure) | medium (derived or "
     "recalled with doubt; the row's notes say which)"),
    ("spec.host_device", "str", None, "the CPU's spec-table row when a GPU ran the model (the host side "
     "of a partial offload)"),
    ("spec.host_mem_bw_gbs", "float", "GB/s", "published peak memory bandwidth of that CPU platform"),
    ("spec.host_source", "str", None, "the document the CPU's spec row cites"),
    ("bench.rows", "int", "rows", "result rows in the llama-bench table(s) read"),
    ("bench.tests", "list", None, "every llama-bench row: test, t/s and the settings that vary, as printed"),
    ("bench.prefill_test", "str", None, "the llama-bench test the prefill speed comes from (pp512, ...)"),
    ("bench.decode_test", "str", None, "the llama-bench test the decode speed comes from (tg128, ...)"),
    ("bench.backend", "str", None, "the backend column of the llama-bench table (CUDA, Metal,BLAS, Vulkan, CPU)"),
]

LABELS = frozenset({"spec.kind", "spec.confidence", "bench.backend", "bench.prefill_test", "bench.decode_test"})
