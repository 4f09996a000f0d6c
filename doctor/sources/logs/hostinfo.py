"""What people paste beside a speed result to say which machine ran it, and the engine lines that say
where the work ran: read by no engine parser.

The strings are the tools' own:
- nvidia-smi -L: `GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-7cbcc10d-...)`; llama.cpp's SYCL device table
  (ggml-sycl.cpp: `|%2d|%19s|%39s|...`: `| 0| [level_zero:gpu:0]| Intel Arc A770 Graphics|...`);
- fastfetch (src/modules/cpu/cpu.c, gpu/gpu.c: `name (cores|P+E) @ freq`, `vendor name (cores) @ freq
  (used / total) [Discrete]`) and neofetch (`CPU: Intel i7-4790 (8) @ 4.000GHz`), `Memory: used / total`;
- system_profiler SPHardwareDataType (`Chip: Apple M4 Max`, `Total Number of Cores: 16 (12 performance
  and 4 efficiency)`, `Memory: 64 GB`) and SPDisplaysDataType (`Chipset Model: Apple M1 Pro`, then its
  GPU's `Total Number of Cores: 14`);
- lscpu's topology (`CPU(s):`, `Thread(s) per core:`, `Core(s) per socket:` / `per cluster:`,
  `Socket(s):` / `Cluster(s):`, `NUMA node(s):`, one `Model name:` per core type on a big.LITTLE SoC) and
  /proc/cpuinfo
  (`cpu cores`, `siblings`);
- llama.cpp: Metal's `recommendedMaxWorkingSetSize  = %8.2f MB` (ggml-metal-device.m), `graph splits = %d`
  or `graph splits = %d (with bs=%d), %d (with bs=1)` (llama-context.cpp);
- `ollama ps` (cmd/cmd.go): `llama3:70b  be39eb53a197  41 GB  42%/58% CPU/GPU  4 minutes from now`, or its
  PROCESSOR column alone (`33%/67%   CPU/GPU`); of several models, the one least on the GPU;
- the command a result came from: `ollama run [--verbose] MODEL`, geerlingguy's obench.sh `Running
  benchmark N times using model: MODEL` and its average (obench.sh: `Average Eval Rate: %s tokens/second`, or
  with --markdown `|**Average Eval Rate**| %s tokens/second |`); where a post runs several models, the last
  one's (as Ollama's parser keeps the last verbose block's speeds).
Names go to `host.gpu[i].name` / `host.cpu.model` only where no engine line or doctor/sources/logs/devices.py
named them. Casts no engine vote.

Pure: text in, facts out.
"""

from __future__ import annotations

import re

from doctor.core.facts import Facts
from doctor.sources.logs.base import LineKind, LineKinds, LogParser, reads
from doctor.sources.logs.devices import CPU_WORDS
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated

MAX_GPUS = 16
GIB = 1 << 30
# ggml-sycl.cpp's device table: "|%2d|%19s|%39s|%7s|..." (id, [backend:type:n], name, version, ...)
SYCL_DEVICE = gated(r"^\|\s*(\d+)\s*\|\s*\[(?:level_zero|opencl|ext_oneapi_\w+):gpu:\d+\]\s*\|\s*(\S[^|]*?)\s*\|")
SMI_L = gated(r"^\s*GPU (\d+): (.+?) \(UUID: GPU-[0-9a-fA-F-]+\)")
FETCH_CPU = gated(r"\bCPU: (.+?)(?: \((\d+)(?:\+(\d+))*\))?(?: @ [\d.]+ ?[GM]Hz)?\s*$")
FETCH_GPU = gated(r"\bGPU(?: \d+)?: (.+?)(?: \(\d+\))?(?: @ [\d.]+ ?[GM]Hz)?(?: - [\d.]+ ?°?C)?"
                  r"(?: \([\d.]+ [KMGT]iB(?: / [\d.]+ [KMGT]iB)?(?:, \d+%)?\))?"
                  r"(?: \[(?:Discrete|Integrated|Unknown)\])?\s*$")
MEMORY = gated(r"\bMemory: (?:[\d.]+ [MGT]iB / )?([\d.]+) ([MGT]iB|GB)\b")
CORES = gated(r"^\s*Total Number of Cores: (\d+)(?: \((\d+) performance and (\d+) efficiency\))?\s*$")
CHIPSET = gated(r"^\s*Chipset Model: (.+?)\s*$")
CHIP = gated(r"^\s*Chip: +(Apple \S.*?)\s*$")
LSCPU = gated(r"^\s*(CPU\(s\)|Thread\(s\) per core|Core\(s\) per (?:socket|cluster)|Socket\(s\)|Cluster\(s\)|"
              r"NUMA node\(s\)|Model name):\s+(\S.*?)\s*$")
CPUINFO = gated(r"^(cpu cores|siblings)\s*: (\d+)\s*$")
WORKING_SET = gated(r"recommendedMaxWorkingSetSize\s*=\s*([\d.]+) MB")
SPLITS = gated(r"graph splits = (\d+)(?: \(with bs=\d+\), (\d+) \(with bs=1\))?")
# `ollama ps` (cmd/cmd.go): NAME, ID, SIZE, PROCESSOR: "100% CPU", "100% GPU" or "%d%%/%d%% CPU/GPU"
OLLAMA_PS = gated(r"^(\S+)\s+[0-9a-f]{12}\s+[\d.]+ [KMGT]?B\s+(?:(100)% (CPU|GPU)|(\d+)%/(\d+)% +CPU/GPU)\b")
# its PROCESSOR column pasted alone (a split: "100% GPU" alone says too little to be told from other text)
OLLAMA_PS_SPLIT = gated(r"(?:^|\s)(\d{1,3})%/(\d{1,3})% +CPU/GPU\b")
OLLAMA_RUN = gated(r"\bollama run(?: --?[\w-]+)* ([\w.-]+(?:/[\w.-]+)*:[\w.-]+|[\w.-]+)")
OBENCH = gated(r"\busing model: ([\w.-]+(?:/[\w.-]+)*:[\w.-]+|[\w.-]+)")
# obench.sh's average, plain or --markdown: `Average Eval Rate: %s tokens/second`, `|**Average Eval Rate**| %s ...|`
OBENCH_AVG = gated(r"Average Eval Rate\**\s*[|:]\s*([\d.]+) tokens/second")
GPU_WORDS = re.compile(r"\b(?:nvidia|geforce|rtx|gtx|quadro|tesla|radeon|amd|rx|arc|intel|apple|mali|adreno|"
                       r"vivante|v3d|instinct)\b", re.IGNORECASE)
UNITS = {"MiB": 1 << 20, "GiB": GIB, "TiB": 1 << 40, "GB": GIB}

SMI_L_KIND = LineKind("smi_l", (SMI_L, SYCL_DEVICE), (r"GPU \d+: .* \(UUID: GPU-", r":gpu:\d+\] *\|"))
FETCH_KIND = LineKind("fetch", (FETCH_CPU, FETCH_GPU, MEMORY), (r"\b(?:CPU|GPU(?: \d+)?|Memory): ",))
PROFILER_KIND = LineKind("profiler", (CORES, CHIPSET, CHIP), (r"Total Number of Cores: ", r"Chipset Model: ",
                                                               r"Chip: +Apple"))
LSCPU_KIND = LineKind("lscpu", (LSCPU, CPUINFO), (
    r"(?:CPU\(s\)|Thread\(s\) per core|Core\(s\) per (?:socket|cluster)|Socket\(s\)|Cluster\(s\)|"
    r"NUMA node\(s\)|Model name): ",
    r"(?:cpu cores|siblings)\s*: "))
PLACE_KIND = LineKind("place", (WORKING_SET, SPLITS), (r"recommendedMaxWorkingSetSize", r"graph splits = "))
RUN_KIND = LineKind("run", (OLLAMA_RUN, OBENCH, OLLAMA_PS, OLLAMA_PS_SPLIT, OBENCH_AVG), (
    r"ollama run ", r"using model: ", r"Average Eval Rate",
    r"[0-9a-f]{12} +[\d.]+ [KMGT]?B +(?:100% |\d+%/\d+% +CPU/GPU)", r"\d+%/\d+% +CPU/GPU"))
KINDS = LineKinds(SMI_L_KIND, PROFILER_KIND, LSCPU_KIND, PLACE_KIND, RUN_KIND, FETCH_KIND)


class HostInfoParser(LogParser):
    name = "hostinfo"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.gpus: dict[int, tuple[str, LogLine]] = {}
        self.values: dict[str, tuple[object, LogLine]] = {}
        self.lscpu: list[tuple[str, str, LogLine]] = []
        self.in_display = False  # the last system_profiler section was a GPU (Chipset Model)
        self.obench: tuple[float, LogLine] | None = None

    def feed(self, line: LogLine) -> None:
        if self.passes_gate(line.text):
            self.dispatch(line)

    def _keep(self, name: str, value: object, line: LogLine) -> None:
        self.values.setdefault(name, (value, line))

    @reads(SMI_L_KIND)
    def _smi_l(self, line: LogLine) -> bool:
        m = SMI_L.search(line.text) or SYCL_DEVICE.search(line.text)
        if not m:
            return False
        if int(m.group(1)) < MAX_GPUS:
            self.gpus.setdefault(int(m.group(1)), (m.group(2).strip(), line))
        return True

    @reads(PROFILER_KIND)
    def _profiler(self, line: LogLine) -> bool:
        t = line.text
        m = CHIPSET.search(t)
        if m:
            self.in_display = True
            if GPU_WORDS.search(m.group(1)):
                self.gpus.setdefault(0, (m.group(1), line))
            return True
        m = CHIP.search(t)
        if m:
            self.in_display = False
            self._keep("host.cpu.model", m.group(1), line)
            return True
        m = CORES.search(t)
        if not m:
            return False
        if self.in_display and not m.group(2):
            self._keep("host.gpu[0].cores", int(m.group(1)), line)
        elif m.group(2):
            self._keep("host.cpu.physical_cores", int(m.group(1)), line)
            self._keep("host.cpu.perf_cores", int(m.group(2)), line)
        return True

    @reads(LSCPU_KIND)
    def _lscpu(self, line: LogLine) -> bool:
        m = LSCPU.search(line.text) or CPUINFO.search(line.text)
        if not m:
            return False
        self.lscpu.append((m.group(1), m.group(2), line))
        return True

    @reads(PLACE_KIND)
    def _place(self, line: LogLine) -> bool:
        t = line.text
        m = WORKING_SET.search(t)
        if m:
            self._keep("host.gpu[0].working_set", int(float(m.group(1)) * 1e6), line)
            return True
        m = SPLITS.search(t)
        if m:
            self.values["run.graph_splits"] = (int(m.group(2) or m.group(1)), line)  # the decode graph's (bs=1)
            return True
        return False

    @reads(RUN_KIND)
    def _run(self, line: LogLine) -> bool:
        ps = OLLAMA_PS.search(line.text)
        split = None if ps else OLLAMA_PS_SPLIT.search(line.text)
        if ps or (split and int(split.group(1)) + int(split.group(2)) == 100):
            if ps:
                self._keep("model.name", ps.group(1), line)
                cpu = (1.0 if ps.group(3) == "CPU" else 0.0) if ps.group(2) else int(ps.group(4)) / 100
            else:
                cpu = int(split.group(1)) / 100  # type: ignore[union-attr]
            share = round(1.0 - cpu, 2)
            low = self.values.get("run.gpu_share")
            if low is None or not isinstance(low[0], float) or share < low[0]:  # of several models, the least on GPU
                self.values["run.gpu_share"] = (share, line)
            return True
        avg = OBENCH_AVG.search(line.text)
        if avg:  # the average of the model named by the `using model:` line above it
            self.obench = (float(avg.group(1)), line)
            return True
        m = OLLAMA_RUN.search(line.text) or OBENCH.search(line.text)
        if not m:
            return False
        # the last command's model: Ollama's parser keeps the last verbose block's speeds
        self.values["model.name"] = (m.group(1), line)
        return True

    @reads(FETCH_KIND)
    def _fetch(self, line: LogLine) -> bool:
        t = line.text
        if "UUID: GPU-" in t:
            return False
        m = FETCH_CPU.search(t)
        if m and CPU_WORDS.search(m.group(1)):
            self._keep("host.cpu.model", " ".join(m.group(1).split()), line)
            if m.group(3) and m.group(2):  # fastfetch's P+E core types
                self._keep("host.cpu.perf_cores", int(m.group(2)), line)
            return True
        m = FETCH_GPU.search(t)
        if m and GPU_WORDS.search(m.group(1)):
            index = len(self.gpus)
            if index < MAX_GPUS and all(name != m.group(1) for name, _ in self.gpus.values()):
                self.gpus[index] = (m.group(1).strip(), line)
            return True
        m = MEMORY.search(t)
        if m:
            self._keep("host.ram.total", int(float(m.group(1)) * UNITS[m.group(2)]), line)
            return True
        return False

    def _topology(self) -> dict[str, tuple[object, LogLine]]:
        """Physical and logical cores (and the big cores of a big.LITTLE SoC) from lscpu / cpuinfo."""
        out: dict[str, tuple[object, LogLine]] = {}
        blocks: list[dict[str, int]] = []
        models: list[str] = []
        for key, value, line in self.lscpu:
            if key == "Model name":
                models.append(value)
                blocks.append({})
            elif key in ("CPU(s)", "siblings") and value.isdigit():
                out.setdefault("host.cpu.logical_cores", (int(value), line))
            elif key == "cpu cores" and value.isdigit():
                out.setdefault("host.cpu.physical_cores", (int(value), line))
            elif value.isdigit():
                if not blocks:
                    blocks.append({})
                blocks[-1][key] = int(value)
        cores = []
        for block in blocks:
            per = block.get("Core(s) per socket") or block.get("Core(s) per cluster")
            groups = block.get("Socket(s)") or block.get("Cluster(s)") or 1
            if per:
                cores.append(per * groups)
        first = blocks[0] if blocks else {}
        if first.get("Socket(s)") and first.get("Core(s) per socket") and self.lscpu:  # sockets, for NUMA
            out["host.cpu.sockets"] = (first["Socket(s)"], self.lscpu[-1][2])
            out["host.cpu.cores_per_socket"] = (first["Core(s) per socket"], self.lscpu[-1][2])
        numa = next((b["NUMA node(s)"] for b in blocks if b.get("NUMA node(s)")), None)
        if numa and self.lscpu:
            out["host.cpu.numa_nodes"] = (numa, self.lscpu[-1][2])
        if cores and self.lscpu:
            line = self.lscpu[-1][2]
            out["host.cpu.physical_cores"] = (sum(cores), line)
            if len(cores) > 1 and len(set(models)) > 1:  # a big.LITTLE SoC: one block per core type, the
                out["host.cpu.perf_cores"] = (sum(cores[1:]), line)  # little cores first (they are cpu0...)
        return out

    def summarize(self, facts: Facts) -> None:
        named = any(facts.has(f"host.gpu[{i}].name") for i in range(MAX_GPUS))
        if self.gpus and not named:
            for index, (name, line) in sorted(self.gpus.items()):
                facts.set(f"host.gpu[{index}].name", name, self.src(line))
            if not facts.has("host.gpu.count"):
                facts.set("host.gpu.count", len(self.gpus), self.src(next(iter(self.gpus.values()))[1]))
        for name, (value, line) in {**self._topology(), **self.values}.items():
            if not facts.has(name):
                facts.set(name, value, self.src(line))  # type: ignore[arg-type]
        if self.obench is not None and not facts.has("run.decode_tps"):
            facts.set("run.decode_tps", self.obench[0], self.src(self.obench[1]))
