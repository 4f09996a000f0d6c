"""The llama.cpp parser's context lines: the context and batch settings in force, the training-context
warnings, slots and prompts of llama-server, and every form of a prompt that did not fit (rejected,
truncated, shifted, a full KV cache, a failed decode). Patterns: patterns.py.

Pure.
"""

from __future__ import annotations

import re
from typing import Any

from doctor.sources.engines.llama_cpp_python.parser import LlamaCppPythonLines
from doctor.sources.engines.llamacpp.patterns import (
    CONTEXT_KEYS,
    CONTEXT_KIND,
    CONTEXT_PARAMS_KIND,
    CTX_FULL_STOP,
    CTX_KV,
    CTX_KV_KEYS,
    CTX_SHIFT,
    CTX_SHIFT_DISABLED,
    CTX_TRAIN_OVER,
    CTX_TRAIN_WARN,
    DECODE_FAILED,
    FA_DECISION,
    GENERATE,
    INPUT_LARGER,
    KV_FULL,
    MEMORY_SLOT,
    NEW_PROMPT,
    NEW_SLOT,
    PROMPT_TOO_LONG,
    QUANT_V_NEEDS_FA,
    REQUEST_EXCEEDS,
    REQUESTED_TOKENS,
    SLOT_INIT,
    SLOT_TASK,
    STOP_TRUNCATED,
    TASK_ID,
    TOO_BIG_MSGS,
    TRUNCATED,
    remember_task,
    task_key,
)
from doctor.sources.engines.llamacpp.state import LlamaCppBase
from doctor.sources.logs.base import reads
from doctor.sources.logs.line import LogLine


class ContextLines(LlamaCppBase, LlamaCppPythonLines):
    """The context kinds of the llama.cpp parser (llama-cpp-python's context errors vote for it)."""

    @reads(CONTEXT_KIND)
    def _step_context(self, line: LogLine) -> bool:
        t = line.text
        return any(k in t for k in CONTEXT_KEYS) and self._context_overflow(line)

    def _context_overflow(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        for pattern in (REQUESTED_TOKENS, PROMPT_TOO_LONG, REQUEST_EXCEEDS, INPUT_LARGER):
            m = pattern.search(t)
            if m and m.group(1) is None:  # llama-cpp-python's first wording: no count
                self.event("prompt_too_long", line, n_ctx=int(m.group(2)))
                self.vote_binding(2)
                self.set("config.n_ctx", int(m.group(2)), line)
                return True
            if m:
                n_tokens, n_ctx = int(m.group(1)), int(m.group(2))
                self.event("prompt_too_long", line, n_tokens=n_tokens, n_ctx=n_ctx)
                if n_tokens > s.prompt_tokens_max:
                    s.prompt_tokens_max, s.prompt_line = n_tokens, line
                if pattern is REQUESTED_TOKENS:
                    self.vote_binding(2)
                    self.set("config.n_ctx", n_ctx, line)
                return True
        m = TOO_BIG_MSGS.search(t)
        if m:
            data: dict[str, Any] = {"n_ctx": int(m.group(1))} if m.group(1) else {}
            self.event("prompt_too_long", line, **data)
            return True
        m = TRUNCATED.search(t)
        if m:
            remember_task(s.cut_tasks, t)
            self.event("truncation", line, n_ctx=int(m.group(1)), n_keep=int(m.group(2)),
                       n_tokens=int(m.group(4)))
            if int(m.group(4)) > s.prompt_tokens_max:
                s.prompt_tokens_max, s.prompt_line = int(m.group(4)), line
            return True
        m = STOP_TRUNCATED.search(t)
        if m:
            n_past = int(m.group(1))
            if n_past > s.used_max:
                s.used_max, s.used_line = n_past, line
            if m.group(2) != "0":
                task = task_key(t)
                cut = task in s.cut_tasks if task is not None else bool(s.cut_tasks)
                shifted = task in s.shifted_tasks if task is not None else bool(s.shifted_tasks)
                if cut:
                    self.event("truncation", line, n_past=n_past)
                elif not shifted:
                    self.event("ctx_full", line, n_past=n_past)  # generation ran into the end of the slot
            return True
        if CTX_FULL_STOP.search(t):
            self.event("ctx_full", line)
            return True
        m = CTX_SHIFT.search(t)
        if m:
            remember_task(s.shifted_tasks, t)
            data = {}
            if m.group(1):
                data = {"n_keep": int(m.group(1)), "n_left": int(m.group(2)), "n_discard": int(m.group(3))}
            elif m.group(4):
                data = {"n_past": int(m.group(4)), "n_ctx": int(m.group(6)), "n_discard": int(m.group(8))}
            self.event("context_shift", line, **data)
            return True
        m = MEMORY_SLOT.search(t)
        if m:
            self.event("ctx_full", line, n_batch=int(m.group(1)))
            return True
        if KV_FULL.search(t):
            self.event("ctx_full", line)
            return True
        if CTX_SHIFT_DISABLED.search(t):
            # llama-server sends it for a slot that is generating when the next token has no cell left
            # (tools/server: `slot.n_past + 1 >= slot.n_ctx` with context shift off): generation ran into
            # the end of the slot, unless the task's own prompt already filled it (issue 37, item 2)
            asked = TASK_ID.search(t)
            prompt, slot_ctx = s.task_prompts.get(asked.group(1), (0, 0)) if asked else (0, 0)
            data = {"n_tokens": prompt, "n_ctx": slot_ctx} if prompt and slot_ctx else {}
            self.event("prompt_too_long" if data and prompt >= slot_ctx else "ctx_full", line, **data)
            return True
        m = DECODE_FAILED.search(t)
        if m:
            ret = m.group(1) or m.group(2)
            data = {"ret": int(ret)} if ret else {}
            self.event("decode_failed", line, **data)
            if m.group(2):
                self.vote_binding()
            return True
        return False

    @reads(CONTEXT_PARAMS_KIND)
    def _context_params(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        if QUANT_V_NEEDS_FA.search(t):
            self.event("context_failed", line, reason="v_quant_needs_fa")
            return True
        m = CTX_TRAIN_OVER.search(t)
        if m:
            self.event("ctx_over_train", line, n_ctx=int(m.group(1)), n_ctx_train=int(m.group(2)))
            return True
        m = CTX_TRAIN_WARN.search(t)
        if m:
            self.event("ctx_over_train", line, n_ctx=int(m.group(2)), n_ctx_train=int(m.group(1)))
            return True
        m = FA_DECISION.search(t)
        if m:
            self.set("config.flash_attn", m.group(1) or m.group(2) or m.group(3), line)
            return True
        m = GENERATE.search(t)
        if m:
            self._stage("run")
            self.mark("prefill", line)
            n_predict = int(m.group(3))
            if n_predict >= 0:
                self.set("config.max_new_tokens", n_predict, line)
            s.capture = True
            s.output_line = None
            return True
        m = SLOT_INIT.search(t)
        if m:
            s.n_slots = int(m.group(1))
            self.set("config.n_parallel", s.n_slots, line)
            if m.group(2):
                self.set("config.n_ctx_seq", int(m.group(2)), line)
            unified = re.search(r"kv_unified = '(true|false)'", t)
            if unified:
                self.set("config.kv_unified", unified.group(1) == "true", line)
            return True
        m = NEW_SLOT.search(t)
        if m and "new prompt" not in t:
            self.set("config.n_ctx_seq", int(m.group(1)), line)
            return True
        m = NEW_PROMPT.search(t)
        if m:
            self._stage("run")
            self.mark("prefill", line)
            self.set("config.n_ctx_seq", int(m.group(1)), line)
            n_prompt = int(m.group(3))
            self.set("run.prompt_tokens", n_prompt, line)
            task = SLOT_TASK.search(t)
            if task and len(s.task_prompts) < 10000:
                s.task_prompts[task.group(2)] = (n_prompt, int(m.group(1)))
            if n_prompt > s.prompt_tokens_max:
                s.prompt_tokens_max, s.prompt_line = n_prompt, line
            return True
        found = False
        if any(k in t for k in CTX_KV_KEYS):
            for key, value in CTX_KV.findall(t):
                found = True
                if key == "n_ctx" and ("generate:" in t or "slot" in t or "n_ctx_train" in t):
                    continue
                if key in ("n_ctx", "n_ctx_seq", "n_ctx_per_seq", "n_seq_max", "n_batch", "n_ubatch"):
                    if not value.isdigit():
                        continue
                    target = {"n_ctx": "config.n_ctx", "n_ctx_seq": "config.n_ctx_seq",
                              "n_ctx_per_seq": "config.n_ctx_seq", "n_seq_max": "config.n_parallel",
                              "n_batch": "config.n_batch", "n_ubatch": "config.n_ubatch"}[key]
                    if key == "n_ctx" and "llama_model_load" in t:
                        pass  # 2023 builds print the hyper-parameters, n_ctx among them, before the weights load
                    elif key == "n_ctx":
                        if s.stage in ("ready", "run"):
                            self.timeline.restart("weights", line.number, line.raw, self.name)  # a new context
                        self._stage("context")
                        self.mark("weights", line)  # a context is made: the weights are placed
                        if s.stage in ("ready", "run"):
                            s.stage = "context"
                        s.kv_buffers.clear()
                        s.compute_buffers.clear()
                        s.kv_size_lines.clear()
                    self.set(target, int(value), line)
                elif key == "flash_attn":
                    v = value.lower()
                    self.set("config.flash_attn", {"0": "disabled", "1": "enabled", "false": "disabled",
                                                   "true": "enabled"}.get(v, v), line)
                elif key == "kv_unified":
                    self.set("config.kv_unified", value.lower() in ("true", "1"), line)
        return found
