"""What a user wrote in the prose of a post: speeds, settings, the model and the machine (issue 36).

People paste a post, not only a log: "I get 2 t/s on my Orange Pi 5", "OLLAMA_KV_CACHE_TYPE=q8_0 on a
4090 gives 18 tok/s", "pp 300 / tg 15", a command line with `-t 8 -ngl 20 -ctk q8_0`. This reader goes
over a small input once, after the engines' parsers, and sets only what none of them set:

- speeds written as prose ("12.5 t/s", "about 20 tokens per second", "eval rate 8 tok/s", "pp 300 /
  tg 15", "120 ms per token") give `run.decode_tps` / `run.prefill_tps` only where no engine output in
  the paste gave a speed. A post that states several is taken at its first of each phase (the run it
  reports; later ones are comparisons or a fix tried), and the phase is read from the words around
  the number (prompt / pp / prefill before generation / eval / tg; none: generation);
- settings written as command-line or environment fragments (`-t 8`, `--threads 16`, `-ngl 20`,
  `num_gpu 20`, `-ctk q8_0`, `OLLAMA_KV_CACHE_TYPE=q8_0`, `OLLAMA_FLASH_ATTENTION=1`, `-fa`, `-nkvo`,
  `--no-mmap`, `OLLAMA_NUM_PARALLEL=4`, `n_threads=8`): a setting in a sentence that states a speed
  belongs to that speed's run, one in any other sentence (a command, an env line) to every run;
- the model as named (an Ollama tag, a GGUF file, "Llama 3.1 8B Q4_K_M"): `model.name`, sized by
  doctor/derive/model_guess.py;
- the post's own thread sweep: decode speeds whose runs differ only in the thread count (a table with a
  num_thread / threads column, "-t 7" beside the same command without it, "16 threads = 0.83t/s"), one at least
  SWEEP_RATIO times the other: `run.threads_fast(_tps)` / `run.threads_slow(_tps)` (a count not shown is the
  engine's default; a cell's "less than 0.1" is a bound, compared but never taken as the run's speed);
- the machine ("on my 4090", "RTX 3060 12GB", "M2 Max 32GB", "ReBAR off", "x1 riser", "PCIe 3.0 x4")
  through the `--hardware` reader (doctor/sources/hardware_text.py, `named_in`), the first device of
  each kind named.

Every fact's Source is the sentence (kind log, name "the user's words", its line). Only inputs of at
most MAX_PROSE bytes are read: a paste, not a server's log (doctor/sources/logs/analyze.py).

Sources floor, pure: text in, facts out. The patterns are written here from the engines' own option
names (llama.cpp common/arg.cpp, Ollama's envconfig and Modelfile parameters, llama-cpp-python's
Llama() keywords) and the units people write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.core.facts import Facts, Source
from doctor.core.sanitize import strip_controls
from doctor.derive.model_guess import guess
from doctor.sources import hardware_text

MAX_PROSE = 64 * 1024
NAME = "the user's words"
NUM = r"(\d+(?:\.\d+)?)"
UNIT = (r"(?:t/s(?:ec)?|toks?/s(?:ec)?|tokens?/s(?:ec)?|tk/s|tps|tokens?\s+(?:per|a|/)\s*s(?:ec(?:ond)?)?|"
        r"toks?\s+per\s+s(?:ec(?:ond)?)?)\b")
# "12.5 t/s", "~20 tokens per second", "6-7 tok/s", "40+ tk/s", "1,500 t/s"
SPEED = re.compile(rf"(?<![\w.]){NUM}(?:\s*(?:-|–|to)\s*{NUM})?\+?\s*{UNIT}", re.IGNORECASE)
MS_PER_TOKEN = re.compile(rf"(?<![\w.]){NUM}\s*ms\s*(?:/|per)\s*(?:token|tok|t)\b", re.IGNORECASE)
# "pp 300 / tg 15", "pp512: 850", "tg=15", "Token generation: 111.95 ± 2.45" (no unit: only a phase's name with a
# colon, or llama-bench's test names, right before the number; "generation: 128 tokens" is a count)
TEST_PAIR = re.compile(rf"\b(pp|tg|prompt (?:processing|evaluation|eval)|(?:token |text )?generation)(?:\d+)?"
                       rf"(?: speed)?\s*[:=]\s*{NUM}(?:\s*±\s*[\d.]+)?(?!\s*(?:tokens?|t|ms|s|sec|seconds|%)\b)"
                       rf"|\b(pp|tg)\s+{NUM}\s*(?=/|,|$)", re.IGNORECASE)
# "16 threads = 0.83t/s", "with 8 threads I get 5 t/s": a thread count in a sentence that states a speed is that run's
# (elsewhere "16 threads" describes a CPU); "8 cores, 16 threads" is the CPU's
PROSE_THREADS = re.compile(r"\b(\d{1,3})\s+threads?\b", re.IGNORECASE)
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
PHASE_WORDS = re.compile(r"(?P<pre>\bprompt(?:\s+eval\w*)?|\bpp\s?\d*\b|\bpre-?fill\w*|\bprocess\w*|\bingest\w*|"
                         r"\binput\b)|(?P<dec>\beval\w*|\bgenerat\w*|\bgen\b|\btg\s?\d*\b|\bdecod\w*|\boutput\b|"
                         r"\binference\b|\bresponse\b)", re.IGNORECASE)
AFTER_PHASE = re.compile(r"^\W{0,3}(?:(?P<pre>pp\s?\d*|prompt|pre-?fill)|(?P<dec>tg\s?\d*|gen\w*|eval\w*|decod\w*))\b",
                         re.IGNORECASE)
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
# a markdown table people write beside their numbers: "| Model | avg tok/s | offload |", then "|---|---|"
TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$"
                        r"|^\s*\|\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)+\|?\s*$")  # GFM: one dash a cell, between pipes
SPEED_HEADER = re.compile(r"\b(?:tok(?:en)?s?\s*/\s*s(?:ec(?:ond)?)?|t/s|tps|tokens?\s+per\s+s(?:ec(?:ond)?)?)\b",
                          re.IGNORECASE)
CELL_NUMBER = re.compile(r"^~?(\d+(?:\.\d+)?)\b")
# a speed written as a bound in a table's cell: "N/A (less than 0.1)", "< 0.1" (the run was at most that fast)
CELL_BOUND = re.compile(r"(?:\bless than|\bunder|\bbelow|<)\s*(\d+(?:\.\d+)?)\b", re.IGNORECASE)
# a column of the thread count: "| num_thread | tok/s |", "| threads |", "| -t |"
THREADS_HEADER = re.compile(r"^(?:num_threads?|n_threads|threads?|-t|--threads)$", re.IGNORECASE)
# a post's own sweep: the same settings but the thread count, and one count this many times faster than another
SWEEP_RATIO = 4.0
# a line an engine printed, not the user's words (a timestamp, a level, `time=`, a `llama_...:` / `load_tensors:`
# prefix, a JSON record, a `service | ` prefix): never read as prose, whether or not a parser took it
LOG_LINE = re.compile(r"^\s*(?:\[?\d{4}[-/]\d\d[-/]\d\d|\d\d[-:]\d\d[ :]\d\d|[A-Z][a-z]{2} +\d+ \d\d:\d\d|time=|"
                      r"level=|\[GIN\]|(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE)\b\s|\d+\.\d\d\.\d{3}\.\d{3} [IWED] |"
                      r"[a-z][a-z0-9]*_[\w.]*\s*:|\{|[\w.-]+\s+\|\s)")
KV_TYPES = {"f16", "bf16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}
OPT = r"(?:^|(?<=[\s\"'`(\[]))"
# setting -> (pattern, how its match becomes a value)
SETTINGS: dict[str, list[re.Pattern[str]]] = {
    "config.n_threads": [re.compile(rf"{OPT}(?:-t|--threads|--n-threads)(?:\s+|=)(\d{{1,3}})\b"),
                         re.compile(r"\b(?:num_thread|n_threads)\b[\"']?\s*[:=]?\s*(\d{1,3})\b")],
    "config.n_gpu_layers": [re.compile(rf"{OPT}(?:-ngl|--n-gpu-layers|--gpu-layers|-gl)(?:\s+|=)(-?\d{{1,9}})\b"),
                            re.compile(r"\b(?:num_gpu|n_gpu_layers)\b[\"']?\s*[:=]?\s*(-?\d{1,4})\b")],
    "config.type_k": [re.compile(r"\bOLLAMA_KV_CACHE_TYPE\s*[=:]\s*[\"']?(\w+)"),
                      re.compile(rf"{OPT}(?:-ctk|--cache-type-k)(?:\s+|=)(\w+)"),
                      re.compile(r"\btype_k\s*=\s*[\"']?(\w+)")],
    "config.type_v": [re.compile(r"\bOLLAMA_KV_CACHE_TYPE\s*[=:]\s*[\"']?(\w+)"),
                      re.compile(rf"{OPT}(?:-ctv|--cache-type-v)(?:\s+|=)(\w+)"),
                      re.compile(r"\btype_v\s*=\s*[\"']?(\w+)")],
    "config.flash_attn": [re.compile(r"\bOLLAMA_FLASH_ATTENTION\s*[=:]\s*[\"']?(\w+)"),
                          re.compile(rf"{OPT}(?:-fa|--flash-attn)(?:(?:\s+|=)(on|off|auto|1|0|true|false)\b|(?=\s|$))"),
                          re.compile(r"\bflash_attn\s*=\s*(\w+)")],
    "config.offload_kqv": [re.compile(rf"{OPT}(-nkvo|--no-kv-offload)\b"), re.compile(r"\boffload_kqv\s*=\s*(\w+)")],
    "config.use_mmap": [re.compile(rf"{OPT}(--no-mmap)\b"), re.compile(r"\buse_mmap\s*=\s*(\w+)")],
    "config.n_parallel": [re.compile(r"\bOLLAMA_NUM_PARALLEL\s*[=:]\s*[\"']?(\d{1,3})\b"),
                          re.compile(rf"{OPT}(?:-np|--parallel)(?:\s+|=)(\d{{1,3}})\b")],
}
TRUE = {"1", "true", "on", "yes", "enabled"}
FALSE = {"0", "false", "off", "no", "disabled"}
# the model as a post names it: an Ollama tag with a size, a GGUF file, a size followed by a quantisation
MODEL_TAG = re.compile(r"(?<![\w/.:-])([a-z][\w.-]*(?:/[\w.-]+)?:[\w.-]+)", re.IGNORECASE)
MODEL_FILE = re.compile(r"([\w.+-]+\.gguf)\b", re.IGNORECASE)
# a name with its size but no quantisation ("Qwen3-4B", "Meta-Llama-3.1-8B-Instruct"), beside a post that names one
# quantisation for all its runs ("all models Q4_K_M")
MODEL_SIZED = re.compile(r"\b([A-Za-z][\w.]*(?:-[\w.]+)*?-\d+(?:\.\d+)?[Bb](?:-[A-Za-z][\w.]*)*)\b")
QUANT_WORD = re.compile(r"\b(I?Q\d_K(?:_[SML]|_XL)?|Q\d_[01]|IQ\d_(?:XXS|XS|S|M|NL)|[BF]?F16)\b", re.IGNORECASE)
MODEL_WORDS = re.compile(r"\b((?:[A-Za-z][\w.]*[ -](?:\d+(?:\.\d+)?[ -])?)?\d+(?:\.\d+)?[Bb](?:[ -][\w.]+?){0,2}?[ _.-]"
                         r"(?:I?Q\d(?:_K)?(?:_[SMLX]{1,2}|_[01]|_XXS|_XS|_NL)?|[BF]?F16))\b", re.IGNORECASE)


@dataclass
class Run:
    """A speed the post states, with the sentence it is in."""

    phase: str  # prefill | decode
    tok_s: float
    sentence: int
    line: int
    text: str
    start: int = 0  # where in the sentence the number is
    row: bool = False  # a markdown table's row: its model is its own row's or none
    bound: bool = False  # "less than 0.1": at most this fast (never taken as the run's speed)


@dataclass
class Sentence:
    index: int
    line: int
    text: str
    runs: list[Run] = field(default_factory=list)
    settings: dict[str, tuple[object, int]] = field(default_factory=dict)  # name -> (value, where written)
    row_threads: int | None = None  # a table row's thread count, from the column its header names


def _num(text: str) -> float:
    return float(THOUSANDS.sub("", text))


def _phase(sentence: str, start: int, end: int, floor: int) -> str:
    after = AFTER_PHASE.match(sentence[end:end + 16])
    if after:
        return "prefill" if after.group("pre") else "decode"
    words = list(PHASE_WORDS.finditer(sentence[max(floor, start - 48):start]))
    if words and words[-1].group("pre"):
        return "prefill"
    return "decode"


def _speeds(sentence: str, index: int, line: int) -> list[Run]:
    found: list[tuple[int, int, float]] = []
    text = THOUSANDS.sub("", sentence)
    for m in SPEED.finditer(text):
        low, high = _num(m.group(1)), m.group(2)
        found.append((m.start(), m.end(), (low + _num(high)) / 2 if high else low))
    for m in MS_PER_TOKEN.finditer(text):
        ms = _num(m.group(1))
        if ms > 0:
            found.append((m.start(), m.end(), round(1000.0 / ms, 2)))
    runs: list[Run] = []
    floor = 0
    for start, end, value in sorted(found):
        if value > 0:
            runs.append(Run(_phase(text, start, end, floor), value, index, line, sentence, start))
        floor = end
    if not runs:
        for m in TEST_PAIR.finditer(text):
            which, number = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            phase = "prefill" if which.lower() == "pp" or which.lower().startswith("prompt") else "decode"
            runs.append(Run(phase, _num(number), index, line, sentence, m.start()))
    return runs


def _setting(name: str, raw: str) -> object | None:
    value = raw.strip().lower()
    if name in ("config.n_threads", "config.n_gpu_layers", "config.n_parallel"):
        number = int(value)
        return number if number > 0 or (name == "config.n_gpu_layers" and number >= -1) else None
    if name in ("config.type_k", "config.type_v"):
        return value if value in KV_TYPES else None
    if name == "config.flash_attn":
        return "enabled" if value in TRUE or value in ("-fa", "--flash-attn", "") else \
            "disabled" if value in FALSE else "auto" if value == "auto" else None
    if name in ("config.offload_kqv", "config.use_mmap"):
        return False if value.startswith("--no") or value == "-nkvo" or value in FALSE else \
            True if value in TRUE else None
    return None


def _settings(sentence: str) -> dict[str, tuple[object, int]]:
    """Each setting the sentence writes: (its value, where it is written)."""
    out: dict[str, tuple[object, int]] = {}
    for name, patterns in SETTINGS.items():
        for pattern in patterns:
            m = pattern.search(sentence)
            if m is None:
                continue
            value = _setting(name, m.group(1) if m.lastindex else "")
            if value is not None:
                out[name] = (value, m.start())
                break
    return out


def _belongs(s: Sentence, name: str, chosen: list[Run]) -> bool:
    """Whether a setting the sentence writes goes with the run taken: a sentence with no speed speaks of
    every run (a command, an env line); in one with speeds, a setting goes with the speed after it, or
    the last one ("2 t/s by default; with -t 4 it's 4 t/s": -t 4 is the second run's)."""
    if not s.runs:
        return True
    where = s.settings[name][1]
    owner = next((r for r in s.runs if r.start >= where), s.runs[-1])
    return any(owner is run for run in chosen)


def _model(sentence: str, patterns: tuple[re.Pattern[str], ...]) -> str | None:
    for pattern in patterns:
        for m in pattern.finditer(sentence):
            name = m.group(1).strip().rstrip(".-")
            if guess(name) is not None:
                return name
    return None


def _cells(line: str) -> list[str]:
    return [c.strip().strip("*`").strip() for c in line.strip().strip("|").split("|")]


def _table_runs(header: list[str], row: list[str], index: int, line: int, text: str) -> list[Run]:
    """The speeds of a markdown table's row, from the columns whose header names a speed ("avg tok/s",
    "Avg TPS", "Gen tok/s") or whose cell states one ("30 tokens/s"); the phase from the header's words."""
    runs: list[Run] = []
    for col, (name, cell) in enumerate(zip(header, row, strict=False)):
        if not SPEED_HEADER.search(name) and not SPEED.search(cell):  # "| Generation |" over "30 tokens/s"
            continue
        m = CELL_NUMBER.match(THOUSANDS.sub("", cell))
        bound = m is None and SPEED_HEADER.search(name) is not None and CELL_BOUND.search(cell) is not None
        if bound:
            m = CELL_BOUND.search(cell)
        if m is None or float(m.group(1)) <= 0:
            continue
        words = list(PHASE_WORDS.finditer(name))
        phase = "prefill" if words and words[-1].group("pre") else "decode"
        runs.append(Run(phase, float(m.group(1)), index, line, text, col, row=True, bound=bound))
    return runs


def _row_threads(header: list[str], row: list[str]) -> int | None:
    for name, cell in zip(header, row, strict=False):
        m = CELL_NUMBER.match(cell) if THREADS_HEADER.match(name) else None
        if m is not None and "." not in m.group(1) and 0 < int(m.group(1)) < 1000:
            return int(m.group(1))
    return None


def sentences(text: str) -> list[Sentence]:
    """The post's sentences (lines an engine printed left out); a markdown table's rows are sentences
    whose speeds come from the columns the header names as speeds (a llama-bench table, with its
    `test` column, is the bench parser's)."""
    out: list[Sentence] = []
    lines = text.splitlines()
    header: list[str] | None = None
    for number, line in enumerate(lines, 1):
        if LOG_LINE.match(line):
            continue
        if TABLE_ROW.match(line):
            nxt = lines[number] if number < len(lines) else ""
            if header is None and TABLE_RULE.match(nxt):
                cells = _cells(line)
                header = cells if not any(c.lower() == "test" for c in cells) else []
                continue
            if TABLE_RULE.match(line):
                continue
            if header:
                s = Sentence(len(out), number, line.strip())
                s.runs = _table_runs(header, _cells(line), s.index, number, s.text)
                s.row_threads = _row_threads(header, _cells(line))
                out.append(s)
                continue
        else:
            header = None
        for part in SENTENCE.split(line.strip()):
            if part:
                out.append(Sentence(len(out), number, part))
    return out


def read_prose(facts: Facts, text: str, where: list[int] | None = None) -> None:
    """Set what the post's prose says, where no engine output in it said it. `where`: for a paste read as its
    logical lines (framing stripped, quoted strings decoded: doctor/core/paste.py), the user's line each begins on."""
    if len(text) > MAX_PROSE:
        return
    # made inert line by line as every log line is (escapes and controls out), the line count kept
    text = "\n".join(strip_controls(line) for line in text.split("\n"))
    parts = sentences(text)
    if where:
        for s in parts:
            s.line = where[min(s.line, len(where)) - 1]
            for run in s.runs:
                run.line = s.line
    for s in parts:
        s.runs = s.runs or _speeds(s.text, s.index, s.line)  # a table row's columns name their phase
        s.settings = _settings(s.text)
        if s.row_threads is not None and "config.n_threads" not in s.settings:
            s.settings["config.n_threads"] = (s.row_threads, 0)
        if s.runs and "config.n_threads" not in s.settings:
            count = PROSE_THREADS.search(s.text)
            if count and "core" not in s.text[max(0, count.start() - 16):count.start()].lower() and int(count.group(1)):
                s.settings["config.n_threads"] = (int(count.group(1)), count.start())
    engine_speed = facts.has("run.decode_tps") or facts.has("run.prefill_tps")
    chosen: dict[str, Run] = {}
    if not engine_speed:
        for s in parts:
            for run in s.runs:
                if not run.bound:
                    chosen.setdefault(run.phase, run)
    for phase, run in chosen.items():
        facts.set(f"run.{phase}_tps", run.tok_s, _src(run.line, run.text))
    for s in parts:
        for name, (value, _) in s.settings.items():
            if not facts.has(name) and _belongs(s, name, list(chosen.values())):
                facts.set(name, value, _src(s.line, s.text))  # type: ignore[arg-type]
    _read_model(facts, parts, chosen.get("decode") or chosen.get("prefill"))
    _read_hardware(facts, parts)
    _read_thread_sweep(facts, parts)
    if chosen and facts.value("run.recognised") is False:
        first = min(chosen.values(), key=lambda r: r.sentence)
        facts.set("run.recognised", True, _src(first.line, "no engine output recognised; the post states its speed "
                                                          f"in words: {first.text}"))


def _read_thread_sweep(facts: Facts, parts: list[Sentence]) -> None:
    """The post's own thread sweep: generation speeds whose runs differ only in the thread count (a table of
    num_thread against tok/s, "-t 7" beside the same command without it), one SWEEP_RATIO times the other."""
    groups: dict[tuple[tuple[str, str], ...], dict[int | None, Run]] = {}
    for s in parts:
        run = next((r for r in s.runs if r.phase == "decode"), None)
        if run is None:
            continue
        threads = s.settings.get("config.n_threads", (None, 0))[0]
        others = tuple(sorted((name, str(value)) for name, (value, _) in s.settings.items()
                              if name != "config.n_threads"))
        groups.setdefault(others, {}).setdefault(threads if isinstance(threads, int) else None, run)
    for group in groups.values():
        if len(group) < 2:
            continue
        fast_threads, fast = max(group.items(), key=lambda item: item[1].tok_s)
        slow_threads, slow = min(group.items(), key=lambda item: item[1].tok_s)
        if fast.bound or fast.tok_s < SWEEP_RATIO * slow.tok_s:
            continue
        facts.set("run.threads_fast_tps", fast.tok_s, _src(fast.line, fast.text))
        facts.set("run.threads_slow_tps", slow.tok_s, _src(slow.line, slow.text))
        for name, threads, run in (("run.threads_fast", fast_threads, fast), ("run.threads_slow", slow_threads, slow)):
            if threads is not None:  # none: the engine's default count
                facts.set(name, threads, _src(run.line, run.text))
        return


def _read_model(facts: Facts, parts: list[Sentence], run: Run | None) -> None:
    """The model named beside the speed taken, else the first one the post names (a file's or a tag's name
    before words)."""
    if facts.has("model.name") or facts.has("model.weights_bytes") or facts.has("model.file_bytes"):
        return
    own = [parts[run.sentence]] if run is not None else []
    others = [] if run is not None and run.row else parts  # another row's model is another run's
    for where, patterns in ((own, (MODEL_FILE, MODEL_TAG, MODEL_WORDS)), (others, (MODEL_FILE, MODEL_TAG)),
                            (others, (MODEL_WORDS,))):
        for s in where:
            name = _model(s.text, patterns)
            if name:
                facts.set("model.name", name, _src(s.line, s.text))
                return
    quants = {q.group(1).upper() for s in parts for q in QUANT_WORD.finditer(s.text)}
    sized = MODEL_SIZED.search(own[0].text) if own else None
    if sized and len(quants) == 1 and guess(f"{sized.group(1)} {next(iter(quants))}") is not None:
        # the run's model names its size, the post one quantisation for all its runs
        facts.set("model.name", f"{sized.group(1)} {next(iter(quants))}", _src(own[0].line, own[0].text))


def _read_hardware(facts: Facts, parts: list[Sentence]) -> None:
    merged: hardware_text.Hardware | None = None
    where: Sentence | None = None
    for s in parts:
        hw = hardware_text.named_in(s.text)
        if hw is None:
            continue
        if merged is None:
            merged, where = hw, s
            continue
        if merged.gpu is None and hw.gpu is not None:
            merged.gpu, merged.gpu_count, merged.gpu_cores = hw.gpu, hw.gpu_count, hw.gpu_cores
        if merged.cpu is None and hw.cpu is not None:
            merged.cpu = hw.cpu
        for name in ("rebar", "pcie_gen", "pcie_width", "mem_type", "mem_mts"):
            if getattr(merged, name) is None:
                setattr(merged, name, getattr(hw, name))
    if merged is not None and where is not None:
        hardware_text.apply_parsed(facts, merged, _src(where.line, where.text), fill_only=True)


def _src(line: int, text: str) -> Source:
    return Source("log", NAME, line, text[:300])
