"""Reading the rule base's YAML: a safe loader that refuses aliases and remembers line numbers, and
the one-line error every rule-base check raises (file:line [field]: message).

Judge floor. The rule files and `families.yaml` (rules/) are read through here; their parsed trees
are kept by doctor/judge/rulecache.py. The error texts are this module's own.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from doctor.core.errors import RuleError
from doctor.judge.rulecache import LineDict, LineList, load_tree

MAX_FILE_BYTES = 1 << 20


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
            mapping = LineDict(super().construct_mapping(node, deep=True))
            mapping.line = node.start_mark.line + 1
            mapping.key_lines = {}
            for key_node, _value in node.value:
                mapping.key_lines[str(key_node.value)] = key_node.start_mark.line + 1
            return mapping

        def construct_sequence(self, node: Any, deep: bool = False) -> Any:
            seq = LineList(super().construct_sequence(node, deep=True))
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


def builtin_rules_dir() -> Path:
    """The built-in rule base: doctor/_builtin_rules in the wheel, rules/ in a checkout."""
    package = Path(__file__).resolve().parents[1]  # doctor/
    packaged = package / "_builtin_rules"
    if packaged.is_dir():
        return packaged
    checkout = package.parent / "rules"
    if checkout.is_dir():
        return checkout
    raise RuleError(str(packaged), None, None, "built-in rules not found (broken install?)")


def read_tree(path: Path) -> Any:
    """One rule-base file's YAML tree (from the cache when its text is unchanged)."""
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
    return load_tree(text, where, load_yaml)


# -- one-line errors ---------------------------------------------------------------------------------

def line_of(node: Any, key: str | None = None) -> int | None:
    """The line a mapping's key (its last dotted part) or a node starts on."""
    if isinstance(node, LineDict):
        if key is not None and key.split(".")[-1] in node.key_lines:
            return node.key_lines[key.split(".")[-1]]
        return node.line
    return getattr(node, "line", None)


class Ctx:
    """Where a check is: the file, the node being read, and the rule id once known (the message's prefix)."""

    def __init__(self, where: str, node: Any, rule_id: str | None = None) -> None:
        self.where = where
        self.node = node
        self.rule_id = rule_id

    def fail(self, field_name: str, message: str, node: Any = None) -> RuleError:
        line = line_of(node if node is not None else self.node, field_name)
        prefix = f"{self.rule_id}: " if self.rule_id else ""
        return RuleError(self.where, line, field_name, prefix + message)
