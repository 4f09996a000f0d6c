"""`analyze --hardware TEXT`: the machine as a user writes it beside a pasted result ("RTX 3090",
"M1 Ultra 64-core GPU, 128 GB", "Raspberry Pi 5", "i5-4278U, DDR3", "2x 4090", "Ryzen 9 7950X,
DDR5-6000", "RX 7900 XTX, Resizable BAR disabled", "3090 on an x1 riser") - and the same reader on the
sentences of a pasted post's prose (`named_in`, used by doctor/sources/logs/prose.py: "on my 4090",
"dual 3090s", "M2 Max 32GB", "my Orange Pi 5"), where words that name no device are left out rather
than taken as a device the table lacks.

Floor: sources (user input -> facts). The device names are matched against the published-spec table
(doctor/derive/specs/hardware.yaml) so that "4090" finds the GeForce RTX 4090's row; the words read
here (GPU core counts, memory generation and speed, Resizable BAR, the PCIe link) are the ones people
write on spec sheets and in forum signatures. Only what the paste itself did not say is set: a GPU
the engine's own device lines named stays as the engine printed it. The Source of every fact is the
text as given (kind `config`: the user stated it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.core.errors import UsageError
from doctor.core.facts import Facts, Source
from doctor.derive.specs import SpecRow, table

MAX_TEXT = 300
MAX_GPUS = 16
GIB = 1 << 30
# "+" joins two devices ("4090 + 7950X", "4090+7950X") but ends a product name ("Ryzen AI Max+ 395",
# "Xeon Platinum 8480+"): a "+" right after a word and before a space or the end is the name's own
SPLIT = re.compile(r"\s*(?:[,;/&]|\s\+|\+(?=\S)|\bwith\b|\band\b|\bon an?\b|\bon\b|\bin an?\b|\bplus\b)\s*",
                   re.IGNORECASE)
COUNT = re.compile(r"^(\d{1,2})\s*[x×]\s*(.+)$|^(.+?)\s*[x×]\s*(\d{1,2})$", re.IGNORECASE)
MEMORY = re.compile(r"\b(LP)?DDR(\d)(X|L)?(?:[- ]?(\d{3,4})(?:\s*MT/s|\s*MHz)?)?\b", re.IGNORECASE)
RAM_GB = re.compile(r"\b(\d{1,4})\s*(?:GB|GiB|G)\b(?!\s*/s)", re.IGNORECASE)
GPU_CORES = re.compile(r"\b(\d{1,3})[- ]?core(?:s)?\s+GPU\b|\bGPU\s*\(?(\d{1,3})[- ]?cores?\b", re.IGNORECASE)
CPU_CORES = re.compile(r"\b(\d{1,3})[- ]?core(?:s)?\s+CPU\b", re.IGNORECASE)
REBAR = re.compile(r"\b(?:resizable[- ]bar|re-?bar|large bar|above[- ]4g(?: decoding)?)\b", re.IGNORECASE)
OFF = re.compile(r"\b(?:off|disabled?|no|not|without|unsupported)\b", re.IGNORECASE)
SMALL_BAR = re.compile(r"\bsmall bar\b|\b256 ?MB bar\b", re.IGNORECASE)
PCIE = re.compile(r"\bPCIe\s*(?:gen\s*)?(\d)(?:\.0)?(?:\s*x\s*(\d{1,2}))?\b|\bx(1|2|4|8|16)\b(?=.*\b(?:risers?|link|"
                  r"slot|lanes?|pcie)\b)|\b(?:risers?|link|slot)\b.*\bx(1|2|4|8|16)\b", re.IGNORECASE)
GPU_WORDS = re.compile(r"\b(?:rtx|gtx|radeon|rx|arc|quadro|tesla|geforce|gpu|instinct|mi\d{2,3})\b", re.IGNORECASE)
RISER = re.compile(r"\b(?:x1|usb)\s+risers?\b|\bmining risers?\b", re.IGNORECASE)
# prose: the words before a device ("my 4090", "a 3090"), a count in words ("dual 3090s"), a plural
DETERMINER = re.compile(r"^(?:my|our|his|her|their|your|this|that|the|an?|one|single|new|old)\s+", re.IGNORECASE)
WORD_COUNT = re.compile(r"^(dual|twin|two|three|four|quad)\s+(.+)$", re.IGNORECASE)
WORD_COUNTS = {"dual": 2, "twin": 2, "two": 2, "three": 3, "four": 4, "quad": 4}
PLURAL = re.compile(r"\b(\d{3,4})s\b", re.IGNORECASE)
# in prose, a bare model number is a device only as a segment of its own ("4090", "3060 12GB") or after a
# determiner or a count, or first in its segment ("for a 4090", "my 7900 XTX gives"): "makes 580 tokens" is no
# RX 580
BARE_NUMBER = re.compile(r"^\d{3,4}\s?(?:ti|super|xtx|xt|gre|s)?(?:\s*\d{1,3}\s?gb)?$", re.IGNORECASE)
NAMED_NUMBER = re.compile(r"(?:^|\b(?:my|our|an?|the|this|dual|two|\d\s?x)\s+)(\d{4}(?:\s?(?:ti|super|xtx|xt|gre))?)\b",
                          re.IGNORECASE)
# a name written as a slug: hyphens between words, none with a digit on both sides kept ("i5-4278U" is Intel's own)
SLUG = re.compile(r"[a-z]-[a-z]|[a-z]-\d{3,4}-[a-z]", re.IGNORECASE)
SLUG_SEP = re.compile(r"(?<=[a-z])-(?=[a-z\d])|(?<=\d)-(?=[a-z]{2})", re.IGNORECASE)
# Intel's names carry a hyphen ("Core i5-4278U", ark.intel.com); people write a space ("i5 4278U")
INTEL_SPACE = re.compile(r"\b(i[3579]) (\d{4,5}[a-z]{0,3})\b", re.IGNORECASE)
# what a bare model number needs before the spec table knows it ("4090" -> "RTX 4090")
PREFIXES = ("", "rtx ", "geforce rtx ", "rx ", "radeon rx ", "gtx ", "apple ", "core ")


@dataclass
class Hardware:
    """What the text says of the machine."""

    text: str
    gpu: SpecRow | None = None
    gpu_count: int = 1
    cpu: SpecRow | None = None
    cpu_text: str | None = None
    gpu_text: str | None = None
    gpu_cores: int | None = None
    cpu_cores: int | None = None
    ram_bytes: int | None = None
    mem_type: str | None = None  # DDR5, LPDDR4X, ...
    mem_mts: int | None = None
    rebar: bool | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    unmatched: list[str] = field(default_factory=list)


def _find(segment: str, kinds: tuple[str, ...], prose: bool = False) -> SpecRow | None:
    spec = table()
    segment = INTEL_SPACE.sub(r"\1-\2", segment)
    for prefix in PREFIXES:
        if prefix and prose and not BARE_NUMBER.match(segment):
            named = NAMED_NUMBER.search(segment)
            if named is None:
                break
            segment = named.group(1)
        row = spec.find(prefix + segment, kinds)
        if row is not None:
            return row
    if SLUG.search(segment):  # a name written as a slug ("nvidia-geforce-rtx-4070-ti"): its words
        return _find(SLUG_SEP.sub(" ", segment), kinds, prose)
    return None


def _memory(hw: Hardware, text: str) -> None:
    m = MEMORY.search(text)
    if m:
        hw.mem_type = f"{'LP' if m.group(1) else ''}DDR{m.group(2)}{(m.group(3) or '').upper()}"
        if m.group(4):
            hw.mem_mts = int(m.group(4))


def _links(hw: Hardware, text: str) -> None:
    if SMALL_BAR.search(text):
        hw.rebar = False
    for bar in REBAR.finditer(text):
        window = text[max(0, bar.start() - 20):bar.end() + 20]
        hw.rebar = not OFF.search(window)
    if RISER.search(text):
        hw.pcie_width = 1
    m = PCIE.search(text)
    if m:
        if m.group(1):
            hw.pcie_gen = int(m.group(1))
        width = m.group(2) or m.group(3) or m.group(4)
        if width:
            hw.pcie_width = int(width)


def _count(segment: str) -> tuple[int, str]:
    """A segment's device count and the device words: "2x 4090", "4090 x2", "dual 3090s"."""
    count = COUNT.match(segment)
    if count:
        return int(count.group(1) or count.group(4)), (count.group(2) or count.group(3)).strip()
    words = WORD_COUNT.match(segment)
    if words:
        return WORD_COUNTS[words.group(1).lower()], words.group(2).strip()
    return 1, segment


def parse(text: str, prose: bool = False) -> Hardware:
    """Read the machine from a user's words; UsageError when nothing in it names a device. `prose`: the
    text is a sentence of a post, not an answer to "which machine?": words that name no device in the
    table (and amounts of memory, which prose gives for VRAM as often as for RAM) are left out."""
    text = " ".join(text.split())[:MAX_TEXT]
    hw = Hardware(text)
    _memory(hw, text)
    _links(hw, text)
    m = GPU_CORES.search(text)
    hw.gpu_cores = int(m.group(1) or m.group(2)) if m else None
    m = CPU_CORES.search(text)
    hw.cpu_cores = int(m.group(1)) if m else None
    for segment in (s for s in SPLIT.split(text) if s and s.strip()):
        segment = PLURAL.sub(r"\1", DETERMINER.sub("", segment.strip()))
        n, segment = _count(segment)
        segment = DETERMINER.sub("", segment)
        bare = GPU_CORES.sub("", segment).strip()
        amount = MEMORY.sub("", bare).strip()  # "8GB DDR3L-1600": the amount beside the memory type
        if RAM_GB.fullmatch(amount) or not amount:
            ram = RAM_GB.fullmatch(amount)
            if ram and hw.ram_bytes is None and not prose:
                hw.ram_bytes = int(ram.group(1)) * GIB
            continue
        gpu = _find(bare, ("gpu", "apple"), prose)
        if gpu is not None and hw.gpu is None:
            hw.gpu, hw.gpu_count = gpu, max(1, min(n, MAX_GPUS))
            continue
        cpu = _find(bare, ("cpu",), prose)
        if cpu is not None and hw.cpu is None:
            hw.cpu = cpu
            continue
        if REBAR.search(segment) or SMALL_BAR.search(segment) or PCIE.search(segment) or RISER.search(segment):
            continue
        hw.unmatched.append(segment)
    if not text and not prose:
        raise UsageError("--hardware needs the machine's name (e.g. 'RTX 3090', 'M2 Max 38-core GPU', 'Ryzen 9 7950X')")
    if prose:
        hw.unmatched = []
        return hw
    named = [s for s in hw.unmatched if not GPU_WORDS.search(s)]
    if hw.gpu is None and any(GPU_WORDS.search(s) for s in hw.unmatched):
        hw.gpu_text = next(s for s in hw.unmatched if GPU_WORDS.search(s))
    if hw.cpu is None and named:
        hw.cpu_text = named[0]  # a device the table lacks: the verdict then says which figure would settle it
    return hw


def _gpu_named(facts: Facts) -> bool:
    return any(facts.has(f"host.gpu[{i}].name") for i in range(MAX_GPUS))


def _hint() -> re.Pattern[str]:
    """What a sentence must hold before it is read for a device: one of the table's match strings, a
    bare model number after a word, or a link word."""
    if not _HINT:
        words = sorted({m for row in table().rows for m in row.match}, key=len, reverse=True)
        _HINT.append(re.compile("|".join([re.escape(w) for w in words] + [
            r"\b\d{4}s?\b", r"\b(?:[0-9]{3,4}\s?(?:xtx|xt|ti|super))\b", REBAR.pattern, SMALL_BAR.pattern,
            r"\bPCIe\b", r"\briser\b"]), re.IGNORECASE))
    return _HINT[0]


_HINT: list[re.Pattern[str]] = []


def named_in(sentence: str) -> Hardware | None:
    """What a sentence of a post's prose says of the machine, or None when it names nothing."""
    if not _hint().search(sentence) and not _hint().search(SLUG_SEP.sub(" ", sentence)):
        return None
    hw = parse(sentence, prose=True)
    if hw.gpu is None and hw.cpu is None and hw.rebar is None and hw.pcie_width is None and hw.pcie_gen is None:
        return None
    return hw


def apply(facts: Facts, text: str) -> Hardware:
    """Set what `text` says of the machine where the paste said nothing of it."""
    hw = parse(text)
    apply_parsed(facts, hw, Source("config", "--hardware", text=text[:MAX_TEXT]))
    return hw


def apply_parsed(facts: Facts, hw: Hardware, src: Source, fill_only: bool = False) -> None:
    """Set what `hw` says; `fill_only`: the links and memory too only where nothing else said them (prose)."""
    if hw.gpu is not None:
        if not _gpu_named(facts):
            for i in range(hw.gpu_count if hw.gpu.kind == "gpu" else 1):
                facts.set(f"host.gpu[{i}].name", hw.gpu.name, src)
            if not facts.has("host.gpu.count"):
                facts.set("host.gpu.count", hw.gpu_count if hw.gpu.kind == "gpu" else 1, src)
        if hw.gpu.kind == "apple" and not facts.has("host.cpu.model"):
            facts.set("host.cpu.model", hw.gpu.name, src)  # the chip is the CPU as well
    elif hw.gpu_text and not _gpu_named(facts):
        facts.set("host.gpu[0].name", hw.gpu_text, src)
        if not facts.has("host.gpu.count"):
            facts.set("host.gpu.count", 1, src)
    cpu_name = hw.cpu.name if hw.cpu is not None else hw.cpu_text
    if cpu_name and not facts.has("host.cpu.model"):
        facts.set("host.cpu.model", cpu_name, src)
    if hw.gpu_cores and not facts.has("host.gpu[0].cores"):
        facts.set("host.gpu[0].cores", hw.gpu_cores, src)
    if hw.ram_bytes and not facts.has("host.ram.total"):
        facts.set("host.ram.total", hw.ram_bytes, src)
    for name, value in (("host.ram.type", hw.mem_type), ("host.ram.mts", hw.mem_mts),
                        ("host.gpu[0].rebar", hw.rebar), ("host.gpu[0].pcie.width_current", hw.pcie_width),
                        ("host.gpu[0].pcie.gen_current", hw.pcie_gen)):
        if value is not None and not (fill_only and facts.has(name)):
            facts.set(name, value, src)
