"""Probes: read the machine (storage under the model, GPUs, PCIe, CPU, RAM, the engine install, the
GGUF file) and report facts. One module per probe; each returns a Facts snapshot and never raises -
a value it cannot read is *unknown* with the reason. Every probe takes the roots it reads
(`/sys`, `/proc`, an NVML module, a psutil module) as parameters, so recorded machines under
fixtures/machines/ replay anywhere.

Costs: "passive" (reads files/APIs, milliseconds), "light" (imports an engine, tens of ms),
"heavy" (benchmarks that read the disk or load the GPU; only with `scan --bench`).
"""
