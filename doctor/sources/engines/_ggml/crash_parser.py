"""The crash parser: finds the crash causes of the table (crashes.py) in any engine's log, with the
evidence around them (the AMX / CPU_REPACK weight buffers, `AMX_INT8 = 1` in the system line, the
CPU model, backtrace frames), and at each summary writes one `crash_cause` event per cause found,
plus `crash_evidence` events for the lines that support it. Votes for no engine. Its lines:
crash_patterns.py. Pure: text in, events out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from doctor.core.facts import Event, Facts, Scalar
from doctor.sources.engines._ggml.crash_config import TP_HEADS, heads_detail
from doctor.sources.engines._ggml.crash_context import BY_ENDING, GPU_DTYPE
from doctor.sources.engines._ggml.crash_patterns import (
    AMX_BUFFER,
    AMX_CPU,
    AMX_EVIDENCE_KIND,
    AMX_FEATURE,
    AMX_FRAME,
    AMX_REPACK_LINE,
    AMX_VARIANT,
    CONTEXT_KIND,
    CUBLAS_CALL,
    CUDA_DETAIL_KIND,
    CUDA_ERROR,
    CUDA_ERROR_KIND,
    CUDA_WHERE,
    DEEPSPEED_INFERENCE,
    ENGINE_WORDS,
    EXPLICIT,
    EXPLICIT_KIND,
    GPU_ARCH,
    KERNEL_TRAP,
    KINDS,
    LCP_LOAD_FAILED,
    LCP_LOAD_FAILED_KIND,
    PLATFORM,
    SEGV,
    SIGILL,
    SIGNAL_KIND,
    WRAPPED_HEADS,
)
from doctor.sources.engines._ggml.crashes import (
    AMX,
    CUBLAS,
    CUDA_BLOCK,
    CUDA_CAUSES,
    CUDA_OTHER,
    DEEPSPEED_RESERVE,
    HIPBLASLT_DATA,
    ILLEGAL_ADDRESS,
    ILLEGAL_INSTRUCTION,
    NO_KERNEL_IMAGE,
    UNKNOWN_ARCH,
    Cause,
    fix_data,
)
from doctor.sources.logs import endings
from doctor.sources.logs.base import LogParser, reads
from doctor.sources.logs.line import LogLine

# causes that are engine or driver bugs rather than a setting: the version in use is part of the report
REGRESSION_PRONE = (ILLEGAL_ADDRESS, CUBLAS, CUDA_OTHER)
MAX_CRASHES = 64  # crash lines kept per input (a journal of a crash loop repeats them)
BACKTRACE_WINDOW = 80  # lines after a crash in which its backtrace frames are read


@dataclass(slots=True)
class _Crash:
    line: LogLine
    kind: str  # the ending's key: sigsegv | sigill | sigabrt | sigbus | sigfpe | dll_not_found | ...
    ending: endings.Ending | None = None


@dataclass(slots=True)
class _Found:
    cause: Cause
    confidence: str
    line: LogLine
    detail: str = ""
    support: list[LogLine] = field(default_factory=list)


@dataclass(slots=True)
class _State:
    explicit: list[_Found] = field(default_factory=list)
    crashes: list[_Crash] = field(default_factory=list)
    amx_strong: list[LogLine] = field(default_factory=list)  # AMX buffer or amx repack lines (first of each)
    repack: LogLine | None = None  # a CPU_REPACK (non-AMX) weight buffer
    amx_build: LogLine | None = None  # AMX_INT8 = 1 in the system line, or the AMX CPU variant loaded
    amx_cpu: LogLine | None = None  # a CPU model / flags with AMX
    frames: list[LogLine] = field(default_factory=list)  # backtrace frames through the AMX / extra kernels
    arch: LogLine | None = None  # the first line naming the GPU's architecture (gfx, compute capability)
    platform: LogLine | None = None  # the first line naming an embedded board (Jetson, Raspberry Pi, RK3588)
    deepspeed: LogLine | None = None  # the first line showing a DeepSpeed-Inference run (init_inference, mp_size)
    pending_cuda: _Found | None = None  # a "CUDA error: X" that no explicit entry named (yet)
    cuda_block: _Found | None = None  # the latest CUDA finding: its "current device" line follows


def _explicit_match(text: str) -> tuple[re.Match[str] | None, Cause | None, str]:
    """The first line pattern that names its cause in `text`: (match, cause, confidence)."""
    for cause, confidence, pattern in EXPLICIT:
        m = pattern.search(text)  # type: ignore[attr-defined]
        if m:
            return m, cause, confidence
    return None, None, ""


class CrashParser(LogParser):
    """Finds the crash causes of CAUSES in any engine's log. Votes for no engine."""

    name = "crashes"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()

    def feed(self, line: LogLine) -> None:
        if not self.passes_gate(line.text):
            return
        s = self.s
        if s.pending_cuda is not None and line.number - s.pending_cuda.line.number > CUDA_BLOCK:
            self._flush_cuda()
        self.dispatch(line)

    # -- line kinds ------------------------------------------------------------------------------
    @reads(EXPLICIT_KIND)
    def _explicit(self, line: LogLine) -> bool:
        m, cause, confidence = _explicit_match(line.text)
        if m is None and WRAPPED_HEADS.search(line.text):
            # a heads check wrapped over two lines (a terminal's width, a notification's): read joined
            for candidate in line.continuations():
                m, cause, confidence = _explicit_match(candidate.text)
                if m is not None:
                    break
        if m is None or cause is None:
            return False
        detail = m.group(0)
        if cause.id.startswith("assert_"):
            detail = cause.family[0]  # one spelling for both formats and for Ollama's restatement
        elif cause is UNKNOWN_ARCH and m.groups() and m.group(1) is not None:
            detail = f"architecture '{m.group(1)}'"
        elif cause is TP_HEADS:
            numbers = [int(g) for g in m.groups() if g is not None]
            if len(numbers) == 2:  # DeepSpeed's containers say it without the numbers
                detail = heads_detail(*numbers)
        elif cause is HIPBLASLT_DATA:  # "Cannot read" and "Could not load" of one file are one finding
            name = m.group(1).rsplit("/", 1)[-1] if m.group(1) else "HIPBLASLT_TENSILE_LIBPATH"
            detail = f"no {name}"
        found = _Found(cause, confidence, line, detail)
        if cause in CUDA_CAUSES:
            s = self.s
            if s.pending_cuda is not None and line.number - s.pending_cuda.line.number <= CUDA_BLOCK:
                s.pending_cuda = None  # "CUDA error: <this text>": the explicit match says more
            s.cuda_block = found
        self._found(found)
        return True

    @reads(CUDA_DETAIL_KIND)
    def _cuda_detail(self, line: LogLine) -> bool:
        """A line of the block after the latest CUDA error: where it happened, or the cuBLAS call."""
        t = line.text
        s = self.s
        block = s.cuda_block
        if block is not None and line.number - block.line.number <= CUDA_BLOCK:
            m = CUDA_WHERE.search(t)
            if m:
                if " in " not in block.detail:
                    block.detail = f"{block.detail} in {m.group(2)} ({m.group(3).rsplit('/', 1)[-1]})"
                block.support.append(line)
                return True
            m = CUBLAS_CALL.search(t)
            if m and block is s.pending_cuda:
                block.cause, block.confidence = CUBLAS, "high"
                block.detail = f"{block.detail}, calling {m.group(1)}"
                block.support.append(line)
                return True
        return False

    @reads(CUDA_ERROR_KIND)
    def _cuda_error(self, line: LogLine) -> bool:
        m = CUDA_ERROR.search(line.text)
        if not m:
            return False
        self._flush_cuda()
        self.s.pending_cuda = self.s.cuda_block = _Found(CUDA_OTHER, "medium", line, m.group(0).strip()[:160])
        return True

    @reads(LCP_LOAD_FAILED_KIND)
    def _lcp_load_failed(self, line: LogLine) -> bool:
        if not LCP_LOAD_FAILED.search(line.text):
            return False
        found = self._last(UNKNOWN_ARCH)
        if found is not None and line.number - found.line.number <= 20:
            found.support.append(line)
        return True

    @reads(SIGNAL_KIND)
    def _signal(self, line: LogLine) -> bool:
        """The process died by a signal or a crash status (classified at the summary, with the evidence
        around it). SIGKILL and Windows' memory statuses are the host running out of memory: the host-memory
        parser's (doctor/sources/logs/host_oom.py)."""
        t = line.text
        s = self.s
        if len(s.crashes) < MAX_CRASHES and not _another_process(t):
            found = endings.read(t)
            ending = found[0] if found is not None else None
            if SIGILL.search(t):
                s.crashes.append(_Crash(line, "sigill", ending))
            elif SEGV.search(t):
                s.crashes.append(_Crash(line, "sigsegv", ending))
            elif ending is not None and not ending.memory:
                s.crashes.append(_Crash(line, ending.key, ending))
        return False

    @reads(CONTEXT_KIND)
    def _context(self, line: LogLine) -> bool:
        """The GPU's architecture and the board: what a crash met (never takes the line)."""
        s = self.s
        t = line.text
        if s.arch is None and GPU_ARCH.search(t):
            s.arch = line
        if s.platform is None and PLATFORM.search(t):
            s.platform = line
        if s.deepspeed is None and DEEPSPEED_INFERENCE.search(t):
            s.deepspeed = line
        return False

    def _flush_cuda(self) -> None:
        s = self.s
        if s.pending_cuda is not None:
            self._found(s.pending_cuda)
            s.pending_cuda = None

    @reads(AMX_EVIDENCE_KIND)
    def _amx_evidence(self, line: LogLine) -> bool:
        """Evidence for the AMX / repack crash; never takes the line (it may be the crash itself)."""
        self._amx_line(line)
        return False

    def _amx_line(self, line: LogLine) -> None:
        t = line.text
        s = self.s
        m = AMX_BUFFER.search(t)
        if m:
            if m.group(1) == "AMX":
                if not any("buffer" in x.text for x in s.amx_strong):
                    s.amx_strong.append(line)
            elif s.repack is None:
                s.repack = line
            return
        if AMX_REPACK_LINE.search(t):
            if not any("repack" in x.text for x in s.amx_strong):
                s.amx_strong.append(line)
            return
        if AMX_FEATURE.search(t) or (AMX_VARIANT.search(t) and "backend" in t):
            s.amx_build = s.amx_build or line
            return
        if AMX_FRAME.search(t) and not SEGV.search(t):
            if len(s.frames) < 8:
                s.frames.append(line)
            return
        if AMX_CPU.search(t) and s.amx_cpu is None:
            s.amx_cpu = line

    def _found(self, found: _Found) -> None:
        if any(f.cause is found.cause and f.detail == found.detail for f in self.s.explicit):
            return  # the same failure restated (Ollama repeats the runner's last error line)
        if len(self.s.explicit) < MAX_CRASHES:
            self.s.explicit.append(found)

    def _last(self, cause: Cause) -> _Found | None:
        return next((f for f in reversed(self.s.explicit) if f.cause is cause), None)

    # -- summary --------------------------------------------------------------------------------
    def summarize(self, facts: Facts) -> None:
        s = self.s
        found = list(s.explicit)
        if s.pending_cuda is not None and not any(f.cause is s.pending_cuda.cause and f.detail == s.pending_cuda.detail
                                                  for f in found):
            found.append(s.pending_cuda)
        unnamed: _Crash | None = None  # the first crash no cause explains: its ending is said in words
        for crash in s.crashes:
            f = self._classify(crash)
            if f is not None and not any(x.cause is f.cause for x in found):
                found.append(f)
            elif f is None and unnamed is None:
                unnamed = crash
        for f in found:
            f = self._add_context(facts, self._in_deepspeed(f))  # copies: summarize runs at every snapshot
            self._emit(facts, f)
        if unnamed is not None and not found:
            self._say_ending(facts, unnamed)

    def _in_deepspeed(self, f: _Found) -> _Found:
        """An illegal memory access in a DeepSpeed-Inference run: the sequence ran past the KV cache it reserved
        (crash_setup.py DEEPSPEED_RESERVE), the run's line or the crash's own naming DeepSpeed-Inference. A new
        _Found: the state's own stays as read (summarize runs at every snapshot)."""
        if f.cause is not ILLEGAL_ADDRESS:
            return f
        evidence = f.line if DEEPSPEED_INFERENCE.search(f.line.text) else self.s.deepspeed
        if evidence is None:
            return f
        detail = f"{f.detail} in a DeepSpeed-Inference run" if f.detail else "in a DeepSpeed-Inference run"
        support = f.support + ([evidence] if evidence is not f.line else [])
        return replace(f, cause=DEEPSPEED_RESERVE, confidence="medium", detail=detail, support=support)

    def _context_lines(self, facts: Facts, cause: object | None) -> tuple[str, list[LogLine]]:
        """What the log shows around a crash: the board, the GPU's architecture, and for an illegal
        instruction the CPU features the build found missing."""
        s = self.s
        words: list[str] = []
        support: list[LogLine] = []
        if s.platform is not None:
            m = PLATFORM.search(s.platform.text)
            words.append(f"on {m.group(1).strip() if m else 'an embedded board'} (an embedded board: its GPU and "
                         f"CPU builds differ from desktop ones)")
            support.append(s.platform)
        if s.arch is not None and cause in (NO_KERNEL_IMAGE, GPU_DTYPE, None):
            m = GPU_ARCH.search(s.arch.text)
            arch = next((g for g in (m.groups() if m else ()) if g), "")
            if arch:
                words.append(f"GPU architecture {arch}" if arch.startswith(("gfx", "sm_"))
                             else f"GPU compute capability {arch}")
                support.append(s.arch)
        if cause is ILLEGAL_INSTRUCTION:
            features = facts.value("engine.cpu_features")
            if isinstance(features, list) and features and "AVX2" not in features and "NEON" not in features:
                words.append("a CPU without AVX2 (the system line lists no AVX2)")
        if cause is None or cause in REGRESSION_PRONE:
            driver = facts.value("host.gpu.driver")
            if isinstance(driver, str) and driver:
                words.append(f"GPU driver {driver}")
            version = facts.value("engine.version")
            if isinstance(version, str) and version:
                words.append(f"engine version {version} (if an earlier release ran the same model and settings, "
                             f"this is a regression of the engine: keep that release and report this one)")
        return "; ".join(words), support

    def _add_context(self, facts: Facts, f: _Found) -> _Found:
        """f with what the crash met (a new _Found, as _in_deepspeed's)."""
        if (f.cause not in (ILLEGAL_INSTRUCTION, NO_KERNEL_IMAGE, GPU_DTYPE, *REGRESSION_PRONE)
                and self.s.platform is None):
            return f
        words, support = self._context_lines(facts, f.cause)
        if not words:
            return f
        return replace(f, detail=f"{f.detail}; {words}" if f.detail else words,
                       support=f.support + [x for x in support if x is not f.line])

    def _say_ending(self, facts: Facts, crash: _Crash) -> None:
        """A crash no cause explains: how it ended, what that means, and what was around it."""
        src = self.src(crash.line)
        ending = crash.ending or (endings.SIGNALS[11] if crash.kind == "sigsegv" else None)
        if ending is not None and not facts.has("run.end_signal"):
            facts.set("run.end_signal", ending.name, src)
            facts.set("run.end_meaning", ending.meaning, src)
        if not facts.has("run.crashed"):
            facts.set("run.crashed", True, src)
        words, support = self._context_lines(facts, None)
        if words and not facts.has("run.crash_context"):
            first = support[0] if support else crash.line
            facts.set("run.crash_context", words, self.src(first))

    def _classify(self, crash: _Crash) -> _Found | None:
        s = self.s
        n = crash.line.number
        if crash.kind == "sigill":
            return _Found(ILLEGAL_INSTRUCTION, "high", crash.line, "illegal instruction")
        by_ending = BY_ENDING.get(crash.kind)
        if by_ending is not None and crash.ending is not None:
            return _Found(by_ending, "high" if crash.kind == "dll_not_found" else "medium", crash.line,
                          crash.ending.name)
        if crash.kind != "sigsegv":
            return None
        before = [x for x in s.amx_strong if x.number < n]
        frames = [x for x in s.frames if abs(x.number - n) <= BACKTRACE_WINDOW]
        amx_frames = [x for x in frames if "amx" in x.text or "sapphirerapids" in x.text]
        in_amx_lib = AMX_VARIANT.search(crash.line.text) is not None
        what = _signal_words(crash.line.text)
        if before or amx_frames or in_amx_lib:
            support = before + amx_frames
            where = "the AMX buffer" if before else "the AMX kernel"
            return _Found(AMX, "high", crash.line, f"{what} after weights went to {where}", support)
        build = s.amx_build if s.amx_build is not None and s.amx_build.number < n else None
        repack = s.repack if s.repack is not None and s.repack.number < n else None
        if repack is not None or frames:
            support = [x for x in (repack,) if x is not None] + frames
            return _Found(AMX, "medium", crash.line, f"{what} after weights went to the CPU_REPACK buffer", support)
        if build is not None:
            return _Found(AMX, "medium", crash.line, f"{what} with an AMX build (AMX_INT8 = 1)", [build])
        if s.amx_cpu is not None:
            return _Found(AMX, "low", crash.line, f"{what} on an Intel Xeon with AMX", [s.amx_cpu])
        return None

    def _emit(self, facts: Facts, f: _Found) -> None:
        c = f.cause
        detail = f" ({f.detail})" if f.detail and f.detail not in c.title else ""  # "(SIGBUS)" once
        summary = f"{c.title}{detail}. {c.meaning}"
        data: dict[str, Scalar] = {"cause": c.id, "confidence": f.confidence, "title": c.title, "detail": f.detail,
                                   "summary": summary[:900], **fix_data(c)}
        placed = self.placed(f.line)  # what the run had done when it crashed (doctor/sources/logs/timeline.py)
        if placed is not None:
            data.update(placed.data())
        facts.add_event(Event(kind="crash_cause", line=f.line.number, text=f.line.raw[:400], source=self.name,
                              data=data, placed_by=placed.lines() if placed is not None else ()))
        for support in f.support:  # the same data: whichever line comes first renders the finding
            facts.add_event(Event(kind="crash_evidence", line=support.number, text=support.raw[:400],
                                  source=self.name, data=data))


def _another_process(text: str) -> bool:
    """A kernel line about a process that is no engine (a journal holds every program's segfaults)."""
    m = KERNEL_TRAP.search(text)
    return m is not None and not ENGINE_WORDS.search(text)


def _signal_words(text: str) -> str:
    if "general protection" in text:
        return "a general protection fault"
    return "a segmentation fault"
