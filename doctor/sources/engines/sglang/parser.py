"""SGLang server logs: start-up (server arguments, the KV pool), the scheduler's batch lines, and its
memory and request-length errors.

Format strings from SGLang's source, read at 0.3.0 (2024-09), 0.4.3 (2025-02) and 0.5.23 (2026):
- `server_args=ServerArgs(model_path='...', ..., mem_fraction_static=0.88, ...)` (srt/server.py, later
  srt/entrypoints/engine.py);
- `max_total_num_tokens=N, [chunked_prefill_size=C, ]max_prefill_tokens=P, max_running_requests=R,
  context_len=L[, available_gpu_mem=G GB]` (managers/tp_worker.py, then managers/scheduler.py): the
  KV pool in tokens beside the longest request;
- `Load weight end. [elapsed=S s, ]type=..., dtype=..., avail mem=X GB[, mem usage=Y GB]` (elapsed: the load
  time), `Memory pool end. avail mem=X GB` (model_executor/model_runner.py);
- `Prefill batch[(mixed #running-req: M)]. #new-seq: ...` / `Prefill batch[ [iter]], #new-seq: ...` and
  `Decode batch. #running-req: R, #token: T, token usage: U, ... gen throughput (token/s): G, #queue-req: Q`
  (scheduler.py, later scheduler_components/metrics_reporter.py; `.` became `,` after the name);
- `Decode out of memory happened. #retracted_reqs: N` (to 0.4) and `KV cache pool is full. Retract
  requests. #retracted_reqs: N` (0.5): the pool filled while decoding, requests went back to the queue;
- `Not enough memory. Please try to increase --mem-fraction-static.`: no room for the KV pool;
- `Capture cuda graph failed: ...` with PyTorch's out-of-memory text: CUDA graphs did not fit;
- `The input (N tokens) is longer than the model's context length (M tokens).` and `Requested token
  count exceeds the model's maximum context length of M tokens. You requested a total of T tokens: I
  tokens from the input messages and N tokens for the completion.` (managers/tokenizer_manager.py);
  with --allow-auto-truncate the same texts end in `Truncating the input.` / `Truncating max_new_tokens.`

Pure.
"""

from __future__ import annotations

from doctor.core.facts import Facts
from doctor.sources.engines.sglang.fold import BatchFold
from doctor.sources.engines.sglang.patterns import (
    ARG,
    ARGS,
    ARGS_KIND,
    BATCH,
    BATCH_KIND,
    CAPTURE_BEGIN,
    GIB,
    GRAPH_FAILED,
    INPUT_TOO_LONG,
    KINDS,
    LENGTH_KIND,
    LOAD_BEGIN,
    MEMORY_KIND,
    NO_POOL,
    OUT_OF_MEMORY,
    POOL,
    POOL_END,
    POOL_KIND,
    READY,
    READY_KIND,
    RETRACT,
    STAT,
    STEP_KIND,
    TOTAL_TOO_LONG,
    TOTAL_TRUNCATED,
    WEIGHTS,
)
from doctor.sources.engines.sglang.state import GEN_TPS_KEPT, new_run
from doctor.sources.logs.base import reads
from doctor.sources.logs.line import LogLine


class SglangParser(BatchFold):
    """Reads SGLang's server logs (its batch lines are folded a run at a time: fold.py)."""

    kinds = KINDS

    def feed(self, line: LogLine) -> None:
        t = line.text
        if not self.passes_gate(t):
            return
        self.dispatch(line)

    # -- start-up ----------------------------------------------------------------------------------
    @reads(ARGS_KIND)
    def _args(self, line: LogLine) -> bool:
        if not ARGS.search(line.text):
            return False
        self._vote()
        self.s = new_run()
        for key, raw in ARG.findall(line.text):
            value = raw.strip("'")
            if value in ("None", ""):
                continue
            if key == "model_path":
                self.set("model.name", value[:200], line)
            elif key == "context_length" and value.isdigit():
                self.set("config.max_model_len", int(value), line)
            elif key == "mem_fraction_static":
                self.set("server.sglang.mem_fraction_static", float(value), line)
            elif key == "max_running_requests" and value.isdigit():
                self.set("server.sglang.max_running_requests", int(value), line)
            elif key == "chunked_prefill_size" and value.lstrip("-").isdigit():
                self.set("config.max_num_batched_tokens", int(value), line)
            elif key == "tp_size" and value.isdigit():
                self.set("server.sglang.tp_size", int(value), line)
            elif key == "kv_cache_dtype":
                self.set("config.kv_cache_dtype", value, line)
            elif key == "disable_cuda_graph":
                self.set("server.sglang.disable_cuda_graph", value == "True", line)
        return True

    @reads(POOL_KIND)
    def _pool(self, line: LogLine) -> bool:
        t = line.text
        m = POOL.search(t)
        if m:
            self._vote()
            pool, context = int(m.group(1)), int(m.group(5))
            self.set("server.kv_tokens", pool, line)
            self.set("server.sglang.max_running_requests", int(m.group(4)), line)
            self.set("config.n_ctx_seq", context, line)
            self.set("config.max_model_len", context, line)
            self.set("server.max_len_fit", min(pool, context), line)
            self.mark("profile", line)  # the token pool is sized: its allocation comes next
            if m.group(2) is not None:
                self.set("config.max_num_batched_tokens", int(m.group(2)), line)
            return True
        m = WEIGHTS.search(t)
        if m:
            self._vote()
            if m.group(3):
                self.set("server.weights_bytes", int(float(m.group(3)) * GIB), line)
            if m.group(1):  # newer releases say how long reading the weights took
                self.set("run.load_ms", round(float(m.group(1)) * 1000, 1), line)
            self.mark("weights", line)
            return True
        m = POOL_END.search(t)
        if m:
            self._vote()
            self.set("server.sglang.avail_after_pool_bytes", int(float(m.group(1)) * GIB), line)
            self.mark("kv", line)
            return True
        return False

    # -- serving -----------------------------------------------------------------------------------
    @reads(BATCH_KIND)
    def _batch(self, line: LogLine) -> bool:
        t = line.text
        m = BATCH.search(t)
        if not m:
            return False
        stats = dict(STAT.findall(t[m.start():]))
        if not stats:
            return False
        self._vote()
        src = self.src(line)
        s = self.s
        if "#running-req" in stats:
            s.running.add(int(float(stats["#running-req"])), src)
        if "#queue-req" in stats and m.group(1) == "Decode":
            # waiting while others decode; a prefill line's queue counts a request being chunked in
            s.queued.add(int(float(stats["#queue-req"])), src)
        if "token usage" in stats:
            s.usage.add(round(float(stats["token usage"]) * 100.0, 1), src)
        if m.group(1) == "Decode" and "gen throughput (token/s)" in stats and len(s.gen_tps) < GEN_TPS_KEPT:
            s.gen_tps.append((float(stats["gen throughput (token/s)"]), src))
        return True

    @reads(MEMORY_KIND)
    def _memory(self, line: LogLine) -> bool:
        t = line.text
        m = RETRACT.search(t)
        if m:
            self._vote()
            n = int(m.group(1))
            self.s.retracted += n
            self.s.retract_source = self.src(line)
            self.event("preempted", line, mode="retract", count=n, total=self.s.retracted)
            return True
        if NO_POOL.search(t):
            self._vote()
            self.event("kv_capacity", line, reason="no_memory")
            return True
        if GRAPH_FAILED.search(t):
            self._vote()
            text = line.joined() if not OUT_OF_MEMORY.search(t) else t
            if OUT_OF_MEMORY.search(text):
                self.event("oom", line, phase="compute", step="cuda_graphs", phase_from="message", engine="sglang")
            return True
        return False

    @reads(LENGTH_KIND)
    def _length(self, line: LogLine) -> bool:
        t = line.text
        m = INPUT_TOO_LONG.search(t)
        if m:
            self._vote()
            n, limit = int(m.group(1)), int(m.group(2))
            if m.group(3):
                self.event("truncation", line, n_tokens=n, n_ctx=limit, limit="context_length")
            else:
                self.event("prompt_too_long", line, n_tokens=n, n_ctx=limit, prompt=n, limit="context_length")
            self.set("server.limit_tokens", limit, line)
            self.set("server.limit_name", "context_length", line)
            return True
        m = TOTAL_TOO_LONG.search(t)
        if m:
            self._vote()
            limit, total, prompt, completion = (int(g) for g in m.groups())
            self.event("prompt_too_long", line, n_tokens=total, n_ctx=limit, prompt=prompt, completion=completion,
                       limit="context_length")
            self.set("server.limit_tokens", limit, line)
            self.set("server.limit_name", "context_length", line)
            self.set("server.request_tokens_max", total, line)
            return True
        m = TOTAL_TRUNCATED.search(t)
        if m:
            self._vote()
            prompt, completion, limit = (int(g) for g in m.groups())
            self.event("truncation", line, n_tokens=prompt + completion, n_ctx=limit, prompt=prompt,
                       completion=completion, limit="context_length", what="max_new_tokens")
            return True
        return False

    @reads(READY_KIND)
    def _ready(self, line: LogLine) -> bool:
        if not READY.search(line.text):
            return False
        self._vote()
        self.mark("serving", line)
        return True

    @reads(STEP_KIND)
    def _step(self, line: LogLine) -> bool:
        """A start-up step SGLang only announces: loading the weights, capturing CUDA graphs."""
        t = line.text
        if LOAD_BEGIN.search(t):
            self.mark("load", line)
            return True
        if CAPTURE_BEGIN.search(t):
            self.mark("warmup", line, "cuda_graphs")
            return True
        return False

    def summarize(self, facts: Facts) -> None:
        s = self.s
        s.running.emit(facts, None, "server.running_max")
        if s.running.high is not None and s.running.high_source is not None:
            facts.set("server.max_num_seqs_suggested", max(1, int(s.running.high) // 2), s.running.high_source)
        s.queued.emit(facts, None, "server.waiting_max")
        s.usage.emit(facts, None, "server.kv_usage_max")
        if s.gen_tps:
            # all requests together over each logging interval (the first one holds the idle time before
            # it): the median, not a per-request speed
            rate, src = sorted(s.gen_tps, key=lambda pair: pair[0])[len(s.gen_tps) // 2]  # equal rates: no Source order
            facts.set("server.gen_tps", rate, src)
        if s.retracted and s.retract_source is not None:
            facts.set("server.preemptions", s.retracted, s.retract_source)
