"""The llama.cpp parser's hardware and sampling lines: threads and CPU features (system_info), GPU
devices and backends found, loaded or failing to start (../_ggml/gpu_failures.py), the build, and the
sampler's settings. Patterns: patterns.py.

Pure.
"""

from __future__ import annotations

from doctor.sources.engines._ggml.gpu_failures import gpu_failure_cause
from doctor.sources.engines.llamacpp.patterns import (
    BACKEND_LOADED,
    BACKEND_NOT_LOADED,
    BUILD,
    CUDA_DEVICE,
    CUDA_FOUND,
    FEATURE,
    GPU_BACKENDS,
    GPU_INIT_FAILED,
    GPU_RUNTIME_FAILED,
    HARDWARE_KIND,
    METAL_DEVICE,
    MIB,
    NO_GPU,
    SAMPLER_KEYS,
    SAMPLER_KV,
    SAMPLING_KIND,
    SECTION,
    SEED,
    SERVER_THREADS,
    SYSINFO_THREADS,
    USING_DEVICE,
    VULKAN_DEVICE,
    VULKAN_FOUND,
    backend_of,
)
from doctor.sources.engines.llamacpp.state import LlamaCppBase
from doctor.sources.logs.base import reads
from doctor.sources.logs.line import LogLine


class HardwareLines(LlamaCppBase):
    """The hardware and sampling kinds of the llama.cpp parser."""

    @reads(HARDWARE_KIND)
    def _hardware(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = SYSINFO_THREADS.search(t) or SERVER_THREADS.search(t)
        if m:
            self.set("config.n_threads", int(m.group(1)), line)
            if m.group(2):
                self.set("config.n_threads_batch", int(m.group(2)), line)
            self.set("host.cpu.logical_cores", int(m.group(3)), line)
            self.votes["llama.cpp"] += 1
        if " = 1" in t and ("AVX" in t or "NEON" in t or "SSE3" in t):
            found = set(FEATURE.findall(t))
            self.set("engine.cpu_features", sorted(found - {"LLAMAFILE", "OPENMP", "REPACK", "USE_GRAPHS"}), line)
            self.set("engine.cpu_repack", "REPACK" in found, line)
            sections = {sec for sec in SECTION.findall(t) if sec not in ("system_info",)}
            if sections:
                gpu = sorted(sec for sec in sections if sec.upper() in {b.upper() for b in GPU_BACKENDS})
                self.set("engine.backends", sorted(sections), line)
                self.set("engine.gpu_offload_supported", bool(gpu), line)
                for b in gpu:
                    s.backends.add(b)
            return True
        if m:
            return True
        m = CUDA_FOUND.search(t)
        if m:
            self.votes["llama.cpp-library"] += 1
            s.backends.add(m.group(2))
            s.backends_line = s.backends_line or line
            self.set("host.gpu.count", int(m.group(1)), line)
            self.set("engine.gpu_offload_supported", True, line)
            return True
        m = CUDA_DEVICE.search(t)
        if m:
            idx = int(m.group(1))
            s.gpu_names[idx] = m.group(2).strip()
            if m.group(3):
                s.gpu_vram[idx] = int(m.group(3)) * MIB
            self.set(f"host.gpu[{idx}].name", m.group(2).strip(), line)
            if m.group(3):
                self.set(f"host.gpu[{idx}].vram_total", int(m.group(3)) * MIB, line)
            return True
        m = USING_DEVICE.search(t)
        if m:
            s.gpu_free[m.group(1)] = int(m.group(3)) * MIB
            s.gpu_line = line
            s.backends.add(backend_of(m.group(1)))
            return True
        m = BACKEND_LOADED.search(t)
        if m:
            s.backends.add(m.group(1))
            s.backends_line = s.backends_line or line
            if m.group(1).upper() != "CPU":
                self.set("engine.gpu_offload_supported", True, line)
            return True
        m = VULKAN_FOUND.search(t)
        if m:
            s.backends.add("Vulkan")
            self.set("host.gpu.count", int(m.group(1)), line)
            return True
        m = VULKAN_DEVICE.search(t)
        if m:
            s.backends.add("Vulkan")
            if int(m.group(1)) < 16:  # a device index, not a hostile number that makes thousands of facts
                self.set(f"host.gpu[{int(m.group(1))}].name", m.group(2).strip(), line)
            return True
        m = METAL_DEVICE.search(t)
        if m:
            s.backends.add("Metal")
            self.set("host.gpu[0].name", m.group(1).strip(), line)
            return True
        if NO_GPU.search(t):
            self.event("no_gpu", line)
            self.set("engine.gpu_offload_supported", False, line)
            return True
        m = GPU_INIT_FAILED.search(t) or GPU_RUNTIME_FAILED.search(t)
        if m:
            reason = m.group(2).strip()[:200]
            cause, code = gpu_failure_cause(t)
            self.event("gpu_init_failed", line, backend=m.group(1), reason=reason, cause=cause,
                       **({"code": code} if code else {}))
            return True
        m = BACKEND_NOT_LOADED.search(t)
        if m:
            self.event("gpu_init_failed", line, backend=(m.group(2) or m.group(1)).rsplit("/", 1)[-1][:80],
                       reason="the backend library did not load", cause="not_loaded")
            return True
        m = BUILD.search(t)
        if m and ("build" in t[:40] or "llama" in t or t.lstrip().startswith("version:")):
            self.set("engine.build", int(m.group(1)), line)
            self.set("engine.version", f"b{m.group(1)} ({m.group(2)})", line)
            return True
        return False

    @reads(SAMPLING_KIND)
    def _sampling(self, line: LogLine) -> bool:
        t = line.text
        if any(k in t for k in SAMPLER_KEYS):
            found = False
            for key, value in SAMPLER_KV.findall(t):
                target = {"temp": "temperature"}.get(key, key)
                number = float(value)
                is_int = key in ("top_k", "repeat_last_n", "mirostat")
                self.set(f"sampling.{target}", int(number) if is_int else number, line)
                found = True
            if found:
                return True
        m = SEED.search(t)
        if m and ("sampler" in t or "seed =" in t):
            self.set("sampling.seed", int(m.group(1) or m.group(2)), line)
            return True
        return False
