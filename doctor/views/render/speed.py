"""Each phase's speed against the ceiling, as rows the text view and the TUI show (issue 26).

Floor: views (pure: a Facts snapshot in, plain rows out; no derive). Strings are written here; the
figures are the speed.<phase>.* facts doctor/derive/speed.py set.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.facts import Facts

PHASES = ("prefill", "decode")


@dataclass(frozen=True, slots=True)
class PhaseRow:
    phase: str
    tok_s: float
    ceiling: float | None  # tok/s; None when the ceiling is unknown
    fraction: float | None
    bound: str
    source: str  # measured | spec | unknown
    expected: float | None
    settle: str | None
    misfit: str | None = None  # the term a measured speed ran past: the ceiling does not fit this machine

    def line(self) -> str:
        """"decode   11.6 tok/s = 29% of 40.6 (memory-bandwidth:cpu, measured; usually ~13.5)"."""
        head = f"{self.phase:<8} {self.tok_s:,.1f} tok/s"
        if self.ceiling is None or self.fraction is None:
            return f"{head}, ceiling unknown" + (f": needs {self.settle}" if self.settle else "")
        usual = f"; usually ~{self.expected:,.1f}" if self.expected else ""
        if self.misfit:
            return (f"{head}, above the {self.ceiling:,.1f} its {self.misfit} bound allows: that ceiling does not "
                    f"fit this machine, nothing is judged against it")
        return f"{head} = {self.fraction:.0%} of {self.ceiling:,.1f} ({self.bound}, {self.source}{usual})"


def _num(facts: Facts, name: str) -> float | None:
    value = facts.value(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def phase_rows(facts: Facts) -> list[PhaseRow]:
    rows = []
    for phase in PHASES:
        p = f"speed.{phase}"
        tok_s = _num(facts, f"{p}.tok_s")
        if tok_s is None:
            continue
        settle = facts.value(f"{p}.settle")
        bound, source = str(facts.value(f"{p}.bound", "unknown")), str(facts.value(f"{p}.ceiling_source", "unknown"))
        misfit = facts.value(f"{p}.misfit_term") if bound == "ceiling-misfit" else None
        rows.append(PhaseRow(phase, tok_s, _num(facts, f"{p}.ceiling_tok_s"), _num(facts, f"{p}.fraction"), bound,
                             source, _num(facts, f"{p}.expected_tok_s"), settle if isinstance(settle, str) else None,
                             str(misfit) if misfit else None))
    return rows


def shared_note(facts: Facts) -> str | None:
    """"cores shared: others used 85% of them" when contention bound a phase or the cores were shared."""
    if not any(facts.value(f"speed.{p}.bound") == "contention" for p in PHASES) \
            and facts.value("speed.cores_shared") is not True:
        return None
    other = _num(facts, "host.cpu.other_busy")
    return "cores shared with other processes" + (f" (they used {other:.0%} of them)" if other is not None else "")
