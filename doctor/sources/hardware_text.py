"""`analyze --hardware TEXT`: the machine as a user writes it beside a pasted result ("RTX 3090",
"M1 Ultra 64-core GPU, 128 GB", "Raspberry Pi 5", "i5-4278U, DDR3", "2x 4090", "Ryzen 9 7950X,
DDR5-6000", "RX 7900 XTX, Resizable BAR disabled", "3090 on an x1 riser").

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
PCIE = re.compile(r"\bPCIe\s*(?:gen\s*)?(\d)(?:\.0)?(?:\s*x\s*(\d{1,2}))?\b|\bx(1|2|4|8|16)\b(?=.*\b(?:riser|link|"
                  r"slot|lanes?|pcie)\b)|\b(?:riser|link|slot)\b.*\bx(1|2|4|8|16)\b", re.IGNORECASE)
GPU_WORDS = re.compile(r"\b(?:rtx|gtx|radeon|rx|arc|quadro|tesla|geforce|gpu|instinct|mi\d{2,3})\b", re.IGNORECASE)
RISER = re.compile(r"\b(?:x1|usb)\s+riser\b|\bmining riser\b", re.IGNORECASE)
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


def _find(segment: str, kinds: tuple[str, ...]) -> SpecRow | None:
    spec = table()
    segment = INTEL_SPACE.sub(r"\1-\2", segment)
    for prefix in PREFIXES:
        row = spec.find(prefix + segment, kinds)
        if row is not None:
            return row
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


def parse(text: str) -> Hardware:
    """Read the machine from a user's words; UsageError when nothing in it names a device."""
    text = " ".join(text.split())[:MAX_TEXT]
    hw = Hardware(text)
    _memory(hw, text)
    _links(hw, text)
    m = GPU_CORES.search(text)
    hw.gpu_cores = int(m.group(1) or m.group(2)) if m else None
    m = CPU_CORES.search(text)
    hw.cpu_cores = int(m.group(1)) if m else None
    for segment in (s for s in SPLIT.split(text) if s and s.strip()):
        segment = segment.strip()
        count = COUNT.match(segment)
        n = 1
        if count:
            n = int(count.group(1) or count.group(4))
            segment = (count.group(2) or count.group(3)).strip()
        bare = GPU_CORES.sub("", segment).strip()
        amount = MEMORY.sub("", bare).strip()  # "8GB DDR3L-1600": the amount beside the memory type
        if RAM_GB.fullmatch(amount) or not amount:
            ram = RAM_GB.fullmatch(amount)
            if ram and hw.ram_bytes is None:
                hw.ram_bytes = int(ram.group(1)) * GIB
            continue
        gpu = _find(bare, ("gpu", "apple"))
        if gpu is not None and hw.gpu is None:
            hw.gpu, hw.gpu_count = gpu, max(1, min(n, MAX_GPUS))
            continue
        cpu = _find(bare, ("cpu",))
        if cpu is not None and hw.cpu is None:
            hw.cpu = cpu
            continue
        if REBAR.search(segment) or SMALL_BAR.search(segment) or PCIE.search(segment) or RISER.search(segment):
            continue
        hw.unmatched.append(segment)
    if not text:
        raise UsageError("--hardware needs the machine's name (e.g. 'RTX 3090', 'M2 Max 38-core GPU', 'Ryzen 9 7950X')")
    named = [s for s in hw.unmatched if not GPU_WORDS.search(s)]
    if hw.gpu is None and any(GPU_WORDS.search(s) for s in hw.unmatched):
        hw.gpu_text = next(s for s in hw.unmatched if GPU_WORDS.search(s))
    if hw.cpu is None and named:
        hw.cpu_text = named[0]  # a device the table lacks: the verdict then says which figure would settle it
    return hw


def _gpu_named(facts: Facts) -> bool:
    return any(facts.has(f"host.gpu[{i}].name") for i in range(MAX_GPUS))


def apply(facts: Facts, text: str) -> Hardware:
    """Set what `text` says of the machine where the paste said nothing of it."""
    hw = parse(text)
    src = Source("config", "--hardware", text=text[:MAX_TEXT])
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
    if hw.mem_type:
        facts.set("host.ram.type", hw.mem_type, src)
    if hw.mem_mts:
        facts.set("host.ram.mts", hw.mem_mts, src)
    if hw.rebar is not None:
        facts.set("host.gpu[0].rebar", hw.rebar, src)
    if hw.pcie_width:
        facts.set("host.gpu[0].pcie.width_current", hw.pcie_width, src)
    if hw.pcie_gen:
        facts.set("host.gpu[0].pcie.gen_current", hw.pcie_gen, src)
    return hw
