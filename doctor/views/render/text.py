"""The text view, in the doctor style: the assessment on top, then one line per area with
[✓] [!] [✗] [?], each finding with its evidence and the fix (→) for the user's engine.

Everything that came from outside (log lines, paths, model names) passes through `inert` first,
so a log cannot move the cursor, set the title or write the clipboard.
"""

from __future__ import annotations

from collections import defaultdict

from doctor import __version__
from doctor.core.format import format_value
from doctor.core.report import SEVERITY_RANK, Check, Finding, Report
from doctor.core.sanitize import inert
from doctor.views.render.speed import phase_rows, shared_note
from doctor.views.render.style import Style

EARLIER_SHOWN = 5  # earlier sessions shown in full (the most recent ones); the rest are counted
AREA_ORDER = ["Model file", "Storage and load", "GPU offload", "PCIe link", "GPU memory bandwidth",
              "CPU threads", "Memory", "Context", "KV cache", "Decode timing", "Sampling and output"]


def render_text(report: Report, style: Style, verbose: bool = False) -> str:
    out: list[str] = []
    out.append(_header(report, style))
    if report.mode == "scan":
        out.extend(style.paint("dim", line) for line in scan_lines(report, verbose))
    out.extend(_sessions_summary(report, style))
    out.extend(speed_lines(report, style))
    out.append("")
    if report.assessment is not None:
        a = report.assessment
        kind = "error" if a.severity == "error" else "warning"
        out.append(style.paint("bold", "Likely root cause: ") + style.paint(kind, inert(a.title))
                   + style.paint("dim", f"  ({a.cls}, confidence {a.confidence})"))
        out.append(f"  {inert(a.message)}")
        shown = report.findings if a.session is None else report.all_findings()
        top = next((f for f in shown if f.id == a.id and (a.session is None or f.session == a.session)), None)
        if top is not None:
            command = top.fix.command or top.fix.text
            out.append(f"  {style.mark('arrow')} {inert(command)}")
            if not top.fix.command and top.fix.note:  # the fix check found no safe setting change
                out.append(style.paint("warning", f"    {inert(top.fix.note, 600)}"))
        note = report.input_note()
        if note:
            out.append(style.paint("dim", f"  {inert(note)}"))
        out.append("")
    elif report.verdict() in ("nothing_recognised", "unexplained"):
        out.append(style.paint("warning", inert(report.verdict_text())))
        out.append("")
    elif report.verdict() == "no_problems":
        out.append(style.paint("warning" if report.cut_short() else "ok", report.verdict_text())
                   + ("" if report.checks else " (no rules ran)"))
        out.append("")

    by_area: dict[str, list[Check]] = defaultdict(list)
    for check in report.checks:
        by_area[check.area].append(check)
    findings = {f.id: f for f in report.findings}
    areas = sorted(by_area, key=lambda a: (AREA_ORDER.index(a) if a in AREA_ORDER else 99, a))
    not_checked: list[str] = []
    for area in areas:
        checks = by_area[area]
        area_findings = [findings[c.id] for c in checks if c.id in findings]
        mark_kind = _area_mark(checks, area_findings)
        if mark_kind == "unknown" and not verbose:
            not_checked.append(area)  # nothing in the input speaks to this area: one line at the end
            continue
        out.append(f"[{style.paint(mark_kind, style.mark(mark_kind))}] {style.paint('bold', area)}"
                   + style.paint("dim", _area_note(checks, area_findings)))
        for finding in sorted(area_findings, key=lambda f: -SEVERITY_RANK[f.severity]):
            out.extend(_finding_lines(finding, report, style, verbose))
        if verbose:
            for check in checks:
                if check.outcome == "ok":
                    out.append(f"    {style.paint('ok', style.mark('ok'))} {check.id} {check.slug}")
                elif check.outcome == "unknown":
                    out.append(f"    {style.paint('unknown', style.mark('unknown'))} {check.id} {check.slug}"
                               + style.paint("dim", f" — needs {', '.join(check.missing)}"))
                elif check.inhibited_by:
                    out.append(f"    {style.paint('dim', '-')} {check.id} {check.slug}"
                               + style.paint("dim", f" — explained by {check.inhibited_by}"))
    if not_checked:
        hint = " — `llm-doctor scan` reads the machine" if report.mode == "analyze" else ""
        out.append(f"[{style.paint('unknown', style.mark('unknown'))}] " + style.paint(
            "dim", f"Not checked, the input does not say: {', '.join(not_checked)}{hint} (-v for each check)"))
    out.append("")
    for earlier in report.earlier[-EARLIER_SHOWN:]:
        if earlier.findings:
            out.append(style.paint("bold", f"Earlier {inert(earlier.session.describe(), 120)}:"))
            for finding in sorted(earlier.findings, key=lambda f: -SEVERITY_RANK[f.severity]):
                out.extend(_finding_lines(finding, report, style, verbose))
            out.append("")
    out.extend(_footer(report, style))
    for error in report.errors:
        out.append(style.paint("error", f"error: {inert(error)}"))
    return "\n".join(out) + "\n"


def speed_lines(report: Report, style: Style) -> list[str]:
    """One line per phase: measured tok/s against this machine's ceiling and the bound (inert text)."""
    rows = phase_rows(report.facts)
    if not rows:
        return []
    out = [style.paint("bold", "Speed:") + style.paint("dim", " measured against what this machine allows")]
    out += [f"  {inert(row.line())}" for row in rows]
    note = shared_note(report.facts)
    if note:
        out.append(style.paint("warning", f"  {inert(note)}"))
    return out


def _sessions_summary(report: Report, style: Style) -> list[str]:
    """Several engine sessions in the input: which one the report is about, and the others."""
    if not report.sessions:
        return []
    latest = report.sessions[-1].session
    lines = [f"{latest.number} engine sessions in this input; this report is about the latest, "
             f"{inert(latest.describe(), 120)}."]
    hidden = latest.number - 1 - len(report.earlier[-EARLIER_SHOWN:])
    if hidden > 0:
        kept = report.earlier[:-EARLIER_SHOWN]
        with_findings = sum(1 for s in kept if s.findings)
        lines.append(f"  {hidden} earlier sessions not shown ({with_findings} of the {len(kept)} kept have findings; "
                     "--format json lists those)")
    for earlier in report.earlier[-EARLIER_SHOWN:]:
        counts = [f"{n} {sev}{'s' if n != 1 else ''}" for sev in ("error", "warning", "info")
                  if (n := sum(1 for f in earlier.findings if f.severity == sev))]
        found = ", ".join(counts) + " (below)" if counts else "no findings"
        lines.append(f"  earlier {inert(earlier.session.describe(), 120)}: {found}")
    return [style.paint("dim", line) for line in lines]


def _header(report: Report, style: Style) -> str:
    parts = [f"llm-doctor {__version__}", report.command]
    if report.engine:
        parts.append(inert(report.engine, 40))
    name = report.facts.value("model.name") or report.facts.value("model.path")
    if name:
        parts.append(inert(str(name)))  # a path: never cut (the user may copy it)
    inputs = [inert(i) for i in report.facts.inputs]
    lines = report.facts.value("run.log_lines")
    if inputs:
        parts.append(", ".join(inputs) + (f" ({lines} lines)" if isinstance(lines, int) else ""))
    return style.paint("bold", " · ".join(parts))


def _scan_summary(report: Report, verbose: bool) -> list[str]:
    """Scan only: the machine, the model and the planned settings, one line each. A value that was
    not read (a probe left out with --only / --skip) is left out, never shown as None or ?."""
    facts = report.facts

    def known(name: str) -> bool:
        return facts.has(name)

    v = facts.value
    machine = []
    if known("host.cpu.usable_cores"):
        machine.append(f"{format_value(v('host.cpu.usable_cores'), None)} usable cores")
    if known("host.ram.available"):
        machine.append(f"RAM {format_value(v('host.ram.available'), 'bytes')} available")
    if known("host.gpu.count"):
        if v("host.gpu.count") and known("host.gpu[0].name"):
            free = (f" ({format_value(v('host.gpu[0].vram_free'), 'bytes')} free)"
                    if known("host.gpu[0].vram_free") else "")
            machine.append(f"{v('host.gpu[0].name')}{free}")
        elif v("host.gpu.count") == 0:
            machine.append("no GPU")
    if known("model.storage.kind"):
        machine.append(f"model on {v('model.storage.kind')} storage")
    model = [str(v(name)) for name in ("model.arch",) if known(name)]
    if known("model.n_layer"):
        model.append(f"{v('model.n_layer')} layers")
    if known("model.file_type"):
        model.append(str(v("model.file_type")))
    if known("model.file_bytes"):
        model.append(format_value(v("model.file_bytes"), "bytes"))
    if known("derived.mmproj_weights_bytes"):  # --mmproj: the vision projector charged beside the model
        proj = f"vision projector {format_value(v('derived.mmproj_weights_bytes'), 'bytes')}"
        if known("derived.mmproj_compute_bytes"):
            proj += f" + {format_value(v('derived.mmproj_compute_bytes'), 'bytes')} compute"
        if known("derived.image_tokens"):
            proj += f" ({v('derived.image_tokens')} tokens per image)"
        model.append(proj)
    plan = []
    for name, label in (("config.n_ctx", "n_ctx"), ("config.n_parallel", "slots"),
                        ("config.n_gpu_layers", "n_gpu_layers"), ("config.n_threads", "threads")):
        if known(name) and not (name == "config.n_parallel" and v(name) == 1):
            plan.append(f"{label} {v(name)}")
    if known("config.type_k") and known("config.type_v"):
        plan.append(f"KV {v('config.type_k')}/{v('config.type_v')}")
    if known("config.flash_attn"):
        plan.append(f"flash attention {v('config.flash_attn')}")
    if known("config.prompt_tokens") and known("config.max_new_tokens"):
        planned = f"prompt {v('config.prompt_tokens')} + {v('config.max_new_tokens')} new tokens"
        if known("run.prompt_tokens"):  # the short trace runs a prompt of its own: say its real size
            ran = f"a {v('run.prompt_tokens')}-token prompt" + (
                f" + {v('run.generated_tokens')} new" if known("run.generated_tokens") else "")
            planned += f" planned (the trace ran {ran})"
        plan.append(planned)
    lines = [inert(f"  machine: {', '.join(machine) or 'not probed'}"),
             inert(f"  model:   {', '.join(model) or 'not read'}"),
             inert(f"  plan:    {', '.join(plan)}" + ("" if verbose else "  (-v: why each)"))]
    memory = memory_line(report)
    if memory:
        lines.append(inert(f"  memory:  {memory}"))
    if verbose:
        lines += [inert(f"           {f.name.removeprefix('config.')} = {f.value}: {f.source.text}")
                  for f in facts.with_prefix("config.") if f.source.name == "scan plan" and f.source.text]
    return lines


def scan_lines(report: Report, verbose: bool = False) -> list[str]:
    """The scan header: machine, model, plan, and what `--bench` measured (inert text)."""
    lines = _scan_summary(report, verbose)
    bench = bench_figures(report)
    if bench:
        lines.insert(2, inert(f"  bench:   {', '.join(bench)}"))
    trace = trace_figures(report)
    if trace:
        at = next((i + 1 for i, line in enumerate(lines) if line.startswith("  plan:")), len(lines))
        lines.insert(at, inert(f"  trace:   {', '.join(trace)}"))
    return lines


def trace_figures(report: Report) -> list[str]:
    """What scan's short real run measured: load, prefill and decode (and a setting triage changed)."""
    v = report.facts.value
    out = []
    for name, label, unit in (("run.load_ms", "load", "ms"), ("run.prefill_ms", "prefill", "ms"),
                              ("run.decode_tps", "decode", "tokens/s")):
        value = v(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(f"{label} {format_value(value, unit)}")
    setting = v("run.triage_setting")
    if out and isinstance(setting, str) and setting:
        out.append(f"after triage changed {setting}")
    return out


def bench_figures(report: Report) -> list[str]:
    """What `scan --bench` measured (and scan's own RAM read bandwidth, with the decode floor it sets): model-file
    read speed, RAM read and copy bandwidth, GPU copy bandwidth, PCIe transfers."""
    v = report.facts.value
    out = []
    read = v("model.storage.read_mb_s")
    if isinstance(read, int | float) and not isinstance(read, bool):
        bound = " (at least: served from the page cache)" if v("model.storage.read_upper_bound") is True else ""
        out.append(f"model file read {format_value(read, 'MB/s')}{bound}")
    read, read_all = v("host.ram.read_bw_gbs"), v("host.ram.read_bw_all_gbs")
    if isinstance(read_all, int | float) and not isinstance(read_all, bool):
        at = f" ({format_value(read, 'GB/s')} at the engine's threads)" \
            if isinstance(read, int | float) and not isinstance(read, bool) and read != read_all else ""
        out.append(f"RAM read {format_value(read_all, 'GB/s')} on all cores{at}")
    ram = v("host.ram.bandwidth_measured_gbs")
    if isinstance(ram, int | float) and not isinstance(ram, bool):
        out.append(f"RAM copy {format_value(ram, 'GB/s')}")
    floor = v("derived.decode_floor_ms")
    if out and isinstance(floor, int | float) and not isinstance(floor, bool):
        out.append(f"decode floor {format_value(floor, 'ms')} a token")
    count = v("host.gpu.count")
    for i in range(count if isinstance(count, int) and not isinstance(count, bool) and 0 < count <= 16 else 0):
        for name, what in (("bandwidth_measured_gbs", "memory copy"), ("pcie.h2d_measured_gbs", "PCIe host-to-GPU")):
            value = v(f"host.gpu[{i}].{name}")
            if isinstance(value, int | float) and not isinstance(value, bool):
                out.append(f"GPU{i} {what} {format_value(value, 'GB/s')}")
    return out


def memory_line(report: Report) -> str:
    """The fit verdict in one line: what the plan needs against each budget, and the room left."""
    v = report.facts.value
    parts = []
    for device, need, budget, room, short in (
            ("RAM", "derived.host_need_bytes", "derived.ram_budget", "derived.host_room_bytes",
             "derived.host_short_bytes"),
            ("VRAM", "derived.gpu_need_bytes", "derived.vram_budget", "derived.gpu_room_bytes",
             "derived.gpu_short_bytes")):
        if not isinstance(v(budget), int) or not isinstance(v(short), int) or (device == "VRAM" and not v(need)):
            continue
        paged = v("derived.weights_paged_bytes") if device == "RAM" and v("derived.ram_runs") is True else None
        if v(short) > 0 and isinstance(paged, int) and paged > 0:
            parts.append(f"{device} runs but pages: {format_value(paged, 'bytes')} of the mapped weights re-read "
                         f"from disk per token (needs {format_value(v(need), 'bytes')} of "
                         f"{format_value(v(budget), 'bytes')} to keep them resident)")
        elif v(short) > 0:
            parts.append(f"{device} does not fit: needs {format_value(v(need), 'bytes')} of "
                         f"{format_value(v(budget), 'bytes')}, short by {format_value(v(short), 'bytes')}")
        else:
            parts.append(f"{device} fits: {format_value(v(need), 'bytes')} of {format_value(v(budget), 'bytes')}, "
                         f"{format_value(v(room), 'bytes')} left")
    if not parts:
        return ""
    extra = []
    if isinstance(v("derived.max_ctx_fit"), int):  # 0: not even 256 tokens beside the weights (LD319)
        fit = v("derived.max_ctx_fit")
        extra.append(f"largest context {fit}" if fit > 0 else "no context fits beside the weights")
    if isinstance(v("derived.max_gpu_layers"), int) and v("derived.total_layers"):
        extra.append(f"{v('derived.max_gpu_layers')} of {v('derived.total_layers')} layers fit on the GPU")
    return "; ".join(parts) + (f" ({', '.join(extra)})" if extra else "")


def _area_mark(checks: list[Check], findings: list[Finding]) -> str:
    if any(f.severity == "error" for f in findings):
        return "error"
    if any(f.severity == "warning" for f in findings):
        return "warning"
    if any(c.outcome in ("ok", "fired") for c in checks):
        return "ok"
    return "unknown"


def _area_note(checks: list[Check], findings: list[Finding]) -> str:
    ok = sum(1 for c in checks if c.outcome == "ok")
    unknown = [c for c in checks if c.outcome == "unknown"]
    need_run = [c for c in unknown if c.missing == ["events"]]
    unknown = [c for c in unknown if c not in need_run]
    bits = []
    if findings:
        bits.append(f"{len(findings)} finding{'s' if len(findings) != 1 else ''}")
    if ok:
        bits.append(f"{ok} ok")
    if unknown:
        missing = sorted({m for c in unknown for m in c.missing})
        shown = ", ".join(missing[:3]) + (", …" if len(missing) > 3 else "")
        bits.append(f"{len(unknown)} unknown: needs {shown}")
    if need_run:
        bits.append(f"{len(need_run)} need a log or a run")
    return f"  ({'; '.join(bits)})" if bits else ""


def _finding_lines(f: Finding, report: Report, style: Style, verbose: bool) -> list[str]:
    kind = {"error": "error", "warning": "warning", "info": "info"}[f.severity]
    lines = [f"    {style.paint(kind, style.mark(kind))} {style.paint('bold', f.id)} {f.slug}"
             + style.paint("dim", f" · {f.severity} · {f.confidence} confidence")]
    lines.append(f"      {inert(f.message)}")
    if verbose and f.explain:
        for chunk in _wrap(inert(f.explain), 92):
            lines.append(style.paint("dim", f"      {chunk}"))
    shown = f.evidence if verbose else f.evidence[:4]
    for ev in shown:
        where = f"line {ev.line}: " if ev.line is not None and ev.kind == "log" else ""
        lines.append(style.paint("dim", f"      · {where}{inert(ev.text, 200)}"))
    if len(f.evidence) > len(shown):
        lines.append(style.paint("dim", f"      · … {len(f.evidence) - len(shown)} more (-v)"))
    arrow = style.mark("arrow")
    lines.append(f"      {style.paint('ok', arrow)} {inert(f.fix.text)}")
    if f.fix.command:
        lines.append(f"        {f.fix.engine}: {style.paint('bold', inert(f.fix.command))}")
    # the fix check (doctor/judge/recheck.py): no safe setting change for this engine, what the run already
    # has, and (-v) the changes set aside and why
    if f.fix.note:
        lines.append(style.paint("warning", f"        {inert(f.fix.note, 600)}"))
    elif f.fix.already:
        have = ", ".join(f"{k} {v}" for k, v in f.fix.already.items())
        lines.append(style.paint("dim", f"        (already so in this run: {inert(have)})"))
    if verbose and f.fix.command:
        for check in f.fix.checks:
            lines.append(style.paint("dim", f"        checked, {inert(check, 300)}"))
    if verbose or (not f.fix.command and not f.fix.note):
        for engine, command in f.fix.by_engine.items():
            if engine != f.fix.engine:
                lines.append(style.paint("dim", f"        {engine}: {inert(command)}"))
    verified = f.fix.verified
    if verified is not None:
        kind = {"resolved": "ok", "made worse": "error", "not resolved": "warning"}.get(verified.outcome, "dim")
        lines.append(f"      {style.paint(kind, 'verified: ' + verified.outcome)} · {inert(verified.line)}")
    if f.inhibits:
        lines.append(style.paint("dim", f"      (explains {', '.join(f.inhibits)})"))
    return lines


def verification_lines(report: Report) -> list[str]:
    """--verify's summary: its time and runs, and each sweep as a compact table."""
    v = report.verification
    if v is None:
        return []
    out = [f"Verified fixes (--verify): {v.runs} re-runs in {v.seconds:.1f} s (budget {v.budget_s:.0f} s)"]
    # never cut: a note may hold the command to run (the user copies it)
    for sweep in v.sweeps:
        out.extend("  " + inert(line) for line in sweep.lines())
    out.extend("  " + inert(note) for note in v.notes)
    return out


def _footer(report: Report, style: Style) -> list[str]:
    c = report.counts()
    verified = verification_lines(report)
    parts = []
    if c["error"]:
        parts.append(style.paint("error", f"{c['error']} error{'s' if c['error'] != 1 else ''}"))
    if c["warning"]:
        parts.append(style.paint("warning", f"{c['warning']} warning{'s' if c['warning'] != 1 else ''}"))
    if c["info"]:
        parts.append(f"{c['info']} note{'s' if c['info'] != 1 else ''}")
    head = ("Found " + ", ".join(parts) + ".") if parts else "No findings."
    tail = f" {c['ok']} checks ok, {c['unknown']} unknown"
    if c["inhibited"]:
        tail += f", {c['inhibited']} explained by a root cause"
    lines = [*verified, *([""] if verified else []), head + style.paint("dim", tail + ".")]
    if report.findings:
        lines.append(style.paint("dim", f"Details: -v · Explain a rule: llm-doctor explain {report.findings[0].id}"))
    return lines


def _wrap(text: str, width: int) -> list[str]:
    words, lines, cur = text.split(), [], ""
    for word in words:
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        lines.append(cur)
    return lines


def render_value(value: object, unit: str | None) -> str:
    return format_value(value, unit)
