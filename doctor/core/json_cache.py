"""The on-disk JSON caches' one way to store an entry: written atomically into a private folder
(a temporary file renamed over the entry), the folder then cut back to its newest entries, and where
the folders are (`cache_folder`). Used by the rule-file cache (doctor/judge/rulecache.py), the log
patterns' literal cache (doctor/sources/logs/literal_cache.py) and the GGUF probe's cache
(doctor/sources/probes/gguf_model.py); each decides what an entry holds and when one is valid. A
failure to store is the caller's to ignore.
"""

from __future__ import annotations

import contextlib
import os


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
