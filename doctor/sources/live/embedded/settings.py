"""What the embedded engine runs: `RunSettings`, the model, prompt and settings of one run of
llama-cpp-python (doctor/sources/live/embedded/runner.py runs them; the names are llama-cpp-python's
Llama() and create_completion arguments, and the engine table's settings names).

Pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from doctor.core import engines
from doctor.core.errors import UsageError
from doctor.core.vocab import KV_TYPES

DEFAULT_PROMPT = "Here is a short story about a robot who learns to paint:"
CONTEXT_FULL = ("truncate", "fail")


@dataclass
class RunSettings:
    """What to run. Defaults are llama-cpp-python's where it has one, except n_ctx (2048: room for
    the default prompt and output) and the prompt."""

    model_path: str
    n_ctx: int = 2048
    n_gpu_layers: int = 0
    n_threads: int | None = None
    n_batch: int = 512
    n_ubatch: int = 512
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = False
    use_mmap: bool = True
    prompt: str = DEFAULT_PROMPT
    chat: bool = False
    max_tokens: int = 128
    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    seed: int | None = None
    n_threads_batch: int | None = None
    context_full: str = "truncate"  # truncate (like create_completion) | fail (decode until the engine refuses)
    use_extra_bufts: bool = True  # llama.cpp's extra buffer types (weight repacking: AMX, CPU_REPACK); -nr turns off

    def validate(self) -> None:
        """Refuse settings the engine would reject or misread, with a one-line reason."""
        checks = [
            (self.n_ctx > 0, f"--ctx-size must be positive (got {self.n_ctx})"),
            (self.n_batch > 0 and self.n_ubatch > 0, "--batch-size and --ubatch-size must be positive"),
            (self.n_threads is None or self.n_threads > 0, f"--threads must be positive (got {self.n_threads})"),
            (self.max_tokens >= 0,
             f"--max-tokens must be 0 (until the context is full) or more (got {self.max_tokens})"),
            (self.temperature >= 0, f"--temperature must be 0 (greedy) or more (got {self.temperature})"),
            (0 <= self.top_p <= 1, f"--top-p must be between 0 and 1 (got {self.top_p})"),
            (0 <= self.min_p <= 1, f"--min-p must be between 0 and 1 (got {self.min_p})"),
            (self.repeat_penalty > 0, f"--repeat-penalty must be above 0 (got {self.repeat_penalty})"),
            (self.repeat_last_n >= 0, f"--repeat-last-n must be 0 or more (got {self.repeat_last_n})"),
            (self.type_k.lower() in KV_TYPES, f"--type-k {self.type_k}: one of {', '.join(KV_TYPES)}"),
            (self.type_v.lower() in KV_TYPES, f"--type-v {self.type_v}: one of {', '.join(KV_TYPES)}"),
            (self.context_full in CONTEXT_FULL, f"context_full must be one of {', '.join(CONTEXT_FULL)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def requested(self) -> dict[str, Any]:
        """The settings as the SettingsEvent (stage "requested") carries them."""
        out = self.to_json()
        out["engine"] = engines.embedded()
        out["flash_attn"] = "enabled" if self.flash_attn else "disabled"
        out["type_k"] = self.type_k.lower()
        out["type_v"] = self.type_v.lower()
        return out
