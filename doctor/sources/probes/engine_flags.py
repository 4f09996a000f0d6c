"""The flags the user's own llama.cpp build knows: its `--help`, read, indexed, and fix commands checked
against it (sources floor: a probe of this machine).

Strings: llama.cpp prints its options in `--help` as one line per option, the spellings first and
the value after them, the description past a run of spaces (common/arg.cpp since late 2024:
`-ngl,  --gpu-layers, --n-gpu-layers N   max. number of layers ...`; common/common.cpp before it:
`  -c N, --ctx-size N    size of the prompt context ...`). `--version` prints
`version: 4000 (d5a409e5)` (the build number; `version: 0.5.0-dev (build 1, ...)` in packaged builds).

Flags were renamed and removed across llama.cpp's history: `-fa` took no value before it took
`on|off|auto`; `-ngl auto|all` came with `--fit`; `--load-mode` replaced `--no-mmap` and `--mlock`.
`RESPELL` holds those eras: a fix written in one spelling is said in the spelling the user's build
knows, and a flag with no equivalent in that build is reported as needing a newer build.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from doctor.sources.engines.llamacpp.engine import BINARIES

SERVER = BINARIES[0]  # llama-server

HELP_TIMEOUT_S = 10.0
# an option line: at most four spaces in, then a flag; its columns are cut by runs of two spaces or more
OPTION = re.compile(r"^ {0,4}-[-\w]")
COLUMNS = re.compile(r" {2,}|\t")
SPELLING = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
VERSION = re.compile(r"version:\s*(\S+)(?:\s*\((?:build\s+)?([^)]*)\))?")
# a flag in a fix command, with the value that follows it (not another flag)
FLAG_IN_COMMAND = re.compile(r"(?<![\w/.=-])(--?[A-Za-z][\w-]*)(?:[ =]((?!-)[^\s,;()]+))?")

# the same option in other eras, tried in order: (flag, value or None) -> alternatives
RESPELL: dict[tuple[str, str | None], tuple[tuple[str, str | None], ...]] = {
    ("--no-mmap", None): (("--load-mode", "none"),),
    ("--mlock", None): (("--load-mode", "mlock"),),
    ("--load-mode", "none"): (("--no-mmap", None),),
    ("--load-mode", "mlock"): (("--mlock", None),),
    ("--load-mode", "mmap+mlock"): (("--mlock", None),),
    ("--flash-attn", "on"): (("--flash-attn", None),),
    ("--flash-attn", "auto"): (("--flash-attn", None),),
    ("--n-gpu-layers", "auto"): (("--n-gpu-layers", "999"),),
    ("--n-gpu-layers", "all"): (("--n-gpu-layers", "999"),),
}
# what older builds did without being told, in words (no flag of theirs says it)
DEFAULTS_OF_OLD_BUILDS: dict[tuple[str, str | None], str] = {
    ("--load-mode", "mmap"): "the default (mmap)",
    ("--flash-attn", "off"): "no -fa (off by default)",
}
# spellings of one option across eras, long form first (the build's own help adds its own aliases)
SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("--ctx-size", "-c"), ("--n-gpu-layers", "-ngl", "--gpu-layers"), ("--flash-attn", "-fa"),
    ("--cache-type-k", "-ctk"), ("--cache-type-v", "-ctv"), ("--batch-size", "-b"), ("--ubatch-size", "-ub"),
    ("--threads", "-t"), ("--threads-batch", "-tb"), ("--parallel", "-np"), ("--no-kv-offload", "-nkvo"),
    ("--cache-ram", "-cram"), ("--kv-unified", "-kvu"), ("--cpu-moe", "-cmoe"), ("--n-cpu-moe", "-ncmoe"),
    ("--override-tensor", "-ot"), ("--fit", "-fit"), ("--fit-target", "-fitt"), ("--fit-ctx", "-fitc"),
    ("--load-mode", "-lm"), ("--n-predict", "-n", "--predict"), ("--split-mode", "-sm"),
    ("--tensor-split", "-ts"), ("--main-gpu", "-mg"), ("--temp",), ("--top-k",), ("--top-p",), ("--min-p",),
    ("--repeat-penalty",), ("--repeat-last-n",), ("--swa-full",), ("--no-mmap",), ("--mlock",),
)
# values a flag that takes a choice lists in its help ("[on|off|auto]", "{none,layer,row}", "'auto', or 'all'")
CHOICES = re.compile(r"[\[{]([\w+|,-]+)[\]}]")
QUOTED_CHOICES = re.compile(r"'(\w+)'")
CHOICE_WORDS = frozenset({"on", "off", "auto", "all"})


@dataclass(frozen=True, slots=True)
class FlagSet:
    """What one build's `--help` says it knows."""

    binary: str
    spellings: frozenset[str]  # every spelling of every option
    takes_value: frozenset[str]  # spellings whose help line shows a value placeholder
    choices: dict[str, frozenset[str]] = field(default_factory=dict, hash=False)  # spelling -> allowed words
    aliases: dict[str, frozenset[str]] = field(default_factory=dict, hash=False)  # spelling -> its option's
    version: str | None = None  # "4000" or "0.5.0-dev"

    def knows(self, flag: str) -> bool:
        return flag in self.spellings

    def spelled(self, flag: str) -> str | None:
        """`flag` as this build spells it: itself, or another spelling of the same option; None if absent."""
        if flag in self.spellings:
            return flag
        for group in SYNONYMS:
            if flag in group:
                return next((g for g in group if g in self.spellings), None)
        return None

    def accepts(self, flag: str, value: str | None) -> bool:
        """Whether the build takes `flag` with `value` (a word it lists, or any value it takes one)."""
        if value is None:
            return True  # named without a value: a mention in prose ("or a smaller --ctx-size"), or a switch
        if flag not in self.takes_value:
            return False
        allowed = self.choices.get(flag)
        if value in CHOICE_WORDS:  # words of the later choice-style options: the build must list them
            return allowed is not None and value in allowed
        return True  # a number, a type name, or prose after the flag ("-ngl two below ...")


def parse_help(text: str, binary: str = SERVER, version_text: str = "") -> FlagSet:
    """Index a `--help` text (either era's layout)."""
    spellings: set[str] = set()
    takes_value: set[str] = set()
    choices: dict[str, frozenset[str]] = {}
    aliases: dict[str, frozenset[str]] = {}
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        if not OPTION.match(raw):
            continue
        columns = COLUMNS.split(raw.strip())
        heads = [c for c in _leading(columns)]
        head = " ".join(heads)
        names = [s for s in SPELLING.findall(head) if not s.startswith("--)")]
        if not names:
            continue
        rest = SPELLING.sub(" ", head).replace(",", " ").split()
        has_value = bool(rest)
        words: set[str] = set()
        found = CHOICES.search(head)
        if found:
            words |= {w for w in re.split(r"[|,]", found.group(1)) if w}
        desc = " ".join(columns[len(heads):]) + " " + (lines[i + 1] if i + 1 < len(lines) else "")
        if "either an exact number" in desc or "'auto'" in desc:
            words |= set(QUOTED_CHOICES.findall(desc))
        group = frozenset(names)
        for name in names:
            spellings.add(name)
            aliases[name] = group
            if has_value:
                takes_value.add(name)
            if words and name.startswith("-"):
                choices[name] = frozenset(words)
    version = None
    vm = VERSION.search(version_text)
    if vm and vm.group(1) != "0":  # a build made without git metadata prints "0 (unknown)"
        version = vm.group(1)
    return FlagSet(binary, frozenset(spellings), frozenset(takes_value), choices, aliases, version)


def _leading(columns: list[str]) -> list[str]:
    """The option's own columns: those before the description (each starts with a flag)."""
    out: list[str] = []
    for col in columns:
        if not col.startswith("-"):
            break
        out.append(col)
    return out


@dataclass(frozen=True, slots=True)
class CheckedCommand:
    """A fix command checked against a build: `command` in the build's spelling, the flags it lacks."""

    original: str
    command: str
    missing: tuple[str, ...] = ()  # flags (with their value) the build has no spelling for
    respelled: tuple[tuple[str, str], ...] = ()  # (as written, as the build spells it)

    @property
    def changed(self) -> bool:
        return self.command != self.original or bool(self.missing)

    def note(self, flags: FlagSet) -> str:
        """One sentence for the fix text; empty when the command stands as written."""
        build = f"{flags.binary}" + (f" (version {flags.version})" if flags.version else "")
        parts: list[str] = []
        if self.respelled:
            said = ", ".join(f"{a} as {b}" for a, b in self.respelled)
            parts.append(f"said in the spelling of {build}: {said}")
        if self.missing:
            parts.append(f"{', '.join(self.missing)} needs a newer llama.cpp build than {build}")
        return "; ".join(parts)


def check_command(command: str, flags: FlagSet) -> CheckedCommand:
    """Say `command` (a fix's llama.cpp part) in the spelling `flags` knows."""
    missing: list[str] = []
    respelled: list[tuple[str, str]] = []
    out: list[str] = []
    pos = 0
    for m in FLAG_IN_COMMAND.finditer(command):
        flag, value = m.group(1), m.group(2)
        out.append(command[pos:m.start()])
        pos = m.end()
        written = m.group(0)
        said = _respell(flag, value, flags)
        if said is None:
            missing.append(written.strip())
            out.append(written)
        else:
            if said != written:
                respelled.append((written.strip(), said))
            out.append(said)
    out.append(command[pos:])
    return CheckedCommand(command, "".join(out), tuple(missing), tuple(respelled))


def _respell(flag: str, value: str | None, flags: FlagSet) -> str | None:
    """`flag value` as the build says it, or None when it has no spelling for it."""
    own = flags.spelled(flag)
    if own is not None and flags.accepts(own, value):
        return own if value is None else f"{own} {value}"
    long_form = next((g[0] for g in SYNONYMS if flag in g), flag)
    if own is None or not flags.accepts(own, value):
        said = DEFAULTS_OF_OLD_BUILDS.get((long_form, value))
        if said is not None and not flags.knows("--fit"):  # an older build: its default does it
            return said
    for alt_flag, alt_value in RESPELL.get((long_form, value), ()):
        same_option = alt_flag == long_form and own is not None
        alt = own if same_option else flags.spelled(alt_flag)
        if alt is not None and flags.accepts(alt, alt_value):
            return alt if alt_value is None else f"{alt} {alt_value}"
    return None


def read_flags(binary: Path, timeout_s: float = HELP_TIMEOUT_S) -> FlagSet | None:
    """Run `binary --help` and `--version`; None when it does not run or prints no options."""
    try:
        helped = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=timeout_s,
                                check=False, stdin=subprocess.DEVNULL)
        versioned = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                                   timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    flags = parse_help(helped.stdout + helped.stderr, binary.name, versioned.stdout + versioned.stderr)
    return flags if len(flags.spellings) >= 5 else None


def candidates(log_paths: Iterable[str] = (), suite_cache: bool = False) -> list[Path]:
    """Where the user's llama.cpp binary may be: a path the log names (when it is on this machine),
    $LLM_DOCTOR_LLAMA_SERVER, llama-server on PATH, and (asked for) the suite's builds in
    ~/.cache/llm-doctor/llama-server-*/bin."""
    found: list[Path] = []
    for text in log_paths:
        path = Path(text)
        # only llama.cpp's own program names: a log is input, and "main" or "server" could be anything
        if path.name.removesuffix(".exe") in BINARIES:
            found.append(path)
    env = os.environ.get("LLM_DOCTOR_LLAMA_SERVER")
    if env:
        found.append(Path(env))
    on_path = shutil.which(SERVER)
    if on_path:
        found.append(Path(on_path))
    if suite_cache:
        cache = Path(os.environ.get("LLM_DOCTOR_CACHE", Path.home() / ".cache" / "llm-doctor"))
        found.extend(sorted(cache.glob(f"{SERVER}-*/bin/{SERVER}"), reverse=True))
    return [p for p in dict.fromkeys(found) if p.is_file() and os.access(p, os.X_OK)]


def find_flags(log_paths: Iterable[str] = (), suite_cache: bool = False) -> FlagSet | None:
    """The first candidate binary whose `--help` reads."""
    for path in candidates(log_paths, suite_cache):
        flags = read_flags(path)
        if flags is not None:
            return flags
    return None
