"""llama-bench's results pasted into a report: its markdown table, its CSV and its JSONL lines.

The strings are llama-bench's own (tools/llama-bench/llama-bench.cpp, examples/llama-bench before
2025): `markdown_printer` writes a header of display names (`| model | size | params | backend |
ngl | threads | n_batch | type_k | fa | dev | ... | test | t/s |`; the first versions, Aug 2023, printed
field names such as `n_gpu_layers`, `n_threads`, and no size or params), a dashed line, then one row
per test: the model description, `%.2f GiB` / `%.2f MiB`, `%.2f B` / `%.2f M` parameters, the backends
joined by commas, the settings that vary, the test (`pp512`, `tg128`, `pp512+tg128`, `pp 512` before
2024, ` @ d4096` at a depth since 2025) and `%.2f ± %.2f` tokens/s. `-o csv` writes a header of field
names and quoted values; `-o jsonl` one JSON object per test (with `cpu_info`, `gpu_info`, `avg_ts`).

Every row stays as evidence (`bench.tests`); the representative rows give `run.prefill_tps` and
`run.decode_tps`: among the rows of the first model, at depth 0, the fastest prompt-processing test
and the fastest generation test (a sweep's best setting is what the machine can do). The settings of
the chosen generation row (threads, ngl, batch, flash attention, KV types) and the model's size and
parameters become facts; the device lines around the table are the llama.cpp parser's.

Pure: text in, facts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from doctor.core.facts import Facts, Source
from doctor.sources.logs.base import LineKind, LineKinds, LogParser, reads
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated

MIB, GIB = 1 << 20, 1 << 30
MAX_ROWS = 512  # a pasted table is short; a hostile one cannot grow the evidence without bound

HEADER = gated(r"^\s*\|\s*model\s*\|(?:.*\|)?\s*test\s*\|\s*t/s\s*\|\s*$")
ROW = gated(r"^\s*\|.*\|\s*(?:pp|tg) ?\d+(?:\+tg ?\d+)?(?: @ d\d+)?\s*\|\s*\d+(?:\.\d+)?\s*(?:±|\+/-)\s*"
            r"\d+(?:\.\d+)?\s*\|+\s*$")
TEST = re.compile(r"^(?:pp ?(\d+))?(?:\+?tg ?(\d+))?(?: @ d(\d+))?$")
TPS = re.compile(r"^(\d+(?:\.\d+)?)\s*(?:±|\+/-)\s*(\d+(?:\.\d+)?)$")
SIZE = re.compile(r"^(\d+(?:\.\d+)?) (MiB|GiB)$")
PARAMS = re.compile(r"^(\d+(?:\.\d+)?) ([MB])$")
CSV_HEADER = gated(r"^build_commit,build_number,.*\bavg_ts\b")
CSV_ROW = gated(r'^"[0-9a-f]+","\d+",')
BUILD = gated(r"^build: ([0-9a-f]+) \((\d+)\)\s*$")

# header names (display names, and the field names the first versions printed) -> setting key
COLUMNS = {
    "ngl": "n_gpu_layers", "n_gpu_layers": "n_gpu_layers", "threads": "n_threads", "n_threads": "n_threads",
    "n_batch": "n_batch", "n_ubatch": "n_ubatch", "type_k": "type_k", "type_v": "type_v",
    "fa": "flash_attn", "flash_attn": "flash_attn", "dev": "devices", "devices": "devices",
    "sm": "split_mode", "split_mode": "split_mode", "ts": "tensor_split", "tensor_split": "tensor_split",
    "n_cpu_moe": "n_cpu_moe", "nkvo": "no_kv_offload", "no_kv_offload": "no_kv_offload",
    "mmap": "use_mmap", "use_mmap": "use_mmap", "lm": "load_mode", "ot": "tensor_buft_overrides",
    "main_gpu": "main_gpu", "f16_kv": "f16_kv", "mul_mat_q": "mul_mat_q", "low_vram": "low_vram",
    "embd": "embeddings", "poll": "poll", "cpu_mask": "cpu_mask", "cpu_strict": "cpu_strict",
}
# setting key -> (fact, reader)
_INT_FACTS = {"n_gpu_layers": "config.n_gpu_layers", "n_threads": "config.n_threads",
              "n_batch": "config.n_batch", "n_ubatch": "config.n_ubatch"}
_STR_FACTS = {"type_k": "config.type_k", "type_v": "config.type_v"}


@dataclass(slots=True)
class BenchRow:
    """One llama-bench result."""

    number: int  # the line it was read from
    raw: str
    test: str  # as printed: pp512, tg128, pp512+tg128 @ d4096
    n_prompt: int
    n_gen: int
    depth: int
    tok_s: float
    model: str | None = None
    size_bytes: int | None = None
    n_params: int | None = None
    backend: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    cpu_info: str | None = None
    gpu_info: str | None = None

    @property
    def phase(self) -> str:
        if self.n_prompt > 0 and self.n_gen == 0:
            return "prefill"
        if self.n_gen > 0 and self.n_prompt == 0:
            return "decode"
        return "mixed"

    def describe(self) -> str:
        varying = " ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"{self.test}: {self.tok_s:g} t/s" + (f" ({varying})" if varying else "")


def parse_header(text: str) -> list[str] | None:
    """The column names of a markdown header line, or None."""
    if not HEADER.search(text):
        return None
    return [cell.strip() for cell in text.strip().strip("|").split("|")]


def parse_test(text: str) -> tuple[int, int, int] | None:
    """`pp512` / `tg128` / `pp512+tg128 @ d4096` / `pp 512` -> (n_prompt, n_gen, depth)."""
    m = TEST.match(text.strip())
    if not m or not (m.group(1) or m.group(2)):
        return None
    return int(m.group(1) or 0), int(m.group(2) or 0), int(m.group(3) or 0)


def _size(text: str) -> int | None:
    m = SIZE.match(text)
    return int(float(m.group(1)) * (GIB if m.group(2) == "GiB" else MIB)) if m else None


def _params(text: str) -> int | None:
    m = PARAMS.match(text)
    return int(float(m.group(1)) * (1e9 if m.group(2) == "B" else 1e6)) if m else None


def parse_row(text: str, columns: list[str], number: int = 0) -> BenchRow | None:
    """One markdown result row read with the header's columns, or None when it is not one."""
    cells = [cell.strip() for cell in text.strip().strip("|").split("|")]
    if len(cells) != len(columns):
        return None
    values = dict(zip(columns, cells, strict=True))
    test = parse_test(values.get("test", ""))
    tps = TPS.match(values.get("t/s", ""))
    if test is None or tps is None:
        return None
    settings = {COLUMNS[c]: v for c, v in values.items() if c in COLUMNS}
    return BenchRow(number=number, raw=text.strip()[:300], test=values["test"], n_prompt=test[0], n_gen=test[1],
                    depth=test[2], tok_s=float(tps.group(1)), model=values.get("model") or None,
                    size_bytes=_size(values.get("size", "")), n_params=_params(values.get("params", "")),
                    backend=values.get("backend") or None, settings=settings)


def default_columns(text: str) -> list[str] | None:
    """The columns llama-bench prints by default, for a row pasted without its header (a forum's copy, a
    snapshot that dropped the header): model, size, params, backend, then `ngl` for a GPU backend or
    `threads` for the CPU (llama-bench's default field list), test, t/s; other settings stay unnamed."""
    cells = [cell.strip() for cell in text.strip().strip("|").split("|")]
    if len(cells) < 6 or _size(cells[1]) is None or _params(cells[2]) is None:
        return None
    middle = len(cells) - 6
    gpu = any(b in cells[3].lower() for b in ("cuda", "rocm", "hip", "vulkan", "metal", "sycl", "musa", "cann"))
    named = (["ngl"] if gpu else ["threads"]) if middle == 1 else [f"_{i}" for i in range(middle)]
    return ["model", "size", "params", "backend", *named, "test", "t/s"]


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def row_from_record(record: dict[str, Any], number: int, raw: str) -> BenchRow | None:
    """One result from llama-bench's CSV or JSONL fields (`avg_ts`, `n_prompt`, `n_gen`, ...)."""
    try:
        tok_s = float(record.get("avg_ts"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    n_prompt, n_gen = _as_int(record.get("n_prompt")), _as_int(record.get("n_gen"))
    depth = _as_int(record.get("n_depth"))
    if tok_s <= 0 or (n_prompt <= 0 and n_gen <= 0):
        return None
    test = "+".join(x for x in (f"pp{n_prompt}" if n_prompt else "", f"tg{n_gen}" if n_gen else "") if x)
    test += f" @ d{depth}" if depth else ""
    keys = ("n_gpu_layers", "n_threads", "n_batch", "n_ubatch", "type_k", "type_v", "flash_attn", "devices")
    settings: dict[str, str] = {key: str(record[key]) for key in keys if key in record}
    size, params = _as_int(record.get("model_size")), _as_int(record.get("model_n_params"))
    backend = record.get("backends") or ",".join(
        label for key, label in (("cuda", "CUDA"), ("vulkan", "Vulkan"), ("kompute", "Kompute"), ("metal", "Metal"),
                                 ("sycl", "SYCL")) if record.get(key) in (True, 1, "1", "true"))
    return BenchRow(number=number, raw=raw[:300], test=test, n_prompt=n_prompt, n_gen=n_gen, depth=depth, tok_s=tok_s,
                    model=str(record.get("model_type") or "") or None, size_bytes=size or None,
                    n_params=params or None, backend=str(backend) if backend else None, settings=settings,
                    cpu_info=str(record.get("cpu_info") or "") or None,
                    gpu_info=str(record.get("gpu_info") or "") or None)


def pick(rows: list[BenchRow]) -> tuple[BenchRow | None, BenchRow | None]:
    """The representative (prefill, decode) rows: the first model's fastest test of each kind at depth 0
    (any depth when none is at 0)."""
    if not rows:
        return None, None
    model = rows[0].model
    same = [r for r in rows if r.model == model]
    chosen: list[BenchRow | None] = []
    for phase in ("prefill", "decode"):
        candidates = [r for r in same if r.phase == phase]
        at_zero = [r for r in candidates if r.depth == 0] or candidates
        chosen.append(max(at_zero, key=lambda r: r.tok_s) if at_zero else None)
    return chosen[0], chosen[1]


def _csv_cells(text: str) -> list[str]:
    import csv

    return next(csv.reader([text]), [])


HEADER_KIND = LineKind("header", (HEADER,), (r"\| *model +\|",))
ROW_KIND = LineKind("row", (ROW,), (r"\| *(?:pp|tg) ?\d+(?:\+tg ?\d+)?(?: @ d\d+)? *\|",))
CSV_HEADER_KIND = LineKind("csv_header", (CSV_HEADER,), (r"build_commit,build_number,",))
CSV_ROW_KIND = LineKind("csv_row", (CSV_ROW,), (r'"[0-9a-f]+","\d+",',))
JSONL_KIND = LineKind("jsonl", (), (r'"avg_ts":',))
BUILD_KIND = LineKind("build", (BUILD,), (r"build: [0-9a-f]+ \(\d+\)",))
KINDS = LineKinds(HEADER_KIND, ROW_KIND, CSV_HEADER_KIND, CSV_ROW_KIND, JSONL_KIND, BUILD_KIND)


class LlamaBenchParser(LogParser):
    """Reads llama-bench results; votes llama.cpp on every table it reads."""

    name = "llama-bench"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.columns: list[str] | None = None
        self.csv_columns: list[str] | None = None
        self.rows: list[BenchRow] = []

    def feed(self, line: LogLine) -> None:
        if self.passes_gate(line.text):
            self.dispatch(line)

    def _add(self, row: BenchRow) -> None:
        if len(self.rows) < MAX_ROWS:
            self.rows.append(row)
            self.votes["llama.cpp"] += 1

    @reads(HEADER_KIND)
    def _header(self, line: LogLine) -> bool:
        columns = parse_header(line.text)
        if columns is None:
            return False
        self.columns = columns
        return True

    @reads(ROW_KIND)
    def _row(self, line: LogLine) -> bool:
        if not ROW.search(line.text):
            return False
        row = parse_row(line.text, self.columns, line.number) if self.columns is not None else None
        if row is None:  # a row without its header (or under another table's): the default columns
            columns = default_columns(line.text)
            row = parse_row(line.text, columns, line.number) if columns is not None else None
        if row is None:
            return False
        self._add(row)
        return True

    @reads(CSV_HEADER_KIND)
    def _csv_header(self, line: LogLine) -> bool:
        if not CSV_HEADER.search(line.text):
            return False
        self.csv_columns = _csv_cells(line.text)
        return True

    @reads(CSV_ROW_KIND)
    def _csv_row(self, line: LogLine) -> bool:
        if self.csv_columns is None or not CSV_ROW.search(line.text):
            return False
        cells = _csv_cells(line.text)
        if len(cells) != len(self.csv_columns):
            return False
        row = row_from_record(dict(zip(self.csv_columns, cells, strict=True)), line.number, line.raw)
        if row is None:
            return False
        self._add(row)
        return True

    @reads(JSONL_KIND)
    def _jsonl(self, line: LogLine) -> bool:
        record = line.fields
        if "avg_ts" not in record or "n_gen" not in record:
            return False
        row = row_from_record(record, line.number, line.raw)
        if row is None:
            return False
        self._add(row)
        return True

    @reads(BUILD_KIND)
    def _build(self, line: LogLine) -> bool:
        m = BUILD.search(line.text)
        if not m or not self.rows:
            return False
        if not self.facts.has("engine.build"):
            self.set("engine.build", int(m.group(2)), line)
        return True

    def summarize(self, facts: Facts) -> None:
        if not self.rows:
            return
        first = self.rows[0]
        table_src = Source("log", self.name, first.number, first.raw)
        facts.set("bench.rows", len(self.rows), table_src)
        facts.set("bench.tests", [f"line {r.number}: {r.describe()}" for r in self.rows], table_src)
        prefill, decode = pick(self.rows)
        for row, phase in ((prefill, "prefill"), (decode, "decode")):
            if row is None:
                continue
            src = Source("log", self.name, row.number, row.raw)
            facts.set(f"run.{phase}_tps", row.tok_s, src)
            facts.set(f"bench.{phase}_test", row.test, src)
        main = decode or prefill
        if main is not None:  # rows whose tests are neither prompt nor generation (a mangled table): no settings
            self._settings(facts, main)

    def _settings(self, facts: Facts, row: BenchRow) -> None:
        src = Source("log", self.name, row.number, row.raw)
        for key, name in _INT_FACTS.items():
            value = row.settings.get(key, "")
            if value.isdigit():
                facts.set(name, int(value), src)
        for key, name in _STR_FACTS.items():
            if row.settings.get(key):
                facts.set(name, row.settings[key], src)
        kqv = row.settings.get("no_kv_offload")
        if kqv in ("0", "1", "true", "false"):  # -nkvo 1: the KV cache (and attention) stay in host RAM
            facts.set("config.offload_kqv", kqv in ("0", "false"), src)
        flash = row.settings.get("flash_attn")
        if flash in ("0", "1", "true", "false"):
            facts.set("config.flash_attn", "enabled" if flash in ("1", "true") else "disabled", src)
        if row.size_bytes:
            facts.set("model.weights_bytes", row.size_bytes, src)
        if row.n_params:
            facts.set("model.n_params", row.n_params, src)
        if row.model and not facts.has("model.name"):
            facts.set("model.name", row.model, src)
        if row.backend:
            facts.set("bench.backend", row.backend, src)
        if row.cpu_info and not facts.has("host.cpu.model"):
            facts.set("host.cpu.model", row.cpu_info, src)
        if row.gpu_info and not facts.has("host.gpu[0].name"):
            for i, gpu in enumerate(x.strip() for x in row.gpu_info.split(",") if x.strip()):
                facts.set(f"host.gpu[{i}].name", gpu, src)
