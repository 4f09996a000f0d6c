"""Reading one line for its meaning: a failure relation over a resource, with the quantities it names.

Sources floor; the words are the vocabulary's (vocabulary.yaml, read by vocabulary.py). `read(text)` finds
the first failure relation (exceeds, lacks, preempted) and, in a window around it, the resources the line
names (its subject: the first in the vocabulary's order, or the context when a request is too long and
nothing else is named), the modifiers that undo or change a reading, the step the line says it failed in,
and the quantities with their roles:
  - a comparison `A > B` gives A needed and B the limit;
  - else the last few words before a number (not across punctuation: "prompt: 1299", "maximum allowed prompt
    length (2048)"), or the words just after it ("512 MiB free"), hold a role word (a limit word wins);
  - else a number with a unit takes its side of the relation: before it needed, after it the limit
    ("memory 42.8GB exceeds ceiling 42.0GB"). A number with neither unit nor role word is no quantity.
`event_for(vocabulary, reading)` is the rule of the vocabulary's `events` that applies, with the reading's
numbers in its unit. Pure: text in, a Reading out; doctor/sources/catalogue/meaning_parser.py decides
whether the line is news (no engine parser and no catalogued message read it) and places it in the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.sources.catalogue.vocabulary import EventRule, Vocabulary
from doctor.sources.engines._torch.pytorch import parse_size
from doctor.sources.logs.timeline import PLACED

WINDOW = 300  # characters either side of the relation that a reading looks at (a prompt in a line is no message)
PHRASE_WORDS = 5  # the words before a number that may give it its role
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)"
                     r"(?:\s*((?:[a-z]+ )?tokens?|[KMGT]i?B|bytes|blocks?)\b)?(?!\w|\.\d)", re.IGNORECASE)
_COMPARE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:tokens?\s*)?(>=?|<=?)\s*(\d+(?:\.\d+)?)")
_PUNCT = re.compile(r"[()\[\]{},;:=<>|\"`]|\.\s")
_WORD = re.compile(r"[A-Za-z_][A-Za-z_']*")
_COUNT_AFTER = re.compile(r"^\W{0,3}(\d+)\b")
_SENTENCE = re.compile(r"[.!?]\s|\.$")
_SETTING = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")  # a setting's name as engines print it (max_num_batched_tokens)


@dataclass(frozen=True, slots=True)
class Quantity:
    value: float
    unit: str | None  # tokens | bytes | blocks | None (a number the words give a role to)
    role: str  # needed | limit
    capacity: bool = False  # a limit the words call a capacity (allowed, available, free), not the model's
    before: bool = True  # it stands before the relation


@dataclass(frozen=True, slots=True)
class Reading:
    """What a line says: `relation` over `resource` (also naming `others`), its numbers by role (`needed`,
    `limit`, each in the unit it was given), a `count` after the relation, the `modifiers` it holds, the
    `step` it names, and whether its subject is a request (a prompt, an input)."""

    relation: str
    resource: str
    others: tuple[str, ...] = ()
    quantities: tuple[Quantity, ...] = ()
    count: int | None = None
    modifiers: tuple[str, ...] = ()
    step: str | None = None
    request: bool = False

    def quantity(self, role: str, unit: str | None) -> Quantity | None:
        """The first quantity of `role` in `unit` (a quantity without a unit counts as the resource's own); of
        the limits, the first the words call a capacity ("1.66 GiB free", not "60.97 GiB total")."""
        fits = [q for q in self.quantities if q.role == role and (q.unit == unit or q.unit is None)]
        return next((q for q in fits if q.capacity), fits[0] if fits else None) if role == "limit" else \
            (fits[0] if fits else None)

    def number(self, role: str, unit: str | None) -> float | None:
        q = self.quantity(role, unit)
        return q.value if q is not None else None


def read(v: Vocabulary, text: str) -> Reading | None:
    """The meaning of `text`, or None when it states no failure relation over a resource."""
    found_relations = [x for x in v.relation_re.finditer(text) if x.lastgroup]
    if not found_relations:
        return None
    # a preemption anywhere is what the line reports ("Decode out of memory happened. #retracted_reqs: 3")
    m = next((x for x in found_relations if x.lastgroup == "preempted"), found_relations[0])
    relation = str(m.lastgroup)
    lo, hi = max(0, m.start() - WINDOW), min(len(text), m.end() + WINDOW)
    window = text[lo:hi]
    rel_start, rel_end = m.start() - lo, m.end() - lo
    # the resources of the relation's own sentence ("... This may lead to CUDA errors." is another's)
    starts = [x.end() for x in _SENTENCE.finditer(window, 0, rel_start)]
    stop = _SENTENCE.search(window, rel_end)
    sentence = (starts[-1] if starts else 0, stop.start() + 1 if stop else len(window))
    matches = [(x.lastgroup, x.start()) for x in v.resource_re.finditer(window, *sentence) if x.lastgroup]
    named = [name for name, _ in matches]
    request = v.request_re.search(window[:rel_start]) is not None
    found = sorted(set(named), key=v.order.__getitem__)
    if relation == "preempted" and "kv_cache" not in found:
        found.insert(0, "kv_cache")  # a request is preempted for KV cache space
    if not found and relation == "exceeds" and request:
        found = ["context"]  # "the prompt is too long": the context window is what it exceeds
    if not found:
        return None
    resource = found[0]
    if resource == "context" and relation == "exceeds" and (
            any(n == "context" and at < rel_start for n, at in matches)
            or (not request and _SETTING.search(window, sentence[0], rel_start))):
        # a context, or a setting, compared with another ("the slot context exceeds the training context",
        # "max_num_batched_tokens (16384) exceeds max_num_seqs * max_model_len (8192)"): settings, no request
        return None
    modifiers = tuple(sorted({x.lastgroup for x in v.modifier_re.finditer(window) if x.lastgroup
                              and (x.lastgroup != "advisory" or _governs(window, x.start(), rel_start))}))
    step = next((x.lastgroup for x in v.step_re.finditer(window) if x.lastgroup), None)
    count = None
    if relation == "preempted":
        c = _COUNT_AFTER.match(window[rel_end:])
        count = int(c.group(1)) if c else None
    units = v.units(resource)
    quantities = _quantities(v, window, rel_start, rel_end, units, relation)
    return Reading(relation, resource, tuple(found[1:]), quantities, count, modifiers, step, request)


def _governs(window: str, at: int, rel_start: int) -> bool:
    """Whether a conditional at `at` governs the relation: it comes before it, in the same sentence."""
    return at < rel_start and _SENTENCE.search(window, at, rel_start) is None


def _quantities(v: Vocabulary, window: str, rel_start: int, rel_end: int, units: tuple[str, ...],
                relation: str) -> tuple[Quantity, ...]:
    compared: list[Quantity] = []
    out: list[Quantity] = []
    taken: set[int] = set()
    for c in _COMPARE.finditer(window):  # "2605 > 2048": the larger side is what the smaller must hold
        a, op, b = float(c.group(1)), c.group(2), float(c.group(3))
        needed, limit = (a, b) if op.startswith(">") else (b, a)
        compared += [Quantity(needed, None, "needed"), Quantity(limit, None, "limit")]
        taken.update(range(c.start(), c.end()))
    for n in _NUMBER.finditer(window):
        if n.start() in taken:
            continue
        unit = _unit(n.group(2))
        if unit is not None and unit not in units:
            continue  # tokens beside a memory reading, say: not this resource's number
        role, capacity = _role(v, window[:n.start()], window[n.end():])
        # a number with a unit, or alone in parentheses after what it measures ("KV cache (16816)"), takes its side
        bare = (window[n.start() - 1:n.start()] == "(" and window[n.end():n.end() + 1] == ")") or (
            n.start() >= rel_end and not window[rel_end:n.start()].strip())  # or right after it: "must be <= 2048"
        if role is None and (unit is not None or bare) and not (rel_start <= n.start() < rel_end):
            role = "needed" if n.start() < rel_start else "limit"
        if role is None:
            continue
        try:
            value = float(n.group(1).replace(",", ""))
        except ValueError:
            continue
        if unit == "bytes":
            size = parse_size(n.group(1).replace(",", ""), n.group(2).replace("bytes", "B"))
            if size is None:
                continue
            value = float(size)
        out.append(Quantity(value, unit, role, capacity, n.start() < rel_start))
    if relation == "exceeds" and {q.before for q in out} == {True, False}:
        # "A is larger than B": the subject is what is needed, whatever its words call it ("max seq len")
        out = [Quantity(q.value, q.unit, "needed" if q.before else "limit", q.capacity, q.before) for q in out]
    return tuple(compared + out)


def _unit(raw: str | None) -> str | None:
    if raw is None:
        return None
    low = raw.lower()
    if low.endswith(("token", "tokens")):  # "1441 tokens", "16000 total tokens"
        return "tokens"
    if low.startswith("block"):
        return "blocks"
    return "bytes"


def _role(v: Vocabulary, before: str, after: str) -> tuple[str | None, bool]:
    """The role the words around a number give it (the phrase before it, else the word just after it), and
    whether they call a limit a capacity."""
    words = v.role_words
    for phrase in (_phrase_before(before), _phrase_after(after)):
        found = {part for w in _WORD.findall(phrase) for part in w.lower().split("_") if part}
        if found & words["limit"]:
            return "limit", bool(found & words["capacity"])
        if found & words["needed"]:
            return "needed", False
    return None, False


def _phrase_before(text: str) -> str:
    """The last words before a number, back to the punctuation that begins their phrase."""
    text = text.rstrip(" \t:=([")
    cut = max((m.end() for m in _PUNCT.finditer(text)), default=0)
    return " ".join(text[cut:].split()[-PHRASE_WORDS:])


def _phrase_after(text: str) -> str:
    """The word just after a number and its unit, when no punctuation comes first: "512 MiB free"."""
    m = _WORD.match(text.lstrip(" \t"))
    return m.group(0) if m and not text[:1].strip(" \t") else ""


def event_for(v: Vocabulary, reading: Reading) -> EventRule | None:
    """The first rule of the vocabulary's `events` whose `when` the reading meets."""
    for rule in v.events:
        if rule.relation and reading.relation not in rule.relation:
            continue
        if rule.resource and reading.resource not in rule.resource:
            continue
        if rule.with_ and not set(rule.with_) & set(reading.others):
            continue
        if rule.modifier and not set(rule.modifier) & set(reading.modifiers):
            continue
        return rule
    return None


def numbers(rule: EventRule, reading: Reading) -> dict[str, int | float]:
    """The reading's numbers in the rule's fields (`numbers`, or the fact names of `facts`), in its unit."""
    targets = rule.numbers or rule.facts
    out: dict[str, int | float] = {}
    for role, name in targets.items():
        value = float(reading.count) if role == "count" and reading.count is not None else \
            reading.number(role, rule.unit) if role != "count" else None
        if value is not None:
            out[name] = int(value) if value.is_integer() else value
    return out


def consistent(reading: Reading, rule: EventRule) -> bool:
    """Whether the numbers say what the words do: what exceeds its limit is larger than it (what is lacking
    need not be: "tried to allocate 147 MB" with 20 GB allowed, the rest taken)."""
    needed, limit = reading.number("needed", rule.unit), reading.number("limit", rule.unit)
    return needed is None or limit is None or reading.relation != "exceeds" or needed > limit


@dataclass(frozen=True, slots=True)
class Meaning:
    """What a reading becomes, before the rest of the log is asked: the vocabulary's rule, the event kind
    (None: facts), its phase ("timeline": the run's timeline places it; a step the line names places it
    itself, with its `step`) and data."""

    rule: EventRule
    kind: str | None
    phase: str | None
    data: dict[str, str | int | float | bool]


def meaning_of(v: Vocabulary, reading: Reading) -> Meaning | None:
    """The vocabulary's meaning of a reading; None when it states no failure (no rule, numbers that say
    otherwise, a conditional or advice, an engine that coped)."""
    rule = event_for(v, reading)
    if rule is None or not consistent(reading, rule):
        return None
    if ({"advisory", "coping"} & set(reading.modifiers)) - set(rule.modifier):
        return None
    data: dict[str, str | int | float | bool] = {**rule.data, **numbers(rule, reading)}
    device = v.device(reading.resource)
    if device is not None and rule.event == "oom":
        data["device"] = device
    phase = rule.phase if rule.event == "oom" else None
    if phase == "timeline" and reading.step is not None and reading.step in PLACED:
        phase, step = PLACED[reading.step]
        data.update(phase_from="message", step=step)
    elif phase is not None and phase != "timeline":
        data["phase_from"] = "message"
    return Meaning(rule, rule.event, phase, data)
