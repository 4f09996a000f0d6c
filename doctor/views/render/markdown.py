"""The Markdown view: a report a user can paste into an issue. Log text goes into code spans
and fenced blocks after being made inert; backticks inside it cannot break out of the fence."""

from __future__ import annotations

from doctor import __version__
from doctor.core.report import Report
from doctor.core.sanitize import inert

MARK = {"ok": "✓", "unknown": "?"}
# a fired check is marked by its severity: only an error is a cross
SEVERITY_MARK = {"error": "✗", "warning": "!", "info": "•"}


EARLIER_SHOWN = 5  # as in the text view: the most recent earlier sessions in full


def _code(text: str) -> str:
    text = inert(text).replace("`", "ˋ")  # a command: never cut
    return f"`{text}`"


def verification_markdown(report: Report) -> list[str]:
    """--verify's time, runs and sweeps, as a section with one small table per sweep."""
    v = report.verification
    if v is None:
        return []
    out = ["## Verified fixes", "", f"{v.runs} re-runs in {v.seconds:.1f} s (budget {v.budget_s:.0f} s).", ""]
    for sweep in v.sweeps:
        head = sweep.lines()[0]
        out.append(f"**{inert(head, 200)}**")
        out.append("")
        if sweep.rows:
            out.append(f"| {sweep.setting} | {inert(sweep.measure, 40)} |")
            out.append("|---|---|")
            for value, figure, note in sweep.rows:
                shown = inert(sweep.cell(figure, note), 80)
                mark = " (best)" if value == sweep.best else ""
                out.append(f"| {value}{mark} | {shown} |")
            out.append("")
    for note in v.notes:
        out.append(f"- {_code(note) if note.startswith('llm-doctor ') else inert(note)}")  # a command to copy
    if v.notes:
        out.append("")
    return out


def render_markdown(report: Report) -> str:
    out: list[str] = []
    out.append(f"# llm-doctor {report.command} report")
    out.append("")
    meta = [f"llm-doctor {__version__}"]
    if report.engine:
        meta.append(f"engine: {inert(report.engine, 40)}")
    if report.facts.inputs:
        meta.append("input: " + ", ".join(inert(i) for i in report.facts.inputs))
    out.append(" · ".join(meta))
    out.append("")
    if report.mode == "scan":
        from doctor.views.render.text import scan_lines

        for line in scan_lines(report):
            label, _, rest = line.strip().partition(":")
            out.append(f"- **{label}:** {rest.strip().replace('(-v: why each)', '').strip()}")
    if report.sessions:
        total = report.sessions[-1].session.number
        out.append(f"{total} engine sessions in this input; this report is about the latest:")
        out.append("")
        for s in report.sessions[-(EARLIER_SHOWN + 1):]:
            mark = " (this report)" if s is report.sessions[-1] else f" — {len(s.findings)} finding(s), below"
            out.append(f"- {inert(s.session.describe(), 160)}{mark}")
        out.append("")
    if report.command == "scan":
        from doctor.views.render.text import memory_line

        memory = memory_line(report)
        if memory:
            out.append(f"**Memory:** {inert(memory)}")
            out.append("")
    if report.assessment:
        a = report.assessment
        out.append(f"**Likely root cause:** {inert(a.title)} (`{a.cls}`, {a.severity}, confidence {a.confidence})")
        out.append("")
        out.append(f"> {inert(a.message)}")
        out.append("")
    else:
        out.append(f"**{inert(report.verdict_text())}**")
        out.append("")
    note = report.input_note() if report.assessment else None
    if note:
        out.append(f"_{inert(note)}_")
        out.append("")
    groups = [("## Findings", report.findings)]
    groups += [(f"## Earlier {inert(s.session.describe(), 160)}", s.findings)
               for s in report.earlier[-EARLIER_SHOWN:] if s.findings]
    for heading, group in groups:
        if not group:
            continue
        out.append(heading)
        out.append("")
        for f in group:
            out.append(f"### {f.id} {f.slug} — {f.severity}, {f.confidence} confidence")
            out.append("")
            out.append(f"**{inert(f.title)}** (`{f.cls}`)")
            out.append("")
            out.append(inert(f.message))
            out.append("")
            if f.explain:
                out.append(inert(f.explain))
                out.append("")
            if f.evidence:
                out.append("Evidence:")
                out.append("")
                out.append("```text")
                for ev in f.evidence:
                    where = f"{ev.line:>6} | " if ev.line is not None and ev.kind == "log" else "       | "
                    out.append(where + inert(ev.text, 300).replace("```", "ˋˋˋ"))
                out.append("```")
                out.append("")
            out.append(f"**Fix:** {inert(f.fix.text)}")
            out.append("")
            if f.fix.note:  # the fix check found no safe setting change for this engine
                out.append(f"**Checked:** {inert(f.fix.note, 600)}")
                out.append("")
            elif f.fix.already:
                have = ", ".join(f"{k} {v}" for k, v in f.fix.already.items())
                out.append(f"**Already so in this run:** {inert(have)}")
                out.append("")
            if f.fix.by_engine:
                out.append("| engine | what to change |")
                out.append("|---|---|")
                for engine, command in f.fix.by_engine.items():
                    star = " (detected)" if engine == f.fix.engine else ""
                    out.append(f"| {engine}{star} | {_code(command)} |")
                out.append("")
            if f.fix.verified is not None:
                out.append(f"**Verified:** {f.fix.verified.outcome} — {inert(f.fix.verified.line)}")
                out.append("")
            if f.references:
                out.append("References: " + ", ".join(inert(r, 200) for r in f.references))
                out.append("")
    out.extend(verification_markdown(report))
    out.append("## Checks")
    out.append("")
    severity = {f.id: f.severity for f in report.findings}
    out.append("| | rule | area | outcome |")
    out.append("|---|---|---|---|")
    for c in report.checks:
        outcome = c.outcome if c.outcome != "fired" else f"fired ({severity.get(c.id, c.severity)})"
        if c.inhibited_by:
            outcome = f"explained by {c.inhibited_by}"
        elif c.outcome == "unknown":
            outcome = "unknown (needs " + ", ".join(c.missing) + ")"
        if c.outcome == "fired":
            mark = "–" if c.inhibited_by else SEVERITY_MARK.get(severity.get(c.id, c.severity), "")
        else:
            mark = MARK.get(c.outcome, "")
        out.append(f"| {mark} | {c.id} {c.slug} | {c.area} | {outcome} |")
    out.append("")
    if report.errors:
        out.append("## Errors")
        out.append("")
        for error in report.errors:
            out.append(f"- {inert(error)}")
        out.append("")
    return "\n".join(out)
