"""The vision projector file (`--mmproj`): what llama.cpp's mtmd/clip loader will put in memory.

An mmproj GGUF (general.architecture = clip) holds an image encoder (a ViT: `v.blk.N.*`) and the
projector into the text model's embedding space (`mm.*`). Its header gives what the estimate
needs (doctor/derive/mmproj.py): the bytes of every tensor - tools/mtmd/clip.cpp allocates them
all in one weight buffer and prints their sum as `model size` - and the encoder's shape from the
`clip.vision.*` keys (tools/mtmd/clip-impl.h KEY_*). Read with the same bounded header walk as the
model (doctor/sources/probes/gguf_header.py); a file that is not a projector is a usage error at the CLI.
"""

from __future__ import annotations

from typing import Any

from doctor.core.facts import Facts
from doctor.sources.probes.base import Reporter

# fact, key (tools/mtmd/clip-impl.h)
KEYS: tuple[tuple[str, str], ...] = (
    ("mmproj.n_embd", "clip.vision.embedding_length"),
    ("mmproj.n_ff", "clip.vision.feed_forward_length"),
    ("mmproj.n_layer", "clip.vision.block_count"),
    ("mmproj.n_head", "clip.vision.attention.head_count"),
    ("mmproj.image_size", "clip.vision.image_size"),
    ("mmproj.patch_size", "clip.vision.patch_size"),
    ("mmproj.projection_dim", "clip.vision.projection_dim"),
    ("mmproj.n_merge", "clip.vision.projector.scale_factor"),
)


class NotAProjector(ValueError):
    """The file reads as GGUF but is not an mmproj (clip) file."""


def collect_mmproj(path: str) -> Facts:
    """Facts `mmproj.*` of the projector file. Raises GgufCorrupt (unreadable) or NotAProjector."""
    from doctor.sources.probes.gguf_header import check_gguf
    from doctor.sources.probes.gguf_model import header_metadata

    head = check_gguf(path)
    md: dict[str, Any] = header_metadata(head)
    arch = md.get("general.architecture")
    if arch != "clip":
        raise NotAProjector(f"general.architecture is {arch!r}, not 'clip' (an mmproj file)")
    rep = Reporter("gguf")
    rep.set("mmproj.path", path)
    rep.set("mmproj.weights_bytes", sum(t.n_bytes for t in head.tensors),
            text=f"sum of {len(head.tensors)} tensor sizes (clip.cpp's `model size`)")
    has_vision = md.get("clip.has_vision_encoder") is True or any(t.name.startswith("v.") for t in head.tensors)
    rep.set("mmproj.has_vision", has_vision, text="clip.has_vision_encoder")
    projector = md.get("clip.vision.projector_type", md.get("clip.projector_type"))
    if isinstance(projector, str):
        rep.set("mmproj.projector", projector, text="clip.projector_type")
    for fact, key in KEYS:
        value = md.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 31:
            rep.set(fact, value, text=key)
    return rep.facts
