"""From a block device number to the disks under it, through sysfs, and what kind each disk is.

`/sys/dev/block/MAJ:MIN` resolves to the device; a partition's parent directory is its disk; a
device-mapper (LVM, dm-crypt, multipath) or md RAID device is followed through `slaves/` to every
member; a loop device through `loop/backing_file` (handed back to the caller to map as a file).
A stack is as slow as its slowest member.

Kinds: nvme, ssd, hdd, network, virtual, ram, unknown. The transport follows lsblk's logic
(util-linux lsblk.c get_transport) plus what lsblk leaves out: `vd*` virtio, `xvd*` Xen, nbd/rbd
network, and the NVMe controller's own `transport` attribute - tcp/rdma/fc mean NVMe over
fabrics, network storage that lsblk still calls nvme. A virtual disk's `queue/rotational` says
nothing about the media and is not used for its kind.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from doctor.sources.probes.base import Roots, try_text

KIND_RANK = {"network": 0, "hdd": 1, "virtual": 2, "unknown": 3, "ssd": 4, "nvme": 5, "ram": 6}
VIRTUAL_SCSI_DRIVERS = ("virtio_scsi", "storvsc", "hv_storvsc", "vmw_pvscsi", "xen", "mptspi", "BusLogic")
VIRTUAL_MODELS = re.compile(r"QEMU|VBOX|VIRTUAL|VMware|Virtual disk|Xen|Google PersistentDisk|Msft", re.IGNORECASE)
NETWORK_NVME_MODELS = re.compile(r"Elastic Block Store|PersistentDisk|nvme_card-pd", re.IGNORECASE)
HCTL = re.compile(r"^(\d+):(\d+):(\d+):(\d+)$")
MAX_DEPTH = 8


@dataclass(slots=True)
class Disk:
    """A leaf disk under the file."""

    name: str
    kind: str
    transport: str | None
    rotational: bool | None
    model: str | None
    note: str = ""


@dataclass(slots=True)
class DeviceChain:
    """What a device number resolves to: the path taken and the leaf disks."""

    steps: list[str] = field(default_factory=list)  # e.g. ["dm-0 (LVM vg0-root)", "sda2", "sda"]
    disks: list[Disk] = field(default_factory=list)
    backing_files: list[str] = field(default_factory=list)  # loop devices: files to map again
    problem: str | None = None

    @property
    def worst(self) -> Disk | None:
        return min(self.disks, key=lambda d: KIND_RANK.get(d.kind, 3)) if self.disks else None


def resolve_devnum(roots: Roots, major: int, minor: int) -> DeviceChain:
    chain = DeviceChain()
    link = roots.sys("dev", "block", f"{major}:{minor}")
    if not os.path.exists(link):
        chain.problem = f"no block device {major}:{minor} in sysfs"
        return chain
    _walk(roots, os.path.realpath(link), chain, 0)
    return chain


def resolve_name(roots: Roots, name: str) -> DeviceChain:
    """A device by its /dev name (btrfs and others give `/dev/nvme0n1p2` as the mount source)."""
    chain = DeviceChain()
    path = roots.sys("class", "block", os.path.basename(name))
    if not os.path.exists(path):
        chain.problem = f"{name}: not a block device in sysfs"
        return chain
    _walk(roots, os.path.realpath(path), chain, 0)
    return chain


def _walk(roots: Roots, path: str, chain: DeviceChain, depth: int) -> None:
    if depth > MAX_DEPTH:
        chain.problem = "device stack deeper than expected"
        return
    name = os.path.basename(path)
    if os.path.exists(os.path.join(path, "partition")):
        chain.steps.append(name)
        _walk(roots, os.path.dirname(path), chain, depth + 1)
        return
    if name.startswith("dm-"):
        dm_name = try_text(os.path.join(path, "dm", "name")) or "?"
        uuid = try_text(os.path.join(path, "dm", "uuid")) or ""
        owner = uuid.split("-", 1)[0] if "-" in uuid else "dm"
        chain.steps.append(f"{name} ({owner} {dm_name})")
        _members(roots, path, chain, depth)
        return
    if name.startswith("md"):
        level = try_text(os.path.join(path, "md", "level")) or "md"
        chain.steps.append(f"{name} ({level})")
        _members(roots, path, chain, depth)
        return
    if name.startswith("loop"):
        backing = try_text(os.path.join(path, "loop", "backing_file"))
        chain.steps.append(f"{name} (loop{' of ' + backing if backing else ''})")
        if backing:
            chain.backing_files.append(backing)
        else:
            chain.disks.append(Disk(name, "unknown", "loop", None, None, "loop device without a backing file"))
        return
    chain.steps.append(name)
    chain.disks.append(classify_disk(roots, path))


def _members(roots: Roots, path: str, chain: DeviceChain, depth: int) -> None:
    slaves = os.path.join(path, "slaves")
    try:
        members = sorted(os.listdir(slaves))
    except OSError:
        members = []
    if not members:
        chain.disks.append(Disk(os.path.basename(path), "unknown", None, None, None, "stacked device without members"))
    for member in members:
        _walk(roots, os.path.realpath(os.path.join(slaves, member)), chain, depth + 1)


def _scsi_host(path: str) -> str | None:
    """The SCSI host number from the device link's H:C:T:L."""
    target = os.path.basename(os.path.realpath(os.path.join(path, "device")))
    m = HCTL.match(target)
    return m.group(1) if m else None


def classify_disk(roots: Roots, path: str) -> Disk:
    name = os.path.basename(path)
    rot_text = try_text(os.path.join(path, "queue", "rotational"))
    rotational = None if rot_text is None else rot_text == "1"
    model = try_text(os.path.join(path, "device", "model"))
    vendor = try_text(os.path.join(path, "device", "vendor"))
    label = " ".join(filter(None, (vendor, model))) or None
    if name.startswith("nvme"):
        transport = (try_text(os.path.join(path, "device", "transport"))
                     or try_text(os.path.join(path, "device", "device", "transport")) or "pcie")
        if transport in ("tcp", "rdma", "fc"):
            return Disk(name, "network", f"nvme-{transport}", rotational, label, f"NVMe over {transport} (fabrics)")
        if transport == "loop":
            return Disk(name, "virtual", "nvme-loop", rotational, label, "NVMe loop target")
        if model and NETWORK_NVME_MODELS.search(model):
            return Disk(name, "network", "nvme", rotational, label, f"{model.strip()} is a network volume")
        return Disk(name, "nvme", "nvme", rotational, label)
    if name.startswith("vd"):
        return Disk(name, "virtual", "virtio", rotational, label, "virtio disk: media unknown")
    if name.startswith("xvd"):
        return Disk(name, "virtual", "xen", rotational, label, "Xen virtual disk: media unknown")
    if name.startswith(("nbd", "rbd")):
        return Disk(name, "network", name.rstrip("0123456789"), rotational, label, "network block device")
    if name.startswith(("zram", "ram", "pmem")):
        return Disk(name, "ram", "memory", rotational, label)
    if name.startswith("mmcblk"):
        return Disk(name, "ssd", "mmc", rotational, label, "SD/eMMC flash")
    if name.startswith(("sd", "sr")):
        return _classify_scsi(roots, path, name, rotational, label, model)
    return Disk(name, "unknown", None, rotational, label, f"unrecognised device {name}")


def _classify_scsi(roots: Roots, path: str, name: str, rotational: bool | None, label: str | None,
                   model: str | None) -> Disk:
    host = _scsi_host(path)
    device_path = os.path.realpath(os.path.join(path, "device"))
    transport = None
    if host is not None:
        if os.path.exists(roots.sys("class", "iscsi_host", f"host{host}")):
            return Disk(name, "network", "iscsi", rotational, label, "iSCSI")
        if os.path.exists(roots.sys("class", "fc_host", f"host{host}")):
            return Disk(name, "network", "fc", rotational, label, "Fibre Channel SAN")
        if os.path.exists(roots.sys("class", "sas_host", f"host{host}")):
            transport = "sas"
        proc_name = try_text(roots.sys("class", "scsi_host", f"host{host}", "proc_name")) or ""
        if proc_name.startswith(VIRTUAL_SCSI_DRIVERS):
            return Disk(name, "virtual", proc_name, rotational, label, f"{proc_name} virtual disk: media unknown")
        if transport is None and "usb" in device_path:
            transport = "usb"
        if transport is None and proc_name.startswith(("ahci", "sata")):
            transport = "sata"
        elif transport is None and "ata" in proc_name:
            transport = "ata"
    if model and VIRTUAL_MODELS.search(model):
        return Disk(name, "virtual", transport, rotational, label, f"{model.strip()}: virtual disk")
    if rotational is None:
        return Disk(name, "unknown", transport, None, label, "no queue/rotational")
    return Disk(name, "hdd" if rotational else "ssd", transport, rotational, label)
