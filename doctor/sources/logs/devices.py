"""Device names pasted beside a speed report that no engine parser reads: nvidia-smi's table, lscpu,
/proc/cpuinfo and macOS's chip line.

A speed figure means little without the hardware, and people paste it with `nvidia-smi` or
`lscpu`. The strings are the tools' own: nvidia-smi's table row `|   0  NVIDIA GB10   On  |
0000000F:01:00.0 Off |` (index, name, persistence mode, bus id; a long name is cut with `...`),
lscpu's `Model name:` and /proc/cpuinfo's `model name\t:`, and `system_profiler`'s `Chip: Apple M2 Ultra`.
Names go to `host.gpu[i].name` and `host.cpu.model`, never over a name an engine's own device lines
gave. Casts no engine vote.

Pure: text in, facts out.
"""

from __future__ import annotations

import re

from doctor.core.facts import Facts
from doctor.sources.logs.base import LineKind, LineKinds, LogParser, reads
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated

SMI_GPU = gated(r"^\|\s+(\d+)\s+(\S.*?)\s+(?:On|Off)\s+\|\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
CPU_MODEL = gated(r"^\s*(?:Model name|model name)\s*:\s*(\S.*?)\s*$")
APPLE_CHIP = gated(r"^\s*Chip:\s*(Apple M\d.*?)\s*$")
# a CPU model string, not some other "Model name" (a product sheet, a model card)
CPU_WORDS = re.compile(r"\b(?:intel|amd|apple|ryzen|xeon|epyc|core|threadripper|snapdragon|neoverse|cortex|"
                       r"graviton|ampere|processor|cpu)\b", re.IGNORECASE)
MAX_GPUS = 16

SMI_KIND = LineKind("smi", (SMI_GPU,), (r"\| +\d+ +\S.* (?:On|Off) +\| +[0-9A-Fa-f]{4,8}:",))
CPU_KIND = LineKind("cpu", (CPU_MODEL,), (r"[Mm]odel name\s*:",))
CHIP_KIND = LineKind("chip", (APPLE_CHIP,), (r"Chip: *Apple M\d",))
KINDS = LineKinds(SMI_KIND, CPU_KIND, CHIP_KIND)


class DeviceLineParser(LogParser):
    name = "devices"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.gpus: dict[int, tuple[str, LogLine]] = {}
        self.cpu: tuple[str, LogLine] | None = None

    def feed(self, line: LogLine) -> None:
        if self.passes_gate(line.text):
            self.dispatch(line)

    @reads(SMI_KIND)
    def _smi(self, line: LogLine) -> bool:
        m = SMI_GPU.search(line.text)
        if not m:
            return False
        index = int(m.group(1))
        if index < MAX_GPUS:
            self.gpus.setdefault(index, (m.group(2).strip(), line))
        return True

    @reads(CPU_KIND)
    def _cpu(self, line: LogLine) -> bool:
        m = CPU_MODEL.search(line.text)
        if not m or not CPU_WORDS.search(m.group(1)):
            return False
        self.cpu = self.cpu or (" ".join(m.group(1).split()), line)
        return True

    @reads(CHIP_KIND)
    def _chip(self, line: LogLine) -> bool:
        m = APPLE_CHIP.search(line.text)
        if not m:
            return False
        self.cpu = self.cpu or (m.group(1), line)
        return True

    def summarize(self, facts: Facts) -> None:
        if self.cpu is not None and not facts.has("host.cpu.model"):
            facts.set("host.cpu.model", self.cpu[0], self.src(self.cpu[1]))
        if not self.gpus or any(facts.has(f"host.gpu[{i}].name") for i in range(MAX_GPUS)):
            return  # an engine's own device lines name the GPUs
        for index, (name, line) in sorted(self.gpus.items()):
            facts.set(f"host.gpu[{index}].name", name, self.src(line))
