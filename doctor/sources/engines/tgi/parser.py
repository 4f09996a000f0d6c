"""Hugging Face text-generation-inference (TGI) logs: launcher, router and shard messages.

The handlers: launcher arguments, shard start-up and warm-up, warm-up memory failures, request
validation, shard and webserver failures (patterns.py names the lines and their sources); a PyTorch
OOM in a shard goes on the analysis's board (../_torch/pytorch.py), placed by the shard method that
failed.

Pure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from doctor.core.facts import Facts, Source
from doctor.sources.engines._torch import pytorch
from doctor.sources.engines.tgi.patterns import (
    ARG,
    ARGS_INPUT_TOTAL,
    ARGS_KIND,
    BATCH_TOTAL,
    CRASHED,
    DEFAULTS,
    ENV,
    ENV_KIND,
    FAILURE_KIND,
    FRAME_KIND,
    FRAME_PHASE,
    GRAPH_WARMUP_FAILED,
    GRAPH_WARMUP_KIND,
    HINT_WINDOW,
    INIT_FAILED,
    INPUT_LEN,
    INPUT_TOTAL,
    KINDS,
    KV_BLOCKS,
    MAX_NEW,
    MEMORY_KIND,
    METHOD_FAILED,
    METHOD_PHASE,
    MODEL_SUPPORTS,
    OOM,
    OOM_KIND,
    PREFILL_OOM,
    READ,
    REDUCED_PREFILL,
    SHARD_FAILED,
    SHARD_READY,
    SHARD_START,
    SHARDING,
    SIGNATURE,
    STARTUP_KIND,
    TARGET,
    TOTAL_OOM,
    TOTAL_OVER_BATCH,
    VALIDATION_KIND,
    WARMING,
    duration_ms,
)
from doctor.sources.logs.base import LogParser, reads
from doctor.sources.logs.line import LogLine


@dataclass(slots=True)
class _State:
    stage: str = "start"
    method: tuple[str, str] | None = None
    method_line: int = 0
    handled_until: int = 0
    prefill_seen: set[int] = field(default_factory=set)
    total_seen: set[int] = field(default_factory=set)
    failed: bool = False
    crashed: bool = False
    largest: pytorch.LargestRequest = field(default_factory=pytorch.LargestRequest)



class TgiParser(LogParser):
    name = "tgi"
    # TGI warms up with its largest prefill batch once the weights are placed (its KV is sized by the warm-up)
    startup_next: ClassVar[Mapping[str, tuple[str, str]]] = {
        "weights": ("compute", "warmup"), "kv": ("compute", "warmup")}
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()
        self.frames = pytorch.Frames()
        self._framed = False  # the line being read carries a TGI tracing target

    def feed(self, line: LogLine) -> None:
        t = line.text
        if not self.passes_gate(t):
            return
        framed = self._framed = bool(TARGET.search(t))
        if framed or SIGNATURE.search(t):
            self._vote()
        plan = KINDS.plan(KINDS.bits(t))  # the kinds this line can be, by phase
        if self.run(plan[FRAME_PHASE], line):
            return
        for candidate in (line, *line.continuations()):  # a message wrapped over two lines is read joined
            if candidate is not line:
                plan = KINDS.plan(KINDS.bits(candidate.text))
            if self.run(plan[OOM], candidate) or self.run(plan[READ], candidate):
                return

    @reads(FRAME_KIND)
    def _frame(self, line: LogLine) -> bool:
        return self.frames.feed(line)

    def _vote(self) -> None:
        self.votes["tgi"] += 1
        self.state.part(pytorch.TorchOomBoard).votes["tgi"] = sum(self.votes.values())

    def _new_run(self, line: LogLine | None = None) -> None:
        s = self.s
        s.stage, s.method, s.failed, s.crashed = "start", None, False, False
        if line is not None:  # the timeline begins again too (doctor/sources/logs/timeline.py)
            self.timeline.restart("start", line.number, line.raw, self.name)
        s.prefill_seen.clear()
        s.total_seen.clear()

    # -- PyTorch OOM in a shard --------------------------------------------------------------------
    @reads(OOM_KIND)
    def _oom(self, line: LogLine) -> bool:
        data = pytorch.torch_oom(line.text)
        if data is None:
            return False
        s = self.s
        frame = self.frames.current(line.number)
        if frame is None and s.method is not None and line.number - s.method_line <= HINT_WINDOW:
            frame = s.method
        handled = line.number <= s.handled_until
        owner = "tgi" if self._framed else None
        board = self.state.part(pytorch.TorchOomBoard)
        board.record("tgi", line, data, self.placed(line), frame, owner, handled=handled)
        return True

    # -- launcher arguments --------------------------------------------------------------------------
    @reads(ARGS_KIND)
    def _args(self, line: LogLine) -> bool:
        t = line.text
        if "Args {" in t:
            self._new_run(line)
        found = False
        for m in ARG.finditer(t):
            key, value = m.group(1), m.group(3)
            if value is None and m.group(2) and line.next_text:
                value = line.next_text.strip().rstrip(",")
            if value is None or value in ("None", ""):
                continue
            found = True
            value = value.strip('"')
            if key == "model_id":
                self.set("model.name", value, line)
            elif key == "quantize":
                self.set("server.tgi.quantize", value.lower(), line)
            elif key == "cuda_memory_fraction":
                with contextlib.suppress(ValueError):
                    self.set("server.tgi.cuda_memory_fraction", float(value), line)
            elif key == "kv_cache_dtype":
                self.set("config.kv_cache_dtype", value, line)
            elif value.isdigit():
                target = {"max_input_tokens": "config.max_input_tokens", "max_input_length": "config.max_input_tokens",
                          "max_total_tokens": "config.max_total_tokens",
                          "max_batch_prefill_tokens": "config.max_batch_prefill_tokens",
                          "max_batch_total_tokens": "server.batch_total_tokens", "num_shard": "config.num_shard",
                          "max_concurrent_requests": "server.tgi.max_concurrent_requests"}[key]
                self.set(target, int(value), line)
        if found and not (TARGET.search(t) or "Args {" in t):
            self._vote()  # a field of the pretty-printed Args block
        return found or "Args {" in t

    # -- start-up ------------------------------------------------------------------------------------
    @reads(STARTUP_KIND)
    def _startup(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = DEFAULTS.search(t)
        if m:
            key = m.group(1) or f"max_{m.group(3)}_tokens"
            self.set(f"config.{key}", int(m.group(2) or m.group(4)), line)
            return True
        m = MODEL_SUPPORTS.search(t)
        if m:
            self.set("model.n_ctx_train", int(m.group(1)), line)
            return True
        m = REDUCED_PREFILL.search(t)
        if m:
            self.set("config.max_batch_prefill_tokens", int(m.group(2)), line)
            self.event("warning", line, what="prefill_reduced", default=int(m.group(1)), reduced=int(m.group(2)))
            return True
        m = SHARDING.search(t)
        if m:
            self.set("config.num_shard", int(m.group(1)), line)
            return True
        if SHARD_START.search(t):
            if s.stage in ("loaded", "warmup", "run"):
                self._new_run(line)
            s.stage = "load"
            self.mark("load", line)
            return True
        m = SHARD_READY.search(t)
        if m:
            s.stage = "loaded"
            self.mark("weights", line)
            self.set("run.load_ms", duration_ms(m.group(1), m.group(2)), line)
            return True
        if WARMING.search(t):
            s.stage = "warmup"
            self.mark("warmup", line, "warmup")
            return True
        m = KV_BLOCKS.search(t)
        if m:
            blocks, size = int(m.group(1)), int(m.group(2))
            self.set("server.kv_blocks_gpu", blocks, line)
            self.set("server.kv_tokens", blocks * size, line)
            return True
        m = BATCH_TOTAL.search(t)
        if m:
            s.stage = "run"
            self.mark("serving", line)
            self.set("server.batch_total_tokens", int(m.group(1) or m.group(2)), line)
            return True
        m = METHOD_FAILED.search(t)
        if m:
            hint = METHOD_PHASE.get(m.group(1))
            if hint is not None:
                s.method, s.method_line = hint, line.number
            return True
        if INIT_FAILED.search(t):
            s.method, s.method_line = ("weights", "load_model"), line.number
            return True
        return False

    @reads(GRAPH_WARMUP_KIND)
    def _graph_warmup(self, line: LogLine) -> bool:
        if GRAPH_WARMUP_FAILED.search(line.text):
            # TGI catches this OOM, drops the CUDA graph and goes on: not a failure
            self.s.handled_until = line.number + HINT_WINDOW
            return True
        return False

    # -- warm-up memory failures -----------------------------------------------------------------------
    @reads(MEMORY_KIND)
    def _memory(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = PREFILL_OOM.search(t)
        if m:
            n = int(m.group(1))
            if n not in s.prefill_seen:
                s.prefill_seen.add(n)
                suggest = max(256, n // 2 // 256 * 256)
                self.event("oom", line, phase="compute", n_tokens=n, limit="max_batch_prefill_tokens",
                           suggest=suggest, step="warmup", engine="tgi", phase_from="message")
                if not self.facts.has("config.max_batch_prefill_tokens"):
                    self.set("config.max_batch_prefill_tokens", n, line)
            return True
        m = TOTAL_OOM.search(t)
        if m:
            n = int(m.group(1) or m.group(2))
            self._total_over(line, n)
            return True
        m = TOTAL_OVER_BATCH.search(t)
        if m:
            self.set("server.batch_total_tokens", int(m.group(2)), line)
            self._total_over(line, int(m.group(1)), pool=int(m.group(2)))
            return True
        return False

    def _total_over(self, line: LogLine, n: int, pool: int | None = None) -> None:
        """One request of --max-total-tokens does not fit in what the KV blocks hold."""
        self.set("config.max_total_tokens", n, line)
        if n not in self.s.total_seen:
            self.s.total_seen.add(n)
            data: dict[str, Any] = {"reason": "max_total_tokens", "max_total_tokens": n}
            if pool is not None:
                data["kv_tokens"] = pool
            self.event("kv_capacity", line, **data)

    # -- request validation ------------------------------------------------------------------------------
    @reads(ENV_KIND)
    def _env(self, line: LogLine) -> bool:
        """MAX_INPUT_LENGTH=4095 / MAX_TOTAL_TOKENS: 4096 / --max-input-tokens 4095, as pasted."""
        found = False
        for m in ENV.finditer(line.text):
            key = (m.group(1) or m.group(3) or "").lower().replace("-", "_")
            value = int(m.group(2) or m.group(4))
            target = {"max_input_length": "config.max_input_tokens", "max_input_tokens": "config.max_input_tokens",
                      "max_total_tokens": "config.max_total_tokens",
                      "max_batch_prefill_tokens": "config.max_batch_prefill_tokens"}[key]
            self.set(target, value, line)
            found = True
            if key.startswith("max_input"):
                self._vote()  # TGI's own name for the prompt budget
        return found

    @reads(VALIDATION_KIND)
    def _validation(self, line: LogLine) -> bool:
        t = line.text
        m = INPUT_TOTAL.search(t)
        if m:
            limit, prompt, new = int(m.group(1)), int(m.group(2)), int(m.group(3))
            self.set("config.max_total_tokens", limit, line)
            self._rejected(line, n_tokens=prompt + new, n_ctx=limit, prompt=prompt, completion=new,
                           limit="max_total_tokens")
            return True
        m = INPUT_LEN.search(t)
        if m:
            limit, prompt = int(m.group(1)), int(m.group(2))
            self.set("config.max_input_tokens", limit, line)
            self._rejected(line, n_tokens=prompt, n_ctx=limit, prompt=prompt, limit="max_input_tokens")
            return True
        m = MAX_NEW.search(t)
        if m:
            limit = int(m.group(1))
            if m.group(2):
                new = int(m.group(2))
                self.event("prompt_too_long", line, n_tokens=new, n_ctx=limit, completion=new,
                           limit="max_new_tokens", cause="completion", room=limit)
            else:
                self.event("prompt_too_long", line, n_ctx=limit, limit="max_new_tokens", cause="completion",
                           room=limit)
            return True
        m = ARGS_INPUT_TOTAL.search(t)
        if m:
            self.set("config.max_input_tokens", int(m.group(1)), line)
            self.set("config.max_total_tokens", int(m.group(2)), line)
            return True
        return False

    def _rejected(self, line: LogLine, *, n_tokens: int, n_ctx: int, prompt: int, limit: str,
                  completion: int | None = None) -> None:
        pytorch.record_rejection(self, self.s.largest, line, n_tokens=n_tokens, n_ctx=n_ctx, prompt=prompt,
                                 limit=limit, completion=completion)

    # -- shard and webserver failures ---------------------------------------------------------------------
    @reads(FAILURE_KIND)
    def _failure(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = SHARD_FAILED.search(t)
        if m:
            if not s.failed:
                s.failed = True
                self.event("load_failed", line, reason="shard", engine="tgi")
            return True
        if CRASHED.search(t):
            if not s.crashed:
                s.crashed = True
                self.event("crash", line, engine="tgi")
            return True
        return False

    # -- summary -----------------------------------------------------------------------------------------------
    def summarize(self, facts: Facts) -> None:
        s = self.s
        self.state.part(pytorch.TorchOomBoard).summarize("tgi", self.votes, facts)
        if not self.votes:
            return
        s.largest.emit(facts, self.src)
        total = facts.get("config.max_total_tokens")
        if total is not None and total.known and not facts.has("config.n_ctx_seq"):
            # --max-total-tokens is the context one request gets
            facts.set("config.n_ctx_seq", total.value, total.source)
        batch_total = facts.get("server.batch_total_tokens")
        if batch_total is not None and batch_total.known and not facts.has("server.kv_tokens"):
            # the router's max batch total tokens is what the shard's KV blocks hold
            facts.set("server.kv_tokens", batch_total.value, batch_total.source)
        kv = facts.value("server.kv_tokens")
        if isinstance(kv, int) and not facts.has("server.max_len_fit"):
            facts.set("server.max_len_fit", kv, Source("log", self.name, text=f"KV blocks hold {kv} tokens"))
