"""The entry points of one group, as `importlib.metadata.entry_points(group=...)` lists them, read
without importing importlib.metadata (core floor; the strings are the installed distributions' own
`entry_points.txt` and `METADATA` files).

Importing importlib.metadata costs about 25 ms (it pulls in email, zipfile, csv, socket, datetime),
and finding the engine table's rows through it is on every command's path, `analyze` of a five-line
log included. The lookup itself is simple: each directory on `sys.path` is listed, its
`*.dist-info` / `*.egg-info` children taken in listing order, one distribution per normalised name
(the first found), and each one's `entry_points.txt` read as importlib.metadata's own small INI
reader reads it. This module does exactly that, in the order importlib.metadata (Python 3.11's)
does it, and hands over to importlib.metadata itself for everything out of the ordinary: a zip
file or an `.egg` folder on the path, a distribution finder other than the standard one, a file it
cannot read as expected, a Python of another minor version. An odd case costs time, never a
different answer.
"""

from __future__ import annotations

import os
import re
import sys

# (entry point name, its value "module:attribute", the Name of its distribution's metadata or None)
Found = tuple[str, str, str | None]

_EXTS = (".dist-info", ".egg-info")


class _Unusual(Exception):
    """Something this reader does not follow importlib.metadata in: ask importlib.metadata."""


def group_entry_points(group: str) -> list[Found]:
    """Every entry point of `group`, in importlib.metadata's order, with its distribution's name."""
    try:
        return _read(group)
    except (_Unusual, OSError, UnicodeDecodeError, TypeError, ValueError):
        return _from_importlib(group)


def _from_importlib(group: str) -> list[Found]:
    from importlib.metadata import entry_points

    found: list[Found] = []
    for ep in entry_points(group=group):
        dist = getattr(ep, "dist", None)
        found.append((ep.name, ep.value, dist.metadata["Name"] if dist is not None else None))
    return found


def _read(group: str) -> list[Found]:
    if sys.version_info[:2] != (3, 11):  # the order and rules followed here are 3.11's
        raise _Unusual("python")
    from importlib.machinery import PathFinder

    if any(getattr(f, "find_distributions", None) is not None and f is not PathFinder for f in sys.meta_path):
        raise _Unusual("finder")
    found: list[Found] = []
    seen: set[str] = set()
    for info in _infos(sys.path):
        name = _normalize(os.path.splitext(os.path.basename(info))[0].partition("-")[0])
        if name in seen:
            continue  # importlib.metadata keeps the first distribution of a name
        seen.add(name)
        pairs = _group_pairs(_read_text(os.path.join(info, "entry_points.txt")) or "", group)
        if pairs:
            dist_name = _dist_name(info)
            found.extend((key, value, dist_name) for key, value in pairs)
    return found


def _infos(paths: list[str]) -> list[str]:
    """The metadata folders of every path entry, in importlib.metadata's order: per entry, grouped by
    normalised name in the order the names first appear in the listing."""
    out: list[str] = []
    for root in paths:
        root = os.fspath(root)
        if os.path.basename(root).lower().endswith(".egg"):
            raise _Unusual("egg")
        try:
            children = os.listdir(root or ".")
        except OSError:
            if os.path.exists(root or "."):  # a zip file (or an unreadable folder): importlib's own rules
                raise _Unusual("zip") from None
            continue
        by_name: dict[str, list[str]] = {}
        for child in children:
            low = child.lower()
            if not low.endswith(_EXTS):
                continue
            if not child.endswith(_EXTS):  # "Foo.DIST-INFO": importlib names it from its metadata
                raise _Unusual("case")
            name = _normalize(low.rpartition(".")[0].partition("-")[0])
            by_name.setdefault(name, []).append(os.path.join(root, child))
        for infos in by_name.values():
            out.extend(infos)
    return out


def _normalize(name: str) -> str:
    """importlib.metadata's Prepared.normalize: PEP 503, dashes as underscores."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return None


def _group_pairs(text: str, group: str) -> list[tuple[str, str]]:
    """The (name, value) pairs of one section of an entry_points.txt, read as importlib.metadata's
    Sectioned reader does (stripped lines, `#` comments, `[section]` headers, `name = value`)."""
    pairs: list[tuple[str, str]] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue
        if "=" not in line:  # importlib.metadata fails on it: let it say how
            raise _Unusual("pair")
        key, value = line.split("=", 1)
        if section == group:
            pairs.append((key.strip(), value.strip()))
    return pairs


def _dist_name(info: str) -> str | None:
    """The `Name` header of a distribution's METADATA (or PKG-INFO), as email's parser gives it."""
    text = _read_text(os.path.join(info, "METADATA")) or _read_text(os.path.join(info, "PKG-INFO"))
    if not text:
        raise _Unusual("metadata")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for at, line in enumerate(lines):
        if not line:
            break
        if line[:1] in (" ", "\t") or line.startswith("From ") or ":" not in line:
            raise _Unusual("header")  # a folded header, an mbox line, a defect: email's rules
        key, value = line.split(":", 1)
        if key.lower() == "name":
            if at + 1 < len(lines) and lines[at + 1][:1] in (" ", "\t"):
                raise _Unusual("folded")
            return value.lstrip(" \t")
    return None
