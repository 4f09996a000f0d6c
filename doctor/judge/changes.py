"""A change of settings as data: the names a rule's `fix.change` and `verify.try` may use, how each
engine spells a change, and a fix's `verify:` recipe (what `--verify` tries, or why it tries nothing).

A change maps RunSettings field names to values: a number, a word, true/false, or "{fact.name}" (a
fact of the run, read in when the fix is shown or tried), or a floor or a ceiling ({at_least: V},
{at_most: V}: a run already past it needs nothing); a rule's `fix.change` may list several changes in
the order to offer them (`Candidate`); a verify candidate may also use "@needed"
(the prompt plus the reply, rounded up to 256). The names and their spelling per engine are the
engine table's (doctor/core/engines.py, `Spelling`): an engine without a spelling gets no command
from a change, only from its own `fix:` key.

Judge floor; pure. The error texts are this module's; the values come from the rule files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from doctor.core import catalog, engines
from doctor.judge.ruleyaml import Ctx

NEEDED = "@needed"  # a verify value: the prompt plus the reply, rounded up to 256
VERIFY_KEYS = ("try", "not_tried", "needs_gpu")
BOUNDS = ("at_least", "at_most")  # a fix value that is a floor or a ceiling: what is past it is already so

Change = tuple[tuple[str, Any], ...]  # (setting, value) pairs, in the order written


@dataclass(frozen=True, slots=True)
class Candidate:
    """One settings change a rule's fix offers (`fix.change`, or one of its list, in the order to offer
    them): the values, and for each setting written `{at_least: V}` / `{at_most: V}` that bound (a run at
    temperature 0.8 already samples at least as hot as 0.7: nothing to ask for)."""

    change: dict[str, Any] = field(default_factory=dict, hash=False)
    bounds: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class Recipe:
    """What `--verify` does with a fix: candidate changes in the order to try them, or why not."""

    candidates: tuple[Change, ...] = ()  # settings changes, in the order to try
    not_tried: str = ""  # why the fix is not a setting llm-doctor can try
    needs_gpu: bool = False  # the change only means something with a GPU


def setting_names() -> tuple[str, ...]:
    """Every setting some engine of the table spells, in table order."""
    names: list[str] = []
    for engine in engines.table():
        for name in engine.spelling.forms if engine.spelling is not None else ():
            if name not in names:
                names.append(name)
    return tuple(names)


def flags(changes: Mapping[str, Any]) -> dict[str, str]:
    """The change in each engine's terms, for the engines the engine table spells settings for
    (engine name -> its command: a server flag, a Llama() argument, a Modelfile PARAMETER)."""
    out: dict[str, str] = {}
    for engine in engines.table():
        spelled = engine.spelling.spell(changes) if engine.spelling is not None else None
        if spelled:
            out[engine.name] = spelled
    return out


def _garbled(name: str, value: str) -> str | None:
    """The first engine whose form for `name` would not carry a "{fact}" value through unchanged
    (an upper-cased GGML type, on/off), or None."""
    if not value.startswith("{"):
        return None
    for engine in engines.table():
        spelled = engine.spelling.spell({name: value}) if engine.spelling is not None else None
        if spelled is not None and value not in spelled:
            return engine.name
    return None


# -- read from YAML --------------------------------------------------------------------------------

def embedded_settings() -> tuple[str, ...]:
    """The settings of the embedded engine (the one `--verify` re-runs), as the table spells them."""
    engine = engines.get(engines.embedded())
    return tuple(engine.spelling.forms) if engine is not None and engine.spelling is not None else ()


def parse_candidates(ctx: Ctx, node: Any, field_name: str) -> tuple[Candidate, ...]:
    """`fix.change`: one settings change, or a list of them in the order to offer them (the first that
    survives the fix check of doctor/judge/recheck.py is shown)."""
    items = node if isinstance(node, list) else [node]
    if not items:
        raise ctx.fail(field_name, "a list of settings changes needs at least one", node)
    out = []
    for i, item in enumerate(items):
        where = f"{field_name}[{i}]" if isinstance(node, list) else field_name
        bounds: dict[str, str] = {}
        out.append(Candidate(parse_change(ctx, item, where, bounds=bounds), bounds))
    return tuple(out)


def parse_change(ctx: Ctx, node: Any, field_name: str, *, verify: bool = False,
                 bounds: dict[str, str] | None = None) -> dict[str, Any]:
    """A mapping of setting -> value, checked: known settings (a verify candidate's: the embedded
    engine's), single values, known facts; where `bounds` is given, a value may be a floor or a ceiling
    ({at_least: V}), recorded there by setting."""
    if not isinstance(node, dict) or not node:
        raise ctx.fail(field_name, "a settings change maps settings to values ({n_ctx: 4096}; a floor or a "
                                   "ceiling as {temperature: {at_least: 0.7}})", node)
    known = embedded_settings() if verify else setting_names()
    out: dict[str, Any] = {}
    for name, value in node.items():
        if name not in known:
            whose = "the embedded engine has" if verify else "the engine table spells"
            raise ctx.fail(field_name, f"unknown setting '{name}' ({whose}: {', '.join(known)})", node)
        if bounds is not None and isinstance(value, dict) and len(value) == 1 and next(iter(value)) in BOUNDS:
            bounds[str(name)], value = next(iter(value.items()))
        if value is None or isinstance(value, dict | list):
            raise ctx.fail(f"{field_name}.{name}", "a setting takes one value (a number, a word, true/false "
                                                   "or \"{fact.name}\")", node)
        if isinstance(value, str):
            value = value.strip()
            if value == NEEDED and not verify:
                raise ctx.fail(f"{field_name}.{name}", f"'{NEEDED}' is a verify value only", node)
            if value.startswith("{") and not (value.endswith("}") and catalog.is_known(value[1:-1])):
                raise ctx.fail(f"{field_name}.{name}", f"'{value}' is not a known fact in braces "
                                                       "(see `llm-doctor facts`)", node)
            garbled = _garbled(name, value)
            if garbled is not None:
                raise ctx.fail(f"{field_name}.{name}", f"{garbled} spells {name} in a way a fact cannot go "
                                                       "into; give the value itself", node)
        out[str(name)] = value
    return out


def parse_verify(ctx: Ctx, node: Any, field_name: str = "verify") -> Recipe:
    """{try: [CHANGE, ...], needs_gpu: BOOL} or {not_tried: WHY}."""
    if not isinstance(node, dict):
        raise ctx.fail(field_name, "'verify' is {try: [{setting: value}, ...]} or {not_tried: why}", node)
    bad = set(node) - set(VERIFY_KEYS)
    if bad:
        raise ctx.fail(field_name, f"unknown keys in verify: {sorted(bad)} (known: {', '.join(VERIFY_KEYS)})", node)
    if ("try" in node) == ("not_tried" in node):
        raise ctx.fail(field_name, "'verify' gives either 'try' (changes to run) or 'not_tried' (why not)", node)
    needs_gpu = node.get("needs_gpu", False)
    if not isinstance(needs_gpu, bool):
        raise ctx.fail(f"{field_name}.needs_gpu", "'needs_gpu' is true or false", node)
    if "not_tried" in node:
        why = node["not_tried"]
        if not isinstance(why, str) or not why.strip():
            raise ctx.fail(f"{field_name}.not_tried", "'not_tried' says why the fix is not tried here", node)
        return Recipe(not_tried=" ".join(why.split()), needs_gpu=needs_gpu)
    tries = node["try"]
    if not isinstance(tries, list) or not tries:
        raise ctx.fail(f"{field_name}.try", "'try' is a non-empty list of settings changes", node)
    candidates = tuple(tuple(parse_change(ctx, item, f"{field_name}.try[{i}]", verify=True).items())
                       for i, item in enumerate(tries))
    return Recipe(candidates, needs_gpu=needs_gpu)
