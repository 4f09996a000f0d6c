"""PCIe links from sysfs, for any vendor, and the link arithmetic.

`/sys/bus/pci/devices/<domain:bus:dev.fn>/{current,max}_link_{speed,width}`: the speed strings are
the kernel's "8.0 GT/s PCIe" (older kernels "8 GT/s", or "Unknown speed"); the leading number
maps to a generation. A device's own max_link_* is what the card supports; the bridge above it
(the slot) caps it, so the usable maximum is the smaller of the two - a card limited by its slot
is a finding, an idle card's slower current link is not (NVIDIA GPUs drop to Gen1 at idle).

Pure except for the sysfs reads through `Roots`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from doctor.sources.probes.base import Roots, try_text

GT_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# GB/s per lane per direction after line coding (8b/10b for Gen1-2, 128b/130b for Gen3-5; Gen6 flit)
GEN_GBS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.877}
PCI_VENDORS = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel", "0x1ed5": "moore threads"}
DISPLAY_CLASSES = ("0x0300", "0x0302", "0x0380", "0x1200")  # VGA, 3D controller, other display, accelerator
_SPEED = re.compile(r"^\s*([\d.]+)\s*GT/s")


def speed_to_gen(text: str | None) -> int | None:
    if not text:
        return None
    m = _SPEED.match(text)
    if not m:
        return None
    return GT_TO_GEN.get(float(m.group(1)))


def link_gbs(gen: int | None, width: int | None) -> float | None:
    if gen is None or width is None or gen not in GEN_GBS_PER_LANE or width <= 0:
        return None
    return round(GEN_GBS_PER_LANE[gen] * width, 2)


def nvml_bus_to_sysfs(bus_id: str) -> str:
    """NVML '00000000:01:00.0' -> sysfs '0000:01:00.0'."""
    domain, _, rest = bus_id.partition(":")
    return f"{domain[-4:]}:{rest}".lower()


@dataclass(frozen=True, slots=True)
class Link:
    bdf: str
    gen_current: int | None
    width_current: int | None
    gen_device_max: int | None  # what the card supports
    width_device_max: int | None
    gen_slot_max: int | None  # what the bridge above it supports
    width_slot_max: int | None

    @property
    def gen_max(self) -> int | None:
        return _min(self.gen_device_max, self.gen_slot_max)

    @property
    def width_max(self) -> int | None:
        return _min(self.width_device_max, self.width_slot_max)

    @property
    def slot_limited(self) -> bool | None:
        if self.gen_device_max is None or self.gen_slot_max is None:
            return None
        return (self.gen_slot_max < self.gen_device_max
                or (self.width_slot_max is not None and self.width_device_max is not None
                    and self.width_slot_max < self.width_device_max))


def _min(a: int | None, b: int | None) -> int | None:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_link(roots: Roots, bdf: str) -> Link | None:
    path = roots.sys("bus", "pci", "devices", bdf)
    if not os.path.exists(path):
        return None
    real = os.path.realpath(path)
    bridge = os.path.dirname(real)
    has_bridge = os.path.exists(os.path.join(bridge, "max_link_speed"))
    return Link(
        bdf=bdf,
        gen_current=speed_to_gen(try_text(os.path.join(real, "current_link_speed"))),
        width_current=_int(try_text(os.path.join(real, "current_link_width"))),
        gen_device_max=speed_to_gen(try_text(os.path.join(real, "max_link_speed"))),
        width_device_max=_int(try_text(os.path.join(real, "max_link_width"))),
        gen_slot_max=speed_to_gen(try_text(os.path.join(bridge, "max_link_speed"))) if has_bridge else None,
        width_slot_max=_int(try_text(os.path.join(bridge, "max_link_width"))) if has_bridge else None,
    )


@dataclass(frozen=True, slots=True)
class PciGpu:
    bdf: str
    vendor: str
    device_id: str | None
    integrated: bool


def list_gpus(roots: Roots) -> list[PciGpu]:
    """Display controllers and accelerators on the PCI bus, in bus order (NVML's order)."""
    base = roots.sys("bus", "pci", "devices")
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return []
    gpus = []
    for bdf in entries:
        cls = try_text(os.path.join(base, bdf, "class")) or ""
        if not cls.startswith(DISPLAY_CLASSES):
            continue
        vendor_id = (try_text(os.path.join(base, bdf, "vendor")) or "").lower()
        vendor = PCI_VENDORS.get(vendor_id, vendor_id or "unknown")
        # an Intel or AMD graphics function on the root bus is the CPU's integrated GPU
        integrated = vendor in ("intel", "amd") and bdf.split(":")[1] == "00"
        gpus.append(PciGpu(bdf, vendor, try_text(os.path.join(base, bdf, "device")), integrated))
    return gpus
