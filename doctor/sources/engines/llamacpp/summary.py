"""The llama.cpp parser's summary: the facts that need the whole input (buffers added up per device and
kind, requests, decode-rate extremes, backends, a CPU-only build, the generated output), written at
each snapshot without ending the reading.

Pure.
"""

from __future__ import annotations

from doctor.core.facts import Facts, Source
from doctor.sources.engines.llamacpp.patterns import (
    GPU_BACKENDS,
    MIB,
    NGL_DEFAULT_ALL_BUILD,
    OLD_BINARIES,
    is_gpu_buffer,
    is_repack_buffer,
)
from doctor.sources.engines.llamacpp.state import LlamaCppBase


class Summary(LlamaCppBase):
    """The whole-input facts of the llama.cpp parser."""

    def summarize(self, facts: Facts) -> None:
        s = self.s
        if s.pending:
            saved = self.facts
            self.facts = facts
            pend = list(s.pending)
            self._flush_oom(None)
            s.pending = pend  # keep them pending: more lines may come
            self.facts = saved
        if s.current is not None and (s.current.prompt_ms is not None or s.current.eval_ms is not None):
            cur = s.current
            used = cur.total_tokens or ((cur.prompt_tokens or 0) + (cur.eval_tokens or 0))
            if used > s.used_max:
                facts.set("run.tokens_used_max", used, Source("log", self.name, cur.line))
        if s.timings:
            facts.set("run.requests", len(s.timings), Source("log", self.name, s.timings[-1].line))
        s.decode_rates.emit(facts, "run.decode_tps_min", "run.decode_tps_max", at_least=2)
        if s.used_max and s.used_line is not None:
            facts.set("run.tokens_used_max", s.used_max, Source("log", self.name, s.used_line.number or None,
                                                                 s.used_line.raw[:300] or None))
        if s.prompt_tokens_max and s.prompt_line is not None:
            facts.set("run.prompt_tokens_max", s.prompt_tokens_max, self.src(s.prompt_line))
        self._summarize_buffers(facts)
        if s.gpu_free and s.gpu_line is not None:
            facts.set("run.gpu_free_at_load", sum(s.gpu_free.values()), self.src(s.gpu_line))
        if s.backends:
            line = s.backends_line or s.buffer_line
            src = self.src(line) if line is not None else Source("log", self.name)
            existing = facts.value("engine.backends")
            merged = sorted(set(existing or []) | s.backends | ({"CPU"} if existing is None else set()))
            facts.set("engine.backends", merged, src)
            if any(b.upper() in {g.upper() for g in GPU_BACKENDS} for b in s.backends):
                facts.set("engine.gpu_offload_supported", True, src)
        self._summarize_cpu_only(facts)
        self._summarize_default_layers(facts)
        self._summarize_fit(facts)
        if s.finish_reason and s.finish_line is not None:
            facts.set("run.finish_reason", s.finish_reason, self.src(s.finish_line))
        if s.output:
            facts.set("run.output_text", "".join(s.output)[-8192:],
                      Source("log", self.name, s.output_line, "generated output"))

    def _summarize_fit(self, facts: Facts) -> None:
        """--fit's placement: the layers it put on the GPUs, and those whose experts overflow elsewhere."""
        devices = self.s.fit_devices
        if not devices:
            return
        last = max(devices.values(), key=lambda d: d[2].number)[2]
        facts.set("run.fit_gpu_layers", sum(d[0] for d in devices.values()), self.src(last))
        overflow = sum(d[1] for d in devices.values())
        if overflow:
            facts.set("run.fit_overflow_layers", overflow, self.src(last))

    def _summarize_default_layers(self, facts: Facts) -> None:
        """A command line without -ngl on a build whose default was 0 GPU layers: n_gpu_layers is 0."""
        command = self.s.command
        if command is None or command[1] or facts.has("config.n_gpu_layers"):
            return
        binary, _, line = command
        build = facts.value("engine.build")
        name = binary.replace("\\", "/").rsplit("/", 1)[-1]
        if name in OLD_BINARIES or (isinstance(build, int) and build < NGL_DEFAULT_ALL_BUILD):
            facts.set("config.n_gpu_layers", 0, self.src(line))

    def _summarize_cpu_only(self, facts: Facts) -> None:
        """A GPU build of llama.cpp prints "offloaded N/M layers to GPU" (0/M too) before the model buffers;
        a CPU-only build prints no such line. Model buffers on the host, no offload line and no GPU backend
        anywhere in the input: the engine has no GPU backend (llama-cpp-python's default pip wheel)."""
        s = self.s
        if (facts.has("engine.gpu_offload_supported") or not s.model_buffers or s.buffer_line is None
                or any(is_gpu_buffer(b) for b in s.model_buffers) or facts.has("run.offloaded_layers")
                or any(b.upper() in {g.upper() for g in GPU_BACKENDS} for b in s.backends)
                or facts.events("gpu_init_failed") or facts.has("host.gpu.count")):
            return
        line = s.buffer_line
        facts.set("engine.gpu_offload_supported", False,
                  Source("log", self.name, line.number, line.raw[:300]))
        if not facts.has("engine.backends"):
            facts.set("engine.backends", ["CPU"], Source("log", self.name, line.number, line.raw[:300]))

    def _summarize_buffers(self, facts: Facts) -> None:
        s = self.s
        if s.buffer_line is None and s.kv_line is None:
            return
        src = self.src(s.buffer_line) if s.buffer_line is not None else self.src(s.kv_line)  # type: ignore[arg-type]

        def split(table: dict[str, float]) -> tuple[int, int]:
            gpu = sum(v for k, v in table.items() if is_gpu_buffer(k))
            host = sum(v for k, v in table.items() if not is_gpu_buffer(k))
            return int(gpu * MIB), int(host * MIB)

        if s.model_buffers:
            gpu, host = split(s.model_buffers)
            facts.set("run.weights_gpu_bytes", gpu, src)
            facts.set("run.weights_host_bytes", host, src)
            repack = sum(v for k, v in s.model_buffers.items() if is_repack_buffer(k))
            if repack:
                facts.set("run.weights_repack_bytes", int(repack * MIB), src)
        if s.kv_buffers:
            gpu, host = split(s.kv_buffers)
            facts.set("run.kv_gpu_bytes", gpu, src)
            facts.set("run.kv_host_bytes", host, src)
            facts.set("run.kv_bytes", gpu + host, src)
        if s.kv_size_lines:
            kv_src = self.src(s.kv_line) if s.kv_line is not None else src
            if not s.kv_buffers:
                facts.set("run.kv_bytes", int(sum(x[0] for x in s.kv_size_lines) * MIB), kv_src)
            cells = sum(c * n for _, c, n in s.kv_size_lines)
            if cells:
                facts.set("run.kv_cells", cells, kv_src)
        if s.compute_buffers:
            gpu, host = split(s.compute_buffers)
            facts.set("run.compute_bytes", gpu + host, src)
            facts.set("run.compute_gpu_bytes", gpu, src)
        if s.output_buffers:
            facts.set("run.output_bytes", int(sum(s.output_buffers.values()) * MIB), src)
