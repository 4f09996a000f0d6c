"""/proc/self/mountinfo: which mount holds a path, with its device number, type and source.

Format (proc(5)): `id parent MAJ:MIN root mountpoint options [optional...] - fstype source superopts`;
spaces, tabs, newlines and backslashes in paths are octal-escaped (\\040, \\011, \\012, \\134).
The mount holding a path is the one whose mount point is its longest prefix; of equal mount
points the later line (mounted on top) wins.

Pure: parses text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class Mount:
    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str
    mountpoint: str
    options: str
    fstype: str
    source: str
    super_options: str

    @property
    def dev(self) -> str:
        return f"{self.major}:{self.minor}"

    def super_option(self, key: str) -> str | None:
        for opt in self.super_options.split(","):
            k, _, v = opt.partition("=")
            if k == key:
                return v
        return None


def unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        if not sep:
            continue
        fields, rest = head.split(), tail.split()
        if len(fields) < 6 or len(rest) < 2:
            continue
        try:
            major, minor = (int(x) for x in fields[2].split(":", 1))
            mounts.append(Mount(int(fields[0]), int(fields[1]), major, minor, unescape(fields[3]),
                                unescape(fields[4]), fields[5], rest[0], unescape(rest[1]),
                                rest[2] if len(rest) > 2 else ""))
        except ValueError:
            continue
    return mounts


def find_mount(mounts: list[Mount], path: str) -> Mount | None:
    """The mount that holds `path` (an absolute, resolved path)."""
    best: Mount | None = None
    for mount in mounts:
        mp = mount.mountpoint
        inside = path == mp or mp == "/" or path.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) >= len(best.mountpoint)):
            best = mount
    return best
