"""llama.cpp family: llama-cli, llama-server, the library's own lines, and llama-cpp-python.

The parser that reads them: its entry (`feed`, which runs the line kinds of patterns.py phase by
phase, a line a terminal wrapped read again joined with the next), the signature votes, model
metadata, load mode, offload, buffer and KV sizes, and timings; its other kinds are parts of the
same class (context.py, memory.py, hardware.py, summary.py; llama-cpp-python's own lines:
../llama_cpp_python/parser.py). What is read, and the strings' sources: patterns.py.

Pure.
"""

from __future__ import annotations

import re

from doctor.sources.engines.llamacpp.context import ContextLines
from doctor.sources.engines.llamacpp.fold import FoldLines
from doctor.sources.engines.llamacpp.hardware import HardwareLines
from doctor.sources.engines.llamacpp.memory import MemoryLines
from doctor.sources.engines.llamacpp.patterns import (
    BUFFER,
    BUFFER_KIND,
    CLI_SIGNATURE,
    CLI_SIGNATURE_KIND,
    COMMAND,
    COMMAND_KIND,
    COMMAND_NGL,
    FIT_DEVICE,
    FIT_DEVICE_KIND,
    FIT_PASS,
    FIT_PROJECTED,
    FIT_PROJECTED_KIND,
    GIB,
    INDEX,
    KINDS,
    KV_SELF,
    KV_SELF_2023,
    KV_SIZE,
    KV_SIZE_KIND,
    KV_TYPES_OLD,
    LOAD_MODE,
    LOAD_MODE_KIND,
    LOADED_META,
    LOADED_META_KIND,
    LOADING_FROM,
    LOADING_FROM_KIND,
    MEM_REQUIRED_2023,
    META,
    META_KIND,
    META_KV,
    META_KV_KIND,
    MIB,
    NGL_SETTING,
    OFFLOADED,
    OFFLOADED_KIND,
    OLD_BUFFERS_KIND,
    OUTPUT_END,
    OUTPUT_END_KIND,
    READ,
    SERVER_SIGNATURE,
    SERVER_SIGNATURE_KIND,
    SERVER_TG,
    SETTINGS_KIND,
    TIMING,
    TIMINGS_KIND,
    VRAM_USED_2023,
    backend_of,
    is_gpu_buffer,
    looks_cut,
    starts_a_line,
)
from doctor.sources.engines.llamacpp.state import TIMINGS_KEPT, Timing, int_list, num
from doctor.sources.engines.llamacpp.summary import Summary
from doctor.sources.logs.base import reads
from doctor.sources.logs.line import LogLine

# a GGUF key after its "<arch>." prefix -> the fact gguf_model.py sets from the same key
META_KV_KEYS = {"context_length": "model.n_ctx_train", "block_count": "model.n_layer",
                "embedding_length": "model.n_embd", "attention.head_count": "model.n_head",
                "attention.head_count_kv": "model.n_head_kv", "attention.key_length": "model.head_dim_k",
                "attention.value_length": "model.head_dim_v", "attention.sliding_window": "model.n_swa",
                "expert_count": "model.n_expert", "expert_used_count": "model.n_expert_used",
                "vocab_size": "model.n_vocab"}


class LlamaCppParser(ContextLines, MemoryLines, HardwareLines, Summary, FoldLines):
    """Reads llama.cpp's logs (every era) and llama-cpp-python's."""

    kinds = KINDS

    def feed(self, line: LogLine) -> None:
        t = line.text
        s = self.s
        vote, end, read, rest = KINDS.plan(INDEX.bits(t))  # the kinds this line can be, by phase
        for handler in vote:
            if handler(self, line):
                break
        for handler in end:
            handler(self, line)
        if s.pending and len(s.pending) and line.number - s.pending[0].line.number > 40:
            self._flush_oom(None)

        for handler in read:
            if handler(self, line):
                return
        if looks_cut(t) and line.next_text and not starts_a_line(line.next_text):
            # a line hard-wrapped by a terminal (mid-word) or an issue quote (at a space): read it with the next
            nxt = line.next_text.strip()
            for text in dict.fromkeys((line.joined(), t + nxt)):
                joined = LogLine(line.number, text, line.raw + " " + nxt)
                if self.dispatch(joined, READ):
                    return
        for handler in rest:
            handler(self, line)

    @reads(SERVER_SIGNATURE_KIND)
    def _vote_server(self, line: LogLine) -> bool:
        if SERVER_SIGNATURE.search(line.text):
            self.votes["llama.cpp"] += 1
            self.votes["llama-server"] += 1
            return True  # not llama-cli as well
        return False

    @reads(CLI_SIGNATURE_KIND)
    def _vote_cli(self, line: LogLine) -> bool:
        if CLI_SIGNATURE.search(line.text):
            self.votes["llama.cpp"] += 1
            return True
        return False

    @reads(OUTPUT_END_KIND)
    def _output_end(self, line: LogLine) -> bool:
        s = self.s
        if s.capture and OUTPUT_END.search(line.text):
            s.capture = False
        return False

    @reads(META_KIND)
    def _step_meta(self, line: LogLine) -> bool:
        t = line.text
        if "print_info" in t or "llm_load_print_meta" in t:
            self._meta(line)  # any print_info line is taken, read or not
            return True
        return False

    @reads(META_KV_KIND)
    def _step_meta_kv(self, line: LogLine) -> bool:
        """The GGUF header's shape keys as the loader dumps them; print_info, where it follows, says the same."""
        m = META_KV.search(line.text)
        if not m or m.group(4).endswith("..."):  # a value cut at 40 characters
            return False
        self.votes["llama.cpp-library"] += 1
        prefix, key, value = m.group(1), m.group(2), m.group(4).strip()
        if prefix == "general":
            self.set("model.arch" if key == "architecture" else "model.name", value, line)
            return True
        name = META_KV_KEYS.get(key)
        values = int_list(value)
        if name is not None and values:
            self.set(name, max(values), line)  # per-layer arrays: the largest, as print_info's n_head_kv
        return True

    @reads(TIMINGS_KIND)
    def _step_timings(self, line: LogLine) -> bool:
        t = line.text
        return (" time" in t or "t/s" in t) and self._timings(line)

    @reads(LOADED_META_KIND)
    def _step_loaded_meta(self, line: LogLine) -> bool:
        m = LOADED_META.search(line.text)
        if not m:
            return False
        self._stage("load")
        self.mark("load", line)
        self.s.model_buffers.clear()
        self.set("model.path", m.group(2).strip(), line)
        self.votes["llama.cpp-library"] += 1
        return True

    @reads(LOADING_FROM_KIND)
    def _step_loading_from(self, line: LogLine) -> bool:
        m = LOADING_FROM.search(line.text)
        if not m:
            return False
        self._stage("load")
        self.mark("load", line)
        self.set("model.path", m.group(1).strip("'\""), line)
        self.votes["llama.cpp-library"] += 1
        return True

    @reads(COMMAND_KIND)
    def _step_command(self, line: LogLine) -> bool:
        m = COMMAND.search(line.text)
        if not m:
            return False
        binary = m.group(1)
        self.set("engine.binary", binary, line)
        self.mark("load", line)  # the run was launched with a model: loading it comes first
        self.s.command = (binary, bool(COMMAND_NGL.search(line.text[m.end():])), line)
        return False  # the same line sets -ngl, -c, -t ...

    @reads(SETTINGS_KIND)
    def _step_settings(self, line: LogLine) -> bool:
        m = NGL_SETTING.search(line.text)
        if not m or "option will be ignored" in line.text:
            return False
        self.set("config.n_gpu_layers", int(m.group(1) or m.group(2)), line)
        return False  # the line may carry more (a command line with other flags)

    @reads(LOAD_MODE_KIND)
    def _step_load_mode(self, line: LogLine) -> bool:
        m = LOAD_MODE.search(line.text)
        if not m:
            return False
        self._stage("load")
        self.mark("load", line)
        self.s.model_buffers.clear()
        if m.group(1):
            self.set("config.use_mmap", m.group(1) == "true", line)
            self.set("config.load_mode", "mmap" if m.group(1) == "true" else "none", line)
        else:
            mode = m.group(2)
            self.set("config.load_mode", mode, line)
            self.set("config.use_mmap", "mmap" in mode, line)
            self.set("config.use_mlock", "mlock" in mode, line)
        return True

    @reads(OFFLOADED_KIND)
    def _step_offloaded(self, line: LogLine) -> bool:
        m = OFFLOADED.search(line.text)
        if not m:
            return False
        self.votes["llama.cpp-library"] += 1
        self.set("run.offloaded_layers", int(m.group(1)), line)
        self.set("run.total_layers", int(m.group(2)), line)
        self.set("engine.gpu_offload_supported", True, line)
        return True

    @reads(BUFFER_KIND)
    def _step_buffer(self, line: LogLine) -> bool:
        m = BUFFER.search(line.text)
        if m and "buffer size is" not in line.text:
            self._buffer(line, m)
            return True
        return False

    @reads(FIT_PROJECTED_KIND)
    def _step_fit_projected(self, line: LogLine) -> bool:
        m = FIT_PROJECTED.search(line.text)
        if not m:
            return False
        self.set("run.fit_projected_bytes", int(m.group(1)) * MIB, line)
        self.set("run.fit_free_bytes", int(m.group(2)) * MIB, line)
        return True

    @reads(FIT_DEVICE_KIND)
    def _step_fit_device(self, line: LogLine) -> bool:
        """--fit's layers per device, once it had to move layers (the last pass is the placement it chose)."""
        t = line.text
        if FIT_PASS.search(t):
            self.s.fit_devices.clear()
            return True
        m = FIT_DEVICE.search(t)
        if not m or len(self.s.fit_devices) >= 64:
            return False
        self.s.fit_devices[m.group(1)] = (int(m.group(2)), int(m.group(3) or 0), line)
        self.votes["llama.cpp-library"] += 1
        return True

    @reads(OLD_BUFFERS_KIND)
    def _old_buffers(self, line: LogLine) -> bool:
        """2023 builds: "VRAM used: N MB", "mem required = N MB" (MB meant MiB then)."""
        m = VRAM_USED_2023.search(line.text)
        if m:
            self.s.model_buffers["CUDA0"] = float(m.group(1))
            self.s.buffer_line = line
            self.mark("weights", line)
            return True
        m = MEM_REQUIRED_2023.search(line.text)
        if m:
            self.s.model_buffers["CPU"] = float(m.group(1))
            self.s.buffer_line = line
            # printed before the model's buffer is allocated and read (llama.cpp 2023-04/05 llama_model_load_internal:
            # "mem required", then llama_ctx_buffer - pinned host memory in a cuBLAS build - and load_all_data)
            self.mark("load", line)
            return True
        return False

    def _meta(self, line: LogLine) -> None:
        m = META.search(line.text)
        if not m:
            return
        self._stage("load")
        self.mark("load", line)
        self.votes["llama.cpp-library"] += 1
        key, value = m.group(1).strip(), m.group(2).strip()
        ints = {"n_ctx_train": "model.n_ctx_train", "n_embd": "model.n_embd", "n_layer": "model.n_layer",
                "n_embd_head_k": "model.head_dim_k", "n_embd_head_v": "model.head_dim_v",
                "n_swa": "model.n_swa", "n_expert": "model.n_expert", "n_expert_used": "model.n_expert_used",
                "n_vocab": "model.n_vocab"}
        if key in ints:
            n = int_list(value)
            if n:
                self.set(ints[key], n[0], line)
        elif key in ("n_head", "n_head_kv"):
            values = int_list(value)
            if values:
                self.set(f"model.{key}", max(values), line)
                if len(values) > 1 and key == "n_head_kv":
                    self.set("model.n_head_kv_per_layer", values, line)
        elif key == "arch":
            self.set("model.arch", value, line)
        elif key in ("file type", "model ftype"):
            self.set("model.file_type", value.replace("(guessed)", "").strip(), line)
        elif key in ("file size", "model size"):
            m2 = re.match(r"([\d.]+)\s*(MiB|GiB|MB|GB)", value)
            if m2:
                size = float(m2.group(1)) * {"MiB": MIB, "GiB": GIB, "MB": 1e6, "GB": 1e9}[m2.group(2)]
                self.set("model.file_bytes", int(size), line)
        elif key == "model params":
            m2 = re.match(r"([\d.]+)\s*([KMBT])", value)
            if m2:
                mult = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[m2.group(2)]
                self.set("model.n_params", int(float(m2.group(1)) * mult), line)
        elif key == "general.name":
            self.set("model.name", value, line)

    def _buffer(self, line: LogLine, m: re.Match[str]) -> None:
        s = self.s
        buf, kind, mib = m.group(1), m.group(2), float(m.group(3))
        if kind is None:
            # the ≤ Oct 2024 text for weights had no kind ("CUDA0 buffer size"); other words are kinds
            if buf.lower() in ("compute", "output", "kv", "input", "model", "rs", "lora", "scratch"):
                return
            kind = "model"
        table = {"model": s.model_buffers, "KV": s.kv_buffers, "compute": s.compute_buffers,
                 "output": s.output_buffers}.get(kind)
        if table is None:
            return
        if kind == "KV" and s.kv_size_lines and s.stage in ("ready", "run"):
            s.kv_buffers.clear()
        if kind == "KV" and s.stage in ("ready", "run"):
            self.timeline.restart("kv", line.number, line.raw, self.name)  # a new context after serving
        table[buf] = mib
        s.buffer_line = line
        if kind == "KV":
            self._stage("context")
            self.mark("kv", line)
        elif kind == "compute":
            self._stage("ready")
            self.mark("compute", line)
        elif kind == "model":
            self.mark("weights", line)
        if is_gpu_buffer(buf):
            s.backends.add(backend_of(buf))
            s.backends_line = s.backends_line or line

    @reads(KV_SIZE_KIND)
    def _kv_size(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = KV_SIZE.search(t)
        if m:
            cells, streams = int(m.group(2)), int(m.group(5) or m.group(4))
            if s.stage in ("ready", "run"):
                s.kv_size_lines.clear()
                self.timeline.restart("kv", line.number, line.raw, self.name)
            self._stage("context")
            self.mark("kv", line)
            s.kv_size_lines.append((float(m.group(1)), cells, streams))
            s.kv_line = line
            self.set("config.type_k", m.group(6).lower(), line)
            self.set("config.type_v", m.group(8).lower(), line)
            self.set("config.n_parallel", int(m.group(4)), line)
            return True
        m = KV_SELF.search(t)
        if m:
            if s.stage in ("ready", "run"):
                s.kv_size_lines.clear()
                self.timeline.restart("kv", line.number, line.raw, self.name)
            self._stage("context")
            self.mark("kv", line)
            s.kv_size_lines.append((float(m.group(1)), 0, 1))
            s.kv_line = line
            self.set("config.type_k", m.group(2).lower(), line)
            self.set("config.type_v", m.group(4).lower(), line)
            return True
        m = KV_SELF_2023.search(t)
        if m:
            s.kv_size_lines = [(float(m.group(1)), 0, 1)]  # "MB" in 2023 builds was MiB
            s.kv_line = line
            return True
        m = KV_TYPES_OLD.search(t)
        if m:
            self.set("config.type_k", m.group(1).lower(), line)
            self.set("config.type_v", m.group(2).lower(), line)
            return True
        return False

    def _timings(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = SERVER_TG.search(t)
        if m:
            s.decode_rates.add(float(m.group(2)), self.src(line))
            self._stage("run")
            self.mark("decode", line)
            return True
        if " time" not in t:
            return False
        m = TIMING.search(t)
        if not m:
            return False
        what, ms, count, tps = m.group(1), num(m.group(2)), m.group(3), m.group(6)
        if what in ("sample", "sampling", "samplers"):
            return True
        self._stage("run")
        self.mark("decode", line)  # a request's timings: it was served
        s.capture = False
        cur = s.current
        busy = cur is not None and (cur.prompt_ms is not None or cur.eval_ms is not None)
        starts_new = what == "prompt eval" and busy
        if what == "load" or cur is None or starts_new:
            if cur is not None:
                self._close_timing()
            cur = s.current = Timing(line=line.number)
        if what == "load":
            cur.load_ms = ms
            if ms is not None:
                self.set("run.load_ms", ms, line)
        elif what == "prompt eval":
            cur.prompt_ms = ms
            cur.prompt_tokens = int(count) if count else None
            cur.prompt_tps = num(tps)
            if ms is not None:
                self.set("run.prefill_ms", ms, line)
            if count:
                cur.used_line = line
                self.set("run.prompt_tokens", int(count), line)
                if int(count) > s.prompt_tokens_max:
                    s.prompt_tokens_max, s.prompt_line = int(count), line
            if cur.prompt_tps is not None:
                self.set("run.prefill_tps", cur.prompt_tps, line)
        elif what in ("eval", "generation eval"):
            cur.eval_ms = ms
            cur.eval_tokens = int(count) if count else None
            cur.eval_tps = num(tps)
            if ms is not None:
                self.set("run.decode_ms_total", ms, line)
            if count:
                cur.used_line = line
                self.set("run.decode_tokens", int(count), line)
            if cur.eval_tps is not None:
                self.set("run.decode_tps", cur.eval_tps, line)
                if cur.eval_tokens and cur.eval_tokens > 1:
                    s.decode_rates.add(cur.eval_tps, self.src(line))
        elif what == "total":
            if ms is not None:
                self.set("run.total_ms", ms, line)
            if count:
                cur.total_tokens = int(count)
                cur.used_line = line
            self._close_timing()
        return True

    def _close_timing(self) -> None:
        s = self.s
        cur = s.current
        if cur is None:
            return
        s.current = None
        if cur.prompt_ms is None and cur.eval_ms is None:
            return
        s.timings.append(cur)
        used = cur.total_tokens
        if used is None and (cur.prompt_tokens is not None or cur.eval_tokens is not None):
            used = (cur.prompt_tokens or 0) + (cur.eval_tokens or 0)
        if used is not None and used > s.used_max:
            s.used_max = used
            s.used_line = cur.used_line or LogLine(cur.line or 0, "", "")
        if len(s.timings) > TIMINGS_KEPT:
            del s.timings[:TIMINGS_KEPT // 2]
