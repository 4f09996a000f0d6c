"""vLLM logs, V0 and V1 engines (0.2 to 0.34): facts and events from the engine's own messages.

The handlers: configuration, KV capacity, requests refused for length, preemption and the periodic
stats, each read from the lines patterns.py names (what is read, and where the strings come from, is
said there); a PyTorch OOM is recorded on the analysis's board (../_torch/pytorch.py) with the
start-up step vLLM was in.

Pure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from doctor.core.facts import Facts, Source
from doctor.sources.engines._torch import pytorch
from doctor.sources.engines.vllm.fold import RequestFold
from doctor.sources.engines.vllm.patterns import (
    API_ARG,
    API_KIND,
    API_MODEL,
    BATCHED_BELOW,
    BLOCKS,
    CAPACITY_KIND,
    CHUNKED,
    CONCURRENCY,
    CONFIG_KIND,
    CONFIG_KV,
    CONFIG_LINE,
    CONTEXT_KIND,
    CTX_MAX_TOKENS,
    CTX_REQUEST_HAS,
    CTX_REQUESTED,
    CTX_REQUESTED_INPUT,
    ENGINE_FAILED,
    ESTIMATED_LEN,
    FAILURE_KIND,
    FRAME_KIND,
    FRAME_PHASE,
    HEADER,
    INPUT_TOO_LONG,
    KINDS,
    KV_AVAILABLE,
    KV_TOKENS,
    LOAD_START,
    LOOKAHEAD,
    MAX_LEN_USED,
    MAX_SEQ_OVER_KV,
    NO_KV_MEMORY,
    OOM,
    OOM_KIND,
    PREEMPT_TOTAL,
    PREEMPTED,
    PREEMPTION_KIND,
    PROCESS,
    PROFILE_SPLIT,
    PROFILE_TOTAL,
    PROFILE_V1,
    PROMPT_LONGER,
    READ,
    SHARDS,
    SHARDS_COUNT,
    SHARDS_KIND,
    STAGE,
    STAGE_KIND,
    STAGE_MARKS,
    STAGE_ORDER,
    STATS,
    STATS_KIND,
    STATS_NUMBER,
    TIMELINE_STEPS,
    TO_SERVE,
    USER_MAX_LEN,
    VERSION,
    WEIGHTS_TOOK,
    clean,
    to_int,
)
from doctor.sources.logs.base import reads
from doctor.sources.logs.line import LogLine


@dataclass(slots=True)
class _State:
    stage: str = "start"
    block_size: int = 16
    blocks_gpu: int | None = None
    blocks_line: LogLine | None = None
    preempt_total: int = 0  # V0 running total from the warning
    preempt_sum: int = 0  # V1 sum of the per-interval stat
    preempt_line: LogLine | None = None
    kv_usage_max: float | None = None
    kv_usage_line: LogLine | None = None
    running_max: int | None = None
    running_line: LogLine | None = None
    waiting_max: int | None = None
    waiting_line: LogLine | None = None
    idle_wait: tuple[int, LogLine | None] = (0, None)  # most requests waiting while none ran
    swapped_max: int | None = None
    swapped_line: LogLine | None = None
    # the fastest generation throughput of an interval with one request running and no prompt
    # processed: that request's decode speed (the interval's average, so a lower bound)
    solo_decode: float | None = None
    solo_decode_line: LogLine | None = None
    stats_lines: int = 0
    largest: pytorch.LargestRequest = field(default_factory=pytorch.LargestRequest)
    crashed: bool = False
    capacity_seen: set[tuple[str, int]] = field(default_factory=set)



class VllmParser(RequestFold):
    name = "vllm"
    # vLLM profiles the activation peak before it sizes the KV cache, then captures CUDA graphs
    startup_next: ClassVar[Mapping[str, tuple[str, str]]] = {
        "weights": ("compute", "profile_run"), "kv": ("compute", "cuda_graphs")}
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()
        self.frames = pytorch.Frames()
        self._framed = False  # the line being read carries the vLLM header or a process prefix

    # -- entry -------------------------------------------------------------------------------
    def feed(self, line: LogLine) -> None:
        t = line.text
        if not self.passes_gate(t):
            return
        framed = self._framed = bool(HEADER.search(t) or PROCESS.search(t))
        if framed:
            self._vote()
        plan = KINDS.plan(KINDS.bits(t))  # the kinds this line can be, by phase
        self.run(plan[STAGE], line)
        if self.run(plan[FRAME_PHASE], line):
            return
        for candidate in (line, *line.continuations()):  # a message wrapped over two lines is read joined
            if candidate is not line:
                plan = KINDS.plan(KINDS.bits(candidate.text))
            if self.run(plan[OOM], candidate):
                return
            if self.run(plan[READ], candidate):
                if not framed:
                    self._vote()  # a vLLM message under another tool's logger
                return

    def _vote(self) -> None:
        self.votes["vllm"] += 1
        self.state.part(pytorch.TorchOomBoard).votes["vllm"] = sum(self.votes.values())

    @reads(STAGE_KIND)
    def _stage_marks(self, line: LogLine) -> bool:
        """The start-up step the line shows; never takes the line."""
        t = line.text
        for pattern, stage in STAGE_MARKS:
            if pattern.search(t):
                step, what = TIMELINE_STEPS[stage]
                if stage == "load" and self.s.stage in ("ready", "run"):
                    self.s.stage = "load"  # the engine was started again in the same log
                    self.s.capacity_seen.clear()
                    self.timeline.restart("load", line.number, line.raw, self.name)
                elif STAGE_ORDER.index(stage) > STAGE_ORDER.index(self.s.stage):
                    self.s.stage = stage
                self.mark(step, line, what)
                return False
        return False

    @reads(SHARDS_KIND)
    def _shards(self, line: LogLine) -> bool:
        """transformers' checkpoint bar: short of its total, the weights were being loaded."""
        counts = SHARDS_COUNT.findall(line.text)
        if counts and SHARDS.search(line.text):
            done, total = (int(n) for n in counts[-1])
            if done < total:
                self.mark("load", line)
        return False

    @reads(FRAME_KIND)
    def _frame(self, line: LogLine) -> bool:
        return self.frames.feed(line)

    # -- PyTorch OOM -------------------------------------------------------------------------
    @reads(OOM_KIND)
    def _oom(self, line: LogLine) -> bool:
        data = pytorch.torch_oom(line.text)
        if data is None:
            return False
        step = data.get("step")
        frame = ("compute", str(step)) if step else self.frames.current(line.number)
        owner = "vllm" if self._framed else None
        self.state.part(pytorch.TorchOomBoard).record("vllm", line, data, self.placed(line), frame, owner)
        return True

    # -- configuration -----------------------------------------------------------------------
    @reads(API_KIND)
    def _api_args(self, line: LogLine) -> bool:
        found = False
        for key, value in API_ARG.findall(line.text):
            name = key.replace("-", "_")
            if name == "gpu_memory_utilization":
                share = float(value)
                if 0 < share <= 1:
                    self.set("config.gpu_memory_utilization", share, line)
                    found = True
            elif value.isdigit() and int(value) > 0:
                self.set(f"config.{name}", int(value), line)
                found = True
        if found:
            self._vote()  # vLLM's own setting names
            m = API_MODEL.search(line.text)  # LLM(model="...", ...) on the same line
            if m and not self.facts.has("model.name"):
                self.set("model.name", clean(m.group(1)), line)
        return found

    @reads(CONFIG_KIND)
    def _config(self, line: LogLine) -> bool:
        t = line.text
        m = VERSION.search(t)
        if m:
            version = m.group(1) or m.group(3)
            self.set("engine.version", version, line)
            if m.group(2):
                self.set("server.vllm.v1", True, line)
        if m or CONFIG_LINE.search(t):
            self._config_pairs(line)
            return True
        m = MAX_LEN_USED.search(t)
        if m:
            self.set("config.max_model_len", int(m.group(1)), line)
            return True
        m = CHUNKED.search(t)
        if m:
            self.set("server.chunked_prefill", True, line)
            self.set("config.max_num_batched_tokens", int(m.group(1)), line)
            return True
        m = BATCHED_BELOW.search(t)
        if m:
            self.set("config.max_num_batched_tokens", int(m.group(1)), line)
            self.set("config.max_model_len", int(m.group(2)), line)
            self.set("server.chunked_prefill", False, line)
            return True
        m = USER_MAX_LEN.search(t)
        if m:
            asked, trained = int(m.group(1)), int(m.group(3))
            self.set("config.max_model_len", asked, line)
            self.set("model.n_ctx_train", trained, line)
            self.event("ctx_over_train", line, n_ctx=asked, n_ctx_train=trained, key=m.group(2))
            return True
        m = LOAD_START.search(t)
        if m:
            self.set("model.name", clean(m.group(1)), line)
            return True
        m = WEIGHTS_TOOK.search(t)
        if m:
            if m.group(1) or m.group(2):
                # 0.6.x prints GiB under the name "GB" (model_memory_usage / 2**30)
                self.set("server.weights_bytes", int(float(m.group(1) or m.group(2)) * pytorch.GIB), line)
            seconds = m.group(3) or m.group(4)
            if seconds:
                self.set("run.load_ms", round(float(seconds) * 1000, 1), line)
            return True
        return False

    def _config_pairs(self, line: LogLine) -> None:
        text = line.text if len(line.text) > 40 or not line.next_text else line.joined()
        for key, raw in CONFIG_KV.findall(text):
            value = clean(raw)
            if value in ("None", ""):
                continue
            if key in ("max_model_len", "max_seq_len"):
                n = to_int(value)
                if n:
                    self.set("config.max_model_len", n, line)
            elif key in ("max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size"):
                n = to_int(value)
                if n:
                    self.set(f"config.{key}", n, line)
            elif key == "pipeline_parallel_size":
                n = to_int(value)
                if n:
                    self.set("server.vllm.pipeline_parallel_size", n, line)
            elif key == "gpu_memory_utilization":
                with contextlib.suppress(ValueError):
                    self.set("config.gpu_memory_utilization", float(value), line)
            elif key in ("kv_cache_dtype", "cache_dtype"):
                self.set("config.kv_cache_dtype", value, line)
            elif key == "block_size":
                n = to_int(value)
                if n:
                    self.s.block_size = n
            elif key in ("enable_chunked_prefill", "chunked_prefill_enabled"):
                if value in ("True", "true", "False", "false"):
                    self.set("server.chunked_prefill", value.lower() == "true", line)
            elif key == "quantization":
                self.set("server.vllm.quantization", value, line)
            elif key == "enforce_eager":
                if value in ("True", "False"):
                    self.set("server.vllm.enforce_eager", value == "True", line)
            elif key == "model" and ("/" in value or not self.facts.has("model.name")):
                self.set("model.name", value, line)

    # -- KV capacity ---------------------------------------------------------------------------
    @reads(CAPACITY_KIND)
    def _capacity(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = BLOCKS.search(t)
        if m:
            blocks = int(m.group(2))
            s.blocks_gpu, s.blocks_line = blocks, line
            self.set("server.kv_blocks_gpu", blocks, line)
            if m.group(3):
                self.set("server.kv_blocks_cpu", int(m.group(3)), line)
            self.set("server.kv_tokens", blocks * s.block_size, line)
            self.set("server.vllm.block_size", s.block_size, line)
            if blocks <= 0:
                self._capacity_event(line, "no_memory", blocks=blocks)
            return True
        found = False
        m = KV_TOKENS.search(t)
        if m:
            tokens = to_int(m.group(2))
            if tokens is not None:
                self.set("server.kv_tokens", tokens, line)
            found = True
        m = CONCURRENCY.search(t)
        if m:
            max_len = to_int(m.group(1))
            if max_len:
                self.set("config.max_model_len", max_len, line)
            self.set("server.max_concurrency", float(m.group(2)), line)
            return True
        if found:
            return True
        m = KV_AVAILABLE.search(t)
        if m:
            self.set("server.kv_available_bytes", int(float(m.group(1)) * pytorch.GIB), line)
            return True
        m = PROFILE_TOTAL.search(t)
        if m:
            self.set("server.gpu_total_bytes", int(float(m.group(1)) * pytorch.GIB), line)
            self.set("config.gpu_memory_utilization", float(m.group(2)), line)
            return True
        m = PROFILE_SPLIT.search(t)
        if m:
            self.set("server.weights_bytes", int(float(m.group(1)) * pytorch.GIB), line)
            self.set("server.kv_available_bytes", int(float(m.group(2)) * pytorch.GIB), line)
            return True
        m = PROFILE_V1.search(t)
        if m:
            self.set("server.weights_bytes", int(float(m.group(1)) * pytorch.GIB), line)
            return True
        if NO_KV_MEMORY.search(t):
            self._capacity_event(line, "no_memory")
            return True
        m = MAX_SEQ_OVER_KV.search(t)
        if m:
            max_len, kv = int(m.group(1)), int(m.group(2))
            self.set("config.max_model_len", max_len, line)
            self.set("server.kv_tokens", kv, line)
            self.set("server.max_len_fit", kv, line)
            self._capacity_event(line, "max_len", max_len, max_model_len=max_len, kv_tokens=kv)
            return True
        m = TO_SERVE.search(t)
        if m:
            max_len, needed, available = int(m.group(1)), float(m.group(2)), float(m.group(3))
            self.set("config.max_model_len", max_len, line)
            self.set("server.kv_needed_bytes", int(needed * pytorch.GIB), line)
            self.set("server.kv_available_bytes", int(available * pytorch.GIB), line)
            est = ESTIMATED_LEN.search(line.joined())
            if est:
                self.set("server.max_len_fit", int(est.group(1)), line)
            elif needed > 0 and available > 0:
                self.set("server.max_len_fit", int(max_len * available / needed) // 256 * 256, line)
            self._capacity_event(line, "max_len", max_len, max_model_len=max_len, needed=int(needed * pytorch.GIB),
                                 available=int(available * pytorch.GIB))
            return True
        m = LOOKAHEAD.search(t)
        if m:
            self._capacity_event(line, "prompt", int(m.group(1)), n_tokens=int(m.group(1)))
            self.s.largest.saw_prompt(int(m.group(1)), line)
            return True
        return False

    # -- requests rejected for length ------------------------------------------------------------
    @reads(CONTEXT_KIND)
    def _context(self, line: LogLine) -> bool:
        t = line.text
        m = INPUT_TOO_LONG.search(t)
        if m:
            n, limit = int(m.group(1)), int(m.group(2))
            self._rejected(line, n_tokens=n, n_ctx=limit, prompt=n, limit=self._which_limit(limit))
            return True
        m = CTX_REQUESTED.search(t)
        if m:
            limit, total, prompt, completion = (int(g) for g in m.groups())
            self._rejected(line, n_tokens=total, n_ctx=limit, prompt=prompt, completion=completion)
            return True
        m = CTX_MAX_TOKENS.search(t)
        if m:
            completion, limit, prompt = int(m.group(1)), int(m.group(2)), int(m.group(3))
            self._rejected(line, n_tokens=prompt + completion, n_ctx=limit, prompt=prompt, completion=completion)
            return True
        m = CTX_REQUESTED_INPUT.search(t) or CTX_REQUEST_HAS.search(t)
        if m:
            limit, n = int(m.group(1)), int(m.group(2))
            self._rejected(line, n_tokens=n, n_ctx=limit, prompt=n)
            return True
        m = PROMPT_LONGER.search(t) or PROMPT_LONGER.search(line.joined())
        if m:
            n, limit = int(m.group(1)), int(m.group(2))
            self._rejected(line, n_tokens=n, n_ctx=limit, prompt=n)
            return True
        return False

    def _which_limit(self, limit: int) -> str:
        """V0 rejects a prompt above min(max_model_len, max_num_batched_tokens) without chunked prefill."""
        batched = self.facts.value("config.max_num_batched_tokens")
        max_len = self.facts.value("config.max_model_len")
        if isinstance(batched, int) and limit == batched and (not isinstance(max_len, int) or batched < max_len):
            return "max_num_batched_tokens"
        if isinstance(max_len, int) and limit == max_len:
            return "max_model_len"
        return "prompt_limit"

    def _rejected(self, line: LogLine, *, n_tokens: int, n_ctx: int, prompt: int, completion: int | None = None,
                  limit: str = "max_model_len") -> None:
        pytorch.record_rejection(self, self.s.largest, line, n_tokens=n_tokens, n_ctx=n_ctx, prompt=prompt,
                                 limit=limit, completion=completion)
        if limit == "max_model_len":
            self.set("config.max_model_len", n_ctx, line)

    # -- preemption and the periodic stats ---------------------------------------------------------
    def _capacity_event(self, line: LogLine, reason: str, size: int = 0, **data: Any) -> None:
        """One event per capacity error: multiprocessing prints the same exception again."""
        key = (reason, size)
        if key in self.s.capacity_seen:
            return
        self.s.capacity_seen.add(key)
        self.event("kv_capacity", line, reason=reason, **data)

    @reads(PREEMPTION_KIND)
    def _preemption(self, line: LogLine) -> bool:
        t = line.text
        m = PREEMPTED.search(t)
        if not m:
            return False
        total = PREEMPT_TOTAL.search(t) or PREEMPT_TOTAL.search(line.joined())
        data: dict[str, Any] = {"mode": m.group(2).lower(), "request": m.group(1)[:80]}
        if total:
            n = int(total.group(1))
            data["total"] = n
            if n > self.s.preempt_total:
                self.s.preempt_total = n
        self.s.preempt_line = line
        self.event("preempted", line, **data)
        return True

    @reads(STATS_KIND)
    def _stats(self, line: LogLine) -> bool:
        t = line.text
        m = STATS.search(t)
        if not m:
            return False
        s = self.s
        s.stats_lines += 1
        pairs: dict[str, float] = {}
        for part in t[m.start():].rstrip(". ").split(", "):
            key, sep, value = part.partition(": ")
            if not sep:
                continue
            num = STATS_NUMBER.match(value.strip())
            if num:
                try:
                    pairs[key.strip()] = float(num.group(1))
                except ValueError:
                    continue
        usage = next((v for k, v in pairs.items() if k.endswith("KV cache usage") and not k.startswith("CPU")), None)
        if usage is not None and (s.kv_usage_max is None or usage > s.kv_usage_max):
            s.kv_usage_max, s.kv_usage_line = usage, line
        running = pairs.get("Running")
        if running is not None and (s.running_max is None or running > s.running_max):
            s.running_max, s.running_line = int(running), line
        waiting = pairs.get("Waiting", pairs.get("Pending"))
        if waiting is not None and (s.waiting_max is None or waiting > s.waiting_max):
            s.waiting_max, s.waiting_line = int(waiting), line
        generated = pairs.get("Avg generation throughput")
        if (running == 1 and pairs.get("Avg prompt throughput") == 0 and generated
                and (s.solo_decode is None or generated > s.solo_decode)):
            s.solo_decode, s.solo_decode_line = generated, line
        if waiting and running == 0 and waiting > s.idle_wait[0]:
            s.idle_wait = (int(waiting), line)  # requests waiting while none ran
        swapped = pairs.get("Swapped")
        if swapped is not None and (s.swapped_max is None or swapped > s.swapped_max):
            s.swapped_max, s.swapped_line = int(swapped), line
        preempted = pairs.get("Preemptions")
        if preempted:
            s.preempt_sum += int(preempted)
            s.preempt_line = line
            self.event("preempted", line, n=int(preempted))
        return True

    @reads(FAILURE_KIND)
    def _failure(self, line: LogLine) -> bool:
        if ENGINE_FAILED.search(line.text):
            if not self.s.crashed:
                self.s.crashed = True
                self.event("crash", line, engine="vllm")
            return True
        return False

    # -- summary -------------------------------------------------------------------------------------
    def summarize(self, facts: Facts) -> None:
        s = self.s
        board = self.state.part(pytorch.TorchOomBoard)
        latest = self.timeline.latest()
        guessed = []
        if latest is not None:
            # an OOM read before any start-up step: the error pasted above its log, or a log viewer that
            # lists the newest line first (RunPod, some dashboards). It happened at the furthest step the
            # log reached (so far: put back after this snapshot, the log may reach further)
            for oom in board.ooms.values():
                if oom.guesses.get("vllm") == (None, None) and oom.frame is None:
                    guessed.append((oom, oom.placed.get("vllm")))
                    oom.guesses["vllm"] = (latest.phase, latest.step)
                    oom.placed["vllm"] = latest
        board.summarize("vllm", self.votes, facts)
        for oom, placed in guessed:
            oom.guesses["vllm"] = (None, None)
            if placed is None:
                oom.placed.pop("vllm", None)
            else:
                oom.placed["vllm"] = placed
        if s.preempt_total or s.preempt_sum:
            src = self._src(s.preempt_line)
            facts.set("server.preemptions", max(s.preempt_total, s.preempt_sum), src)
        if s.kv_usage_max is not None:
            facts.set("server.kv_usage_max", s.kv_usage_max, self._src(s.kv_usage_line))
        if s.running_max is not None:
            facts.set("server.running_max", s.running_max, self._src(s.running_line))
            facts.set("server.max_num_seqs_suggested", max(1, s.running_max // 2), self._src(s.running_line))
        if s.waiting_max is not None:
            facts.set("server.waiting_max", s.waiting_max, self._src(s.waiting_line))
        if s.idle_wait[1] is not None:
            facts.set("server.waiting_while_idle", s.idle_wait[0], self._src(s.idle_wait[1]))
        if s.swapped_max is not None:
            facts.set("server.swapped_max", s.swapped_max, self._src(s.swapped_line))
        if s.solo_decode is not None and not facts.has("run.decode_tps"):
            facts.set("run.decode_tps", s.solo_decode, self._src(s.solo_decode_line))
        s.largest.emit(facts, self.src)
        max_len = facts.get("config.max_model_len")
        if max_len is not None and max_len.known and not facts.has("config.n_ctx_seq") and self.votes:
            # max_model_len is the context one sequence gets
            facts.set("config.n_ctx_seq", max_len.value, max_len.source)
        kv = facts.value("server.kv_tokens")
        if isinstance(kv, int) and not facts.has("server.max_len_fit") and self.votes:
            facts.set("server.max_len_fit", kv // 256 * 256 if kv >= 256 else kv,
                      Source("log", self.name, text=f"KV pool of {kv} tokens"))

    def _src(self, line: LogLine | None) -> Source:
        return self.src(line) if line is not None else Source("log", self.name)
