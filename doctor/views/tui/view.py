"""What the report screen shows, decided without Textual: the header, the assessment banner, the
checks grouped by area (worst first) and the detail of one check or finding.

Every string that came from outside (log lines, paths, model names, rendered templates) passes
through `inert` here, so widgets only ever receive display-safe text.

Pure: a Report in, small frozen dataclasses out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePath

from doctor import __version__
from doctor.core import engines
from doctor.core.facts import Facts
from doctor.core.format import format_value, human_bytes
from doctor.core.report import CONFIDENCE_RANK, Check, Finding, Report
from doctor.core.sanitize import inert
from doctor.views.render.speed import phase_rows

MARKS = {"error": "✗", "warning": "!", "info": "•", "unknown": "?", "inhibited": "−", "ok": "✓"}
# worst first: the order of areas and of rows inside an area
MARK_RANK = {"error": 0, "warning": 1, "info": 2, "unknown": 3, "inhibited": 4, "ok": 5}
AREA_ORDER = ["Model file", "Storage and load", "GPU offload", "PCIe link", "GPU memory bandwidth",
              "CPU threads", "Memory", "Context", "KV cache", "Decode timing", "Sampling and output"]


@dataclass(frozen=True, slots=True)
class CheckRow:
    """One rule's outcome as a row of the checks list."""

    id: str
    slug: str
    title: str
    area: str
    mark: str  # a key of MARKS
    outcome: str  # fired | ok | unknown
    missing: tuple[str, ...] = ()
    inhibited_by: str | None = None
    finding: Finding | None = None

    @property
    def label(self) -> str:
        return f"{MARKS[self.mark]} {self.id} {self.slug}"


@dataclass(frozen=True, slots=True)
class AreaGroup:
    area: str
    mark: str
    note: str
    rows: tuple[CheckRow, ...]


@dataclass(frozen=True, slots=True)
class HeaderInfo:
    title: str  # llm-doctor 0.1.0 · analyze
    engine: str
    model: str
    machine: str
    source: str


@dataclass(frozen=True, slots=True)
class BannerInfo:
    kind: str  # error | warning | info | ok | unknown
    headline: str
    detail: str


@dataclass(frozen=True, slots=True)
class EvidenceRow:
    kind: str  # log | fact
    where: str  # "line 1169" or the fact's source
    text: str
    line: int | None


@dataclass(frozen=True, slots=True)
class FixView:
    text: str
    engine: str | None
    command: str | None
    copy_text: str  # what the copy key puts on the clipboard
    others: tuple[tuple[str, str], ...]  # (engine, command) for the other engines
    verified: tuple[str, str] | None = None  # (outcome, before -> after line) under --verify


@dataclass(frozen=True, slots=True)
class DetailView:
    id: str
    mark: str
    heading: str  # the rule's id and slug
    status: str  # error · high confidence · oom.kv_cache
    title: str
    message: str
    explain: str
    evidence: tuple[EvidenceRow, ...]
    fix: FixView | None
    references: tuple[str, ...]
    notes: tuple[str, ...]  # inhibits, missing facts, inhibited by
    lines: tuple[int, ...]  # log lines to highlight


# -- the checks list -------------------------------------------------------------------------

def row_mark(check: Check, finding: Finding | None) -> str:
    if finding is not None:
        return finding.severity if finding.severity in MARKS else "info"
    if check.inhibited_by:
        return "inhibited"
    if check.outcome == "unknown":
        return "unknown"
    return "ok"


def group_checks(report: Report) -> list[AreaGroup]:
    """Checks grouped by area; areas and rows worst first, then in the usual area order."""
    findings = {f.id: f for f in report.findings}
    by_area: dict[str, list[CheckRow]] = defaultdict(list)
    seen: set[str] = set()
    for check in report.checks:
        finding = findings.get(check.id) if check.outcome == "fired" and not check.inhibited_by else None
        by_area[check.area].append(CheckRow(
            check.id, check.slug, inert(check.title), check.area, row_mark(check, finding), check.outcome,
            tuple(check.missing), check.inhibited_by, finding))
        seen.add(check.id)
    for finding in report.findings:  # a report without checks (a watch finding feed) still lists findings
        if finding.id not in seen:
            by_area[finding.area].append(CheckRow(
                finding.id, finding.slug, inert(finding.title), finding.area, row_mark_for(finding), "fired",
                finding=finding))
    groups: list[AreaGroup] = []
    for area, rows in by_area.items():
        rows.sort(key=_row_key)
        mark = min((r.mark for r in rows), key=lambda m: MARK_RANK[m])
        if mark == "inhibited":
            mark = "ok"
        groups.append(AreaGroup(area, mark, _area_note(rows), tuple(rows)))
    groups.sort(key=lambda g: (MARK_RANK[g.mark], _area_index(g.area), g.area))
    # earlier engine sessions of the input keep their findings, after the latest's (row ids carry the
    # session, so the same rule in two sessions gives two rows)
    for earlier in report.earlier:
        if not earlier.findings:
            continue
        rows = sorted((CheckRow(f"s{earlier.session.number}:{f.id}", f.slug, inert(f.title), f.area, row_mark_for(f),
                                "fired", finding=f) for f in earlier.findings), key=_row_key)
        mark = min((r.mark for r in rows), key=lambda m: MARK_RANK[m])
        groups.append(AreaGroup(f"Earlier {inert(earlier.session.describe(), 80)}", mark, _area_note(rows),
                                tuple(rows)))
    return groups


def row_mark_for(finding: Finding) -> str:
    return finding.severity if finding.severity in MARKS else "info"


def _row_key(row: CheckRow) -> tuple[int, int, str]:
    confidence = CONFIDENCE_RANK.get(row.finding.confidence, 0) if row.finding else 0
    return (MARK_RANK[row.mark], -confidence, row.id)


def _area_index(area: str) -> int:
    return AREA_ORDER.index(area) if area in AREA_ORDER else len(AREA_ORDER)


def _area_note(rows: list[CheckRow]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row.mark] += 1
    found = counts["error"] + counts["warning"] + counts["info"]
    bits = []
    if found:
        bits.append(f"{found} finding{'s' if found != 1 else ''}")
    if counts["ok"]:
        bits.append(f"{counts['ok']} ok")
    if counts["unknown"]:
        bits.append(f"{counts['unknown']} unknown")
    if counts["inhibited"]:
        bits.append(f"{counts['inhibited']} explained")
    return ", ".join(bits)


def first_row(groups: list[AreaGroup], report: Report) -> CheckRow | None:
    """The row to select first: the likely root cause, else the worst finding, else the first row."""
    rows = [r for g in groups for r in g.rows]
    if report.assessment is not None:
        for row in rows:
            if row.id == report.assessment.id:
                return row
    return rows[0] if rows else None


# -- header and banner -----------------------------------------------------------------------

def header_info(report: Report) -> HeaderInfo:
    facts = report.facts
    return HeaderInfo(
        title=f"llm-doctor {__version__} · {report.command}",
        engine=_engine_text(report),
        model=_model_text(facts),
        machine=machine_text(facts, report.command),
        source=_source_text(facts),
    )


def _engine_text(report: Report) -> str:
    if not report.engine:
        return "engine ?"
    version = report.facts.value("engine.version")
    if not version:
        return inert(report.engine, 60)
    if str(version).startswith(report.engine):  # some sources give "llama-cpp-python 0.3.36"
        return inert(str(version), 60)
    return inert(f"{report.engine} {version}", 60)


def _model_text(facts: Facts) -> str:
    name = facts.value("model.name")
    path = facts.value("model.path")
    if not name and not path:
        return "model ?"
    label = str(name) if name else PurePath(str(path)).name
    bits = []
    file_type = facts.value("model.file_type")
    if file_type:
        bits.append(str(file_type))
    size = facts.value("model.file_bytes")
    if isinstance(size, int | float) and not isinstance(size, bool):
        bits.append(human_bytes(size))
    text = label + (f" ({', '.join(bits)})" if bits else "")
    return inert(text, 70)


def machine_text(facts: Facts, command: str = "") -> str:
    """GPU, VRAM, PCIe link, storage under the model, RAM; `?` where a probe could not say."""
    probed = any(facts.has(n) for n in facts.names() if n.startswith(("host.", "model.storage.")))
    if not probed:
        return "not probed (this report is from a log)" if command == "analyze" else "?"
    parts = [_gpu_text(facts)]
    pcie = _pcie_text(facts)
    if pcie:
        parts.append(pcie)
    parts.append(_storage_text(facts))
    ram = facts.value("host.ram.total")
    if isinstance(ram, int | float) and not isinstance(ram, bool):
        parts.append(f"RAM {human_bytes(ram)}")
    cores = facts.value("host.cpu.physical_cores")
    if isinstance(cores, int) and not isinstance(cores, bool):
        parts.append(f"{cores} cores")
    return inert(" · ".join(parts), 200)


def _gpu_text(facts: Facts) -> str:
    count = facts.value("host.gpu.count")
    if count == 0:
        return "no GPU"
    name = facts.value("host.gpu[0].name")
    if name is None and count is None:
        return "GPU ?"
    text = str(name or "GPU")
    vram = facts.value("host.gpu[0].vram_total")
    if isinstance(vram, int | float) and not isinstance(vram, bool):
        text += f" {human_bytes(vram)}"
    if isinstance(count, int) and count > 1:
        text += f" (+{count - 1} more)"
    return text


def _pcie_text(facts: Facts) -> str | None:
    if facts.value("host.gpu.count") == 0:
        return None
    gen, width = facts.value("host.gpu[0].pcie.gen_current"), facts.value("host.gpu[0].pcie.width_current")
    if gen is None and width is None:
        return "PCIe ?" if facts.value("host.gpu.count") else None
    text = f"PCIe gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"
    gen_max, width_max = facts.value("host.gpu[0].pcie.gen_max"), facts.value("host.gpu[0].pcie.width_max")
    if (gen_max, width_max) != (None, None) and (gen_max, width_max) != (gen, width):
        text += f" (max gen{gen_max if gen_max is not None else '?'} x{width_max if width_max is not None else '?'})"
    return text


def _storage_text(facts: Facts) -> str:
    kind = facts.value("model.storage.kind")
    if kind is None:
        return "storage ?"
    bits = []
    fs_type = facts.value("model.storage.fs_type")
    if fs_type:
        bits.append(str(fs_type))
    speed = facts.value("model.storage.read_mb_s")
    if isinstance(speed, int | float) and not isinstance(speed, bool):
        bits.append(f"{speed:.0f} MB/s")
    return f"model on {kind}" + (f" ({', '.join(bits)})" if bits else "")


def _source_text(facts: Facts) -> str:
    inputs = [inert(i, 60) for i in facts.inputs]
    if not inputs:
        return ""
    lines = facts.value("run.log_lines")
    text = ", ".join(inputs) + (f" ({lines} lines)" if isinstance(lines, int) and not isinstance(lines, bool) else "")
    if facts.sessions:  # several engine runs: the report is about the latest
        latest = facts.sessions[-1]
        text += f" · session {latest.number} of {len(facts.sessions)} (lines {latest.first_line}-{latest.last_line})"
    return text


def banner_info(report: Report) -> BannerInfo:
    info = _banner_info(report)
    v = report.verification
    if v is None:
        return info
    sweeps = "; ".join(inert(s.lines()[0], 160) for s in v.sweeps if s.rows)
    extra = f" · --verify: {v.runs} re-runs in {v.seconds:.1f} s" + (f" · {sweeps}" if sweeps else "")
    return BannerInfo(info.kind, info.headline, info.detail + extra)


def _banner_info(report: Report) -> BannerInfo:
    a = report.assessment
    if a is not None:
        kind = a.severity if a.severity in ("error", "warning") else "warning"
        note = report.input_note()
        return BannerInfo(kind, f"Likely root cause: {inert(a.title)}",
                          f"{a.id} · {a.cls} · confidence {a.confidence} — {inert(a.message)}"
                          + (f" {inert(note)}" if note else ""))
    counts = report.counts()
    if report.verdict() == "nothing_recognised":
        seen = report.verdict_text().removeprefix("Nothing to judge: ")
        return BannerInfo("unknown", "Nothing to judge", inert(seen))
    if report.verdict() == "unexplained":
        return BannerInfo("warning", "Error lines llm-doctor does not know", inert(report.verdict_text()))
    if report.checks and counts["ok"] == 0 and counts["unknown"] == len(report.checks):
        return BannerInfo("unknown", "Nothing could be judged",
                          f"all {len(report.checks)} checks need facts this input does not have")
    if not report.checks and not report.findings:
        return BannerInfo("unknown", "No rules ran", "check --rules and the rule files")
    notes = counts["info"]
    detail = f"{counts['ok']} checks ok, {counts['unknown']} unknown"
    if notes:
        detail = f"{notes} note{'s' if notes != 1 else ''} · " + detail
    cut = report.cut_short()
    if cut:
        return BannerInfo("warning", "No problems found in the part recorded", f"{cut} {detail}")
    return BannerInfo("ok", "No problems found", detail)


# -- detail of one row -----------------------------------------------------------------------

def detail_view(row: CheckRow) -> DetailView:
    finding = row.finding
    if finding is not None:
        return finding_view(finding)
    notes: list[str] = []
    if row.outcome == "unknown":
        message = "Could not be judged: the input does not have the facts this check reads."
        notes.append("needs: " + ", ".join(row.missing) if row.missing else "needs facts this input lacks")
    elif row.inhibited_by:
        message = f"Fired, but explained by {row.inhibited_by}, the root cause shown for it."
    else:
        message = "OK: the facts this check reads were there, and the problem was not found."
    return DetailView(row.id, row.mark, f"{row.id} {row.slug}", _outcome_word(row), f"Looks for: {row.title}",
                      message, "", (), None, (), tuple(notes), ())


def _outcome_word(row: CheckRow) -> str:
    if row.inhibited_by:
        return f"explained by {row.inhibited_by}"
    return {"ok": "ok", "unknown": "unknown", "fired": "fired"}.get(row.outcome, row.outcome)


def finding_view(finding: Finding) -> DetailView:
    evidence = tuple(_evidence_row(e.kind, e.text, e.line, e.fact, e.value, e.unit, e.source)
                     for e in finding.evidence)
    notes = [f"class {finding.cls}"] if finding.cls else []
    if finding.inhibits:
        notes.append("explains " + ", ".join(finding.inhibits))
    return DetailView(
        id=finding.id,
        mark=row_mark_for(finding),
        heading=f"{finding.id} {finding.slug}",
        status=f"{finding.severity} · {finding.confidence} confidence",
        title=inert(finding.title),
        message=inert(finding.message),
        explain=inert(finding.explain),
        evidence=evidence,
        fix=fix_view(finding),
        references=tuple(inert(r, 300) for r in finding.references),
        notes=tuple(notes),
        lines=tuple(finding.lines),
    )


def _evidence_row(kind: str, text: str, line: int | None, fact: str | None, value: object,
                  unit: str | None, source: str | None) -> EvidenceRow:
    if kind == "log":
        where = f"line {line}" if line is not None else "log"
        return EvidenceRow("log", where, inert(text, 500), line)
    if fact is not None:
        shown = f"{fact} = {format_value(value, unit)}"
        return EvidenceRow("fact", inert(source or "", 80), inert(shown, 500), line)
    return EvidenceRow(kind, inert(source or "", 80), inert(text, 500), line)


def fix_view(finding: Finding) -> FixView:
    fix = finding.fix
    command = inert(fix.command) if fix.command else None
    others = tuple((engine, inert(cmd)) for engine, cmd in _ordered(fix.by_engine) if engine != fix.engine)
    verified = (fix.verified.outcome, inert(fix.verified.line, 300)) if fix.verified is not None else None
    # the fix check's word (doctor/judge/recheck.py): no safe setting change, or what the run already has
    text = " ".join(t for t in (fix.text, fix.note or _already(fix.already) if command else fix.note) if t)
    return FixView(inert(text), fix.engine, command, command or inert(text), others, verified)


def _already(already: dict[str, str]) -> str:
    return f"(already so in this run: {', '.join(f'{k} {v}' for k, v in already.items())})" if already else ""


def _ordered(by_engine: dict[str, str]) -> list[tuple[str, str]]:
    """Fix commands in engine-table order (doctor/core/engines.py); names not in the table last, by name."""
    order = engines.names()
    return sorted(by_engine.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]))


# -- speed: a bar per phase of measured tok/s against this machine's ceiling (issue 26) ----------

BAR_WIDTH = 20


@dataclass(frozen=True, slots=True)
class SpeedBar:
    phase: str
    filled: int  # cells of BAR_WIDTH (the fraction, capped at 1)
    percent: str  # "29%" or "?" without a ceiling
    text: str  # "11.6/40.6 tok/s, memory-bandwidth:cpu (measured)"
    kind: str  # ok | warning | unknown: how the bar is coloured


def speed_bars(report: Report) -> list[SpeedBar]:
    """One bar per phase the report measured (empty when it judged no speed)."""
    bars = []
    for row in phase_rows(report.facts):
        if row.fraction is None or row.ceiling is None:
            bars.append(SpeedBar(row.phase, 0, "?", f"{row.tok_s:,.1f} tok/s, ceiling unknown"
                                 + (f": needs {row.settle}" if row.settle else ""), "unknown"))
            continue
        if row.misfit:  # above its ceiling: the ceiling is wrong, no share to draw
            bars.append(SpeedBar(row.phase, 0, "?", f"{row.tok_s:,.1f} tok/s, above the {row.ceiling:,.1f} its "
                                 f"{row.misfit} bound allows: that ceiling does not fit", "unknown"))
            continue
        filled = round(min(1.0, max(0.0, row.fraction)) * BAR_WIDTH)
        kind = "warning" if row.bound in ("contention", "threads") else "ok"
        bars.append(SpeedBar(row.phase, filled, f"{row.fraction:.0%}",
                             f"{row.tok_s:,.1f}/{row.ceiling:,.1f} tok/s, {row.bound} ({row.source})", kind))
    return bars
