"""Which fixes llm-doctor can try itself (`--verify`), and how to tell whether they worked.

What a finding's fix tries is data: its rule's `verify:` (beside its `fix:` in the rule file), else
its class's default (rules/families.yaml), read into a `Recipe` (doctor/judge/changes.py). A recipe
lists candidate setting changes in the order to try them (a value "{fact.name}" reads a fact of the
first run; "@needed" is the prompt plus the reply, rounded up to 256), or says why its fix is not a
setting that can be tried here ("not tried"). The runner (doctor/commands/verify.py) re-runs the
short job with a candidate applied and hands the judged result back here: `figures` picks the
numbers that matter, `outcome` compares before and after, `line` writes the short before -> after line.

How each engine spells a settings change is the engine table's (doctor/core/engines.py, `Spelling`),
written out by doctor/judge/changes.py.

Pure: no processes, no engine imports (settings are RunSettings field names and plain values).
"""

from __future__ import annotations

from typing import Any

from doctor.core import engines
from doctor.core.facts import Facts
from doctor.core.report import Finding, Report
from doctor.core.vocab import VerifyOutcome
from doctor.derive.speed import CEILING_NOISE  # a fraction above it: a ceiling that does not fit, not a share
from doctor.judge.changes import NEEDED, Recipe
from doctor.judge.recheck import already_so
from doctor.judge.rulebase import RuleBase

NO_GPU = "the fix puts layers on a GPU, and this machine's engine has none to try it on"


def recipe_for(finding: Finding, rules: RuleBase) -> Recipe | None:
    """The finding's rule's `verify:` (or its class's default); a rule the base does not hold (a
    finding read back from JSON) gets its class's default."""
    rule = rules.by_id(finding.id)
    if rule is not None:
        return rule.verify
    known = rules.families.classes.get(finding.cls)
    return known.verify if known is not None else None


def _resolve(value: Any, facts: Facts, settings: dict[str, Any]) -> Any:
    if value == NEEDED:
        prompt = facts.value("run.prompt_tokens_max")
        reply = settings.get("max_tokens")
        if not isinstance(prompt, int) or not isinstance(reply, int) or reply <= 0:
            return None
        return (prompt + reply + 255) // 256 * 256
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        got = facts.value(value[1:-1])
        return got if isinstance(got, int) and not isinstance(got, bool) and got > 0 else None
    return value


def candidates(recipe: Recipe, facts: Facts, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The recipe's candidates with facts read in, keeping those that change something (in order,
    without repeats): a setting the first run already had - given, or the engine's own default that it
    reported (`--threads-batch 2` where 2 was the default) - is not re-run (doctor/judge/recheck.py)."""
    out: list[dict[str, Any]] = []
    engine = engines.embedded()
    for cand in recipe.candidates:
        changes = {name: _resolve(value, facts, settings) for name, value in cand}
        if any(v is None for v in changes.values()):
            continue
        changes = {k: v for k, v in changes.items()
                   if settings.get(k) != v and not already_so(k, v, None, facts, engine)[0]}
        if changes and changes not in out:
            out.append(changes)
    return out


# -- figures and outcomes ---------------------------------------------------------------------

TRUNCATION_EVENTS = ("prompt_too_long", "truncation", "ctx_full", "context_shift")
# what a run did at the end of its context, first match wins: refused the prompt, cut it, or ran out while generating
CONTEXT_END = (("rejected", ("prompt_too_long",)), ("truncated", ("truncation",)),
               ("ran out", ("ctx_full", "context_shift")))
END_WORDS = {"rejected": "rejected by", "truncated": "truncated to", "ran out": "ran out of", "fit": "fit in"}


def figures(facts: Facts) -> dict[str, Any]:
    """The numbers of one run that a before -> after line may quote."""
    out: dict[str, Any] = {}
    for key, name in (("prompt_tokens", "run.prompt_tokens_max"), ("n_ctx", "config.n_ctx"),
                      ("generated_tokens", "run.generated_tokens"), ("decode_ms_per_token", "run.decode_ms_p50"),
                      ("prefill_ms", "run.prefill_ms"), ("loop_count", "run.repeat_count"),
                      ("output_repetition", "run.output_repetition"), ("loop_span", "run.repeat_span"),
                      ("finish_reason", "run.finish_reason"), ("decode_tok_s", "speed.decode.tok_s"),
                      ("decode_fraction", "speed.decode.fraction"), ("prefill_tok_s", "speed.prefill.tok_s"),
                      ("prefill_fraction", "speed.prefill.fraction")):
        value = facts.value(name)
        if value is not None:
            out[key] = value
    rss = facts.value("run.rss_max")
    if isinstance(rss, int):
        out["peak_rss_mib"] = round(rss / (1 << 20), 1)
    out["crashed"] = facts.value("run.crashed") is True
    out["truncated"] = any(facts.event_count(kind) for kind in TRUNCATION_EVENTS)
    if out["truncated"]:  # what the engine did at the end of the context: the words differ (issue 37, item 3)
        out["context_end"] = next(how for how, kinds in CONTEXT_END if any(facts.event_count(k) for k in kinds))
    if out.get("finish_reason") == "error" and not out["truncated"]:
        out["failed"] = True
    return out


_SPEED = ("decode_tok_s", "decode_fraction", "prefill_tok_s", "prefill_fraction")
# the figures that matter, by class (the rest stay in the JSON only when asked for)
FIGURES_BY_CLASS: dict[str, tuple[str, ...]] = {
    "context": ("prompt_tokens", "n_ctx", "generated_tokens", "truncated", "context_end", "peak_rss_mib", "crashed"),
    "sampling": ("generated_tokens", "finish_reason", "loop_count", "output_repetition", "loop_span", "crashed"),
    "cpu": ("decode_ms_per_token", "prefill_ms", *_SPEED, "failed", "crashed"),
    "decode": ("decode_ms_per_token", *_SPEED, "failed", "crashed"),
    "speed": ("decode_ms_per_token", "prefill_ms", *_SPEED, "failed", "crashed"),
    "oom": ("peak_rss_mib", "n_ctx", "generated_tokens", "failed", "crashed"),
    "kv": ("peak_rss_mib", "decode_ms_per_token", "generated_tokens", "failed", "crashed"),
}
DEFAULT_FIGURES = ("decode_ms_per_token", "peak_rss_mib", "generated_tokens", "failed", "crashed")


def pick(cls: str, values: dict[str, Any]) -> dict[str, Any]:
    keys = FIGURES_BY_CLASS.get(cls.split(".")[0], DEFAULT_FIGURES)
    return {k: values[k] for k in keys if k in values}


# a new finding in these areas after a fix is the fix's doing (memory, a crash, the context, the
# load, offload, KV); one elsewhere (a loop now that the run generates) is listed, not blamed on it
WORSE_AREAS = ("oom", "engine", "context", "io", "offload", "kv", "model")


# the areas each setting can make worse: a new finding elsewhere after the change is not its doing
_MEMORY = ("oom", "engine", "kv", "context")
AFFECTS: dict[str, tuple[str, ...]] = {
    "n_ctx": _MEMORY, "type_k": _MEMORY, "type_v": _MEMORY, "flash_attn": ("oom", "engine", "kv"),
    "n_batch": ("oom", "engine"), "n_ubatch": ("oom", "engine"), "n_gpu_layers": ("oom", "engine", "offload", "kv"),
    "n_threads": ("engine", "cpu"), "n_threads_batch": ("engine", "cpu"), "use_mmap": ("io", "oom", "engine", "model"),
    "temperature": ("engine",), "repeat_penalty": ("engine",), "top_p": ("engine",), "top_k": ("engine",),
    "min_p": ("engine",), "seed": ("engine",),
}

SPEED_AREAS = ("cpu", "decode", "speed")  # fixes for speed: slower after is worse, whatever the rules say
SLOWER = 1.2  # decode ms/token this much higher counts as slower
FASTER = 1.10  # a speed fix resolves only what it makes at least this much faster (decode or prompt)


def speed_gain(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """How much faster the re-run was: the larger of decode's and the prompt's before / after times."""
    gains = [b / a for key in ("decode_ms_per_token", "prefill_ms")
             if isinstance(b := before.get(key), (int, float)) and isinstance(a := after.get(key), (int, float))
             and a > 0 and b > 0]
    return max(gains) if gains else None


def related(f: Finding, changes: dict[str, Any] | None) -> bool:
    """Whether a new finding can be the doing of the settings changed: its area is one those settings
    touch (AFFECTS). Without the changes (an older caller), any area of WORSE_AREAS."""
    area = f.cls.split(".")[0]
    if changes is None:
        return area in WORSE_AREAS
    return any(area in AFFECTS.get(name, WORSE_AREAS) for name in changes)


def outcome(finding: Finding, before: Report, after: Report, after_figures: dict[str, Any],
            before_figures: dict[str, Any] | None = None,
            changes: dict[str, Any] | None = None) -> tuple[VerifyOutcome, str]:
    """(outcome, reason): made worse when the re-run crashed, failed, raised a new finding at warning
    or above that the change can have caused (`related`: a storage wait after a sampling change is
    not the change's doing: the caller lists it apart), or (a speed fix) decoded slower; not resolved
    when the finding (or one of its class) fires again; resolved otherwise. `before_figures`: a
    baseline re-run's, when one was made (speed compares like with like: the same short job on the
    same machine, moments apart)."""
    if after_figures.get("crashed") and before.facts.value("run.crashed") is not True:
        return "made worse", "the engine crashed with it"
    if finding.cls.split(".")[0] in SPEED_AREAS:
        b_ms = (before_figures or figures(before.facts)).get("decode_ms_per_token")
        a_ms = after_figures.get("decode_ms_per_token")
        if isinstance(b_ms, (int, float)) and isinstance(a_ms, (int, float)) and b_ms > 0 and a_ms > b_ms * SLOWER:
            return "made worse", f"decode slower: {b_ms:.1f} -> {a_ms:.1f} ms/token"
    before_ids = {f.id for f in before.findings}
    # a crash the re-run's triage worked around (AMX: repacking off) is said beside the outcome, not
    # taken as the fix's doing: the fix is judged on the run made with the working setting
    triaged = after.facts.value("run.triage_status") in ("fixed", "combined")
    new = [f for f in after.findings if f.id not in before_ids and f.severity in ("error", "warning")
           and f.cls != finding.cls and related(f, changes)
           and not (triaged and f.cls == "engine.crash")]
    if new:
        return "made worse", "; ".join(f"{f.id} {f.title}" for f in new)
    again = [f for f in after.findings if f.id == finding.id or (f.cls == finding.cls and f.severity != "info")]
    if again:
        return "not resolved", f"{again[0].id} still fires: {again[0].message}"
    if finding.cls.split(".")[0] in SPEED_AREAS:  # a speed finding is a claim that the fix makes it faster
        gain = speed_gain(before_figures or figures(before.facts), after_figures)
        if gain is not None and gain < FASTER:
            return "not resolved", f"no measured gain (at most {gain:.2f}x as fast; {FASTER:.2f}x needed)"
    if after_figures.get("failed"):
        return "made worse", "the run failed with it"
    return "resolved", ""


def line(cls: str, applied: str, before: dict[str, Any], after: dict[str, Any], result: str, reason: str) -> str:
    """The short before -> after line shown beside the fix."""
    area = cls.split(".")[0]
    head = f"{applied}: " if applied else ""
    if result == "made worse":
        return f"{head}made worse ({reason})"
    if area == "context":
        prompt, n_ctx = after.get("prompt_tokens"), after.get("n_ctx")
        b_prompt, b_ctx = before.get("prompt_tokens"), before.get("n_ctx")
        fits = not after.get("truncated")
        end = str(before.get("context_end", "truncated")) if before.get("truncated") else "fit"
        was = f" (before: {END_WORDS.get(end, end)} a context of {b_ctx})" if b_ctx else ""
        text = f"prompt of {prompt or b_prompt} tokens {'fits' if fits else 'still does not fit'}" \
               f"{f' in {n_ctx}' if n_ctx else ''}{was}"
        gen = after.get("generated_tokens")
        if gen is not None:
            text += f"; {gen} tokens generated" + (", no truncation" if fits else "")
        return head + text
    if area == "sampling":
        def loop(f: dict[str, Any]) -> str:
            rep = f.get("output_repetition")
            if not isinstance(rep, (int, float)) or rep <= 0:
                return "no loop"
            span = f.get("loop_span")
            return f"{rep:.0%} repeated" + (f" (\"{str(span)[:40]}\" x{f.get('loop_count')})" if span else "")
        gen = after.get("generated_tokens")
        ended = " (the model ended it)" if after.get("finish_reason") == "stop" else ""
        tail = f"; {gen} tokens generated{ended}" if gen is not None else ""
        return head + f"{loop(before)} -> {loop(after)}" + tail
    b_ms, a_ms = before.get("decode_ms_per_token"), after.get("decode_ms_per_token")
    bits = [text for phase in ("prefill", "decode") if (text := _speed(phase, before, after))]
    if not bits and isinstance(b_ms, (int, float)) and isinstance(a_ms, (int, float)):
        bits.append(f"decode {b_ms:.1f} -> {a_ms:.1f} ms/token")
    b_rss, a_rss = before.get("peak_rss_mib"), after.get("peak_rss_mib")
    if area in ("oom", "kv") and b_rss is not None and a_rss is not None:
        bits.append(f"peak memory {b_rss:.0f} -> {a_rss:.0f} MiB")
    if before.get("failed") and not after.get("failed") and not after.get("crashed"):
        gen = after.get("generated_tokens")
        bits.insert(0, "the run failed before, completes now" + (f" ({gen} tokens)" if gen is not None else ""))
    bits.append("no crash" if not after.get("crashed") else "crashed")
    tail = "" if result == "resolved" else f"; {result}" + (f": {reason}" if reason else "")
    return head + ", ".join(bits) + tail


def _speed(phase: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """"decode 47.8 -> 88.1 tok/s (27% -> 49% of the ceiling)", when both runs were judged for speed."""
    b, a = before.get(f"{phase}_tok_s"), after.get(f"{phase}_tok_s")
    if not isinstance(b, (int, float)) or not isinstance(a, (int, float)):
        return ""
    bf, af = before.get(f"{phase}_fraction"), after.get(f"{phase}_fraction")
    both = isinstance(bf, (int, float)) and isinstance(af, (int, float)) and max(bf, af) <= CEILING_NOISE
    share = f" ({bf:.0%} -> {af:.0%} of the ceiling)" if both else ""  # above it: the ceiling is wrong, not a share
    return f"{phase} {b:.1f} -> {a:.1f} tok/s{share}"


def settings_view(settings: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The settings a candidate run uses: the first run's with the changes (n_ubatch follows n_batch down)."""
    out = dict(settings)
    out.update(changes)
    if "n_batch" in changes and isinstance(out.get("n_ubatch"), int) and out["n_ubatch"] > out["n_batch"]:
        out["n_ubatch"] = out["n_batch"]
    return out
