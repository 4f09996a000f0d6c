"""Every fix checked before it is shown (issue 37, items 1 and 5).

A finding's fix is a settings change (its rule's `fix.change`: one change, or several in the order to
offer them). Before the report shows it for the run's engine, each change is read in (its "{fact}"
values), stripped of what the run already has (a setting equal to the run's own, or past a floor or a
ceiling written `{at_least: V}` / `{at_most: V}`: nothing is asked for that is already so), applied to
the run's plan in the engine's own terms (doctor/derive/change.py: Ollama's num_ctx per request times
its slots, llama.cpp's --ctx-size split over --parallel unless --kv-unified, vLLM's and SGLang's
longest request against the KV pool, TGI's input and total budgets), derived again and judged again.
It is shown only when

- it clears its finding, by the numbers of the finding's class (`CLEARS`): a context that overflowed
  gives each sequence more room than it had and at least what the run needs; a KV cache that did not
  fit is smaller than the one that failed; a compute buffer or the weights on the GPU shrink; and
- it makes nothing worse (`worse`): no sequence shorter than the need, no request longer than a KV
  pool, no plan that fitted and no longer does, no KV cache, compute buffer or weights grown where an
  out-of-memory finding of that kind stands, no new error from the rule base and no new warning of the
  finding's own family (a context fix past the model's training); a warning elsewhere - fewer GPU layers
  run slower - is the price of some fixes, not a reason to hide them.

The command shown is the first change that passes: the engine's own words from the rule file where
they are about that change (they quote its facts, or it is the first), else the change in the engine
table's spelling. When none passes, no command is shown and the fix says that no safe setting change
was found, and why each was set aside; the fix's words still say what else to do.

Judge floor; pure (derive and the rules, no I/O). The reasons are this module's words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from doctor.core import engines
from doctor.core.facts import Facts
from doctor.core.format import format_value, placeholders
from doctor.core.report import Finding
from doctor.derive import change as plan_change
from doctor.derive import derive
from doctor.judge.changes import Candidate, flags
from doctor.judge.rule import Rule

# what the rules judge a changed run with: rule id -> (severity, title, class) of each rule that fires
Judge = Callable[[Facts], dict[str, tuple[str, str, str]]]
# a change that fires a new error is set aside, and one that fires a new warning of its finding's own
# family (a context fix that runs the model past its training, LD205); a warning elsewhere is the price of
# some fixes (fewer GPU layers run slower, LD506) and does not set it aside
NEW_FAILURES = ("error",)


@dataclass(slots=True)
class Trial:
    """One change of a fix, read in and checked for the run's engine."""

    change: dict[str, Any]  # what is left to change (the settings already so dropped)
    asked: dict[str, Any] = field(default_factory=dict)  # the change as the rule asks it, read in
    already: dict[str, Any] = field(default_factory=dict)  # setting -> the run's own value, already so
    spelled: str | None = None  # the engine's words for `change`
    ok: bool = False
    why: str = ""  # why it is not shown


def recheck(finding: Finding, rule: Rule, facts: Facts, engine: str | None, judge: Judge,
            fired: Mapping[str, tuple[str, str, str]], standing: list[Finding]) -> None:
    """Check the fix of `finding` for `engine` and keep only a command that passed (see the module).
    `fired`: what the rules found on the run itself; `standing`: the report's visible findings."""
    row = engines.get(engine)
    if row is None or not rule.fix_candidates or engine not in rule.fix_engines:
        return
    shown = rule.fix_engines[engine]
    tied = _tied(rule, shown, engine)
    trials: list[Trial | None] = [None] * len(rule.fix_candidates)

    def trial(i: int) -> Trial | None:
        if trials[i] is None:
            trials[i] = _try(rule.fix_candidates[i], finding, facts, engine, judge, fired, standing)
        return trials[i]

    first = trial(tied)
    notes: list[str] = []
    chosen: Trial | None = None
    if first is not None and first.ok:
        chosen = first
    else:
        if first is not None and first.change:
            notes.append(_set_aside(first, engine))
        for i in range(len(rule.fix_candidates)):
            if i == tied:
                continue
            other = trial(i)
            if other is None or any(t is not None and t is not other and t.change == other.change
                                    for t in trials[:i] + trials[tied:tied + 1]):
                continue  # the same change as one already weighed (one slot: the slot's room is the context)
            if other.ok and other.spelled:
                chosen = other
                break
            if other.change:
                notes.append(_set_aside(other, engine))
    if first is not None and not first.change and chosen is not None and chosen is not first:
        row_spelling = row.spelling
        asked = row_spelling.spell(first.asked) if row_spelling is not None else None
        notes.insert(0, f"not {asked or first.asked}: it is what the run already has")
    finding.fix.checks = [n for n in notes if n]
    already = {**(first.already if first is not None else {}), **(chosen.already if chosen is not None else {})}
    if chosen is not None:  # a setting the shown command changes is not "already so"
        already = {k: v for k, v in already.items() if k not in chosen.change}
    if already:
        finding.fix.already = {k: format_value(v, None) for k, v in already.items()}
    if chosen is None:
        if first is None and not notes:
            return  # nothing could be read in (a fact unknown): the command is left out already
        finding.fix.command = None
        finding.fix.by_engine.pop(engine, None)
        finding.fix.note = _none_safe(notes, already)
        return
    if chosen is first and not chosen.already:
        return  # the command as written passed: it stays
    command = chosen.spelled
    if command is None:
        return
    finding.fix.command = command
    finding.fix.by_engine[engine] = command


def _tied(rule: Rule, shown: str, engine: str) -> int:
    """Which change the engine's command stands for: the spelled first change, or for the engine's own
    words the first change whose facts they all quote (else the first)."""
    if shown == flags(rule.fix_change).get(engine):
        return 0
    quoted = {ph.name for ph in placeholders(shown)}
    for i, cand in enumerate(rule.fix_candidates):
        names = {v[1:-1] for v in cand.change.values() if isinstance(v, str) and v.startswith("{")}
        if names and names <= quoted:
            return i
    return 0


def _resolve(value: Any, facts: Facts) -> Any:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        got = facts.value(value[1:-1])
        return got if isinstance(got, int) and not isinstance(got, bool) and got > 0 else None
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return str(a).lower() == str(b).lower()


def already_so(setting: str, value: Any, bound: str | None, facts: Facts, engine: str | None) -> tuple[bool, Any]:
    """(whether the run already has what the fix asks for this setting, the run's own value): equal, or
    past the fix's floor (`at_least`) or ceiling (`at_most`); every layer on the GPU for "all layers"."""
    now = plan_change.current(facts, setting, engine)
    if now is None:
        return False, None
    if setting == "n_gpu_layers" and isinstance(value, int):
        total = facts.value("run.total_layers")
        every = value < 0 or (isinstance(total, int) and value >= total)
        if every and now == plan_change.ALL_LAYERS:
            return True, "all layers"
    numbers = isinstance(now, int | float) and isinstance(value, int | float) and not isinstance(now, bool)
    if bound == "at_least" and numbers:
        return now >= value, now
    if bound == "at_most" and numbers:
        return now <= value, now
    return _same(now, value), now


def _try(cand: Candidate, finding: Finding, facts: Facts, engine: str, judge: Judge,
         fired: Mapping[str, tuple[str, str, str]], standing: list[Finding]) -> Trial | None:
    values = {name: _resolve(value, facts) for name, value in cand.change.items()}
    if any(v is None for v in values.values()):
        return None  # a fact it reads is unknown: as a command with a hole, it is not offered
    out = Trial({}, dict(values))
    for name, value in values.items():
        so, now = already_so(name, value, cand.bounds.get(name), facts, engine)
        if so:
            out.already[name] = now
        else:
            out.change[name] = value
    row = engines.get(engine)
    spelling = row.spelling if row is not None else None
    out.spelled = spelling.spell(out.change) if spelling is not None and out.change else None
    if not out.change:
        out.why = "already so in this run"
        return out
    after = derive(plan_change.apply(facts, out.change, engine))
    reasons = _clears(finding.cls, out.change, facts, after, engine) + _worse(finding, facts, after, engine, standing)
    now_fired = judge(after)
    family = finding.cls.split(".")[0]
    for rid, (severity, title, cls) in now_fired.items():
        if rid in fired or rid == finding.id:
            continue
        if severity in NEW_FAILURES or (severity == "warning" and cls.split(".")[0] == family):
            reasons.append(f"{rid} would fire: {title}")
    out.ok = not reasons
    out.why = "; ".join(dict.fromkeys(reasons))  # each reason once (a pool too small clears nothing and is worse)
    return out


# -- what a change must do, by the finding's class ---------------------------------------------------

def _int(facts: Facts, name: str) -> int | None:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _kv(before: Facts, after: Facts, engine: str) -> tuple[float | None, float | None, str]:
    """The KV cache before and after, in bytes where both are known, else in f16 cells."""
    b, a = plan_change.kv_size(before, engine), plan_change.kv_size(after, engine)
    both = isinstance(before.value("derived.kv_bytes"), int) and isinstance(after.value("derived.kv_bytes"), int)
    if not both:
        b = plan_change.kv_size(before, engine, in_bytes=False)
        a = plan_change.kv_size(after, engine, in_bytes=False)
    return b, a, "bytes" if both else "cells"


def _kv_words(value: float, unit: str) -> str:
    return format_value(int(value), "bytes") if unit == "bytes" else f"{int(value)} tokens"


def _context(before: Facts, after: Facts, engine: str) -> list[str]:
    need = _int(before, "derived.tokens_needed")
    b_seq, a_seq = _int(before, "derived.n_ctx_seq"), _int(after, "derived.n_ctx_seq")
    if a_seq is None:
        return []
    slots = plan_change.slots(after)
    share = f" ({_int(after, 'config.n_ctx')} over {slots} slots)" if slots > 1 and \
        engines.get(engine) is not None and plan_change.current(after, "n_ctx", engine) != a_seq else ""
    if b_seq is not None and a_seq <= b_seq:
        return [f"each sequence would get {a_seq} tokens{share}, no more than the {b_seq} that ran out"]
    if need is not None and a_seq < need:
        return [f"each sequence would get {a_seq} tokens{share}, short of the {need} needed"]
    pool = _int(after, "server.kv_tokens")
    if pool is not None and a_seq > pool:
        return [f"a request of {a_seq} tokens would not fit the KV pool of {pool}"]
    return []


def _kv_cache(before: Facts, after: Facts, engine: str) -> list[str]:
    if (engines.get(engine) or engines.Engine("", "")).semantics.context == "per_request":
        pool, b_seq = _int(after, "server.kv_tokens"), _int(before, "derived.n_ctx_seq")
        a_seq = _int(after, "derived.n_ctx_seq")
        if a_seq == b_seq:
            return []  # the change is not the request length (fewer sequences at once): the pool is not modelled
        if pool is not None and a_seq is not None and a_seq > pool:
            return [f"a request of {a_seq} tokens would still not fit the KV pool of {pool}"]
        if pool is None and b_seq is not None and a_seq is not None and a_seq >= b_seq:
            return [f"the longest request would stay at {a_seq} tokens"]
        return []
    b, a, unit = _kv(before, after, engine)
    if b is not None and a is not None and a >= b:
        slots = plan_change.slots(after)
        how = f" ({_int(after, 'config.n_ctx')} cells: {slots} slots)" if slots > 1 else ""
        return [f"the KV cache would hold {_kv_words(a, unit)}{how}, not less than the {_kv_words(b, unit)} that "
                "did not fit"]
    return []


def _shrinks(name: str, what: str) -> Callable[[Facts, Facts, str], list[str]]:
    def check(before: Facts, after: Facts, engine: str) -> list[str]:
        b, a = before.value(name), after.value(name)
        if isinstance(b, int | float) and isinstance(a, int | float) and a >= b:
            return [f"{what} would stay at {format_value(a, 'bytes')}"]
        return []
    return check


CLEARS: dict[str, Callable[[Facts, Facts, str], list[str]]] = {
    "context.overflow": _context,
    "oom.kv_cache": _kv_cache,
    "oom.concurrency": _kv_cache,
    "oom.compute": _shrinks("derived.compute_bytes", "the compute buffer"),
    "oom.weights": _shrinks("derived.weights_gpu_bytes", "the weights on the GPU"),
}


# the settings each check is about: a change of other settings (a batch size for a context finding whose
# limit is the batch) is not judged by it
CLEARS_SETTINGS: dict[str, frozenset[str]] = {
    "context.overflow": frozenset({"n_ctx", "n_parallel"}),
    "oom.kv_cache": frozenset({"n_ctx", "n_parallel", "type_k", "type_v", "max_num_seqs"}),
    "oom.concurrency": frozenset({"n_ctx", "n_parallel", "type_k", "type_v", "max_num_seqs"}),
    "oom.compute": frozenset({"n_ubatch", "n_batch", "flash_attn", "n_ctx"}),
    "oom.weights": frozenset({"n_gpu_layers"}),
}


def _clears(cls: str, change: dict[str, Any], before: Facts, after: Facts, engine: str) -> list[str]:
    check = CLEARS.get(cls)
    if check is None or not CLEARS_SETTINGS.get(cls, frozenset()) & set(change):
        return []
    return check(before, after, engine)


def _worse(finding: Finding, before: Facts, after: Facts, engine: str, standing: list[Finding]) -> list[str]:
    out: list[str] = []
    need = _int(before, "derived.tokens_needed")
    b_seq, a_seq = _int(before, "derived.n_ctx_seq"), _int(after, "derived.n_ctx_seq")
    if need is not None and a_seq is not None and a_seq < need and (b_seq is None or a_seq < b_seq):
        out.append(f"each sequence would get {a_seq} tokens, short of the {need} the run needs")
    pool = _int(after, "server.kv_tokens")
    if pool is not None and a_seq is not None and a_seq > pool and (b_seq is None or b_seq <= pool):
        out.append(f"a request of {a_seq} tokens would not fit the KV pool of {pool}")
    b_in, b_total = _int(before, "config.max_input_tokens"), _int(before, "config.max_total_tokens")
    a_in, a_total = _int(after, "config.max_input_tokens"), _int(after, "config.max_total_tokens")
    if a_in is not None and a_total is not None and a_in >= a_total and not (
            b_in is not None and b_total is not None and b_in >= b_total):
        # TGI's launcher: `max_input_tokens` must be < `max_total_tokens` (launcher/src/main.rs)
        out.append(f"the server would refuse to start: --max-input-tokens {a_in} is not below "
                   f"--max-total-tokens {a_total}")
    for name, words in (("derived.fits_vram", "the GPU"), ("derived.fits_ram", "RAM")):
        if before.value(name) is True and after.value(name) is False:
            out.append(f"the plan would no longer fit in {words}")
    for name, words in (("derived.gpu_short_bytes", "VRAM"), ("derived.host_short_bytes", "RAM")):
        b, a = before.value(name), after.value(name)
        if isinstance(b, int) and isinstance(a, int) and a > b:
            out.append(f"the plan would be {format_value(a, 'bytes')} short of {words} "
                       f"(was {format_value(b, 'bytes')})")
    for other in standing:  # an out-of-memory finding standing beside this one must not grow
        grows = GROWS.get(other.cls)
        if other.id != finding.id and other.cls != finding.cls and grows is not None and grows(before, after, engine):
            out.append(f"it would make {other.id} worse ({other.title[0].lower()}{other.title[1:]})")
    return out


def _kv_grows(before: Facts, after: Facts, engine: str) -> bool:
    b, a, _ = _kv(before, after, engine)
    return b is not None and a is not None and a > b


def _grows(name: str) -> Callable[[Facts, Facts, str], bool]:
    def check(before: Facts, after: Facts, engine: str) -> bool:
        b, a = before.value(name), after.value(name)
        return isinstance(b, int | float) and isinstance(a, int | float) and a > b
    return check


GROWS: dict[str, Callable[[Facts, Facts, str], bool]] = {
    "oom.kv_cache": _kv_grows, "oom.concurrency": _kv_grows,
    "oom.compute": _grows("derived.compute_bytes"), "oom.weights": _grows("derived.weights_gpu_bytes"),
}


# -- words -------------------------------------------------------------------------------------------

def _set_aside(t: Trial, engine: str) -> str:
    what = t.spelled or ", ".join(f"{k}={v}" for k, v in t.change.items())
    return f"not {what}: {t.why}" if t.why else ""


def _none_safe(notes: list[str], already: dict[str, Any]) -> str:
    if not notes:
        have = ", ".join(f"{k} {format_value(v, None)}" for k, v in already.items())
        return f"Nothing to change in the settings: the run already has {have}." if have else ""
    return "No safe setting change was found: " + "; ".join(notes) + ". See what else the fix says."
