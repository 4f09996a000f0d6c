"""The peer: hf-mem (https://github.com/alvarobartt/hf-mem), on the same sparse GGUFs.

hf-mem is a bench-only extra, not a dependency of llm-doctor: `pip install hf-mem`, or
`pip download hf-mem --no-deps -d DIR` and pass the wheel with `--peer-wheel` (a pure-Python
wheel imports from its zip). Its GGUF path reads the header (normally over HTTP range requests;
here the file's first bytes) and gives weights = sum of tensor sizes and, with `experimental`,
KV = block_count x 2 x head_count_kv x (embedding_length / head_count) x max_model_len x batch x
dtype size - one formula for every architecture, no compute buffer. It is asked the way a user
would: max_model_len = the context per sequence, batch_size = the sequences (1 with a unified KV), the K type as dtype.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HEADER_BYTES = 32 << 20  # enough for any header here (the sparse files' tensor tables are < 1 MiB)


@dataclass(frozen=True, slots=True)
class PeerFigure:
    weights: int | None = None
    kv: int | None = None
    error: str = ""


def available(wheel: Path | None = None) -> str | None:
    """hf-mem's version if it can be imported (from `wheel` when given), else None."""
    if wheel is not None and str(wheel) not in sys.path:
        sys.path.insert(0, str(wheel))
    try:
        from hf_mem._version import __version__
    except ImportError:
        return None
    return str(__version__)


def estimate(path: Path, n_ctx: int, n_seq: int, unified: bool, type_k: str) -> PeerFigure:
    from hf_mem.gguf.metadata import parse_gguf_metadata

    with open(path, "rb") as handle:
        raw = handle.read(HEADER_BYTES)
    per_seq = n_ctx if unified else n_ctx // max(1, n_seq)
    try:
        meta = parse_gguf_metadata(raw, experimental=True, max_model_len=per_seq, kv_cache_dtype=type_k.upper(),
                                   batch_size=1 if unified else max(1, n_seq))
    except Exception as exc:  # the peer's own failure is a result of the comparison
        try:
            weights = parse_gguf_metadata(raw).bytes_count
        except Exception:
            weights = None
        return PeerFigure(weights, None, f"{type(exc).__name__}: {exc}"[:48])
    return PeerFigure(meta.bytes_count, meta.kv_cache.cache_size if meta.kv_cache else None)


def peer_note(version: str | None) -> str:
    if version is None:
        return "hf-mem not installed (pip install hf-mem, or --peer-wheel) - its columns are empty."
    return (f"hf-mem {version} (GGUF header: weights from tensor sizes, KV with one formula, no compute buffer; "
            "max_model_len = context per sequence, batch_size = sequences).")
