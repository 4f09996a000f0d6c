"""Launch commands, pasted alone or beside a log: the engine they start and the settings their flags set.

One reader for every engine family: a command line (continued over several lines with a trailing `\\`)
is split into words, its program found with the engines' own `Launch` (each engine folder's launch.py, named by
its row of the engine table: llama.cpp's llama-server / llama-cli and the old main / server, KoboldCpp, `vllm
serve`, SGLang's launch_server module, TGI's launcher, `ollama serve|run`), or `docker|podman run` of an engine's
image, and its flags read with that engine's table. A flag sets its fact only where no engine line set it (an
engine's own start-up lines say what it really used). From `docker run` it also reads what the container was
given: GPUs (`--gpus`, the NVIDIA runtime, a CDI or ROCm device) as `config.container_gpus`, and the image's
backend and build from its tag (`server-cuda-b4000`). A command given to a shell (`$ `, `> `, `PS C:\\>`) is
read the same way. It votes for the engine it starts, so a fix is said in that engine's words.

Pure: text in, facts out.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from doctor.core import engines
from doctor.core.facts import Facts, Source, Value
from doctor.sources.logs.base import LineKind, LineKinds, LogParser, reads
from doctor.sources.logs.launch_flags import DOCKER_VALUED, MIB, TAG_BACKENDS, Flag, Launch
from doctor.sources.logs.line import LogLine

CONTINUED = ("\\",)  # a shell's (cmd's ^ and PowerShell's backtick end too many other lines: tracebacks, fences)
MAX_WORDS = 400
MAX_LINES = 40  # continuation lines one command may take
LAUNCHES: tuple[Launch, ...] = tuple(engines.pieces(Launch, lambda e: e.launch))  # the table's, in its order


def _fragments() -> tuple[str, ...]:
    """The words a command line holds: a program's name (`main` and `server` only before a flag), a
    program and its subcommand, a module, or docker run."""
    names: list[str] = []
    for launch in LAUNCHES:
        for program in launch.programs:
            names.append(f"{re.escape(program)} +(?:{'|'.join(map(re.escape, launch.subcommands))})\\b"
                         if launch.subcommands else re.escape(program))
        names += [rf"(?:^|[\s/\\]){re.escape(p)}(?:\.exe)? +-" for p in launch.model_flag_programs]
        names += [re.escape(m) for m in launch.modules]
    return ("|".join(names), r"(?:docker|podman|nerdctl) (?:run|create)\b") if names else \
        (r"(?:docker|podman|nerdctl) (?:run|create)\b",)


FRAGMENTS = _fragments()
CONTINUATION = (r"\\\s*$",)  # a continued line (the next physical line belongs to the same command)
COMMAND_KIND = LineKind("command", (), FRAGMENTS)
COMMAND_WORDS = re.compile("|".join(f"(?:{f})" for f in FRAGMENTS))  # what the handler checks itself
CONTINUED_KIND = LineKind("continued", (), CONTINUATION, scan=(r"(?m:\\[ \t]*\r?$)",))
KINDS = LineKinds(COMMAND_KIND, CONTINUED_KIND)
BUILD_TAG = re.compile(r"\bb(\d{3,5})\b")
PROMPT = re.compile(r"^\s*(?:[$#>]|PS [^>]*>|[\w@.-]+[:~][^$#]*[$#])\s*")


@dataclass(slots=True)
class _Command:
    line: LogLine
    words: list[str] = field(default_factory=list)
    last: int = 0  # the number of the last physical line read into it
    next_text: str | None = None  # the physical line after the last one (it may not be a candidate)
    open: bool = False  # the last line read ended with a continuation mark


class LaunchParser(LogParser):
    alone = True  # its lines go to it alone unless another parser's triggers select them too (logs/router.py)
    name = "launch"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.open: _Command | None = None
        self.read_any = False
        self._into = self.facts  # where the command being read goes
        self._provisional: tuple[str, bool] | None = None  # a snapshot's read of the open command: (vote, read_any)

    def _undo_provisional(self) -> None:
        """Take back what a snapshot's read of a command still open added (its vote): the command is read for
        good when it closes, and a snapshot must change nothing (watch --log takes one after every read)."""
        if self._provisional is not None:
            engine, read_any = self._provisional
            self.votes[engine] -= 1
            self.read_any = read_any
            self._provisional = None

    def feed(self, line: LogLine) -> None:
        self._undo_provisional()
        if not self.passes_gate(line.text):
            return  # not one of its lines (the router hands it no other; a line fed to every parser is asked)
        cmd = self.open
        if cmd is not None and cmd.open and line.number == cmd.last + 1:
            self._continue(cmd, line.text, line)
            return
        if cmd is not None:
            self._close()
        self.dispatch(line)

    @reads(COMMAND_KIND)
    def _command(self, line: LogLine) -> bool:
        if not COMMAND_WORDS.search(line.text):
            return False
        text = PROMPT.sub("", line.text, count=1)
        cmd = _Command(line, last=line.number)
        self._continue(cmd, text, line)
        if cmd.open:
            self.open = cmd
        else:
            self._read(cmd)
        return True

    @reads(CONTINUED_KIND)
    def _continued(self, line: LogLine) -> bool:
        return False  # a continued line no command began: nothing to read

    def _continue(self, cmd: _Command, text: str, line: LogLine) -> None:
        stripped = text.rstrip()
        cmd.open = stripped.endswith(CONTINUED) and line.number - cmd.line.number < MAX_LINES
        if cmd.open:
            stripped = stripped[:-1]
        cmd.words += _split(stripped)[:MAX_WORDS]
        cmd.last = line.number
        cmd.next_text = line.next_text if cmd.open else None
        if not cmd.open and cmd is self.open:
            self._close()

    def _close(self) -> None:
        cmd, self.open = self.open, None
        if cmd is not None:
            self._read(_whole(cmd))

    def summarize(self, facts: Facts) -> None:
        self._undo_provisional()
        if self.open is not None:  # read as it stands, into the snapshot (the next line may still continue it)
            read_any = self.read_any
            engine = self._read(_whole(self.open), facts)
            if engine is not None:
                self._provisional = (engine, read_any)

    # -- reading a command -----------------------------------------------------------------------------------
    def _read(self, cmd: _Command, facts: Facts | None = None) -> str | None:
        """Read a whole command into `facts` (the shared snapshot while feeding); the engine it starts."""
        self._into = facts if facts is not None else self.facts
        words = cmd.words
        src = Source("log", self.name, cmd.line.number, cmd.line.raw[:300])
        start = _docker_start(words)
        launch: Launch | None = None
        if start is not None:
            launch, rest = self._docker(words[start:], src)
        else:
            rest = words
        found = _program(rest)
        program = ""
        if found is not None:
            launch, at = found
            program = rest[at]
            self._env(launch, rest[:at], src)
            rest = rest[at + 1:]
        if launch is None:
            return None
        self.read_any = True
        self.votes[launch.engine] += 1  # the engine the user starts: its fixes are said in its words
        self._set("engine.launch_family", launch.engine, src)
        self._set("engine.launch_lines", cmd.last - cmd.line.number + 1, src)
        self._default_layers(launch, rest, program, src)
        flags = launch.flags
        i = 0
        while i < len(rest):
            word = rest[i]
            name, eq, value = word.partition("=")
            flag = flags.get(name) if name.startswith("-") else None
            if flag is None:
                i += 1
                continue
            if flag.switch:
                self._set(flag.fact, flag.const, src)  # type: ignore[arg-type]
                i += 1
                continue
            if not eq:
                nxt = rest[i + 1] if i + 1 < len(rest) else None
                if flag.kind == "onoff" and (nxt is None or nxt.startswith("-") or nxt.lower() not in _ONOFF):
                    self._set(flag.fact, "enabled", src)  # a bare -fa: the switch of 2024 builds
                    i += 1
                    continue
                value = nxt or ""
                i += 1
            self._value(flag, value, src)
            i += 1
        return launch.engine

    def _default_layers(self, launch: Launch, args: list[str], program: str, src: Source) -> None:
        """No GPU-layer flag on a build whose default was no GPU layers (llama.cpp before b6325, or its 2023-24
        program names main / server): n_gpu_layers is 0."""
        if not launch.layer_flags or any(w.partition("=")[0] in launch.layer_flags for w in args):
            return
        build = self._into.value("engine.build")
        name = _base(program)
        if name in launch.old_programs or (isinstance(build, int) and launch.all_layers_from_build is not None
                                           and build < launch.all_layers_from_build):
            self._set("config.n_gpu_layers", 0, src)

    def _docker(self, words: list[str], src: Source) -> tuple[Launch | None, list[str]]:
        """`docker run [options] IMAGE [args]`: what the container was given, its image's engine and backend;
        the words after the image."""
        gpus: list[str] = []
        env: list[str] = []
        i = 2
        image: str | None = None
        while i < len(words):
            word = words[i]
            if not word.startswith("-"):
                image = word
                break
            name, eq, value = word.partition("=")
            if name in DOCKER_VALUED and not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
                i += 1
            if name == "--gpus":
                gpus.append(f"--gpus {value}")
            elif name == "--runtime" and "nvidia" in value:
                gpus.append("--runtime nvidia")
            elif name == "--device" and ("nvidia.com/gpu" in value or value.startswith(("/dev/kfd", "/dev/dri"))):
                gpus.append(f"--device {value}")
            elif name in ("-e", "--env"):
                env.append(value)
            i += 1
        if image is None:
            return None, []
        launch = next((ln for ln in LAUNCHES if any(needle in image for needle in ln.images)), None)
        if launch is not None:
            self._env(launch, env, src)
        self._set("engine.image", image, src)
        self._set("config.container_gpus", "; ".join(gpus) if gpus else "none", src)
        tag = image.rsplit(":", 1)[1].lower() if ":" in image.rsplit("/", 1)[-1] else ""
        backend = next((b for word, b in TAG_BACKENDS if word in tag or word in image.lower()), None)
        if backend is None and launch is not None and launch.gpu_image:
            backend = "CUDA"
        if backend is not None:
            self._set("engine.backends", [backend], src)
            self._set("engine.gpu_offload_supported", True, src)
        elif launch is not None:
            self._set("engine.gpu_offload_supported", False, src)
        m = BUILD_TAG.search(tag)
        if m and launch is not None and launch.all_layers_from_build is not None:  # a build-numbered image tag
            self._set("engine.build", int(m.group(1)), src)
        return launch, words[i + 1:]

    def _env(self, launch: Launch, assignments: list[str], src: Source) -> None:
        for item in assignments:
            name, eq, value = item.partition("=")
            flag = launch.env.get(name)
            if eq and flag is not None:
                self._value(flag, value, src)

    def _value(self, flag: Flag, value: str, src: Source) -> None:
        value = value.strip().strip("\"'")
        if flag.kind == "str":
            if value:
                self._set(flag.fact, value, src)
        elif flag.kind == "onoff":
            state = _ONOFF.get(value.lower())
            if state is not None:
                self._set(flag.fact, state, src)
        elif flag.kind == "mib":
            self._number(flag.fact, value, lambda v: int(v) * MIB, src)
        elif flag.kind == "float":
            self._number(flag.fact, value, float, src)
        else:
            self._number(flag.fact, value, int, src)

    def _number(self, name: str, value: str, cast: object, src: Source) -> None:
        try:
            number = cast(value)  # type: ignore[operator]
        except (TypeError, ValueError, OverflowError):
            return
        if abs(number) < 1 << 62:
            self._set(name, number, src)

    def _set(self, name: str, value: Value, src: Source) -> None:
        if not self._into.has(name):
            self._into.set(name, value, src)


_ONOFF = {"on": "enabled", "1": "enabled", "true": "enabled", "enabled": "enabled", "off": "disabled",
          "0": "disabled", "false": "disabled", "disabled": "disabled", "auto": "auto"}


def _whole(cmd: _Command) -> _Command:
    """The command with the line after its last one read, when that line was no candidate (the last line of a
    continued command holds no trigger)."""
    if not (cmd.open and cmd.next_text):
        return cmd
    return _Command(cmd.line, cmd.words + _split(cmd.next_text.strip())[:MAX_WORDS], cmd.last + 1)


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:  # an unbalanced quote in a pasted line
        return text.split()


def _docker_start(words: list[str]) -> int | None:
    for i, word in enumerate(words[:-1]):
        if word.rsplit("/", 1)[-1] in ("docker", "podman", "nerdctl") and words[i + 1] in ("run", "create"):
            return i
    return None


def _base(word: str) -> str:
    return word.replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe").removesuffix(".py")


def _program(words: list[str]) -> tuple[Launch, int] | None:
    """The engine of the first word that starts one, and its position (of the last word of its name). A
    program is taken only with flags after it (a subcommand or a model flag where its Launch asks for one): a
    word in prose or in a configuration file is no command."""
    for i, word in enumerate(words):
        base = _base(word)
        for launch in LAUNCHES:
            if base in launch.programs:
                if launch.subcommands:
                    sub = words[i + 1] if i + 1 < len(words) else ""
                    # Ollama's settings are its server's environment: its subcommands take no flags
                    if sub in launch.subcommands and (launch.env or _flagged(words, i + 1)):
                        return launch, i + 1
                elif _flagged(words, i):
                    return launch, i
            elif base in launch.model_flag_programs and _flagged(words, i, MODEL_FLAGS):
                return launch, i
            elif word == "-m" and words[i + 1:i + 2] and words[i + 1] in launch.modules and _flagged(words, i + 1):
                return launch, i + 1
    return None


MODEL_FLAGS = ("-m", "--model", "-hf", "--hf-repo")


def _flagged(words: list[str], i: int, needed: tuple[str, ...] = ()) -> bool:
    """Flags follow word `i` (among the next few); `needed`: one of these must be among them (the 2023-24
    program names main / server start llama.cpp only with its model flag after them)."""
    after = words[i + 1:i + 12]
    if needed:
        return any(w.partition("=")[0] in needed for w in after)
    return any(w.startswith("-") for w in after[:4])
