"""The shipped catalogue, checked once and kept as JSON, so that `analyze` does not parse its YAML, compile
its 290 patterns with `re` and read their literals on every start (~0.3 s of CPU, more than the
catalogue's matching costs on a 20 MB log).

Sources floor. The entries are messages/*.yaml's, read and checked by loader.py; the scan's fragments are
matcher.py's. An entry of the cache holds both, under a key made of the files' names and contents and the
source of the modules that read them (loader.py, matcher.py, doctor/sources/logs/matcher.py): an edited
message file or a new llm-doctor is a new key, and only a catalogue that passed every check is stored.
Kept beside the rule files' cache (`$XDG_CACHE_HOME/llm-doctor/catalogue`, else ~/.cache/...); JSON,
never pickle; an entry that does not match its key or its shape is ignored and rewritten.
`LLM_DOCTOR_NO_CACHE=1` turns it off. An entry's own `re` pattern is compiled on its first match.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.core.json_cache import store_text
from doctor.sources.catalogue import loader

CACHE_VERSION = 1
CACHE_KEEP = 8
_READERS = ("loader.py", "matcher.py", "store.py")


def cache_folder() -> str | None:
    """Where the checked catalogue is kept, or None when the cache is off."""
    if os.environ.get("LLM_DOCTOR_NO_CACHE", "").strip() not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llm-doctor", "catalogue")


def _key(folder: Path) -> str:
    from doctor.sources.logs import matcher as log_matcher

    digest = hashlib.sha256(f"catalogue {CACHE_VERSION}".encode())
    here = Path(__file__).resolve().parent
    for module in [*(here / name for name in _READERS), Path(log_matcher.__file__)]:
        digest.update(module.read_bytes())
    for path in sorted(folder.glob("*.yaml")):
        digest.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Stored:
    """The checked catalogue: every entry; for the active ones (loader.Entry.active), the scan's fragments
    and what stands for each in an RE2 set (matcher.set_pattern, in the order of `active`)."""

    entries: tuple[loader.Entry, ...]
    fragments: tuple[str, ...]
    set_patterns: tuple[str, ...]

    @property
    def active(self) -> tuple[loader.Entry, ...]:
        return tuple(e for e in self.entries if e.active)


def _fresh(folder: Path) -> Stored:
    from doctor.sources.catalogue.matcher import scan_fragments, set_pattern

    entries = tuple(e for group in loader.load(folder).values() for e in group)
    active = [e for e in entries if e.active]
    return Stored(entries, scan_fragments(active), tuple(set_pattern(e) for e in active))


def _read(path: str, key: str) -> Stored | None:
    try:
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle)
        if not isinstance(stored, list) or len(stored) != 4 or stored[0] != key:
            return None
        found = Stored(tuple(loader.Entry(**raw) for raw in stored[1]), tuple(map(str, stored[2])),
                       tuple(map(str, stored[3])))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return found if len(found.set_patterns) == len(found.active) else None


@functools.lru_cache(maxsize=1)
def builtin() -> Stored:
    """The shipped catalogue (every engine's entries, in file-name order), checked."""
    cache = cache_folder()
    if cache is None:
        return _fresh(loader.MESSAGES)
    try:
        key = _key(loader.MESSAGES)
    except OSError:
        return _fresh(loader.MESSAGES)
    path = os.path.join(cache, key + ".json")
    found = _read(path, key)
    if found is not None:
        return found
    found = _fresh(loader.MESSAGES)
    stored: list[Any] = [key, [dataclasses.asdict(e) for e in found.entries], list(found.fragments),
                         list(found.set_patterns)]
    with contextlib.suppress(OSError, ValueError, TypeError):
        store_text(cache, path, json.dumps(stored, ensure_ascii=False), CACHE_KEEP)
    return found


def entries() -> tuple[loader.Entry, ...]:
    """The shipped entries, every engine's, in file-name order (read once, checked)."""
    return builtin().entries
