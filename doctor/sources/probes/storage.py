"""The storage probe: what the model file sits on, and (with --bench) how fast it really reads.

File -> mount (mountinfo, longest prefix of the resolved path) -> filesystem type: network
filesystems (nfs, cifs/smb, 9p, virtiofs, ceph, lustre, any fuse.*) and tmpfs are decided there;
btrfs and others with an anonymous device number go through the mount source; overlayfs (a
container's root) cannot be followed to the host, so the disk under the container's bind mounts
(/etc/hostname ...) is reported as a labelled guess; a device number goes to doctor/sources/probes/blockdev.py,
and a loop device's backing file is mapped again.
"""

from __future__ import annotations

from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, Reporter, Roots, read_text
from doctor.sources.probes.blockdev import DeviceChain, resolve_devnum, resolve_name
from doctor.sources.probes.mountinfo import Mount, find_mount, parse_mountinfo

NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "ceph", "glusterfs", "lustre", "gpfs",
              "beegfs", "afs", "davfs", "orangefs", "ocfs2", "gfs2", "cephfs", "pvfs2"}
LOCAL_FUSE = {"fuse.lxcfs", "fuse.squashfuse", "fuse.portal", "fuse.appimagefuse", "fuse.AppImage"}
RAM_FS = {"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"}
OVERLAY_FS = {"overlay", "fuse-overlayfs", "aufs"}
DOCKER_BIND_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf")
MAX_LOOP_DEPTH = 4


def collect_storage(roots: Roots, path: str) -> Facts:
    rep = Reporter("storage")
    text = rep.read(("model.storage.kind", "model.storage.fs_type"),
                    lambda: read_text(roots.procfs("self", "mountinfo"), 8 << 20), "/proc/self/mountinfo")
    if text is None:
        return rep.facts
    mounts = parse_mountinfo(text)
    real = rep.read("model.storage.kind", lambda: roots.realpath(path), "resolve the model path")
    if real is None:
        return rep.facts
    _map_file(rep, roots, mounts, real, 0)
    return rep.facts


def _map_file(rep: Reporter, roots: Roots, mounts: list[Mount], real: str, depth: int) -> None:
    mount = find_mount(mounts, real)
    if mount is None:
        rep.unknown("model.storage.kind", f"no mount holds {real}")
        return
    if depth == 0:
        rep.set("model.storage.fs_type", mount.fstype,
                text=f"mountinfo: {mount.mountpoint} {mount.fstype} {mount.source}")
        rep.set("model.storage.mount", mount.mountpoint, text=f"mount id {mount.mount_id}")
    fstype = mount.fstype
    if fstype in NETWORK_FS or (fstype.startswith("fuse.") and fstype not in LOCAL_FUSE):
        remote = fstype.startswith("fuse.") and fstype not in LOCAL_FUSE
        what = f"{fstype} from {mount.source}" + (" (FUSE: possibly remote)" if remote else "")
        rep.set("model.storage.kind", "network", text=what)
        rep.set("model.storage.remote", True, text=what)
        rep.set("model.storage.transport", "network", text=what)
        rep.set("model.storage.device", mount.source, text=what)
        return
    if fstype in RAM_FS:
        rep.set("model.storage.kind", "tmpfs", text=f"{fstype} at {mount.mountpoint}: the file is in RAM")
        rep.set("model.storage.remote", False)
        rep.set("model.storage.device", fstype)
        return
    if fstype in OVERLAY_FS:
        _overlay(rep, roots, mounts, mount)
        return
    chain: DeviceChain
    if mount.major != 0:
        chain = resolve_devnum(roots, mount.major, mount.minor)
    elif mount.source.startswith("/dev/"):
        chain = resolve_name(roots, mount.source)
    else:
        rep.unknown("model.storage.kind", f"{fstype} from {mount.source!r} has no block device to follow")
        return
    if chain.backing_files and depth < MAX_LOOP_DEPTH:
        for backing in chain.backing_files:
            rep.set("model.storage.device", " → ".join(chain.steps), text=f"loop device backed by {backing}")
            _map_file(rep, roots, mounts, backing.removesuffix(" (deleted)"), depth + 1)
        return
    _report_chain(rep, chain, guess=False)


def _overlay(rep: Reporter, roots: Roots, mounts: list[Mount], mount: Mount) -> None:
    """A container root: the layers are host paths we cannot see; guess the disk from the bind mounts."""
    candidates = [m for m in mounts if m.mountpoint in DOCKER_BIND_FILES and m.major != 0]
    upper = mount.super_option("upperdir") or "?"
    if not candidates:
        rep.unknown("model.storage.kind", f"overlay filesystem (container layer {upper}); the host disk is not visible")
        rep.set("model.storage.device", "overlay")
        return
    chain = resolve_devnum(roots, candidates[0].major, candidates[0].minor)
    _report_chain(rep, chain, guess=True, prefix="overlay (container) on ")


def _report_chain(rep: Reporter, chain: DeviceChain, guess: bool, prefix: str = "") -> None:
    worst = chain.worst
    if worst is None:
        rep.unknown("model.storage.kind", chain.problem or "no disk found under the file")
        return
    note = "; ".join(filter(None, [worst.note, "guessed from the container's bind mounts" if guess else ""]))
    path = " → ".join(chain.steps)
    all_disks = ", ".join(f"{d.name}={d.kind}" for d in chain.disks)
    members = f" members {all_disks}" if len(chain.disks) > 1 else ""
    text = f"{path} ({worst.kind}{': ' + note if note else ''}){members}"
    rep.set("model.storage.kind", worst.kind, text=text)
    rep.set("model.storage.device", prefix + path, text=text)
    rep.set("model.storage.transport", worst.transport, text=text)
    rep.set("model.storage.remote", worst.kind == "network", text=text)
    if worst.rotational is not None and worst.kind not in ("virtual", "network"):
        rep.set("model.storage.rotational", worst.rotational, text=f"{worst.name} queue/rotational")
    elif worst.kind == "virtual":
        rep.unknown("model.storage.rotational", "a virtual disk's rotational flag says nothing about the media")


def _collect(ctx: ProbeContext) -> Facts:
    path = ctx.storage_path or ctx.model_path
    if not path:
        rep = Reporter("storage")
        rep.unknown("model.storage.kind", "no model path")
        return rep.facts
    return collect_storage(ctx.roots, path)


PROBE = Probe("storage", "passive", "the disk / filesystem under the model file",
              ("model.storage.kind",), _collect)
