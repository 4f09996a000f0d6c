"""The embedded engine's child process: llama-cpp-python with per-step timing, streamed to the parent.

Started by doctor/sources/live/embedded/runner.py as
`python -m doctor.sources.live.embedded.child --msg-fd N --t0 T` with the RunSettings JSON on stdin.
Everything it learns goes to the parent as NDJSON messages over the pipe `--msg-fd` (see
doctor/sources/live/embedded/messages.py); its stdout and stderr go to another pipe the parent also reads.
An abort inside llama.cpp (GGML_ABORT, a CUDA error, an assert) kills only this
process; the parent reports it.

How it measures (probes_and_facts.md §A7, checked against llama-cpp-python 0.3.36):
- the engine's log: our own `llama_log_set` callback (kept referenced at module level), levels read
  as ggml defines them (llama-cpp-python's own callback maps them off by one and drops ERROR lines
  when verbose=False); the model is loaded with verbose=False so nothing else prints;
- aborts: `ggml_set_abort_callback` sends the abort message before abort() runs (verbose=False
  sends fd 2 to /dev/null while loading, so a plain fprintf would be lost);
- warm-up: one decode of BOS/EOS, then the KV cache is cleared and the perf counters reset, as
  llama.cpp's own tools do, so the timed prefill is not the first call's one-time cost;
- prefill: the first `next()` of `Llama.generate` (prompt eval + the first sample);
- each decode step: one later `next()` = eval of the previous token + sampling; sampling reads the
  logits, which synchronises the backend, so GPU asynchrony cannot hide a step's time;
- KV use: `llama_memory_seq_pos_max(mem, 0) + 1`, from the engine, after every step;
- llama.cpp's own counters (`llama_perf_context`) at the end, for the cross-check.
Messages are buffered and written in batches (decode steps every 200 ms, other messages every 50 ms,
warnings, errors and phases at once; an abort flushes everything first), so tracing costs tens of
microseconds per token: right after a decode step the caches hold the model, and per-token text
and JSON work would pay for that many times over.

Context full: like llama-cpp-python's create_completion, a prompt that does not fit is refused
("Requested tokens (N) exceed context window of M") and max_tokens is cut to the room left
(`context_full: truncate`, the default); with `context_full: fail` generation goes on until the
engine itself refuses the next token (llama_decode returns 1).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import ctypes
import faulthandler
import json
import os
import random
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

from doctor.core.engines import embedded
from doctor.sources.live.embedded.messages import FLUSH_INTERVAL_S, LEVELS

MAX_BUFFERED = 256  # messages buffered before a write
STEP_FLUSH_INTERVAL_S = 0.2  # decode steps are sent in batches at most this old


class Channel:
    """Buffered NDJSON messages to the parent; `t` is ms since the parent's watch start.

    Decode steps are kept raw (`step()`: a tuple append, nothing else) and rendered into one
    "steps" message when the buffer is written — at most every FLUSH_INTERVAL_S, or before any
    other message so the order holds. Right after a decode step the CPU caches hold the model, not
    the interpreter; doing the token-to-text and JSON work in batches is what keeps tracing cheap.
    """

    def __init__(self, fd: int, t0: float) -> None:
        self.fd = fd
        self.t0 = t0
        self.buf: list[bytes] = []
        self.steps: list[tuple[Any, ...]] = []
        self.render_steps: Any = None  # list of raw steps -> message dict
        self.last_flush = time.monotonic()
        self.closed = False

    def now_ms(self) -> float:
        return round((time.monotonic() - self.t0) * 1000.0, 3)

    def step(self, raw: tuple[Any, ...]) -> None:
        self.steps.append(raw)
        if time.monotonic() - self.last_flush >= STEP_FLUSH_INTERVAL_S:
            self.flush()

    def _drain_steps(self) -> None:
        if not self.steps:
            return
        steps = list(self.steps)
        self.steps.clear()  # the same list object: the decode loop holds a reference to it
        if self.render_steps is not None:
            self.buf.append(_line(self.render_steps(steps)))

    def send(self, msg: dict[str, Any], urgent: bool = False) -> None:
        self._drain_steps()
        msg["t"] = self.now_ms()
        self.buf.append(_line(msg))
        if urgent or len(self.buf) >= MAX_BUFFERED or time.monotonic() - self.last_flush >= FLUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        try:
            self._drain_steps()
        except Exception:  # rendering must not stop the run, nor the report of an abort
            self.steps.clear()
        self.last_flush = time.monotonic()
        if not self.buf or self.closed:
            self.buf.clear()
            return
        data = b"".join(self.buf)
        self.buf.clear()
        try:
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError:
            self.closed = True  # the parent went away; keep running to a clean end


def _line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace") + b"\n"


class LogCapture:
    """Assembles the engine's log callback fragments into lines (CONT continues the last level)."""

    def __init__(self, channel: Channel, min_level: int = 2) -> None:
        self.channel = channel
        self.min_level = min_level  # ggml: 1 debug, 2 info, 3 warn, 4 error; 5 = continue
        self.level = 2
        self.partial = ""
        self.lines = 0

    def __call__(self, level: int, text: bytes | None, _user: Any) -> None:
        try:
            if level != 5:
                if self.partial:
                    self._emit(self.partial)
                    self.partial = ""
                self.level = level
            if self.level < self.min_level or not text:
                return
            chunk = self.partial + text.decode("utf-8", "replace")
            *done, self.partial = chunk.split("\n")
            for line in done:
                self._emit(line)
        except Exception:  # nothing may cross back into C or stop the report
            pass

    def _emit(self, line: str) -> None:
        self.lines += 1
        self.channel.send({"m": "log", "lvl": LEVELS.get(self.level, "info"), "text": line}, urgent=self.level >= 3)

    def finish(self) -> None:
        if self.partial:
            self._emit(self.partial)
            self.partial = ""


# ctypes callbacks must stay referenced while C may call them
_LOG_CALLBACK: Any = None
_ABORT_CALLBACK: Any = None


class ChildRun:
    """One traced generation. Subclass and override `after_step` to act between steps (tests)."""

    def __init__(self, settings: dict[str, Any], channel: Channel) -> None:
        self.s = settings
        self.ch = channel
        self.stop = False
        self.paused = False
        self.llm: Any = None
        self.llama_cpp: Any = None

    # -- hooks ------------------------------------------------------------------------------
    def after_step(self, step: int) -> None:
        """Called after each decode step is recorded (nothing by default)."""

    # -- setup ------------------------------------------------------------------------------
    def _signals(self) -> None:
        def request_stop(_signum: int, _frame: Any) -> None:
            self.stop = True

        def pause(_signum: int, _frame: Any) -> None:
            self.paused = True

        def resume(_signum: int, _frame: Any) -> None:
            self.paused = False

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        if hasattr(signal, "SIGUSR1"):
            signal.signal(signal.SIGUSR1, pause)
            signal.signal(signal.SIGUSR2, resume)

    def _install_callbacks(self, llama_cpp: Any) -> LogCapture:
        global _LOG_CALLBACK, _ABORT_CALLBACK
        capture = LogCapture(self.ch)
        _LOG_CALLBACK = llama_cpp.llama_log_callback(capture)
        llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
        setter = _abort_setter()
        if setter is None:
            return capture  # no abort hook: the message still reaches fd 2 outside the load window
        proto = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
        setter.argtypes = [proto]
        setter.restype = proto

        def on_abort(message: bytes | None) -> None:
            try:
                capture.finish()
                text = (message or b"").decode("utf-8", "replace")
                self.ch.send({"m": "abort", "text": text}, urgent=True)
            except Exception:  # nothing may cross back into C or stop the report
                pass

        _ABORT_CALLBACK = proto(on_abort)
        setter(_ABORT_CALLBACK)
        return capture

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> int:
        self._signals()
        self.ch.send({"m": "hello", "pid": os.getpid(), "python": sys.version.split()[0]}, urgent=True)
        try:
            import llama_cpp
            from llama_cpp import Llama
        except ImportError as exc:
            self.ch.send({"m": "error", "type": "ImportError",
                          "message": f"llama-cpp-python is not installed ({exc}); pip install 'llm-doctor[engine]'"},
                         urgent=True)
            self.ch.flush()
            return 3
        self.llama_cpp = llama_cpp
        capture = self._install_callbacks(llama_cpp)
        try:
            code = self._generate(Llama, llama_cpp, capture)
        except Exception as exc:  # the engine raised: reported to the parent as its exception
            capture.finish()
            self.ch.send({"m": "error", "type": type(exc).__name__, "message": str(exc)[:2000]}, urgent=True)
            self.ch.send({"m": "end", "finish_reason": "error"}, urgent=True)
            code = 1
        capture.finish()
        self.ch.flush()
        return code

    def _generate(self, Llama: Any, llama_cpp: Any, capture: LogCapture) -> int:
        s = self.s
        seed = s.get("seed")
        if seed is None:
            seed = random.randint(0, 2**31 - 1)
        type_k = _ggml_type(llama_cpp, s.get("type_k", "f16"))
        type_v = _ggml_type(llama_cpp, s.get("type_v", "f16"))
        kwargs: dict[str, Any] = {
            "n_ctx": int(s["n_ctx"]), "n_gpu_layers": int(s.get("n_gpu_layers", 0)),
            "n_batch": int(s.get("n_batch", 512)), "n_ubatch": int(s.get("n_ubatch", 512)),
            "flash_attn": bool(s.get("flash_attn", False)), "use_mmap": bool(s.get("use_mmap", True)),
            "type_k": type_k, "type_v": type_v, "seed": seed,
            "last_n_tokens_size": int(s.get("repeat_last_n", 64)), "verbose": False,
        }
        if s.get("n_threads"):
            kwargs["n_threads"] = int(s["n_threads"])
        if s.get("n_threads_batch"):
            kwargs["n_threads_batch"] = int(s["n_threads_batch"])

        use_extra_bufts = bool(s.get("use_extra_bufts", True))
        t = time.perf_counter()
        with _model_params(llama_cpp, use_extra_bufts) as applied:
            llm = Llama(s["model_path"], **kwargs)
        load_ms = (time.perf_counter() - t) * 1000.0
        if not applied:
            self.ch.send({"m": "log", "lvl": "warn", "text": "llm-doctor: this llama-cpp-python has no "
                          "llama_model_params.use_extra_bufts; weight repacking stays on"}, urgent=True)
            use_extra_bufts = True
        self.llm = llm
        capture.finish()
        ctx = llm.ctx
        self.ch.send({"m": "phase", "phase": "load", "ms": round(load_ms, 3)}, urgent=True)

        prompt_tokens = self._tokens(llm)
        n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        n_prompt = len(prompt_tokens)
        max_tokens = int(s.get("max_tokens", 128))
        effective = max_tokens if max_tokens > 0 else n_ctx - n_prompt
        if s.get("context_full", "truncate") == "truncate" and n_prompt + effective >= n_ctx:
            effective = max(0, n_ctx - n_prompt)  # llama-cpp-python's create_completion does the same
        system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
        name = embedded()  # this process is the embedded engine (its row of the engine table)
        engine = {
            "engine": name, "engine_name": name,
            "engine_version": f"{name} {getattr(llama_cpp, '__version__', '?')}",
            "n_ctx": n_ctx, "n_ctx_seq": int(llama_cpp.llama_n_ctx_seq(ctx)), "n_parallel": 1,
            "n_batch": int(llama_cpp.llama_n_batch(ctx)), "n_ubatch": int(llama_cpp.llama_n_ubatch(ctx)),
            "n_threads": int(llama_cpp.llama_n_threads(ctx)),
            "n_threads_batch": int(llama_cpp.llama_n_threads_batch(ctx)),
            "type_k": str(s.get("type_k", "f16")).lower(), "type_v": str(s.get("type_v", "f16")).lower(),
            "use_mmap": bool(s.get("use_mmap", True)) and bool(llama_cpp.llama_supports_mmap()),
            "seed": seed, "prompt_tokens": n_prompt, "max_tokens_effective": effective,
            "model_bytes": int(llama_cpp.llama_model_size(llm.model)),
            "n_params": int(llama_cpp.llama_model_n_params(llm.model)),
            "n_layer": int(llama_cpp.llama_model_n_layer(llm.model)),
            "n_ctx_train": int(llama_cpp.llama_model_n_ctx_train(llm.model)),
            "gpu_offload_supported": bool(llama_cpp.llama_supports_gpu_offload()),
            "mmap_supported": bool(llama_cpp.llama_supports_mmap()),
            "chat_template": bool(s.get("chat")),
            "use_extra_bufts": use_extra_bufts,
        }
        self.ch.send({"m": "settings", "settings": engine}, urgent=True)
        if system_info:
            # what llama-cpp-python prints after loading when verbose=True
            self.ch.send({"m": "log", "lvl": "info", "text": system_info}, urgent=True)

        if n_prompt >= n_ctx:
            # llama-cpp-python's create_completion refuses the same prompt with this message
            self.ch.send({"m": "error", "type": "ValueError",
                          "message": f"Requested tokens ({n_prompt}) exceed context window of {n_ctx}"}, urgent=True)
            self.ch.send({"m": "end", "finish_reason": "error", "generated": 0}, urgent=True)
            return 1

        self._warmup(llm, llama_cpp)
        return self._decode(llm, llama_cpp, prompt_tokens, effective, max_tokens, n_ctx)

    def _tokens(self, llm: Any) -> list[int]:
        """The prompt's tokens; with `chat`, wrapped in the model's chat template (whose end token is
        an end-of-generation token, so generation stops on it like create_chat_completion)."""
        s = self.s
        prompt = str(s.get("prompt", ""))
        if s.get("chat"):
            template = (llm.metadata or {}).get("tokenizer.chat_template")
            if template:
                from llama_cpp import llama_chat_format

                eos = llm.token_eos()
                bos = llm.token_bos()
                formatter = llama_chat_format.Jinja2ChatFormatter(
                    template=template,
                    eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                    bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
                    stop_token_ids=[eos])
                result = formatter(messages=[{"role": "user", "content": prompt}])
                return llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)
            self.ch.send({"m": "log", "lvl": "warn",
                          "text": "llm-doctor: the model has no chat template (tokenizer.chat_template); "
                                  "the prompt is used as plain text"})
        if not prompt:
            return [llm.token_bos()]
        return llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)

    def _warmup(self, llm: Any, llama_cpp: Any) -> None:
        ctx = llm.ctx
        bos, eos = llm.token_bos(), llm.token_eos()
        tokens = [t for t in (bos, eos) if t >= 0] or [0]
        self.ch.flush()  # nothing waits in the buffer while the engine works
        t = time.perf_counter()
        llm.eval(tokens)
        llama_cpp.llama_synchronize(ctx)
        warm_ms = (time.perf_counter() - t) * 1000.0
        mem = llama_cpp.llama_get_memory(ctx)
        if mem is not None:
            llama_cpp.llama_memory_clear(mem, True)
        llm.reset()
        llama_cpp.llama_perf_context_reset(ctx)
        self.ch.send({"m": "phase", "phase": "warmup", "ms": round(warm_ms, 3), "tokens": len(tokens)}, urgent=True)

    def _decode(self, llm: Any, llama_cpp: Any, prompt_tokens: list[int],
                effective: int, max_tokens: int, n_ctx: int) -> int:
        s = self.s
        ctx = llm.ctx
        mem = llama_cpp.llama_get_memory(ctx)
        seq_pos_max = llama_cpp.llama_memory_seq_pos_max
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        is_eog = llama_cpp.llama_vocab_is_eog
        eog_cache: dict[int, bool] = {}
        detok = llm.detokenize
        decoder = codecs.getincrementaldecoder("utf-8")("replace")

        pieces: dict[int, bytes] = {}
        # perf_counter_ns → the parent's clock (both monotonic; the offset is read once)
        clock_ms = (time.monotonic() - self.ch.t0) * 1000.0 - time.perf_counter_ns() / 1e6

        def piece_of(tok: int) -> str:
            raw = pieces.get(tok)
            if raw is None:
                raw = pieces[tok] = detok([tok])
            return decoder.decode(raw)

        def render(steps: list[tuple[Any, ...]]) -> dict[str, Any]:
            rows = [[i, round((t1 - t0) / 1e6, 3), "" if eog else piece_of(tok), kv, round(t1 / 1e6 + clock_ms, 3)]
                    for i, t0, t1, tok, kv, eog in steps]
            return {"m": "steps", "s": rows}

        self.ch.render_steps = render
        pending = self.ch.steps
        send = self.ch.send
        perf_ns = time.perf_counter_ns
        flush_every_ns = int(STEP_FLUSH_INTERVAL_S * 1e9)
        hook = self.after_step if type(self).after_step is not ChildRun.after_step else None
        temp = float(s.get("temperature", 0.8))
        gen = llm.generate(prompt_tokens, top_k=int(s.get("top_k", 40)), top_p=float(s.get("top_p", 0.95)),
                           min_p=float(s.get("min_p", 0.05)), temp=temp,
                           repeat_penalty=float(s.get("repeat_penalty", 1.0)), reset=True)
        generated = 0
        finish = "length"
        if effective <= 0:
            self._context_full(len(prompt_tokens), max_tokens, effective, n_ctx, 0)
            send({"m": "end", "finish_reason": finish, "generated": 0}, urgent=True)
            return 0
        overhead_ns = 0
        t_prev = perf_ns()
        next_flush = t_prev + flush_every_ns
        try:
            for token in gen:
                t_got = perf_ns()
                kv = seq_pos_max(mem, 0) + 1 if mem is not None else None
                eog = eog_cache.get(token)
                if eog is None:
                    eog = eog_cache[token] = bool(is_eog(vocab, token))
                if generated:
                    pending.append((generated, t_prev, t_got, token, kv, eog))
                    if t_got >= next_flush:
                        self.ch.flush()
                        next_flush = perf_ns() + flush_every_ns
                else:
                    piece = "" if eog else piece_of(token)
                    send({"m": "phase", "phase": "prefill", "ms": round((t_got - t_prev) / 1e6, 3),
                          "tokens": len(prompt_tokens), "token": piece, "kv": kv}, urgent=True)
                generated += 1
                if eog:
                    finish = "stop"
                    break
                if generated >= effective:
                    finish = "length"
                    if effective < max_tokens or max_tokens <= 0:
                        self._context_full(len(prompt_tokens), max_tokens, effective, n_ctx, generated)
                    break
                if self.stop or self.ch.closed:  # asked to stop, or the parent is gone
                    finish = "interrupted"
                    break
                if hook is not None and generated > 1:
                    hook(generated - 1)
                if self.paused:
                    self._wait_paused()
                t_prev = perf_ns()
                overhead_ns += t_prev - t_got
        except RuntimeError as exc:
            text = str(exc)
            ret = _decode_ret(text)
            self.ch.send({"m": "error", "type": "RuntimeError", "message": text}, urgent=True)
            self.ch.send({"m": "incident", "event": "decode_failed",
                          "text": f"llama_decode returned {ret} after {generated} generated tokens"
                                  f" ({len(prompt_tokens) + generated} tokens in a context of {n_ctx})",
                          "data": {"ret": ret, "n_ctx": n_ctx, "n_tokens": len(prompt_tokens) + generated}}
                         if ret is not None else
                         {"m": "incident", "event": "decode_failed", "text": text}, urgent=True)
            finish = "error"
        finally:
            gen.close()
        self._perf(llama_cpp, ctx, overhead_ns / 1e6)
        send({"m": "end", "finish_reason": finish, "generated": generated}, urgent=True)
        return 0

    def _wait_paused(self) -> None:
        """Hold between two steps (the pause is not counted in any step's time)."""
        self.ch.send({"m": "log", "lvl": "info", "text": "llm-doctor: generation paused"}, urgent=True)
        while self.paused and not self.stop:
            time.sleep(0.05)
        self.ch.send({"m": "log", "lvl": "info", "text": "llm-doctor: generation resumed"}, urgent=True)

    def _context_full(self, n_prompt: int, max_tokens: int, effective: int, n_ctx: int, generated: int) -> None:
        self.ch.send({"m": "incident", "event": "ctx_full",
                      "text": f"context full: prompt {n_prompt} + max_tokens {max_tokens} exceed n_ctx {n_ctx}; "
                              f"generation stopped after {generated} tokens (max_tokens cut to {effective}, "
                              f"as llama-cpp-python's create_completion does; finish_reason 'length')",
                      "data": {"n_ctx": n_ctx, "n_tokens": n_prompt + max(max_tokens, 0), "n_prompt": n_prompt,
                               "generated": generated, "max_tokens": max_tokens}}, urgent=True)

    def _perf(self, llama_cpp: Any, ctx: Any, tracer_ms: float) -> None:
        try:
            d = llama_cpp.llama_perf_context(ctx)
        except (AttributeError, OSError):
            return
        self.ch.send({"m": "perf", "load_ms": round(d.t_load_ms, 3), "prefill_ms": round(d.t_p_eval_ms, 3),
                      "prompt_tokens": int(d.n_p_eval), "decode_ms": round(d.t_eval_ms, 3),
                      "decode_tokens": int(d.n_eval), "reused": int(d.n_reused),
                      "tracer_ms": round(tracer_ms, 3)}, urgent=True)


@contextlib.contextmanager
def _model_params(llama_cpp: Any, use_extra_bufts: bool) -> Iterator[bool]:
    """Load with llama.cpp's extra buffer types (weight repacking: the AMX and CPU_REPACK kernels) on
    or off. llama-cpp-python 0.3.36 has no Llama() argument for it (unknown keywords are ignored):
    Llama.__init__ starts from `llama_cpp.llama_model_default_params()`, looked up on the
    llama_cpp.llama_cpp module at call time, so that function is wrapped while the model loads.
    Yields whether the setting was applied (False when this build has no such field)."""
    if use_extra_bufts:
        yield True
        return
    fields_ = {name for name, *_ in getattr(llama_cpp.llama_model_params, "_fields_", [])}
    # the ctypes module Llama.__init__ calls (llama_cpp/llama.py: `import llama_cpp.llama_cpp as llama_cpp`)
    lib = getattr(sys.modules.get("llama_cpp.llama"), "llama_cpp", None) or getattr(llama_cpp, "llama_cpp", None)
    original = getattr(lib, "llama_model_default_params", None)
    if "use_extra_bufts" not in fields_ or lib is None or original is None:
        yield False
        return

    def without_extra_bufts() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = without_extra_bufts
    try:
        yield True
    finally:
        lib.llama_model_default_params = original


# sonames of ggml's base library; wheels ship copies (not symlinks) of libggml-base.so*, so the
# copy llama.cpp actually uses must be found among the libraries already loaded
GGML_BASE_NAMES = ("libggml-base.so.0", "libggml-base.so", "libggml-base.0.dylib", "libggml-base.dylib",
                   "ggml-base.dll")


def _abort_setter() -> Any:
    mode = getattr(os, "RTLD_NOLOAD", 0)
    for name in GGML_BASE_NAMES:
        try:
            lib = ctypes.CDLL(name, mode=mode)
            return lib.ggml_set_abort_callback
        except (OSError, AttributeError):
            continue
    return None


def _ggml_type(llama_cpp: Any, name: Any) -> int:
    value = getattr(llama_cpp, f"GGML_TYPE_{str(name).upper()}", None)
    if not isinstance(value, int):
        raise ValueError(f"unknown KV cache type {name!r}")
    return value


def _decode_ret(text: str) -> int | None:
    tail = text.rsplit(" ", 1)[-1]
    try:
        return int(tail)
    except ValueError:
        return None


def main(argv: list[str] | None = None, run_class: type[ChildRun] = ChildRun) -> int:
    parser = argparse.ArgumentParser(prog="doctor.sources.live.embedded.child")
    parser.add_argument("--msg-fd", type=int, required=True)
    parser.add_argument("--t0", type=float, required=True)
    args = parser.parse_args(argv)
    faulthandler.enable(file=sys.stderr)
    channel = Channel(args.msg_fd, args.t0)
    try:
        settings = json.loads(sys.stdin.read())
    except ValueError as exc:
        channel.send({"m": "error", "type": "ValueError", "message": f"bad settings from the parent: {exc}"},
                     urgent=True)
        return 2
    code = run_class(settings, channel).run()
    channel.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
