"""Load and validate the YAML rule base.

Rules are data: YAML is read with a safe loader that also refuses aliases (no alias bombs) and
remembers line numbers, so a broken rule is reported as one line naming file, line and field.
Every fact and event kind a rule names is checked against the catalogue. Built-in rules ship in
`rules/` (in the wheel: `doctor/_builtin_rules`); users add folders with `--rules DIR` or the
LLM_DOCTOR_RULES environment variable (paths separated by the OS path separator); an engine of the
engine table (doctor/core/engines.py) may bring its own folder, read after the built-ins. A user rule
with the id of a built-in one replaces it, and the rule base says so in `notes`. The engine names a
rule's `engines:` and `fix:` may use are the engine table's.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.core import catalog, engines
from doctor.core.errors import RuleError
from doctor.core.format import FILTERS, placeholders
from doctor.core.vocab import (
    CONFIDENCES,
    MODES,
    SEVERITIES,
    STATUSES,
    Confidence,
    Mode,
    RuleOutcome,
    RuleStatus,
    Severity,
    is_confidence,
    is_mode,
    is_rule_outcome,
    is_severity,
    is_status,
)
from doctor.judge.predicates import (
    COMPARE_OPS,
    All,
    Any_,
    Compare,
    Events,
    FactRef,
    Not,
    Predicate,
    compile_regex,
)
from doctor.judge.rulecache import LineDict, LineList, load_tree

ENV_RULES = "LLM_DOCTOR_RULES"

# Diagnosis classes (DESIGN.md): stable names carried in the JSON. Value: the area they show under.
CLASSES: dict[str, str] = {
    "io.slow_load": "Storage and load",
    "offload.none": "GPU offload",
    "offload.partial": "GPU offload",
    "cpu.threads": "CPU threads",
    "context.overflow": "Context",
    "context.oversized": "Context",
    "kv.preemption": "KV cache",
    "kv.dtype": "KV cache",
    "oom.weights": "Memory",
    "oom.kv_cache": "Memory",
    "oom.compute": "Memory",
    "oom.runtime": "Memory",
    "oom.paging": "Memory",
    "oom.prompt_cache": "Memory",
    "oom.concurrency": "Memory",
    "sampling.repetition": "Sampling and output",
    "pcie.degraded": "PCIe link",
    "gpu.bandwidth": "GPU memory bandwidth",
    "model.corrupt": "Model file",
    "decode.jitter": "Decode timing",
    "serving.queueing": "Serving latency",  # requests wait for a place in the batch (/metrics, stats lines)
    "serving.latency": "Serving latency",  # slow first token or per-token latency read from /metrics
    "serving.saturation": "Serving capacity",  # requests queued because every slot / sequence was busy
    "engine.crash": "Engine process",  # the engine aborted or was killed (watch: the child's exit)
}

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 24
MAX_REGEX = 200

ID_RE = re.compile(r"^[A-Z]{2,4}\d{3,4}$")
SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

RULE_KEYS = {"id", "slug", "class", "severity", "title", "when", "confidence", "message", "explain",
             "fix", "inhibits", "references", "tests", "modes", "engines", "status"}
CASE_KEYS = {"name", "facts", "events", "events_observed", "expect", "confidence", "missing", "mode"}


@dataclass(slots=True)
class RuleCase:
    name: str
    facts: dict[str, Any]
    events: list[dict[str, Any]]
    events_observed: bool
    expect: RuleOutcome
    confidence: Confidence | None
    missing: list[str] | None
    mode: Mode | None
    line: int | None


@dataclass(slots=True)
class Rule:
    id: str
    slug: str
    cls: str
    severity: Severity
    title: str
    when: Predicate
    confidence_levels: list[tuple[Confidence, Predicate]]  # (level, predicate), tried in order
    confidence_default: Confidence
    message: str
    explain: str
    fix_text: str
    fix_engines: dict[str, str]
    inhibits: list[str]
    references: list[str]
    tests: list[RuleCase]
    modes: tuple[Mode, ...]
    status: RuleStatus
    path: str
    line: int | None
    builtin: bool
    message_by_mode: dict[str, str] = field(default_factory=dict)  # wording for one mode (scan: nothing ran)

    def message_for(self, mode: Mode | None) -> str:
        return self.message_by_mode.get(mode or "", self.message)
    engines: tuple[str, ...] = ()  # whose logs it reads; () = any engine's

    def applies_to(self, engine: str | None) -> bool:
        """False for a rule about another engine's log (an Ollama check on a vLLM log)."""
        return not self.engines or engine is None or engine in self.engines

    @property
    def area(self) -> str:
        return CLASSES.get(self.cls, self.cls)

    def matches(self, selector: str) -> bool:
        """A selector names this rule by id (LD201), slug (prompt-exceeds-context), diagnosis class
        (context.overflow, also written context-overflow) or class family (context)."""
        if selector.upper() == self.id or selector.lower() == self.slug:
            return True
        wanted, cls = _canon(selector), _canon(self.cls)
        return wanted == cls or wanted == _canon(self.cls.split(".")[0])


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip().lower())


def class_for(selector: str) -> str | None:
    """The diagnosis class a selector names (context-overflow -> context.overflow), or None."""
    return next((cls for cls in CLASSES if _canon(cls) == _canon(selector)), None)


@dataclass(slots=True)
class RuleBase:
    rules: list[Rule] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def by_id(self, rule_id: str) -> Rule | None:
        key = rule_id.upper()
        for rule in self.rules:
            if rule.id == key or rule.slug == rule_id.lower():
                return rule
        return None

    def select(self, selector: str) -> list[Rule]:
        """The rules a selector names: an id, a slug, a class or a class family (see Rule.matches)."""
        return [rule for rule in self.rules if rule.matches(selector)]


# -- YAML with line numbers and no aliases -------------------------------------------------------

_LineDict = LineDict  # mappings and lists that remember their line (doctor/judge/rulecache.py)
_LineList = LineList


@functools.lru_cache(maxsize=1)
def _loader_class() -> Any:
    """The YAML loader, built on first use: PyYAML is imported only when a rule file is not in the
    cache (doctor/judge/rulecache.py), so a warm start does not pay for it."""
    import yaml

    # libyaml's parser when PyYAML has it (ten times faster); safe either way
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _RuleLoader(base):
        def compose_node(self, parent: Any, index: Any) -> Any:  # the pure-Python composer only
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.constructor.ConstructorError(
                    None, None, "YAML aliases (*name) are not allowed in rule files", event.start_mark)
            return super().compose_node(parent, index)

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            # libyaml composes an alias into the very node it names: a node met twice is an alias
            if node in self.constructed_objects or node in self.recursive_objects:
                raise yaml.constructor.ConstructorError(
                    None, None, "YAML aliases (*name) are not allowed in rule files", node.start_mark)
            return super().construct_object(node, deep)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            mapping = _LineDict(super().construct_mapping(node, deep=True))
            mapping.line = node.start_mark.line + 1
            mapping.key_lines = {}
            for key_node, _value in node.value:
                mapping.key_lines[str(key_node.value)] = key_node.start_mark.line + 1
            return mapping

        def construct_sequence(self, node: Any, deep: bool = False) -> Any:
            seq = _LineList(super().construct_sequence(node, deep=True))
            seq.line = node.start_mark.line + 1
            return seq

    _RuleLoader.add_constructor("tag:yaml.org,2002:map", _RuleLoader.construct_mapping)
    _RuleLoader.add_constructor("tag:yaml.org,2002:seq", _RuleLoader.construct_sequence)
    return _RuleLoader


def load_yaml(text: str, path: str) -> Any:
    import yaml

    # _RuleLoader is a (C)SafeLoader that also refuses aliases: no tag can build a Python object
    loader = _loader_class()(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise RuleError(path, line, None, f"not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise RuleError(path, None, None, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise RuleError(path, None, None, "YAML nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # a scalar the constructors reject (a 5000-digit integer, a bad date)
        raise RuleError(path, None, None, f"not valid YAML: {' '.join(str(exc).split())[:200]}") from None
    finally:
        loader.dispose()


# -- locating rule folders -----------------------------------------------------------------------

def builtin_rules_dir() -> Path:
    package = Path(__file__).resolve().parents[1]  # doctor/
    packaged = package / "_builtin_rules"
    if packaged.is_dir():
        return packaged
    checkout = package.parent / "rules"
    if checkout.is_dir():
        return checkout
    raise RuleError(str(packaged), None, None, "built-in rules not found (broken install?)")


def rule_dirs(extra: list[str] | None = None, env: Mapping[str, str] | None = None) -> list[tuple[Path, bool]]:
    env = os.environ if env is None else env
    dirs: list[tuple[Path, bool]] = [(builtin_rules_dir(), True)]
    dirs += [(directory, False) for directory in engines.rule_dirs()]  # rules that come with an engine
    for raw in env.get(ENV_RULES, "").split(os.pathsep):
        if raw.strip():
            dirs.append((Path(raw.strip()).expanduser(), False))
    for raw in extra or []:
        dirs.append((Path(raw).expanduser(), False))
    return dirs


def rule_files(directory: Path) -> list[Path]:
    if directory.is_file():
        return [directory]
    if not directory.is_dir():
        raise RuleError(str(directory), None, None, "rule folder does not exist")
    return sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def load_rulebase(extra_dirs: list[str] | None = None, env: dict[str, str] | None = None) -> RuleBase:
    base = RuleBase()
    index: dict[str, Rule] = {}
    slugs: dict[str, Rule] = {}
    for directory, builtin in rule_dirs(extra_dirs, env):
        paths = rule_files(directory)
        if not paths and not builtin:
            raise RuleError(str(directory), None, None, "no rule files in this folder (*.yaml, *.yml)")
        loaded = [(path, load_rule_file(path, builtin=builtin)) for path in paths]
        if not builtin and not any(rules for _, rules in loaded):
            raise RuleError(str(directory), None, None, "its rule files hold no rules")
        for path, rules in loaded:
            base.sources.append(str(path))
            for rule in rules:
                previous = index.get(rule.id)
                if previous is not None:
                    if previous.builtin and not rule.builtin:
                        base.notes.append(
                            f"rule {rule.id} from {rule.path}:{rule.line} replaces the built-in rule "
                            f"{previous.id} ({previous.slug})")
                        base.rules.remove(previous)
                        slugs.pop(previous.slug, None)
                    else:
                        raise RuleError(rule.path, rule.line, "id",
                                        f"duplicate rule id {rule.id} (also {previous.path}:{previous.line})")
                other = slugs.get(rule.slug)
                if other is not None:
                    raise RuleError(rule.path, rule.line, "slug",
                                    f"duplicate slug {rule.slug} (also {other.id} in {other.path})")
                index[rule.id] = rule
                slugs[rule.slug] = rule
                base.rules.append(rule)
    _check_inhibits(base.rules)
    base.rules.sort(key=lambda r: r.id)
    return base


def _check_inhibits(rules: list[Rule]) -> None:
    ids = {r.id for r in rules}
    graph = {r.id: set(r.inhibits) for r in rules}
    for rule in rules:
        for target in rule.inhibits:
            if target not in ids:
                raise RuleError(rule.path, rule.line, "inhibits", f"{rule.id} inhibits unknown rule {target}")
            if target == rule.id:
                raise RuleError(rule.path, rule.line, "inhibits", f"{rule.id} inhibits itself")
    # no cycles: a root cause cannot be a symptom of its own symptom
    for start in graph:
        stack, seen = list(graph[start]), set()
        while stack:
            node = stack.pop()
            if node == start:
                rule = next(r for r in rules if r.id == start)
                raise RuleError(rule.path, rule.line, "inhibits", f"inhibition cycle through {start}")
            if node not in seen:
                seen.add(node)
                stack.extend(graph.get(node, ()))


def load_rule_file(path: Path, builtin: bool = False) -> list[Rule]:
    where = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise RuleError(where, None, None, f"rule file is {size} bytes; the limit is {MAX_FILE_BYTES}")
        raw = path.read_bytes()
    except OSError as exc:
        raise RuleError(where, None, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RuleError(where, None, None, f"not UTF-8 (byte {exc.start})") from None
    return rules_from_tree(load_tree(text, where, load_yaml), where, builtin=builtin)


def parse_rules(text: str, where: str, builtin: bool = False) -> list[Rule]:
    return rules_from_tree(load_yaml(text, where), where, builtin=builtin)


def rules_from_tree(data: Any, where: str, builtin: bool = False) -> list[Rule]:
    """The rules of one file's YAML tree (parsed now or from the cache), each validated."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise RuleError(where, getattr(data, "line", 1), None, "a rule file holds a YAML list of rules")
    rules = []
    for item in data:
        if not isinstance(item, dict):
            raise RuleError(where, getattr(data, "line", None), None, "each rule must be a mapping")
        try:
            rules.append(_parse_rule(item, where, builtin))
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            # a shape no check above foresaw: still one line naming the file and the rule, never a traceback
            raise RuleError(where, getattr(item, "line", None), None,
                            f"malformed rule ({type(exc).__name__}: {exc})"[:300]) from None
    return rules


# -- one rule --------------------------------------------------------------------------------------

class _Ctx:
    def __init__(self, where: str, node: Any, rule_id: str | None = None) -> None:
        self.where = where
        self.node = node
        self.rule_id = rule_id

    def fail(self, field_name: str, message: str, node: Any = None) -> RuleError:
        line = _line_of(node if node is not None else self.node, field_name)
        prefix = f"{self.rule_id}: " if self.rule_id else ""
        return RuleError(self.where, line, field_name, prefix + message)


def _line_of(node: Any, key: str | None = None) -> int | None:
    if isinstance(node, _LineDict):
        if key is not None and key.split(".")[-1] in node.key_lines:
            return node.key_lines[key.split(".")[-1]]
        return node.line
    return getattr(node, "line", None)


def _parse_rule(node: dict[str, Any], where: str, builtin: bool) -> Rule:
    ctx = _Ctx(where, node)
    unknown = set(node) - RULE_KEYS
    if unknown:
        first = sorted(unknown)[0]
        raise ctx.fail(first, f"unknown field '{first}' (allowed: {', '.join(sorted(RULE_KEYS))})")
    rule_id = _req_str(ctx, node, "id")
    if not ID_RE.match(rule_id):
        raise ctx.fail("id", f"id '{rule_id}' must look like LD201")
    ctx.rule_id = rule_id
    slug = _req_str(ctx, node, "slug")
    if not SLUG_RE.match(slug):
        raise ctx.fail("slug", f"slug '{slug}' must be kebab-case")
    cls = _req_str(ctx, node, "class")
    if cls not in CLASSES:
        raise ctx.fail("class", f"unknown diagnosis class '{cls}' (known: {', '.join(CLASSES)})")
    severity = _req_str(ctx, node, "severity")
    if not is_severity(severity):
        raise ctx.fail("severity", f"severity must be one of {', '.join(SEVERITIES)}")
    title = _req_str(ctx, node, "title")
    if "when" not in node:
        raise ctx.fail("when", "missing 'when'")
    when = _parse_predicate(ctx, node["when"], "when", 0)
    levels, default = _parse_confidence(ctx, node.get("confidence", "medium"))
    message, message_by_mode = _parse_message(ctx, node.get("message"), title)
    explain = _opt_str(ctx, node, "explain") or ""
    fix_text, fix_engines = _parse_fix(ctx, node.get("fix"))
    inhibits = _str_list(ctx, node, "inhibits")
    for target in inhibits:
        if not ID_RE.match(target):
            raise ctx.fail("inhibits", f"'{target}' is not a rule id")
    references = _str_list(ctx, node, "references")
    modes: list[Mode] = []
    for mode in _str_list(ctx, node, "modes") or MODES:
        if not is_mode(mode):
            raise ctx.fail("modes", f"unknown mode '{mode}' (known: {', '.join(MODES)})")
        modes.append(mode)
    engine_names = tuple(_str_list(ctx, node, "engines"))
    known = engines.names()
    for engine in engine_names:
        if engine not in known:
            raise ctx.fail("engines", f"unknown engine '{engine}' (known: {', '.join(known)})")
    status = _opt_str(ctx, node, "status") or "stable"
    if not is_status(status):
        raise ctx.fail("status", f"status must be one of {', '.join(STATUSES)}")
    for name, template in [("message", message), *[(f"message.{m}", t) for m, t in message_by_mode.items()],
                           ("explain", explain), ("fix", fix_text),
                           *[(f"fix.{e}", t) for e, t in fix_engines.items()]]:
        _check_template(ctx, name, template)
    tests = _parse_cases(ctx, node.get("tests"))
    return Rule(
        id=rule_id, slug=slug, cls=cls, severity=severity, title=title, when=when,
        confidence_levels=levels, confidence_default=default, message=message, explain=explain,
        fix_text=fix_text, fix_engines=fix_engines, inhibits=inhibits, references=references,
        tests=tests, modes=tuple(modes), status=status, path=where, line=_line_of(node), builtin=builtin,
        message_by_mode=message_by_mode,
        engines=engine_names,
    )


def _parse_message(ctx: _Ctx, node: Any, title: str) -> tuple[str, dict[str, str]]:
    """A message is a string, or words per mode: {default: ..., scan: ..., watch: ..., analyze: ...}
    (a scan judges a plan - nothing ran unless its trace did - so "the model ran" is not a scan's word)."""
    if node is None:
        return title, {}
    if isinstance(node, str):
        return " ".join(node.split()) or title, {}
    if not isinstance(node, dict):
        raise ctx.fail("message", "'message' is a string or {default: ..., scan: ..., watch: ..., analyze: ...}")
    bad = set(node) - {"default", *MODES}
    if bad:
        raise ctx.fail("message", f"unknown keys in message: {sorted(bad)} (default, {', '.join(MODES)})", node)
    texts = {}
    for key, value in node.items():
        if not isinstance(value, str) or not value.strip():
            raise ctx.fail(f"message.{key}", "each message must be a non-empty string", node)
        texts[key] = " ".join(value.split())
    if "default" not in texts:
        raise ctx.fail("message", "a message by mode needs a 'default'", node)
    default = texts.pop("default")
    return default, texts


def _req_str(ctx: _Ctx, node: dict[str, Any], key: str) -> str:
    if key not in node:
        raise ctx.fail(key, f"missing '{key}'")
    value = node[key]
    if not isinstance(value, str) or not value.strip():
        raise ctx.fail(key, f"'{key}' must be a non-empty string")
    return value.strip()


def _opt_str(ctx: _Ctx, node: dict[str, Any], key: str) -> str | None:
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ctx.fail(key, f"'{key}' must be a string")
    return " ".join(value.split()) if key in ("message", "title") else value.strip()


def _str_list(ctx: _Ctx, node: dict[str, Any], key: str) -> list[str]:
    value = node.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.fail(key, f"'{key}' must be a list of strings")
    return [v.strip() for v in value]


def _check_fact_name(ctx: _Ctx, name: Any, field_name: str, node: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ctx.fail(field_name, "a fact name must be a string", node)
    if not catalog.is_known(name):
        raise ctx.fail(field_name, f"unknown fact '{name}' (see `llm-doctor facts`)", node)
    return name


def _parse_predicate(ctx: _Ctx, node: Any, path: str, depth: int) -> Predicate:
    if depth > MAX_DEPTH:
        raise ctx.fail(path, f"predicate nested deeper than {MAX_DEPTH}", node)
    if not isinstance(node, dict) or not node:
        raise ctx.fail(path, "a predicate must be a mapping (all / any / not / fact / events)", node)
    if "all" in node or "any" in node:
        key = "all" if "all" in node else "any"
        if len(node) != 1:
            raise ctx.fail(path, f"'{key}' must stand alone in its mapping", node)
        items = node[key]
        if not isinstance(items, list) or not items:
            raise ctx.fail(f"{path}.{key}", f"'{key}' needs a non-empty list", node)
        parsed = [_parse_predicate(ctx, item, f"{path}.{key}[{i}]", depth + 1) for i, item in enumerate(items)]
        return All(parsed) if key == "all" else Any_(parsed)
    if "not" in node:
        if len(node) != 1:
            raise ctx.fail(path, "'not' must stand alone in its mapping", node)
        return Not(_parse_predicate(ctx, node["not"], f"{path}.not", depth + 1))
    if "events" in node:
        return _parse_events(ctx, node, path)
    if "fact" in node:
        name = _check_fact_name(ctx, node["fact"], f"{path}.fact", node)
        ops = [k for k in node if k != "fact"]
        if len(ops) != 1:
            raise ctx.fail(path, f"a fact test needs exactly one operator of: {', '.join(COMPARE_OPS)}", node)
        op = ops[0]
        if op not in COMPARE_OPS:
            raise ctx.fail(f"{path}.{op}", f"unknown operator '{op}' (known: {', '.join(COMPARE_OPS)})", node)
        return Compare(name, op, _parse_operand(ctx, op, node[op], f"{path}.{op}", node))
    raise ctx.fail(path, f"unknown predicate keys {sorted(node)} (use all / any / not / fact / events)", node)


def _parse_operand(ctx: _Ctx, op: str, value: Any, path: str, node: Any) -> Any:
    if op == "exists":
        if not isinstance(value, bool):
            raise ctx.fail(path, "'exists' takes true or false", node)
        return value
    if op in ("in", "not_in"):
        if not isinstance(value, list) or not value or any(isinstance(v, dict | list) for v in value):
            raise ctx.fail(path, f"'{op}' takes a non-empty list of values", node)
        return list(value)
    if op == "matches":
        if not isinstance(value, str) or len(value) > MAX_REGEX:
            raise ctx.fail(path, f"'matches' takes a regular expression of at most {MAX_REGEX} characters", node)
        try:
            return compile_regex(value)
        except re.error as exc:
            raise ctx.fail(path, f"bad regular expression: {exc}", node) from None
    if isinstance(value, dict):
        extra = set(value) - {"fact", "times", "plus"}
        if "fact" not in value or extra:
            raise ctx.fail(path, "a fact operand is {fact: NAME, times: N, plus: N}", node)
        name = _check_fact_name(ctx, value["fact"], path + ".fact", value)
        times, plus = value.get("times", 1.0), value.get("plus", 0.0)
        for label, number in (("times", times), ("plus", plus)):
            if not isinstance(number, int | float) or isinstance(number, bool):
                raise ctx.fail(f"{path}.{label}", f"'{label}' must be a number", value)
        if op not in ("lt", "le", "gt", "ge", "eq", "ne"):
            raise ctx.fail(path, f"'{op}' cannot take a fact operand", node)
        return FactRef(name, float(times), float(plus))
    if isinstance(value, list):
        raise ctx.fail(path, f"'{op}' takes a single value (use in / not_in for lists)", node)
    if op in ("lt", "le", "gt", "ge") and (not isinstance(value, int | float) or isinstance(value, bool)):
        raise ctx.fail(path, f"'{op}' takes a number", node)
    return value


def _parse_events(ctx: _Ctx, node: dict[str, Any], path: str) -> Events:
    extra = set(node) - {"events", "min_count"}
    if extra:
        raise ctx.fail(path, f"unknown keys beside 'events': {sorted(extra)}", node)
    spec = node["events"]
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ctx.fail(f"{path}.events", "'events' needs {kind: ..., phase: ...}", node)
    bad = set(spec) - {"kind", "phase", "data"}
    if bad:
        raise ctx.fail(f"{path}.events", f"unknown keys in 'events': {sorted(bad)}", spec)
    kind = spec["kind"]
    if not isinstance(kind, str) or kind not in catalog.EVENT_KINDS:
        known = ", ".join(catalog.EVENT_KINDS)
        raise ctx.fail(f"{path}.events.kind", f"unknown event kind '{kind}' (known: {known})", spec)
    phase = spec.get("phase")
    phases: tuple[str, ...]
    if phase is None:
        phases = ()
    elif isinstance(phase, str):
        phases = (phase,)
    elif isinstance(phase, list) and all(isinstance(p, str) for p in phase):
        phases = tuple(phase)
    else:
        raise ctx.fail(f"{path}.events.phase", "'phase' is a string or a list of strings", spec)
    data = spec.get("data") or {}
    if not isinstance(data, dict) or any(isinstance(v, dict | list) for v in data.values()):
        raise ctx.fail(f"{path}.events.data", "'data' maps keys to single values", spec)
    min_count = node.get("min_count", 1)
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
        raise ctx.fail(f"{path}.min_count", "'min_count' must be a positive integer", node)
    return Events(kind, phases, min_count, dict(data))


def _parse_confidence(ctx: _Ctx, node: Any) -> tuple[list[tuple[Confidence, Predicate]], Confidence]:
    if isinstance(node, str):
        if not is_confidence(node):
            raise ctx.fail("confidence", f"confidence must be one of {', '.join(CONFIDENCES)}")
        return [], node
    if not isinstance(node, dict):
        raise ctx.fail("confidence", "confidence is a level or {high: PREDICATE, medium: PREDICATE, default: LEVEL}")
    bad = set(node) - {"high", "medium", "low", "default"}
    if bad:
        raise ctx.fail("confidence", f"unknown keys in confidence: {sorted(bad)}", node)
    default = node.get("default", "low")
    if not is_confidence(default):
        raise ctx.fail("confidence.default", f"default must be one of {', '.join(CONFIDENCES)}", node)
    levels = [(level, _parse_predicate(ctx, node[level], f"confidence.{level}", 1))
              for level in CONFIDENCES if level in node]
    return levels, default


def _parse_fix(ctx: _Ctx, node: Any) -> tuple[str, dict[str, str]]:
    if node is None:
        raise ctx.fail("fix", "missing 'fix' (every finding says what to do)")
    if isinstance(node, str):
        return " ".join(node.split()), {}
    if not isinstance(node, dict):
        raise ctx.fail("fix", "'fix' is a mapping {text: ..., llama.cpp: ..., ...}")
    known = engines.names()
    bad = set(node) - {"text", *known}
    if bad:
        raise ctx.fail("fix", f"unknown keys in fix: {sorted(bad)} (engines: {', '.join(known)})", node)
    text = node.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ctx.fail("fix.text", "'fix.text' must say what to do", node)
    by_engine = {}
    for engine in known:
        if engine in node:
            value = node[engine]
            if not isinstance(value, str) or not value.strip():
                raise ctx.fail(f"fix.{engine}", f"fix for {engine} must be a non-empty string", node)
            by_engine[engine] = value.strip()
    return " ".join(text.split()), by_engine


def _check_template(ctx: _Ctx, field_name: str, template: str) -> None:
    if template.count("[[") != template.count("]]"):
        raise ctx.fail(field_name, "unbalanced [[ ]] optional part")
    for ph in placeholders(template):
        if ph.filter is not None and ph.filter not in FILTERS:
            raise ctx.fail(field_name, f"unknown filter '|{ph.filter}' (known: {', '.join(FILTERS)})")
        if ph.name.startswith("event."):
            continue
        if not catalog.is_known(ph.name):
            raise ctx.fail(field_name, f"placeholder {{{ph.name}}} names an unknown fact")


def _parse_cases(ctx: _Ctx, node: Any) -> list[RuleCase]:
    if node is None:
        return []
    if not isinstance(node, list):
        raise ctx.fail("tests", "'tests' is a list of cases")
    cases = []
    for i, case in enumerate(node):
        label = f"tests[{i}]"
        if not isinstance(case, dict):
            raise ctx.fail(label, "a test case is a mapping", node)
        bad = set(case) - CASE_KEYS
        if bad:
            raise ctx.fail(label, f"unknown keys in test case: {sorted(bad)}", case)
        facts = case.get("facts") or {}
        if not isinstance(facts, dict):
            raise ctx.fail(f"{label}.facts", "'facts' maps fact names to values", case)
        for name, value in facts.items():
            _check_fact_name(ctx, name, f"{label}.facts", case)
            if isinstance(value, dict):
                raise ctx.fail(f"{label}.facts", f"value of {name} must be a number, string, bool or list", case)
        events = case.get("events") or []
        if not isinstance(events, list) or not all(isinstance(e, dict) and "kind" in e for e in events):
            raise ctx.fail(f"{label}.events", "'events' is a list of {kind: ..., phase: ..., line: ...}", case)
        for event in events:
            if not isinstance(event["kind"], str) or event["kind"] not in catalog.EVENT_KINDS:
                raise ctx.fail(f"{label}.events", f"unknown event kind '{event['kind']}'", case)
        expect = case.get("expect")
        if not is_rule_outcome(expect):
            raise ctx.fail(f"{label}.expect", "'expect' is fired, ok, unknown or skipped", case)
        conf = case.get("confidence")
        if conf is not None and not is_confidence(conf):
            raise ctx.fail(f"{label}.confidence", f"confidence must be one of {', '.join(CONFIDENCES)}", case)
        missing = case.get("missing")
        if missing is not None and (not isinstance(missing, list) or not all(isinstance(m, str) for m in missing)):
            raise ctx.fail(f"{label}.missing", "'missing' is a list of fact names", case)
        mode = case.get("mode")
        if mode is not None and not is_mode(mode):
            raise ctx.fail(f"{label}.mode", f"mode must be one of {', '.join(MODES)}", case)
        observed = case.get("events_observed", True)
        if not isinstance(observed, bool):
            raise ctx.fail(f"{label}.events_observed", "'events_observed' is true or false", case)
        name = case.get("name") or f"case {i + 1}"
        cases.append(RuleCase(str(name), dict(facts), [dict(e) for e in events], observed, expect, conf,
                              list(missing) if missing is not None else None, mode, _line_of(case)))
    return cases
