"""Fix commands said in the spelling of the user's own llama.cpp build (commands floor).

Where a llama.cpp binary is on this machine - the path the log started (`engine.binary`), one named
by `--engine-binary` or $LLM_DOCTOR_LLAMA_SERVER, `llama-server` on PATH - its `--help` is read
(doctor/sources/probes/engine_flags.py) and each llama.cpp fix command is respelled in the flags it
knows; a flag it has no spelling for is named in the fix text as needing a newer build. Nothing
changes where no binary is found.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from doctor.core.report import Report
from doctor.sources.engines.llamacpp.engine import ENGINE as LLAMACPP

if TYPE_CHECKING:
    from doctor.sources.probes.engine_flags import FlagSet

ENGINES = (LLAMACPP.name,)  # engines whose fixes are llama.cpp command-line flags


def check_report_flags(report: Report, binary: str | None = None, log_binary: str | None = None,
                       flags: FlagSet | None = None) -> FlagSet | None:
    """Respell `report`'s llama.cpp fix commands for the build found; the FlagSet used (None: none).
    The probe is imported here: a report of another engine never needs it."""
    from doctor.sources.probes.engine_flags import check_command, find_flags, read_flags

    if flags is None and binary:
        flags = read_flags(Path(binary))  # the user named it: whatever its name
    if flags is None:
        flags = find_flags([log_binary] if log_binary else [])
    if flags is None:
        return None
    for finding in report.findings:
        fix = finding.fix
        for engine in ENGINES:
            command = fix.by_engine.get(engine)
            if not command:
                continue
            checked = check_command(command, flags)
            if not checked.changed:
                continue
            fix.by_engine[engine] = checked.command
            if fix.engine == engine:
                fix.command = checked.command
            note = checked.note(flags)
            if note and note not in fix.text:
                fix.text = f"{fix.text.rstrip()} ({note}.)"
    return flags
