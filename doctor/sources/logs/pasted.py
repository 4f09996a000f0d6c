"""Settings and output pasted beside a log: greedy sampling settings, and the text the model wrote.

People report a loop by pasting their call (`llm(prompt, temperature=0)`, a JSON request with
`"temperature": 0`, `--temp 0`, `PARAMETER temperature 0`, `do_sample=False`) next to the answer
that repeats one paragraph. No engine printed that answer, so no engine parser reads it. Once a
greedy setting is seen, this parser keeps the prose between the candidate lines (lines that look
like log records - timestamps, levels, key=value - are left out) as the output, which the
repetition check (doctor/core/repetition.py, through run.output_text) then reads. Others paste the
conversation itself, each turn after its speaker (`USER: ...` / `ASSISTANT: ...`, `Human:` / `AI:`, the
role prefixes of chat transcripts and of Vicuna-style prompt templates): a transcript with turns of both
sides is kept the same way, turn by turn (the model wrote the replies, and a completion that runs on
writes the next user turn too). It casts no engine vote and never overrides output or settings an
engine parser read.

Pure.
"""

from __future__ import annotations

import re

from doctor.core.facts import Facts, Source
from doctor.core.paste import PROCESS_PREFIX
from doctor.sources.logs.base import LineKind, LineKinds, LogParser, reads
from doctor.sources.logs.hot import FedLine, HotRun
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated
from doctor.sources.logs.shapes import shape_finder

TEMPERATURE = gated(r"""(?:\btemperature['"]?\s*[=:]\s*|--temp(?:erature)?[ =]|PARAMETER temperature |"""
                    r"""parameter temperature )(-?\d+(?:\.\d+)?)""")
TOP_K = gated(r"""\btop_k['"]?\s*[=:]\s*(\d+)|--top-k[ =](\d+)""")
GREEDY_FLAG = gated(r"""\bdo_sample['"]?\s*[=:]\s*(?:False|false)\b|\bgreedy\b""")
PENALTY = gated(r"""\b(?:repeat_penalty|repetition_penalty)['"]?\s*[=:]\s*(\d+(?:\.\d+)?)"""
                r"""|--repeat-penalty[ =](\d+(?:\.\d+)?)""")
# a container's CPU limit in the command or compose file pasted with the log
CPUS = gated(r"""--cpus[= ]['"]?(\d+(?:\.\d+)?)|^\s*cpus:\s*['"]?(\d+(?:\.\d+)?)""")
CPUSET = gated(r"""--cpuset-cpus[= ]['"]?([\d,\-]+)""")
# where a line may set greedy sampling (a temperature of 0.1 or less: one written from 0 or negative; a top_k of 1;
# the flag), as RE2 sources: until one has, a folded run of a server's request lines ends before such a line
# (doctor/sources/engines/vllm/fold.py): this parser then keeps the text between candidates, and nothing is folded
# a number TEMPERATURE reads as <= 0.1 (searched in blocks of lines: a number ends before a character, a line end)
_AT_MOST_TENTH = r"(?:-|0+[^.0-9]|0+\.0|0+\.10*[^0-9])"
GREEDY_CANDIDATES = (
    r"""(?:\btemperature['"]?\s*[=:]\s*|--temp(?:erature)?[ =]|PARAMETER temperature |parameter temperature )"""
    + _AT_MOST_TENTH,
    r"""(?:\btop_k['"]?\s*[=:]\s*|--top-k[ =])0*1[^0-9]""",
    GREEDY_FLAG.pattern,
)
SETTINGS = ("temperature", "top_k", "repeat_penalty")  # kept from their first line (setdefault)
# a Slurm job's CPUs (sbatch / srun --cpus-per-task, #SBATCH -c, the SLURM_CPUS_PER_TASK the job sees): the
# task is bound to that many CPUs (Slurm's sbatch(1) / srun(1) and its output environment variables)
SLURM_CPUS = gated(r"""--cpus-per-task[= ](\d+)|\bSLURM_CPUS_PER_TASK=['"]?(\d+)|#SBATCH\s+-c\s*(\d+)""")
# a turn of a pasted conversation: the speaker's prefix at the start of the line, then what was said
ROLE = gated(r"^\s*(?:(USER|User|Human)|(ASSISTANT|Assistant|AI|Bot))\s?:\s*(\S.*)$")
# a physical line that is a log record rather than prose a model wrote
# a record may lead with vLLM's process prefix (doctor/core/paste.py PROCESS_PREFIX)
LOG_RECORD = re.compile(r"^\s*(?:" + PROCESS_PREFIX + r"\s+)?(?:\S+\s+\|\s|\[?\d{4}[-/]\d\d[-/]\d\d|\d\d-\d\d \d\d:|"
                        r"[A-Z][a-z]{2} +\d+ \d\d:\d\d|"
                        r"time=|level=|\[GIN\]|(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE)\b|\w+(?:\.\w+)*: |"
                        r"File \"|Traceback|\{|>>>|\$ )")
MAX_OUTPUT = 64 * 1024
MAX_SCANNED = 256 * 1024  # a paste is short: past this much text between candidates, stop looking

# every kind reads the line and none takes it (a pasted command line may set several of them)
TEMPERATURE_KIND = LineKind(
    "temperature", (TEMPERATURE,),
    (r"temperature['\"]?\s*[=:]|--temp|PARAMETER temperature|parameter temperature",))
TOP_K_KIND = LineKind("top_k", (TOP_K,), (r"top_k['\"]?\s*[=:]|--top-k",))
GREEDY_KIND = LineKind("greedy", (GREEDY_FLAG,), (r"do_sample['\"]?\s*[=:]|\bgreedy\b",))
PENALTY_KIND = LineKind("penalty", (PENALTY,), (r"repeat_penalty|repetition_penalty|--repeat-penalty",))
CPUS_KIND = LineKind("cpus", (CPUS,), (r"--cpus|cpus: ",))
CPUSET_KIND = LineKind("cpuset", (CPUSET,), (r"--cpuset-cpus",))
SLURM_KIND = LineKind("slurm", (SLURM_CPUS,), (r"--cpus-per-task|SLURM_CPUS_PER_TASK=|#SBATCH +-c",))
ROLE_KIND = LineKind("role", (ROLE,), (r"(?:USER|User|Human|ASSISTANT|Assistant|AI|Bot) ?: *[^ ]",))

KINDS = LineKinds(
    TEMPERATURE_KIND,
    TOP_K_KIND,
    GREEDY_KIND,
    PENALTY_KIND,
    CPUS_KIND,
    CPUSET_KIND,
    SLURM_KIND,
    ROLE_KIND,
)
TRIGGERS = KINDS.triggers


class PastedParser(LogParser):
    name = "pasted"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.greedy_line: LogLine | None = None
        self.settings: dict[str, tuple[float, LogLine]] = {}
        self.output: list[str] = []
        self.output_line: int | None = None
        self.size = 0
        self.scanned = 0
        self.cpus: tuple[float, LogLine] | None = None
        self.cpuset: tuple[int, LogLine] | None = None
        self.turns: list[str] = []  # a pasted conversation's turns (ROLE), kept when both sides speak
        self.turns_line: int | None = None
        self.sides: set[str] = set()

    def feed(self, line: LogLine) -> None:
        if self.passes_gate(line.text):
            self.dispatch(line)

    # -- a server's folded request lines (doctor/sources/engines/vllm/fold.py) -------------------------
    absorbs = frozenset({"vllm_request"})

    def fold_ready(self, kinds: tuple[str, ...]) -> bool:
        return True  # its lines are read alone; until one sets greedy sampling, such a line ends a run

    def fold_guard(self, kinds: tuple[str, ...], known: bool = True) -> tuple[str, ...]:
        return GREEDY_CANDIDATES if not known or self.greedy_line is None else ()

    def fold_patterns(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        """The lines of every kind but the sampling settings' (kept from their first line: `take_run`; greedy
        ones end a run), each read one by one: the CPU limits, and any kind added later."""
        if "vllm_request" not in kinds:
            return ()
        return KINDS.sources_without(TEMPERATURE_KIND, TOP_K_KIND, PENALTY_KIND, GREEDY_KIND)

    def read_run(self, run: HotRun) -> list[FedLine]:
        return run.wanted_lines(shape_finder(self.fold_patterns(run.kinds), run.shape))

    def take_run(self, read: list[FedLine], run: HotRun) -> None:
        """Every line it reads, in order, while a sampling setting is still to be kept (its first line keeps it:
        the first lines of a log); then the other lines read_run found."""
        after = -1
        if not all(key in self.settings for key in SETTINGS):
            find = shape_finder(tuple(self.gate or ()), run.shape)
            for item in run.hits(find) if find is not None else []:
                run.feed(self, [item], run.kinds)
                after = item[0]
                if all(key in self.settings for key in SETTINGS):
                    break
        run.feed(self, [item for item in read if item[0] > after], run.kinds)

    @reads(TEMPERATURE_KIND)
    def _temperature(self, line: LogLine) -> bool:
        m = TEMPERATURE.search(line.text)
        if m:
            value = float(m.group(1))
            self.settings.setdefault("temperature", (value, line))
            if value <= 0.1:
                self.greedy_line = self.greedy_line or line
        return False

    @reads(TOP_K_KIND)
    def _top_k(self, line: LogLine) -> bool:
        m = TOP_K.search(line.text)
        if m:
            value = float(m.group(1) or m.group(2))
            self.settings.setdefault("top_k", (value, line))
            if value == 1:
                self.greedy_line = self.greedy_line or line
        return False

    @reads(GREEDY_KIND)
    def _greedy(self, line: LogLine) -> bool:
        if GREEDY_FLAG.search(line.text):
            self.greedy_line = self.greedy_line or line
            self.settings.setdefault("temperature", (0.0, line))  # greedy decoding: temperature 0 in effect
        return False

    @reads(PENALTY_KIND)
    def _penalty(self, line: LogLine) -> bool:
        m = PENALTY.search(line.text)
        if m:
            self.settings.setdefault("repeat_penalty", (float(m.group(1) or m.group(2)), line))
        return False

    @reads(CPUS_KIND)
    def _cpus(self, line: LogLine) -> bool:
        m = CPUS.search(line.text)
        if m:
            self.cpus = (float(m.group(1) or m.group(2)), line)
        return False

    @reads(CPUSET_KIND)
    def _cpuset(self, line: LogLine) -> bool:
        m = CPUSET.search(line.text)
        if m:
            count = 0
            for part in m.group(1).split(","):
                lo, _, hi = part.partition("-")
                if lo.isdigit() and (not hi or hi.isdigit()):
                    count += int(hi) - int(lo) + 1 if hi else 1
            if count:
                self.cpuset = (count, line)
        return False

    @reads(SLURM_KIND)
    def _slurm(self, line: LogLine) -> bool:
        m = SLURM_CPUS.search(line.text)
        if m:
            count = int(m.group(1) or m.group(2) or m.group(3))
            if 0 < count < 1 << 20 and self.cpuset is None:
                self.cpuset = (count, line)  # bound to that many CPUs, as a cpuset is
        return False

    @reads(ROLE_KIND)
    def _role(self, line: LogLine) -> bool:
        m = ROLE.search(line.text)
        if m and self.size < MAX_OUTPUT:
            self.sides.add("user" if m.group(1) else "model")
            if self.turns_line is None:
                self.turns_line = line.number
            turn = m.group(3) + "\n"
            self.turns.append(turn)
            self.size += len(turn)
        return False

    def wants_capture(self) -> bool:
        return self.greedy_line is not None and self.size < MAX_OUTPUT and self.scanned < MAX_SCANNED

    def feed_gap(self, number: int, text: str) -> None:
        self.scanned += len(text)
        kept = [ln for ln in text.splitlines() if ln.strip() and not LOG_RECORD.match(ln)]
        if not kept:
            return
        if self.output_line is None:
            self.output_line = number
        chunk = "\n".join(kept) + "\n"
        self.output.append(chunk)
        self.size += len(chunk)

    def summarize(self, facts: Facts) -> None:
        self._summarize_cpus(facts)
        if self.greedy_line is None:
            if len(self.sides) == 2 and not facts.has("run.output_text"):  # a transcript: both sides speak
                facts.set("run.output_text", "".join(self.turns)[-8192:],
                          Source("log", self.name, self.turns_line, "pasted conversation"))
            return
        for key, (value, line) in self.settings.items():
            name = f"sampling.{key}"
            if not facts.has(name):
                facts.set(name, int(value) if key == "top_k" else value, self.src(line))
        if self.output and not facts.has("run.output_text"):
            facts.set("run.output_text", "".join(self.output)[-8192:],
                      Source("log", self.name, self.output_line, "pasted output"))
        elif self.turns and not facts.has("run.output_text"):  # the output was the conversation's turns
            facts.set("run.output_text", "".join(self.turns)[-8192:],
                      Source("log", self.name, self.turns_line, "pasted conversation"))

    def _summarize_cpus(self, facts: Facts) -> None:
        """docker --cpus / compose cpus: (a CFS quota), --cpuset-cpus and a Slurm job's --cpus-per-task: the cores
        the engine may use."""
        limits: list[tuple[float, LogLine]] = []
        if self.cpus is not None and self.cpus[0] > 0:
            limits.append(self.cpus)
            if not facts.has("host.cpu.quota_cores"):
                facts.set("host.cpu.quota_cores", self.cpus[0], self.src(self.cpus[1]))
        if self.cpuset is not None:
            limits.append((float(self.cpuset[0]), self.cpuset[1]))
            if not facts.has("host.cpu.affinity_cores"):
                facts.set("host.cpu.affinity_cores", self.cpuset[0], self.src(self.cpuset[1]))
        if limits and not facts.has("host.cpu.usable_cores"):
            value, line = min(limits, key=lambda x: x[0])
            facts.set("host.cpu.usable_cores", max(1, int(value)), self.src(line))
