"""The peer: hf-mem (pip install hf-mem; bench-only, not a dependency of llm-doctor)."""

from __future__ import annotations


def peer_note() -> str:
    try:
        import hf_mem  # noqa: F401
    except ImportError:
        return "hf-mem not installed (pip install hf-mem to add its column)"
    return "hf-mem installed"
