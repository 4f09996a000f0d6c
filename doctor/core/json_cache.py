"""The on-disk JSON caches' one way to store an entry: written atomically into a private folder
(a temporary file renamed over the entry), the folder then cut back to its newest entries. Used by
the rule-file cache (doctor/judge/rulecache.py) and the GGUF probe's cache (doctor/sources/probes/gguf_model.py); each
decides what an entry holds and when one is valid. A failure to store is the caller's to ignore.
"""

from __future__ import annotations

import contextlib
import os


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
