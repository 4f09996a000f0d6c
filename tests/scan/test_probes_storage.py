"""Storage under the model file: mountinfo, the block-device chain through partitions, dm/LVM, md
RAID and loop devices, network and RAM filesystems, containers, and what kind each disk is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from doctor.sources.probes.base import Roots
from doctor.sources.probes.blockdev import resolve_devnum
from doctor.sources.probes.mountinfo import find_mount, parse_mountinfo, unescape
from doctor.sources.probes.replay import load_machine
from doctor.sources.probes.storage import collect_storage
from tests.scan.conftest import MACHINES


def storage_of(machine: str, path: str | None = None) -> dict[str, object]:
    m = load_machine(MACHINES / machine)
    facts = collect_storage(m.roots, path or m.model_path)
    return {f.name.removeprefix("model.storage."): f.value for f in facts if f.known}


def test_mountinfo_escapes_and_longest_prefix() -> None:
    text = ("26 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
            "90 26 8:17 / /srv/my\\040models rw - ext4 /dev/sdb1 rw\n"
            "91 26 0:52 / /srv/my\\040models/cache rw - tmpfs tmpfs rw\n"
            "92 26 8:33 / /srv rw - xfs /dev/sdc1 rw\n")
    mounts = parse_mountinfo(text)
    assert unescape("a\\040b\\011c") == "a b\tc"
    assert find_mount(mounts, "/srv/my models/llama.gguf").source == "/dev/sdb1"
    assert find_mount(mounts, "/srv/my models/cache/x").fstype == "tmpfs"
    assert find_mount(mounts, "/srv/other").source == "/dev/sdc1"
    assert find_mount(mounts, "/srv/my modelsX").source == "/dev/sdc1"  # a prefix of the name is not the mount
    assert find_mount(mounts, "/home/x").mountpoint == "/"


@pytest.mark.parametrize(("machine", "expected"), [
    ("nvme-workstation-rtx4090", {"kind": "nvme", "fs_type": "ext4", "device": "nvme0n1p2 → nvme0n1",
                                  "transport": "nvme", "rotational": False, "remote": False}),
    ("hdd-server", {"kind": "hdd", "fs_type": "ext4", "device": "sdb1 → sdb", "transport": "sata",
                    "rotational": True, "mount": "/srv/models"}),
    ("nfs-models", {"kind": "network", "fs_type": "nfs4", "device": "nas.lan:/volume1/models", "remote": True}),
    ("container-quota", {"kind": "nvme", "fs_type": "overlay", "device": "overlay (container) on nvme0n1p1 → nvme0n1"}),
    ("laptop-no-gpu", {"kind": "nvme", "transport": "nvme"}),
    ("vm-virtio", {"kind": "virtual", "transport": "virtio", "device": "vda"}),
])
def test_recorded_machines(machine: str, expected: dict[str, object]) -> None:
    got = storage_of(machine)
    assert {k: got.get(k) for k in expected} == expected


def test_a_virtual_disks_rotational_flag_is_not_trusted() -> None:
    m = load_machine(MACHINES / "vm-virtio")
    facts = collect_storage(m.roots, m.model_path)
    # the recorded vda says queue/rotational = 1; that says nothing about the media
    assert (MACHINES / "vm-virtio" / "sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/queue/rotational"
            ).read_text().strip() == "1"
    assert not facts.has("model.storage.rotational")
    assert "says nothing" in (facts.get("model.storage.rotational").unknown or "")


def test_the_container_guess_is_labelled() -> None:
    m = load_machine(MACHINES / "container-quota")
    fact = collect_storage(m.roots, m.model_path).get("model.storage.kind")
    assert fact is not None and "guessed from the container's bind mounts" in (fact.source.text or "")


# -- stacked and special devices, on small trees built here --------------------------------------

class Sys:
    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, rel: str, text: str) -> None:
        p = self.root / "sys" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")

    def link(self, rel: str, target: str) -> None:
        p = self.root / "sys" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, p)

    def roots(self, mountinfo: str) -> Roots:
        (self.root / "proc" / "self").mkdir(parents=True, exist_ok=True)
        (self.root / "proc" / "self" / "mountinfo").write_text(mountinfo)
        return Roots(sysfs=str(self.root / "sys"), proc=str(self.root / "proc"), realpath=os.path.normpath, live=False)

    def disk(self, name: str, devnum: str, rotational: int, *, scsi: bool = False, proc_name: str = "ahci",
             host: int = 0) -> str:
        if scsi:
            base = f"devices/pci0000:00/0000:00:17.0/ata{host + 1}/host{host}/target{host}:0:0/{host}:0:0:0"
            self.put(f"{base}/model", "WDC WD40EFRX-68N")
            disk = f"{base}/block/{name}"
            self.link(f"{disk}/device", f"../../../{host}:0:0:0")
            self.put(f"devices/pci0000:00/0000:00:17.0/ata{host + 1}/host{host}/scsi_host/host{host}/proc_name",
                     proc_name)
            self.link(f"class/scsi_host/host{host}",
                      f"../../devices/pci0000:00/0000:00:17.0/ata{host + 1}/host{host}/scsi_host/host{host}")
        else:
            disk = f"devices/virtual/block/{name}"
        self.put(f"{disk}/dev", devnum)
        self.put(f"{disk}/queue/rotational", str(rotational))
        self.link(f"dev/block/{devnum}", f"../../{disk}")
        self.link(f"class/block/{name}", f"../../{disk}")
        return disk


def test_lvm_on_md_raid_is_as_slow_as_its_hard_disk(tmp_path: Path) -> None:
    s = Sys(tmp_path)
    sda = s.disk("sda", "8:0", 0, scsi=True, host=0)
    sdb = s.disk("sdb", "8:16", 1, scsi=True, host=1)
    md = "devices/virtual/block/md0"
    s.put(f"{md}/dev", "9:0")
    s.put(f"{md}/md/level", "raid1")
    s.link(f"{md}/slaves/sda", "../../../../pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda")
    s.link(f"{md}/slaves/sdb", "../../../../pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb")
    dm = "devices/virtual/block/dm-0"
    s.put(f"{dm}/dev", "253:0")
    s.put(f"{dm}/dm/name", "vg0-models")
    s.put(f"{dm}/dm/uuid", "LVM-8mJ1uTsQ0mCvD2Z1Xb3P")
    s.link(f"{dm}/slaves/md0", "../../md0")
    s.link("dev/block/253:0", f"../../{dm}")
    assert sda and sdb
    roots = s.roots("30 1 253:0 / /models rw - xfs /dev/mapper/vg0-models rw\n")
    chain = resolve_devnum(roots, 253, 0)
    assert chain.steps[:2] == ["dm-0 (LVM vg0-models)", "md0 (raid1)"]
    assert {d.name: d.kind for d in chain.disks} == {"sda": "ssd", "sdb": "hdd"}
    facts = collect_storage(roots, "/models/llama.gguf")
    assert facts.value("model.storage.kind") == "hdd"
    assert "sdb=hdd" in (facts.get("model.storage.kind").source.text or "")


def test_a_loop_device_is_followed_to_its_backing_file(tmp_path: Path) -> None:
    s = Sys(tmp_path)
    loop = s.disk("loop3", "7:3", 0)
    s.put(f"{loop}/loop/backing_file", "/data/images/models.img")
    s.disk("sdb", "8:16", 1, scsi=True, host=1)
    s.put("devices/pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb/sdb1/partition", "1")
    s.put("devices/pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb/sdb1/dev", "8:17")
    s.link("dev/block/8:17", "../../devices/pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb/sdb1")
    roots = s.roots("26 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
                    "40 26 8:17 / /data rw - ext4 /dev/sdb1 rw\n"
                    "41 26 7:3 / /mnt/models rw - squashfs /dev/loop3 ro\n")
    facts = collect_storage(roots, "/mnt/models/llama.gguf")
    assert facts.value("model.storage.kind") == "hdd"
    assert facts.value("model.storage.fs_type") == "squashfs"


@pytest.mark.parametrize(("transport", "model", "kind"), [
    ("tcp", "Linux", "network"),                         # NVMe over TCP: network storage that lsblk calls nvme
    ("rdma", "Linux", "network"),
    ("pcie", "Amazon Elastic Block Store", "network"),   # EBS volumes appear as NVMe
    ("pcie", "Samsung SSD 980 PRO 1TB", "nvme"),
])
def test_nvme_that_is_network_storage(tmp_path: Path, transport: str, model: str, kind: str) -> None:
    s = Sys(tmp_path)
    ctrl = "devices/pci0000:00/0000:00:04.0/nvme/nvme1"
    s.put(f"{ctrl}/transport", transport)
    s.put(f"{ctrl}/model", model)
    ns = f"{ctrl}/nvme1n1"
    s.put(f"{ns}/dev", "259:5")
    s.put(f"{ns}/queue/rotational", "0")
    s.link(f"{ns}/device", "../../nvme1")
    s.link("dev/block/259:5", f"../../{ns}")
    roots = s.roots("50 1 259:5 / /models rw - ext4 /dev/nvme1n1 rw\n")
    assert collect_storage(roots, "/models/m.gguf").value("model.storage.kind") == kind


def test_btrfs_anonymous_device_goes_through_the_mount_source(tmp_path: Path) -> None:
    s = Sys(tmp_path)
    ctrl = "devices/pci0000:00/0000:00:01.2/0000:02:00.0/nvme/nvme0"
    s.put(f"{ctrl}/transport", "pcie")
    ns = f"{ctrl}/nvme0n1"
    s.put(f"{ns}/dev", "259:0")
    s.put(f"{ns}/queue/rotational", "0")
    s.link(f"{ns}/device", "../../nvme0")
    s.put(f"{ns}/nvme0n1p2/partition", "2")
    s.link("class/block/nvme0n1p2", f"../../{ns}/nvme0n1p2")
    roots = s.roots("31 1 0:33 /@home /home rw - btrfs /dev/nvme0n1p2 rw,ssd,subvol=/@home\n")
    facts = collect_storage(roots, "/home/u/m.gguf")
    assert (facts.value("model.storage.kind"), facts.value("model.storage.device")) == ("nvme", "nvme0n1p2 → nvme0n1")


@pytest.mark.parametrize(("line", "kind"), [
    ("60 1 0:60 / /models rw - fuse.sshfs user@host:/models rw", "network"),
    ("60 1 0:60 / /models rw - 9p drvfs rw,dirsync,aname=drvfs", "network"),  # WSL2's /mnt/c
    ("60 1 0:60 / /models rw - virtiofs models rw", "network"),
    ("60 1 0:60 / /models rw - ramfs none rw", "tmpfs"),
])
def test_filesystem_decides_before_any_disk(tmp_path: Path, line: str, kind: str) -> None:
    roots = Sys(tmp_path).roots(line + "\n")
    assert collect_storage(roots, "/models/m.gguf").value("model.storage.kind") == kind


def test_nothing_readable_is_unknown_not_a_crash(tmp_path: Path) -> None:
    roots = Roots(sysfs=str(tmp_path / "nope"), proc=str(tmp_path / "nope"), live=False)
    facts = collect_storage(roots, "/models/m.gguf")
    fact = facts.get("model.storage.kind")
    assert fact is not None and not fact.known and "not found" in (fact.unknown or "")
