"""The llama.cpp parser's memory lines: allocation failures and out-of-memory messages (placed in the
start-up phase they hit, or held until a later line names it), failed and corrupt model loads, the
crash line, and Metal's working-set check. Patterns: patterns.py (ggml's OOM messages:
../_ggml/oom.py).

Pure.
"""

from __future__ import annotations

from typing import Any

from doctor.sources.engines._ggml.oom import BACKEND_OOM
from doctor.sources.engines.llamacpp.patterns import (
    ALLOC_RANGE,
    COMPUTE_FUNCTION,
    CONTEXT_FAILED,
    CORRUPT,
    CPU_ALLOC,
    CRASH,
    CUDA_MALLOC,
    CUDA_MALLOC_BARE,
    CUDA_WHERE,
    CUDA_WHERE_KIND,
    GALLOCR,
    LOAD_FAILED,
    MEMORY_KEYS,
    MEMORY_KIND,
    METAL_ALLOCATED,
    METAL_COMMAND_BUFFER,
    METAL_KIND,
    METAL_OVER_SET,
    METAL_SET_SIZE,
    MIB,
    PHASE_COMPUTE,
    PHASE_KV,
    PHASE_WEIGHTS,
    is_gpu_buffer,
)
from doctor.sources.engines.llamacpp.state import LlamaCppBase, PendingOom
from doctor.sources.logs.base import reads
from doctor.sources.logs.line import LogLine


class MemoryLines(LlamaCppBase):
    """The memory kinds of the llama.cpp parser."""

    @reads(MEMORY_KIND)
    def _step_memory(self, line: LogLine) -> bool:
        t = line.text
        return any(k in t for k in MEMORY_KEYS) and self._memory(line)

    def _memory(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = CUDA_MALLOC.search(t)
        if m:
            if "out of memory" in m.group(3):
                data: dict[str, Any] = {"bytes": int(float(m.group(1)) * MIB), "device": int(m.group(2))}
                s.pending.append(PendingOom(line, data, s.stage))
            else:
                self.event("alloc_failed", line, phase=self._stage_phase(line), reason=m.group(3)[:120])
            return True
        m = ALLOC_RANGE.search(t)
        if m:
            buf = m.group(1)
            phase: str | None = "kv_cache" if s.stage in ("context",) else "weights"
            device = buf if is_gpu_buffer(buf) else "host"
            s.pending.append(PendingOom(line, {"bytes": int(m.group(2)), "buffer": buf, "device": device},
                                         s.stage, phase))
            return True
        m = GALLOCR.search(t)
        if m:
            buf = m.group(1)
            device = buf if is_gpu_buffer(buf) else "host"
            s.pending.append(PendingOom(line, {"bytes": int(m.group(2)), "buffer": buf, "device": device},
                                         s.stage, "compute"))
            return True
        m = CPU_ALLOC.search(t)
        if m:
            s.pending.append(PendingOom(line, {"bytes": int(m.group(1)), "device": "host"}, s.stage))
            return True
        if PHASE_KV.search(t):
            self._flush_oom("kv_cache", line)
            return True
        if PHASE_COMPUTE.search(t):
            self._flush_oom("compute", line)
            return True
        m = PHASE_WEIGHTS.search(t)
        if m:
            self._flush_oom("weights", line)
            self.event("load_failed", line, reason="allocation")
            return True
        m = BACKEND_OOM.search(t)
        if m:
            # a backend that ran out after start-up: the run's timeline places it when the pending OOMs are
            # emitted (a request's first batch, a warm-up, serving), unless a later line names its buffer
            data = {}
            if m.group(2):
                data["bytes"] = int(m.group(2))
            s.pending.append(PendingOom(line, data, s.stage))
            if METAL_COMMAND_BUFFER.search(t):
                # Metal reports it through a command buffer's completion: a graph was being computed
                # (ggml-metal.m ggml_metal_graph_compute: "command buffer %d failed with status %lu", then
                # "error: %s" with the NSError's text, kIOGPUCommandBufferCallbackErrorOutOfMemory)
                s.pending[-1].computing = line
            self._computing(line)  # the whole CUDA error block pasted on one line
            return True
        if CUDA_MALLOC_BARE.search(t):
            recent = self.facts.events("oom")[-4:]
            if not s.pending and any(0 < line.number - (e.line or 0) <= 200 for e in recent):
                return True  # a wrapper restating the OOM just reported (Ollama: "llama runner process has terminated")
            s.pending.append(PendingOom(line, {}, s.stage))
            return True
        m = CORRUPT.search(t)
        if m:
            self.event("load_failed", line, reason="corrupt", **({"arch": m.group(1)} if m.group(1) else {}))
            return True
        m = LOAD_FAILED.search(t)
        if m:
            reason = next((g for g in m.groups() if g), "")
            if s.pending:
                self._flush_oom("weights", None)
            self.event("load_failed", line, reason=("missing" if "does not exist" in t else "other"),
                       detail=reason.strip()[:200])
            return True
        m = CONTEXT_FAILED.search(t)
        if m:
            if s.pending:
                self._flush_oom(None, None)
            self.event("context_failed", line, **({"detail": m.group(1)[:200]} if m.group(1) else {}))
            return True
        if CRASH.search(t) and not t.lstrip().startswith(("#", "//")):
            if s.pending:
                self._flush_oom(None, None)
            placed = self.placed(line)  # what the run had done when it aborted
            if placed is not None:
                self.placed_event("crash", line, placed, in_phase=False)
            else:
                self.event("crash", line)
            return True
        return False

    @reads(CUDA_WHERE_KIND)
    def _cuda_where(self, line: LogLine) -> bool:
        """The function a CUDA error names: one that computes a graph places the OOM before it at compute time."""
        return self._computing(line)

    def _computing(self, line: LogLine) -> bool:
        m = CUDA_WHERE.search(line.text)
        pending = self.s.pending
        if m is None or not pending or line.number - pending[-1].line.number > 3:
            return False
        if COMPUTE_FUNCTION.match(m.group(2)):
            pending[-1].computing = line
        return True

    @reads(METAL_KIND)
    def _step_metal(self, line: LogLine) -> bool:
        """Metal's working-set check: past recommendedMaxWorkingSetSize the GPU pages and then fails."""
        t = line.text
        s = self.s
        m = METAL_SET_SIZE.search(t)
        if m:
            self.votes["llama.cpp-library"] += 1
            s.metal_set_mib = float(m.group(1)) * 1e6 / MIB
            s.backends.add("Metal")
            return True
        m = METAL_ALLOCATED.search(t)
        if m:
            self.votes["llama.cpp-library"] += 1
            s.metal_alloc = (float(m.group(2)), float(m.group(3)), line)
            if float(m.group(2)) > float(m.group(3)) > 0:
                self._metal_over(line)
            return True
        if METAL_OVER_SET.search(t):
            self._metal_over(line)
            return True
        return False

    def _metal_over(self, line: LogLine) -> None:
        s = self.s
        if s.metal_over:
            return
        s.metal_over = True
        data: dict[str, Any] = {"device": "Metal", "limit": "recommendedMaxWorkingSetSize", "phase_from": "message"}
        if s.metal_alloc is not None:
            data["bytes"] = int(s.metal_alloc[0] * MIB)
            data["available"] = int(s.metal_alloc[1] * MIB)
        elif s.metal_set_mib:
            data["available"] = int(s.metal_set_mib * MIB)
        self.event("oom", line, phase="weights", **data)
