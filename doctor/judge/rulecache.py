"""The rule files' parsed YAML, kept as JSON so that a command does not parse YAML on every start.

Room in the house: doctor/judge/ruleyaml.py reads each rule-base file through `load_tree`; this module only
turns a file's text into its YAML data tree (mappings and lists that remember their line numbers)
and remembers that tree. Validation is not cached: every rule is checked against the catalogue
from the tree on every load, so a cached file can never let a rule through that the YAML would not.

Parsing the ~4000 lines of built-in rules with PyYAML (even with libyaml's parser, the node
construction runs in Python) was the largest part of a scan's start-up (~45 ms); reading the same
tree back from JSON takes a few milliseconds. Entries live in the user's cache folder
(`$XDG_CACHE_HOME/llm-doctor/rules`, else `~/.cache/llm-doctor/rules`), one per file content, named
by a SHA-256 of the content, PyYAML's version and parser, and this loader's own source: an edited
rule file or a new llm-doctor is a new key. They are JSON, never pickle - loading one runs no code -
and a file that does not match its key or its shape is ignored and rewritten. A tree holding a value
JSON cannot carry as it is (a YAML date, binary, a non-string key) is simply not cached.
`LLM_DOCTOR_NO_CACHE=1` turns the cache off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from doctor.core import json_cache
from doctor.core.json_cache import store_text

CACHE_VERSION = 1
CACHE_KEEP = 64  # entries kept (newest); the built-in rule base is about a dozen files
LINE = "\u0000line"  # a stored mapping's [line, [line of each key, in key order]]
ITEMS = "\u0000items"  # a stored list: {ITEMS: [...], LINE: line}


class LineDict(dict[Any, Any]):
    """A YAML mapping with the line it starts on and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]


class LineList(list[Any]):
    """A YAML list with the line it starts on (1-based)."""

    line: int = 0


class _NotStorable(Exception):
    pass


def cache_folder() -> str | None:
    """Where parsed rule files are kept, or None when the cache is off."""
    return json_cache.cache_folder("rules")


@functools.lru_cache(maxsize=1)
def _code_stamp() -> str:
    """What the tree depends on besides the text: the loader's source, and PyYAML's version and
    parser (its __init__.py, which holds the version, and its files: libyaml's binding or not) -
    found without importing PyYAML, which a warm start does not need."""
    from importlib.util import find_spec

    digest = hashlib.sha256(f"{CACHE_VERSION}".encode())
    # the loader lives in ruleyaml.py beside this module (read, not imported: ruleyaml imports us)
    for module in (__file__, str(Path(__file__).with_name("ruleyaml.py"))):
        digest.update(Path(module).read_bytes())
    spec = find_spec("yaml")
    if spec is None or not spec.origin:
        raise OSError("PyYAML not found")
    package = Path(spec.origin)
    digest.update(package.read_bytes())
    digest.update("\0".join(sorted(p.name for p in package.parent.iterdir())).encode())
    return digest.hexdigest()


def _key(text: str) -> str:
    return hashlib.sha256(_code_stamp().encode() + b"\0" + text.encode("utf-8")).hexdigest()


def load_tree(text: str, where: str, parse: Callable[[str, str], Any], folder: str | None = None) -> Any:
    """The YAML data tree of one rule file's text: from the cache when an entry matches, else
    `parse(text, where)` (which raises RuleError for bad YAML; nothing is stored then)."""
    folder = cache_folder() if folder is None else folder
    if folder is None:
        return parse(text, where)
    try:
        key = _key(text)
    except OSError:  # the loader's or PyYAML's source cannot be read: no cache
        return parse(text, where)
    path = os.path.join(folder, key + ".json")
    tree = _read_entry(path, key)
    if tree is not _MISS:
        return tree
    tree = parse(text, where)
    _write_entry(folder, path, key, tree)
    return tree


_MISS = object()


def _read_entry(path: str, key: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle, object_hook=_decode)
        if not isinstance(stored, list) or len(stored) != 2 or stored[0] != key:
            return _MISS
        return stored[1]
    except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError):
        return _MISS


def _decode(obj: dict[str, Any]) -> Any:
    """One JSON object back into a LineList or LineDict; anything off raises (the entry is a miss).
    Called for every mapping and list of every rule file on every start: kept lean."""
    if ITEMS in obj:
        items = obj[ITEMS]
        if len(obj) != 2 or type(obj[LINE]) is not int or not isinstance(items, list):
            raise ValueError("bad list")
        seq = LineList(items)
        seq.line = obj[LINE]
        return seq
    line, key_lines = obj.pop(LINE)
    if type(line) is not int or not isinstance(key_lines, list) or len(key_lines) != len(obj) \
            or not set(map(type, key_lines)) <= _INT:
        raise ValueError("bad mapping")
    mapping = LineDict(obj)
    mapping.line = line
    mapping.key_lines = dict(zip(obj, key_lines, strict=True))
    return mapping


_INT = {int}


def _encode(node: Any) -> Any:
    if isinstance(node, LineDict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if not isinstance(k, str) or k.startswith("\u0000"):
                raise _NotStorable(k)
            out[k] = _encode(v)
        out[LINE] = [node.line, [node.key_lines.get(k, node.line) for k in node]]
        return out
    if isinstance(node, LineList):
        return {ITEMS: [_encode(v) for v in node], LINE: node.line}
    if node is None or type(node) in (str, bool, int, float):
        return node
    raise _NotStorable(type(node).__name__)  # a date, binary, a plain dict or list: parse it each time


def _write_entry(folder: str, path: str, key: str, tree: Any) -> None:
    """Store atomically; a tree JSON cannot hold, or a folder that cannot be written, is not cached."""
    try:
        store_text(folder, path, json.dumps([key, _encode(tree)], ensure_ascii=False), CACHE_KEEP)
    except (_NotStorable, OSError, ValueError, TypeError, RecursionError):
        return
