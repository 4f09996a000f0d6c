"""Ollama server.log in every era, and the `ollama run --verbose` statistics block: the handlers.

What is read and where the strings come from: patterns.py. Each handler reads the slog message and its
key=value pairs; the whole-input facts are written by summary.py.

Pure.
"""

from __future__ import annotations

import contextlib
import re
from datetime import datetime
from typing import Any

from doctor.sources.engines._ggml.gpu_failures import gpu_failure_cause
from doctor.sources.engines._ggml.oom import RUNNER_OOM
from doctor.sources.engines.ollama.fold import AccessFold
from doctor.sources.engines.ollama.patterns import (
    ACCESS,
    AVX_GATE,
    CLI_KIND,
    CLI_STAT,
    CMD_FLAG,
    CONTEXT_KIND,
    ENV_PAIR,
    EXIT,
    FAILURES_KIND,
    GIN,
    GIN_KIND,
    GPU_DISCOVERY_FAILED,
    GPUS_KIND,
    IMAGE_STEP,
    INFERENCE_PATH,
    INSTALL_KIND,
    INSTALL_PATH,
    JOURNALD,
    KINDS,
    KV_ENV,
    LISTENING,
    LOAD_PROGRESS,
    LOAD_REQUEST,
    MEMORY_KIND,
    OFFLOAD_KIND,
    OLD_ESTIMATE,
    OLD_GO_LOG,
    READ,
    RUNNER_KIND,
    SCHED_KIND,
    SET_PARAM,
    SET_PARAM_KIND,
    SLOG,
    SOURCE,
    SYSTEM_MEMORY,
    TERMINATED,
    TIME_FIELD,
    WARNINGS_KIND,
    go_duration_ms,
    size_sum,
    slog_pairs,
    to_int,
    unwrap,
    wrapped,
)
from doctor.sources.engines.ollama.state import Cli, Offload
from doctor.sources.engines.ollama.summary import Summary
from doctor.sources.logs.base import reads
from doctor.sources.logs.line import LogLine

RELOAD_WINDOW = 5  # lines from the evaluation to the reset (sched.go logs them back to back)


class OllamaParser(Summary, AccessFold):
    """Reads Ollama's server log and its CLI statistics."""

    kinds = KINDS

    def feed(self, line: LogLine) -> None:
        t = line.text
        if not self.passes_gate(t):
            return
        plan = KINDS.plan(KINDS.bits(t))  # the kinds this line can be, by phase
        if self.run(plan[ACCESS], line):
            return
        is_slog = bool(SLOG.search(t))
        if not is_slog and "level=" in t and line.next_text and "msg=" in line.next_text:
            t = unwrap(line)  # wrapped before its message (a terminal, a web page)
            is_slog = bool(SLOG.search(t))
        old_go = OLD_GO_LOG.search(t)
        if old_go:
            self.s.old_go_log = True
        if (is_slog and SOURCE.search(t)) or JOURNALD.search(t) or old_go:
            self.votes["ollama"] += 1
        if is_slog and wrapped(line):
            t = unwrap(line)
        pairs = slog_pairs(t) if is_slog else {}
        msg = pairs.get("msg", t)
        self.run(plan[READ], line, msg, pairs)

    # -- memory estimate and offload ------------------------------------------------------------------
    @reads(OFFLOAD_KIND)
    def _offload(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        if msg.startswith("offload to ") or msg == "offload":
            library = p.get("library") or msg.removeprefix("offload to ").strip() or None
            off = Offload(line, library=library.lower() if library else None)
            if "layers.model" in p:  # v0.1.45 → v0.12
                off.model, off.offload = to_int(p.get("layers.model")), to_int(p.get("layers.offload"))
                off.requested = to_int(p.get("layers.requested"))
            elif "layers.real" in p:  # v0.1.33 → v0.1.44: requested and the estimate, no model count
                off.offload, off.requested = to_int(p.get("layers.real")), to_int(p.get("layers.requested"))
            elif "reallayers" in p:  # v0.1.32
                off.offload, off.model = to_int(p.get("reallayers")), to_int(p.get("layers"))
            self.s.offload = off
            if off.library:
                self.set("server.ollama.library", off.library, line)
            for name, value in (("server.ollama.layers_model", off.model),
                                ("server.ollama.layers_offload", off.offload),
                                ("server.ollama.layers_requested", off.requested)):
                if value is not None:
                    self.set(name, value, line)
            if off.requested is not None and off.requested >= 0:
                self.set("config.n_gpu_layers", off.requested, line)
            sizes = {"server.ollama.memory_available": p.get("memory.available") or p.get("available"),
                     "server.ollama.memory_required_full": p.get("memory.required.full") or p.get("required"),
                     "server.ollama.memory_required_partial": p.get("memory.required.partial") or p.get("used"),
                     "server.ollama.memory_required_kv": p.get("memory.required.kv") or p.get("kv"),
                     "server.ollama.memory_weights": p.get("memory.weights.total")}
            for name, raw in sizes.items():
                value = size_sum(raw)
                if value is not None:
                    self.set(name, value, line)
            return True
        if msg == "loading model" and "model layers" in p:  # v0.11+ scheduler
            model, requested = to_int(p.get("model layers")), to_int(p.get("requested"))
            if model is not None:
                self.set("server.ollama.layers_model", model, line)
            if requested is not None:
                self.set("server.ollama.layers_requested", requested, line)
                if requested >= 0:
                    self.set("config.n_gpu_layers", requested, line)
            return True
        if msg in ("model weights", "kv cache", "compute graph") and "size" in p:  # Ollama engine, per device
            size = size_sum(p.get("size"))
            if size is not None:
                device = p.get("device", "CPU")
                self.s.memory.setdefault(msg, {})[device] = size
                self.s.memory_line = line
            return True
        return False

    # -- GPUs and the AVX gate -------------------------------------------------------------------------------
    @reads(GPUS_KIND)
    def _gpus(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        s = self.s
        if msg == "inference compute":
            if line.number - s.gpu_block_line > 3:
                s.gpus = []  # a new discovery block
            s.gpu_block_line = line.number
            library = (p.get("library") or "").lower()
            if library == "cpu":
                s.no_gpu_line = line
                return True
            # v0.12+ logs the backend device as name= (CUDA0) and the card as description=
            name = p.get("description") or p.get("name", "")
            s.gpus.append((name, size_sum(p.get("total")), size_sum(p.get("available"))))
            s.gpu_line = line
            self.set("server.ollama.library", library, line)
            return True
        if "no compatible GPUs were discovered" in msg:
            s.no_gpu_line = line
            return True
        if AVX_GATE.search(line.text):
            self.set("server.ollama.gpu_gated_avx", True, line)
            self.event("warning", line, what="gpu_disabled_no_avx")
            return True
        return False

    # -- context ---------------------------------------------------------------------------------------------
    @reads(CONTEXT_KIND)
    def _context(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        if msg == "truncating input prompt":
            limit, prompt = to_int(p.get("limit")), to_int(p.get("prompt"))
            keep = to_int(p.get("keep") or p.get("numKeep"))
            data: dict[str, Any] = {"engine": "ollama", "limit": "num_ctx"}
            if limit is not None:
                data["n_ctx"] = limit
                self.set("config.num_ctx", limit, line)
                self.set("server.ollama.num_ctx", limit, line)
            if prompt is not None:
                data["n_tokens"] = prompt
            if keep is not None:
                data["n_keep"] = keep
            new = to_int(p.get("new"))
            if new is not None:
                data["kept_tokens"] = new
            self.event("truncation", line, **data)
            return True
        if msg == "requested context size too large for model":
            # Ollama does not run past the trained context: it caps num_ctx to n_ctx_train and goes on
            n_ctx, train = to_int(p.get("num_ctx")), to_int(p.get("n_ctx_train"))
            parallel = to_int(p.get("num_parallel")) or 1  # v0.9 logged num_ctx for all slots together
            data = {"what": "num_ctx_capped", "engine": "ollama"}
            if n_ctx is not None:
                data["asked"] = n_ctx // parallel
            if train is not None:
                data["n_ctx_train"] = train
                self.set("model.n_ctx_train", train, line)
                self.set("config.num_ctx", train, line)
            self.event("warning", line, **data)
            return True
        return False

    # -- runner start, configuration and death -----------------------------------------------------------
    @reads(RUNNER_KIND)
    def _runner(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        t = line.text
        s = self.s
        if msg in ("starting llama server", "starting runner", "starting llama-server") and "cmd" in p:
            s.served = 0
            self._command(line, p["cmd"])
            return True
        if msg == "load" and "request" in p:
            self._load_request(line, p["request"])
            return True
        m = re.search(r"(?:llama runner|llama-server) started in ([\d.]+) seconds", t)
        if m:
            s.start_s, s.start_line = float(m.group(1)), line
            self.set("server.ollama.runner_start_s", float(m.group(1)), line)
            return True
        if msg == "server config" and "env" in p:
            s.env = dict(ENV_PAIR.findall(p["env"]))
            s.env_line = line
            for key in KV_ENV:
                value = s.env.get(key)
                if value:
                    self._env_fact(key, value, line)
            return True
        m = LISTENING.search(t)
        if m:
            self.set("engine.version", m.group(1), line)
            return True
        m = TERMINATED.search(t)
        if m:
            detail = (m.group(1) or p.get("error", "")).strip()
            key = detail[:120]
            self._runner_oom(line, detail)
            if key not in s.crashed_texts:
                s.crashed_texts.add(key)
                data: dict[str, Any] = {"engine": "ollama"}
                e = EXIT.search(detail)
                if e and e.group(1):
                    code = e.group(1)  # Windows reports NTSTATUS codes in hex (0xc0000409)
                    data["exit_status"] = code
                    self.set("run.exit_status", int(code, 16) if code.startswith("0x") else int(code), line)
                elif e and e.group(2):
                    data["signal"] = e.group(2).strip()
                self.event("crash", line, **data)
                self.set("run.crashed", True, line)
            return True
        return msg == "llama runner terminated"

    def _command(self, line: LogLine, cmd: str) -> None:
        flags = {k: v for k, v in CMD_FLAG.findall(cmd)}
        s = self.s
        s.runner_line = line
        if flags.get("model"):
            self.set("model.path", flags["model"], line)
        ctx, parallel = to_int(flags.get("ctx-size")), to_int(flags.get("parallel"))
        if ctx:
            s.ctx_size = ctx
        if parallel:
            s.parallel = parallel
            self.set("config.n_parallel", parallel, line)
        layers = to_int(flags.get("n-gpu-layers"))
        if layers is not None:
            self.set("config.n_gpu_layers", layers, line)
        threads = to_int(flags.get("threads"))
        if threads:
            self.set("config.n_threads", threads, line)
        if "no-mmap" in flags:
            self.set("config.use_mmap", False, line)
        if "flash-attn" in flags:
            self.set("config.flash_attn", "enabled", line)
        kv_type = flags.get("kv-cache-type")
        if kv_type:
            self.set("config.type_k", kv_type.lower(), line)
            self.set("config.type_v", kv_type.lower(), line)

    def _load_request(self, line: LogLine, request: str) -> None:
        fields = dict(LOAD_REQUEST.findall(request))
        s = self.s
        s.runner_line = line
        kv, parallel = to_int(fields.get("KvSize")), to_int(fields.get("Parallel"))
        if kv:
            s.ctx_size = kv
        if parallel:
            s.parallel = parallel
            self.set("config.n_parallel", parallel, line)
        threads = to_int(fields.get("NumThreads"))
        if threads:
            self.set("config.n_threads", threads, line)
        if fields.get("FlashAttention") in ("true", "false"):
            self.set("config.flash_attn", "enabled" if fields["FlashAttention"] == "true" else "disabled", line)
        if fields.get("KvCacheType"):
            self.set("config.type_k", fields["KvCacheType"].lower(), line)
            self.set("config.type_v", fields["KvCacheType"].lower(), line)
        layers = re.match(r"\d+", fields.get("GPULayers", ""))
        if layers:
            self.set("server.ollama.layers_offload", int(layers.group(0)), line)

    def _env_fact(self, key: str, value: str, line: LogLine) -> None:
        if key == "OLLAMA_CONTEXT_LENGTH":
            n = to_int(value)
            if n:
                self.set("server.ollama.context_length_env", n, line)
        elif key == "OLLAMA_NUM_PARALLEL":
            n = to_int(value)
            if n is not None:
                self.set("server.ollama.num_parallel_env", n, line)
        elif key == "OLLAMA_MAX_LOADED_MODELS":
            n = to_int(value)
            if n is not None:
                self.set("server.ollama.max_loaded_models", n, line)
        elif key == "OLLAMA_FLASH_ATTENTION":
            self.set("server.ollama.flash_attention_env", value.lower() in ("true", "1"), line)
        elif key == "OLLAMA_KV_CACHE_TYPE":
            self.set("server.ollama.kv_cache_type_env", value.lower(), line)

    # -- memory failures ----------------------------------------------------------------------------------
    @reads(MEMORY_KIND)
    def _memory(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        if msg == "model request too large for system":
            required, available = size_sum(p.get("requested")), size_sum(p.get("available"))
            self._system_memory(line, required, available)
            return True
        m = SYSTEM_MEMORY.search(line.text)
        if m:
            self._system_memory(line, size_sum(m.group(1)), size_sum(m.group(2)))
            return True
        return False

    def _system_memory(self, line: LogLine, required: int | None, available: int | None) -> None:
        data: dict[str, Any] = {"device": "host", "engine": "ollama", "limit": "system_memory", "phase_from": "message"}
        if required is not None:
            data["bytes"] = required
            self.set("server.ollama.system_memory_required", required, line)
        if available is not None:
            data["available"] = available
            self.set("server.ollama.system_memory_available", available, line)
        self.event("oom", line, phase="weights", **data)

    # -- GPU discovery failures, the runner's own OOMs, load progress ------------------------------------------
    @reads(FAILURES_KIND)
    def _failures(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        t = line.text
        s = self.s
        if GPU_DISCOVERY_FAILED.search(t):
            cause, code = gpu_failure_cause(t)
            if len(s.gpu_failures) < 8:
                s.gpu_failures.append((cause, line, code, (p.get("error") or msg or t)[:200]))
            return True
        m = OLD_ESTIMATE.search(t)
        if m:
            # before v0.1.33 the layer count came from the file size per layer alone: no KV cache, no graph
            s.old_estimate_line = line
            self.votes["ollama"] += 1
            self.set("server.ollama.memory_available", int(m.group(1)) * (1 << 20), line)
            return True
        if self._runner_oom(line):
            return True
        if IMAGE_STEP.search(t):
            s.image_line = line.number
            return False
        m = LOAD_PROGRESS.search(t)
        if m:
            when = TIME_FIELD.search(t)
            if when:
                with contextlib.suppress(ValueError):
                    seconds = datetime.fromisoformat(when.group(1)).timestamp()
                    if len(s.progress) < 2:
                        s.progress.append((seconds, float(m.group(1)), line))
                    else:
                        s.progress[1] = (seconds, float(m.group(1)), line)
            return True
        return False

    def _runner_oom(self, line: LogLine, text: str | None = None) -> bool:
        t = text if text is not None else line.text
        m = RUNNER_OOM.search(t)
        if not m:
            return False
        s = self.s
        kind = "cuda" if "out of memory" in m.group(0) else "cublas"
        near = [o for o in s.runner_ooms if 0 <= line.number - o[0].number <= 6 and o[1] == kind]
        if not near and len(s.runner_ooms) < 50:  # the runner's line and Ollama's relay of it are one OOM
            s.runner_ooms.append((line, kind, s.served, 0 <= line.number - s.image_line <= 40))
        return True

    # -- warnings worth showing ---------------------------------------------------------------------------
    @reads(WARNINGS_KIND)
    def _warnings(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        what = {
            "quantized kv cache requested but flash attention disabled": "kv_quant_without_fa",
            "kv cache type not supported by model": "kv_type_unsupported",
            "flash attention enabled but not supported by gpu": "fa_unsupported_gpu",
            "flash attention enabled but not supported by model": "fa_unsupported_model",
            "memory layout cannot be allocated": "layout_not_allocated",
            "gpu VRAM usage didn't recover within timeout": "vram_not_recovered",
        }.get(msg)
        if what is None:
            if msg == "enabling flash attention":
                self.set("config.flash_attn", "enabled", line)
                return True
            return False
        data: dict[str, Any] = {"what": what, "engine": "ollama"}
        if p.get("type"):
            data["type"] = p["type"]
        self.event("warning", line, **data)
        return True

    @reads(SCHED_KIND)
    def _sched(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        """A loaded model evaluated for a request, then reset to expire at once: the scheduler reloads it."""
        s = self.s
        if msg == "evaluating already loaded":
            s.evaluated = (line, p.get("model", ""))
            return True
        if msg != "resetting model to expire immediately to make room":
            return False
        before = s.evaluated
        s.evaluated = None
        if before is None or line.number - before[0].number > RELOAD_WINDOW:
            return True  # a runner made room for another model (max runners, memory): not a reload
        target = p.get("modelPath") or p.get("runner.model") or ""  # v0.6.8 on: the runner's group, runner.model=
        if before[1] and target and before[1] not in target and target not in before[1]:
            return True
        self.event("reload", line, engine="ollama", evaluated_line=before[0].number)
        return True

    # -- access log and the CLI statistics ------------------------------------------------------------------
    @reads(GIN_KIND)
    def _gin(self, line: LogLine) -> bool:
        """An access-log line: taken whether or not it reads as one."""
        if "[GIN]" not in line.text:
            return False
        m = GIN.search(line.text)
        if not m:
            return True
        self.votes["ollama"] += 1
        s = self.s
        s.requests += 1
        s.gin_line = line
        if m.group(1).startswith("5"):
            s.errors_5xx += 1
        elif m.group(1) == "200" and INFERENCE_PATH.search(line.text):
            s.served += 1
        return True

    @reads(SET_PARAM_KIND)
    def _set_param(self, line: LogLine) -> bool:
        m = SET_PARAM.search(line.text)
        if not m:
            return False
        name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        s = self.s
        self.votes["ollama"] += 1
        # the typed command and the CLI's answer are one change
        same = bool(s.param_sets) and s.param_sets[-1][0] == name and s.param_sets[-1][3] == len(s.cli)
        if not same and len(s.param_sets) < 100:
            s.param_sets.append((name, value, line, len(s.cli)))
        s.cli_current = None  # the next statistics block is a new generation
        return True

    @reads(INSTALL_KIND)
    def _install(self, line: LogLine) -> bool:
        """A llama.cpp line naming Ollama's own install: the llama.cpp inside is Ollama's."""
        if INSTALL_PATH.search(line.text):
            self.votes["ollama"] += 1
        return False

    @reads(CLI_KIND)
    def _cli(self, line: LogLine) -> bool:
        t = line.text
        if not ("duration:" in t or "eval " in t or "rate:" in t):
            return False
        m = CLI_STAT.search(t)
        if not m:
            return False
        key, value = m.group(1), m.group(2)
        s = self.s
        if key == "total duration" or s.cli_current is None:
            s.cli_current = Cli(line=line)
            s.cli.append(s.cli_current)
            if len(s.cli) > 1000:
                del s.cli[:500]
        cur = s.cli_current
        self.votes["ollama"] += 1
        number = re.match(r"([\d.]+)", value)
        if key.endswith("count"):
            n = to_int(number.group(1)) if number else None
            if key.startswith("prompt"):
                cur.prompt_tokens, cur.prompt_line = n, line
            else:
                cur.eval_tokens = n
        elif key.endswith("rate"):
            rate = float(number.group(1)) if number else None
            if key.startswith("prompt"):
                cur.prompt_tps = rate
            else:
                cur.eval_tps, cur.rate_line = rate, line
        else:
            ms = go_duration_ms(value)
            if key == "total duration":
                cur.total_ms = ms
            elif key == "load duration":
                cur.load_ms = ms
            elif key == "prompt eval duration":
                cur.prompt_ms = ms
            else:
                cur.eval_ms = ms
        return True
