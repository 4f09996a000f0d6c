"""The on-disk JSON caches' one way to store an entry: written atomically into a private folder
(a temporary file renamed over the entry), the folder then cut back to its newest entries, and where
the folders are (`cache_folder`). Used by the rule-file cache (doctor/judge/rulecache.py), the log
patterns' literal cache (doctor/sources/logs/literal_cache.py) and the GGUF probe's cache
(doctor/sources/probes/gguf_model.py); each decides what an entry holds and when one is valid. A
failure to store is the caller's to ignore. Measurements of this machine (the read bandwidth,
doctor/sources/probes/ceilings.py; the kernel probe, doctor/sources/live/embedded/kernels.py) share
`load_fresh` / `store_fresh`: one file per machine key, its figures by name, each kept a month when
measured on quiet cores and an hour when others used them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

FRESH_S = 30 * 86400  # a measurement taken on quiet cores is kept a month
BUSY_FRESH_S = 3600  # one taken while others used the cores, an hour


def cache_folder(name: str) -> str | None:
    """`$XDG_CACHE_HOME/llm-doctor/<name>` (else `~/.cache/llm-doctor/<name>`), or None when
    `LLM_DOCTOR_NO_CACHE` turns the caches off."""
    if os.environ.get("LLM_DOCTOR_NO_CACHE", "").strip() not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llm-doctor", name)


def store_text(folder: str, path: str, text: str, keep: int) -> None:
    """Write `text` to `path` inside `folder` atomically, then keep the `keep` newest `.json` entries.
    Raises OSError when the folder or file cannot be written."""
    import tempfile

    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".entry-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    prune(folder, keep)


def prune(folder: str, keep: int) -> None:
    """Delete all but the `keep` most recently written `.json` entries of `folder`."""
    entries = [e for e in os.scandir(folder) if e.name.endswith(".json") and e.is_file(follow_symlinks=False)]
    if len(entries) <= keep:
        return
    entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns)
    for entry in entries[: len(entries) - keep]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)


def key_path(folder: str, key: dict[str, Any]) -> str:
    """The entry file of a machine key (its JSON's hash)."""
    return os.path.join(folder, hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32] + ".json")


def load_fresh(folder: str, key: dict[str, Any], field: str, now: float,
               busy: Callable[[dict[str, Any]], bool]) -> dict[str, dict[str, Any]]:
    """The figures kept under `key` (in the entry's `field`) that are still fresh at `now`: each needs a `when`,
    and is kept BUSY_FRESH_S where `busy(figure)` says it was measured on busy cores, else FRESH_S ({} when
    none)."""
    try:
        with open(key_path(folder, key), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get(field), dict):
        return {}
    return {name: entry for name, entry in data[field].items()
            if isinstance(entry, dict) and isinstance(entry.get("when"), int | float)
            and now - float(entry["when"]) <= (BUSY_FRESH_S if busy(entry) else FRESH_S)}


def store_fresh(folder: str, key: dict[str, Any], field: str, entries: dict[str, dict[str, Any]], keep: int,
                busy: Callable[[dict[str, Any]], bool]) -> None:
    """Add `entries` to the fresh figures kept under `key`; a failure to write is ignored."""
    kept = load_fresh(folder, key, field, time.time(), busy)
    kept.update(entries)
    with contextlib.suppress(OSError, TypeError, ValueError):
        store_text(folder, key_path(folder, key), json.dumps({"key": key, field: kept}, sort_keys=True), keep)
