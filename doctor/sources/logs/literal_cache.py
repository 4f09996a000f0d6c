"""The required literals of the log patterns, remembered between runs (sources floor; the strings are
the parsers' own patterns, and what doctor/sources/logs/literals.py reads from their syntax).

Every parser's table of line kinds asks, when its class is made, which literals each of its
patterns requires (`required_literals`: Python's own regex parser run over ~200 patterns, about
20 ms of every start, a five-line log's included). The answer depends on nothing but the pattern,
its flags, the code that reads the syntax tree and Python's regex parser, so it is kept: one JSON
file under the user's cache folder (`$XDG_CACHE_HOME/llm-doctor/literals`, else
`~/.cache/llm-doctor/literals`; doctor/core/json_cache.py), named by a SHA-256 of literals.py's
source, this module's and the exact Python version, holding pattern -> literals (and, under keys of
their own, pattern -> where a search may begin: literals.py `leading_literals`). An entry is looked
up by the pattern's whole text and flags, so an edited pattern is a new entry and an edited reader
or another Python a new file: it cannot go stale. What a run had to compute is written once, when
the process exits. A missing, unreadable, foreign or damaged file is just a miss; a folder that
cannot be written leaves every run computing, as without the cache. `LLM_DOCTOR_NO_CACHE=1` turns
it off. JSON, never pickle: loading it runs no code.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from doctor.core.json_cache import cache_folder, store_text

CACHE_VERSION = 1
CACHE_KEEP = 8  # files kept (newest): one per version of the reader and of Python
ENTRIES_MAX = 4096  # entries kept in the file; past it only this run's patterns are written

Literals = tuple[str, ...] | None
_STATE: dict[str, dict[str, list[str] | None] | None] = {"memo": None, "added": None}


@functools.lru_cache(maxsize=1)
def _stamp() -> str:
    digest = hashlib.sha256(f"{CACHE_VERSION}\0{sys.version}\0".encode())
    for module in (str(Path(__file__).with_name("literals.py")), __file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()


def _path() -> str | None:
    folder = cache_folder("literals")
    if folder is None:
        return None
    try:
        return os.path.join(folder, _stamp() + ".json")
    except OSError:  # the reader's source cannot be read: no cache
        return None


def _memo() -> dict[str, list[str] | None]:
    memo = _STATE["memo"]
    if memo is None:
        memo = _STATE["memo"] = _read(_path())
    return memo


def _read(path: str | None) -> dict[str, list[str] | None]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return {}
    entries = stored.get("literals") if isinstance(stored, dict) and stored.get("key") == _stamp() else None
    if not isinstance(entries, dict):
        return {}
    for value in entries.values():
        if value is not None and not (isinstance(value, list) and all(type(s) is str for s in value)):
            return {}
    return entries


def _key(pattern: str, flags: int, kind: str) -> str:
    return f"{kind}\0{flags}\0{pattern}" if kind else f"{flags}\0{pattern}"


def literals(pattern: str, flags: int, compute: Callable[[str, int], Literals], kind: str = "") -> Literals:
    """`compute(pattern, flags)`, from the cache when this pattern's answer is there. `kind` names
    another question asked of the same pattern (literals.py's "lead": where a search may begin); its
    answers are kept beside the literals, under their own keys."""
    memo = _memo()
    key = _key(pattern, flags, kind)
    if key in memo:
        found = memo[key]
        return tuple(found) if found is not None else None
    value = compute(pattern, flags)
    memo[key] = list(value) if value is not None else None
    added = _STATE["added"]
    if added is None:
        added = _STATE["added"] = {}
        atexit.register(save)
    added[key] = memo[key]
    return value


def save() -> None:
    """Write what this process computed into the cache file (once; a failure leaves it as it was)."""
    added, _STATE["added"] = _STATE["added"], None
    path = _path()
    if not added or path is None:
        return
    entries = _read(path)
    if len(entries) + len(added) > ENTRIES_MAX:
        entries = {}
    entries.update(added)
    try:
        store_text(os.path.dirname(path), path, json.dumps({"key": _stamp(), "literals": entries}), CACHE_KEEP)
    except (OSError, ValueError):
        return
