"""What a model path alone says about the storage under it, for logs read away from the machine.

`scan` measures the disk; a pasted log only has the path. Some paths name their storage:
- `/mnt/<letter>/...` inside WSL is a Windows drive served to Linux over 9P (DrvFs), which reads at a
  small fraction of the disk's speed and defeats mmap's page sharing;
- `\\\\host\\share\\...`, `//host/share/...`, `smb://`, `nfs://` and a path component named nfs, smb, cifs or
  nas are network shares; RunPod's `/runpod-volume` is a network volume;
- `/run/user/<uid>/gvfs/` (GNOME's FUSE mounts), `/content/drive/` (Google Drive in Colab), `/dbfs/`
  (Databricks) and `/gcs/` (Cloud Storage FUSE on Vertex AI) are FUSE file systems over the network.

Pure.
"""

from __future__ import annotations

import re

_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^/mnt/[a-zA-Z]/"), "wsl-drvfs", "a Windows drive mounted into WSL (DrvFs over 9P)"),
    (re.compile(r"^(?:\\\\|//)[^\\/]+[\\/]"), "network", "a network share (UNC path)"),
    (re.compile(r"^(?:smb|nfs|cifs)://", re.IGNORECASE), "network", "a network share"),
    (re.compile(r"^/runpod-volume/"), "network", "a RunPod network volume"),
    (re.compile(r"^/run/user/\d+/gvfs/"), "fuse", "a GVfs (FUSE) mount, usually a network share"),
    (re.compile(r"^/content/drive/"), "fuse", "Google Drive mounted in Colab (FUSE)"),
    (re.compile(r"^/dbfs/"), "fuse", "Databricks DBFS (FUSE over object storage)"),
    (re.compile(r"^/gcs/"), "fuse", "Cloud Storage FUSE"),
    (re.compile(r"(?:^|/)(?:nfs|smb|cifs|nas)(?:\d*)/", re.IGNORECASE), "network", "a network share (NFS/SMB)"),
)


def path_storage(path: str) -> tuple[str, str] | None:
    """(kind, description) for a path whose storage its form gives away, else None."""
    path = path.strip().strip("'\"")
    for pattern, kind, what in _RULES:
        if pattern.search(path):
            return kind, what
    return None
