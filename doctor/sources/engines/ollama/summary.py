"""The Ollama parser's summary: the facts that need the whole input (the offload estimate against the
runner's own count, GPUs, the context per slot, the CLI statistics, memory per device, runner OOMs
placed by what Ollama's estimate covered, the load rate), written at each snapshot.

Pure.
"""

from __future__ import annotations

from typing import Any

from doctor.core.facts import Event, Facts, Source
from doctor.sources.engines.ollama.patterns import NAMED_ALLOCATION
from doctor.sources.engines.ollama.state import OllamaBase
from doctor.sources.logs.base import Extremes


class Summary(OllamaBase):
    """The whole-input facts of the Ollama parser."""

    # -- summary ------------------------------------------------------------------------------------------
    def summarize(self, facts: Facts) -> None:
        s = self.s
        if not self.votes:
            return
        self._summarize_offload(facts)
        self._summarize_gpus(facts)
        self._summarize_context(facts)
        self._summarize_cli(facts)
        self._summarize_memory(facts)
        self._summarize_failures(facts)
        self._summarize_progress(facts)
        if s.requests and s.gin_line is not None:
            src = self.src(s.gin_line)
            if not facts.has("run.requests"):
                facts.set("run.requests", s.requests, src)
            facts.set("server.http_errors", s.errors_5xx, src)
        if s.start_s is not None and s.start_line is not None and not facts.has("run.load_ms"):
            facts.set("run.load_ms", round(s.start_s * 1000, 1), self.src(s.start_line))

    def _summarize_offload(self, facts: Facts) -> None:
        off = self.s.offload
        if off is None or off.library == "cpu" or off.offload is None:
            return
        src = self.src(off.line)
        total = facts.get("run.total_layers")
        if off.model is None and total is not None and total.known and not facts.has("server.ollama.layers_model"):
            # v0.1.33-44 logged no model layer count; the runner's own "offloaded N/M layers" has it
            facts.set("server.ollama.layers_model", total.value, total.source)
        if not facts.has("run.offloaded_layers"):
            facts.set("run.offloaded_layers", off.offload, src)
            if off.model is not None:
                facts.set("run.total_layers", off.model, src)
        if not facts.has("engine.gpu_offload_supported"):
            facts.set("engine.gpu_offload_supported", True, src)

    def _summarize_gpus(self, facts: Facts) -> None:
        s = self.s
        if s.gpus and s.gpu_line is not None:
            src = self.src(s.gpu_line)
            facts.set("host.gpu.count", len(s.gpus), src)
            totals = [t for _, t, _ in s.gpus if t]
            if totals:
                facts.set("server.ollama.gpu_vram_max", max(totals), src)
            for i, (name, total, free) in enumerate(s.gpus):
                if name and not facts.has(f"host.gpu[{i}].name"):
                    facts.set(f"host.gpu[{i}].name", name, src)
                if total is not None:
                    facts.set(f"host.gpu[{i}].vram_total", total, src)
                if free is not None:
                    facts.set(f"host.gpu[{i}].vram_free", free, src)
        elif s.no_gpu_line is not None and not facts.has("host.gpu.count"):
            src = self.src(s.no_gpu_line)
            facts.set("host.gpu.count", 0, src)
            if facts.value("server.ollama.gpu_gated_avx") is not True:
                facts.set("host.gpu.vendor", "none", src)

    def _summarize_context(self, facts: Facts) -> None:
        s = self.s
        if s.ctx_size and s.runner_line is not None:
            src = self.src(s.runner_line)
            parallel = s.parallel or 1
            if not facts.has("config.n_ctx"):
                facts.set("config.n_ctx", s.ctx_size, src)
            if not facts.has("config.num_ctx"):
                # Ollama allocates num_ctx for each parallel slot: the runner's context is num_ctx x parallel
                facts.set("config.num_ctx", s.ctx_size // parallel, src)
            if not facts.has("config.n_ctx_seq"):
                facts.set("config.n_ctx_seq", s.ctx_size // parallel, src)
        num_ctx = facts.get("config.num_ctx")
        if num_ctx is not None and num_ctx.known:
            if not facts.has("server.ollama.num_ctx"):
                facts.set("server.ollama.num_ctx", num_ctx.value, num_ctx.source)
            if not facts.has("config.n_ctx_seq"):
                facts.set("config.n_ctx_seq", num_ctx.value, num_ctx.source)
        prompts = [e.data.get("n_tokens") for e in facts.events("truncation") if e.source == self.name]
        numbers = [n for n in prompts if isinstance(n, int)]
        if numbers:
            current = facts.value("run.prompt_tokens_max")
            if not isinstance(current, int) or max(numbers) > current:
                event = next(e for e in facts.events("truncation") if e.data.get("n_tokens") == max(numbers))
                facts.set("run.prompt_tokens_max", max(numbers), Source("log", self.name, event.line, event.text[:300]))

    def _summarize_cli(self, facts: Facts) -> None:
        blocks = [b for b in self.s.cli if b.line is not None]
        if not blocks:
            return
        last = blocks[-1]
        src = self.src(last.line) if last.line is not None else Source("log", self.name)
        for name, value in (("run.load_ms", last.load_ms),
                           ("run.prompt_tokens", last.prompt_tokens),
                           ("run.prefill_ms", last.prompt_ms),
                           ("run.prefill_tps", last.prompt_tps),
                           ("run.decode_tokens", last.eval_tokens),
                           ("run.decode_ms_total", last.eval_ms),
                           ("run.decode_tps", last.eval_tps),
                           ("run.total_ms", last.total_ms)):
            if value is not None:
                facts.set(name, value, src)
        # each extreme cites the line of its own block that holds it, not the last block
        prompts, used, rates = Extremes(), Extremes(), Extremes()
        for b in blocks:
            b_src = self.src(b.line) if b.line is not None else src
            prompts.add(b.prompt_tokens, self.src(b.prompt_line) if b.prompt_line is not None else b_src)
            used.add((b.prompt_tokens or 0) + (b.eval_tokens or 0), b_src)
            if b.eval_tps is not None and (b.eval_tokens or 0) > 1:
                rates.add(b.eval_tps, self.src(b.rate_line) if b.rate_line is not None else b_src)
        if prompts.high is not None and prompts.high > (facts.value("run.prompt_tokens_max") or 0):
            prompts.emit(facts, None, "run.prompt_tokens_max")
        if used.high is not None and used.high > (facts.value("run.tokens_used_max") or 0):
            used.emit(facts, None, "run.tokens_used_max")
        rates.emit(facts, "run.decode_tps_min", "run.decode_tps_max", at_least=2)
        facts.set("run.requests", len(blocks), src)
        self._summarize_thread_change(facts)

    def _summarize_thread_change(self, facts: Facts) -> None:
        """`/set parameter num_thread N` between two generations: their speeds before and after."""
        s = self.s
        for name, value, line, before_n in s.param_sets:
            if name != "num_thread" or not value.isdigit():
                continue
            before = [b for b in s.cli[:before_n] if b.eval_tps is not None and (b.eval_tokens or 0) > 1]
            after = [b for b in s.cli[before_n:] if b.eval_tps is not None and (b.eval_tokens or 0) > 1]
            if not before or not after:
                continue
            was, now = before[-1], after[0]
            facts.set("config.n_threads", int(value), self.src(line))
            facts.set("run.decode_tps_before_threads", was.eval_tps,
                      self.src(was.rate_line) if was.rate_line is not None else self.src(line))
            facts.set("run.decode_tps_after_threads", now.eval_tps,
                      self.src(now.rate_line) if now.rate_line is not None else self.src(line))
            return

    def _summarize_memory(self, facts: Facts) -> None:
        s = self.s
        if not s.memory or s.memory_line is None:
            return
        src = self.src(s.memory_line)

        def split(kind: str) -> tuple[int, int] | None:
            table = s.memory.get(kind)
            if not table:
                return None
            host = sum(v for d, v in table.items() if d.upper().startswith("CPU"))
            return sum(table.values()) - host, host

        for kind, gpu_name, host_name in (("model weights", "run.weights_gpu_bytes", "run.weights_host_bytes"),
                                          ("kv cache", "run.kv_gpu_bytes", "run.kv_host_bytes")):
            pair = split(kind)
            if pair is not None and not facts.has(gpu_name):
                facts.set(gpu_name, pair[0], src)
                facts.set(host_name, pair[1], src)
        kv = split("kv cache")
        if kv is not None and not facts.has("run.kv_bytes"):
            facts.set("run.kv_bytes", kv[0] + kv[1], src)
        graph_table = s.memory.get("compute graph") or {}
        gpu_graphs = {d: v for d, v in graph_table.items() if not d.upper().startswith("CPU")}
        if gpu_graphs:
            device = max(gpu_graphs, key=lambda d: gpu_graphs[d])
            facts.set("server.ollama.graph_gpu_max_bytes", gpu_graphs[device], src)
            facts.set("server.ollama.graph_gpu_device", device, src)
        graph = split("compute graph")
        if graph is not None and not facts.has("run.compute_bytes"):
            facts.set("run.compute_bytes", graph[0] + graph[1], src)
            facts.set("run.compute_gpu_bytes", graph[0], src)

    def _summarize_failures(self, facts: Facts) -> None:
        """GPU discovery that failed with no GPU found after it; runner OOMs placed by what Ollama's own
        estimate covered."""
        s = self.s
        found_gpu = bool(s.gpus) or (s.offload is not None and s.offload.library not in (None, "cpu")
                                     and (s.offload.offload or 0) > 0)
        if s.gpu_failures and not found_gpu:
            for cause, line, code, text in s.gpu_failures:
                data: dict[str, Any] = {"backend": "CUDA", "reason": text, "cause": cause, "engine": "ollama"}
                if code:
                    data["code"] = code
                facts.add_event(Event("gpu_init_failed", line.number, line.raw[:400], self.name, None, data))
        if not s.runner_ooms or any(NAMED_ALLOCATION.search(e.text) for e in facts.events("oom")):
            return  # no runner OOM, or llama.cpp said which buffer it could not allocate: its phase stands
        placed = facts.value("run.offloaded_layers")
        estimate = s.offload is not None or bool(s.memory) or isinstance(placed, int)
        old_era = s.old_estimate_line is not None or s.old_go_log
        kv, available = facts.value("server.ollama.memory_required_kv"), facts.value("server.ollama.memory_available")
        kv_dominates = isinstance(kv, int) and isinstance(available, int) and available > 0 and kv * 2 >= available
        for line, kind, served, image in s.runner_ooms:
            data = {"engine": "ollama", "failure": kind, "phase_from": "engine"}
            if image:
                data["step"] = "image_encode"
                phase = "runtime"
            elif estimate and kv_dominates:
                # the KV cache of num_ctx x parallel alone takes most of the GPU: the context is what to cut
                data.update(estimate="full", cause="num_ctx", kv=kv, available=available)
                phase = "kv_cache"
            elif estimate:
                # Ollama's estimate counted weights, KV cache and graph, and placed the layers by it: an
                # allocation that still fails is the compute headroom the estimate did not leave
                data["estimate"] = "full"
                phase = "runtime" if served else "compute"
                layers = placed if isinstance(placed, int) else (s.offload.offload if s.offload else None)
                if isinstance(layers, int) and layers > 0:
                    data["offloaded"] = layers
                    data["suggest_num_gpu"] = max(0, layers - max(2, layers // 8))
            elif old_era:
                # before v0.1.33 (the "llama.go:" log) the layer count came from the file size per layer
                # alone: the KV cache of num_ctx was left out, and it is what did not fit
                data["estimate"] = "weights_only"
                phase = "kv_cache"
            else:
                continue
            facts.add_event(Event("oom", line.number, line.raw[:400], self.name, phase, data))

    def _summarize_progress(self, facts: Facts) -> None:
        """`model load progress` (debug) timestamps and the size being loaded give the load rate."""
        s = self.s
        if len(s.progress) < 2:
            return
        (t0, p0, first), (t1, p1, last) = s.progress
        size = facts.value("model.file_bytes")
        if not isinstance(size, int):
            weights = s.memory.get("model weights")
            size = sum(weights.values()) if weights else facts.value("server.ollama.memory_weights")
        if not isinstance(size, int):  # the runner's own buffers (llama.cpp's "... buffer size =" lines)
            parts = [facts.value(name) for name in ("run.weights_gpu_bytes", "run.weights_host_bytes")]
            size = sum(p for p in parts if isinstance(p, int)) or None
        if not isinstance(size, int) or size <= 0 or t1 <= t0 or p1 <= p0:
            return
        rate = (p1 - p0) * size / (t1 - t0)
        src = Source("log", self.name, last.number,
                     f"model load progress {p0:.2f} (line {first.number}) to {p1:.2f} (line {last.number}) in "
                     f"{t1 - t0:.1f} s, of {size / (1 << 30):.1f} GiB")
        if not facts.has("model.file_bytes"):
            facts.set("model.file_bytes", size, src)
        facts.set("run.load_ms", round(size / rate * 1000, 1), src)
        facts.set("run.load_mb_s", round(rate / 1e6, 1), src)
