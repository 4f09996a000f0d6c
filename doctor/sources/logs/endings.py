"""How a process ended, as the programs around an engine say it: a signal, a Windows NTSTATUS exit code,
a shell's or a container's exit status. Each ending has one meaning, whatever program reported it.

Sources floor; pure data and the patterns that read it. The strings are the reporters' own:
- glibc's strsignal texts as bash prints a job's end (`Segmentation fault (core dumped)`, `Aborted`,
  `Bus error`, `Floating point exception`, `Illegal instruction`, `Killed`; bash's job line
  `./run.sh: line 3: 12345 Killed   python ...`), zsh's (`zsh: killed  ...`, `zsh: segmentation fault`,
  `zsh: abort`, `zsh: illegal hardware instruction`) and macOS's (`Killed: 9`, `Abort trap: 6`);
- Go's os.ProcessState.String() (Ollama's runner): `signal: killed`, `signal: segmentation fault (core
  dumped)`, `exit status 2`, and on Windows `exit status 0xc0000409` (hex from 1<<16 up; Ollama 2026 adds
  the NTSTATUS text: llm/exit_status_windows.go);
- Python: subprocess.CalledProcessError (`died with <Signals.SIGKILL: 9>.`, `returned non-zero exit status
  139.`), faulthandler (`Fatal Python error: Segmentation fault`), torch.distributed.elastic (`exitcode  :
  -9 (pid: 1234)`, `Signal 9 (SIGKILL) received by PID 1234`), gdb (`received signal SIGSEGV`);
- docker compose (`llama-1 exited with code 137`), kubectl describe (`Exit Code: 137`), IDEs (`Process
  finished with exit code -1073741819 (0xC0000005)`);
- Windows ntstatus.h (the names and codes below; a code also reaches a log as an unsigned or a signed
  decimal: 3221225477, -1073741819, or as the 64-bit unsigned number of the negative code, which LM Studio
  prints through a JavaScript number that keeps 17 digits: `(Exit code: 18446744072635812000)` is
  0xC0000409; codes within 4096 of each other print alike, so such a number can name several).
- Python's ctypes on Windows, which turns a structured exception in a DLL it called into an OSError
  (CPython Modules/_ctypes/callproc.c SetException: "exception: access violation reading %p" / "... writing
  %p", "exception: stack overflow", "exception: integer divide by zero", "exception: illegal instruction"):
  KoboldCpp's and llama-cpp-python's engines are such DLLs.

A shell and a container runtime report a death by signal N as status 128+N (137 = SIGKILL); Python and
torch report it as -N.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.sources.logs.matcher import gated


@dataclass(frozen=True, slots=True)
class Ending:
    """One way a process ends. `key` names it for the crash table (doctor/sources/engines/_ggml/crashes.py)
    and the host-memory rules; `memory`: what usually sends it is the host running out of memory."""

    key: str
    name: str  # SIGSEGV, STATUS_DLL_NOT_FOUND
    meaning: str  # one sentence, for people
    memory: bool = False


SEGV = Ending("sigsegv", "SIGSEGV", "a segmentation fault: the process read or wrote memory it does not own (an "
              "engine bug for this model or feature, a build or driver for another machine, a damaged model file)")
ABRT = Ending("sigabrt", "SIGABRT", "the process aborted itself: a failed assert (GGML_ASSERT), an uncaught C++ "
              "exception or a fatal CUDA error - the line just before it names which")
BUS = Ending("sigbus", "SIGBUS", "a bus error: a page of a memory-mapped file could not be read (the model file was "
             "truncated or replaced while in use, or lives on a network or FUSE filesystem), or shared memory "
             "(/dev/shm) ran out")
FPE = Ending("sigfpe", "SIGFPE", "an arithmetic fault (an integer division by zero) inside the engine")
ILL = Ending("sigill", "SIGILL", "an illegal instruction: the build uses a CPU instruction this processor lacks")
KILL = Ending("sigkill", "SIGKILL", "killed from outside (SIGKILL): most often the kernel's out-of-memory killer "
              "when RAM (or a container's memory limit) ran out, else kill -9 or a supervisor's timeout",
              memory=True)

SIGNALS: dict[int, Ending] = {4: ILL, 6: ABRT, 7: BUS, 8: FPE, 9: KILL, 11: SEGV}
SIGNAL_NAMES: dict[str, Ending] = {e.name: e for e in SIGNALS.values()} | {"SIGIOT": ABRT}


def _nt(key: str, name: str, meaning: str, memory: bool = False) -> Ending:
    return Ending(key, name, meaning, memory)


# Windows NTSTATUS codes a crashed engine exits with (ntstatus.h)
NTSTATUS: dict[int, Ending] = {
    0xC0000005: Ending("sigsegv", "STATUS_ACCESS_VIOLATION", "an access violation, Windows' segmentation fault: the "
                       "process read or wrote memory it does not own"),
    0xC0000409: Ending("sigabrt", "STATUS_STACK_BUFFER_OVERRUN", "a fail-fast exit: the Microsoft C runtime's "
                       "abort() ends a process this way, so a failed GGML_ASSERT or a fatal CUDA error shows as "
                       "0xC0000409 - the line before it names which"),
    0xC000001D: Ending("sigill", "STATUS_ILLEGAL_INSTRUCTION", ILL.meaning),
    0xC0000094: Ending("sigfpe", "STATUS_INTEGER_DIVIDE_BY_ZERO", FPE.meaning),
    0xC0000135: _nt("dll_not_found", "STATUS_DLL_NOT_FOUND", "a DLL the program needs was not found when it started "
                    "(the CUDA runtime or cuBLAS DLLs, the Visual C++ runtime)"),
    0xC000007B: _nt("dll_not_found", "STATUS_INVALID_IMAGE_FORMAT", "a DLL of the wrong kind was loaded (32-bit "
                    "beside 64-bit, or a CUDA DLL of another version found first on PATH)"),
    0xC0000142: _nt("dll_not_found", "STATUS_DLL_INIT_FAILED", "a DLL failed to initialise when the program "
                    "started (a GPU runtime DLL that cannot find its driver)"),
    0xC00000FD: _nt("stack_overflow", "STATUS_STACK_OVERFLOW", "the stack overflowed (deep recursion, e.g. in a "
                    "grammar or a template, on a thread with a small stack)"),
    0xC0000374: _nt("sigsegv", "STATUS_HEAP_CORRUPTION", "the heap was corrupted: memory written past its "
                    "allocation, an engine bug"),
    0xC0000017: _nt("host_memory", "STATUS_NO_MEMORY", "Windows could not give the process more memory", True),
    0xC000012D: _nt("host_memory", "STATUS_COMMITMENT_LIMIT", "Windows ran out of commit (RAM plus the page file) "
                    "for the process", True),
}

# -- reading -----------------------------------------------------------------------------------------------

_WORDS = {  # how a signal is said in words -> its ending
    "segmentation fault": SEGV, "segmentation violation": SEGV, "aborted": ABRT, "abort": ABRT, "abort trap": ABRT,
    "bus error": BUS, "floating point exception": FPE, "illegal instruction": ILL,
    "illegal hardware instruction": ILL, "killed": KILL,
}
# one alternation; the group that matched says which form it is (see read())
ENDING = gated(
    r"(?i:signal: (killed|segmentation fault|aborted|bus error|floating point exception|illegal instruction))"
    r"|Signals\.(SIG[A-Z]{2,6})\b"
    r"|(?:received signal|Signal \d+ \()\s*(SIG[A-Z]{2,6})\b"
    r"|(?:^|\| |Fatal Python error: )\s*(Segmentation fault|Aborted|Abort trap|Bus error|Floating point exception"
    r"|Illegal instruction|Killed)(?: \(core dumped\)|: \d+)?\s*$"
    r"|(?:: line \d+: +\d+ |^\[\d+\][+-]? +)(Segmentation fault|Aborted|Bus error|Floating point exception"
    r"|Illegal instruction|Killed)\b"
    r"|\bzsh: (killed|segmentation fault|abort|bus error|illegal hardware instruction|floating point exception)\b"
    r"|(?i:\bexit(?:ed with)? (?:status|code)|\bexitcode|returned non-zero exit status|\breturncode)"
    r"\s*[:=]?\s*(0x[0-9A-Fa-f]{1,8}|-?\d{1,10}|18446744\d{12})\b"
    r"|\b(0x[cC]0000[0-9A-Fa-f]{3})\b"
    r"|(?<![\d.])(32212\d{5}|-10737\d{5})(?![\d.])"
    r"|\bexception: (access violation|stack overflow|integer divide by zero|illegal instruction)\b"
)
# the literals a line must hold to be read (the scan's fragments and the crash parser's gate: RE2 syntax)
FRAGMENTS = (
    r"signal: (?:killed|segmentation|aborted|bus error|floating|illegal)", r"Signals\.SIG",
    r"received signal SIG|Signal \d+ \(SIG",
    r"Segmentation fault|Aborted|Abort trap|Bus error|Floating point exception|Illegal instruction",
    r"Killed|zsh: (?:killed|segmentation|abort|bus|illegal|floating)",
    r"[Ee]xit(?:ed with)? (?:[Ss]tatus|[Cc]ode)|EXIT (?:STATUS|CODE)|exitcode|non-zero exit status|returncode",
    r"0x[cC]0000[0-9A-Fa-f]{3}|32212\d{5}|-10737\d{5}",
    r"exception: (?:access violation|stack overflow|integer divide|illegal instruction)",
)
# ctypes' words for a structured exception (callproc.c SetException) -> the NTSTATUS code it stands for
_SEH_WORDS = {"access violation": 0xC0000005, "stack overflow": 0xC00000FD, "integer divide by zero": 0xC0000094,
              "illegal instruction": 0xC000001D}


WIDE = (1 << 64) - (1 << 32)  # a negative 32-bit status as a 64-bit unsigned number: WIDE + the code
WINDOWS_EXCEPTION = Ending("windows_exception", "NTSTATUS 0xC0000xxx", "a Windows exception ended the process; the "
                           "program printed its code as a 64-bit number that lost its last digits, so it is one of "
                           "several (an access violation, a missing DLL, an illegal instruction, out of memory ...)")


def _wide(value: int) -> Ending | None:
    """A status printed as a 64-bit unsigned number, maybe through a double (17 significant digits): the
    NTSTATUS code it is, the generic Windows exception where several codes print alike, or None."""
    if value - WIDE in NTSTATUS:
        return NTSTATUS[value - WIDE]
    alike = {e.key: e for code, e in NTSTATUS.items() if float(WIDE + code) == float(value)}
    if len(alike) == 1:
        return next(iter(alike.values()))
    if alike or WIDE + 0xC0000000 - 2048 <= value < WIDE + 0xC1000000:  # NTSTATUS errors, facility 0
        return WINDOWS_EXCEPTION
    return from_status(value - (1 << 64)) if value < 1 << 64 else None  # -N: a signal


def from_status(value: int) -> Ending | None:
    """The ending an exit status says: an NTSTATUS code (unsigned, signed as Windows tools print it, or 64-bit
    unsigned), -N (killed by signal N, as Python reports it) or 128+N (as a shell or a container runtime does).
    None for an ordinary failure status (1, 2, 255): the program's own report, not a crash."""
    if value >= WIDE:
        return _wide(value)
    nt = NTSTATUS.get(value & 0xFFFFFFFF) if value < 0 or value >= 1 << 16 else None
    if nt is not None:
        return nt
    if value < 0:
        return SIGNALS.get(-value)
    if 128 < value < 160:
        return SIGNALS.get(value - 128)
    return None


def read(text: str) -> tuple[Ending, str] | None:
    """The ending a line reports and the words that say it, or None."""
    m = ENDING.search(text)
    if m is None:
        return None
    words, py_sig, gdb_sig, alone, job, zsh, status, hexcode, decimal, seh = m.groups()
    found: Ending | None = None
    said = words or alone or job or zsh
    if said:
        found = _WORDS.get(said.lower())
    elif py_sig or gdb_sig:
        found = SIGNAL_NAMES.get(py_sig or gdb_sig)
    elif status:
        found = from_status(int(status, 16) if status.lower().startswith("0x") else int(status))
    elif hexcode:
        found = NTSTATUS.get(int(hexcode, 16))
    elif decimal:
        found = from_status(int(decimal))
    elif seh:
        found = NTSTATUS.get(_SEH_WORDS[seh])
    return (found, m.group(0).strip()) if found is not None else None


__all__ = ["ENDING", "FRAGMENTS", "KILL", "NTSTATUS", "SIGNALS", "Ending", "from_status", "read"]
