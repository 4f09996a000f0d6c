"""The closed vocabularies of the rule base and the report: severities, confidences, modes, outcomes.

Each is a `Literal` type for the checker plus the tuple of its values (in rank order, worst or most
sure first) for validation where values come in from YAML or JSON. `is_*` guards narrow a `str` read
from input to the type; rule files are validated in doctor/judge/rulebase.py, report JSON in the report
model's readers. Pure, no imports from the rest of llm-doctor.
"""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

Severity = Literal["error", "warning", "info"]
Confidence = Literal["high", "medium", "low"]
Mode = Literal["scan", "watch", "analyze"]  # how the rules judge: a plan, a live run, a finished input
RuleStatus = Literal["stable", "experimental", "deprecated"]
CheckOutcome = Literal["fired", "ok", "unknown"]  # a check's outcome in the report
RuleOutcome = Literal["fired", "ok", "unknown", "skipped"]  # also "skipped": the rule is not for this mode
VerifyOutcome = Literal["resolved", "not resolved", "made worse", "not tried"]  # a fix tried by --verify
Verdict = Literal["problems", "no_problems", "unexplained", "nothing_recognised"]
FailOn = Literal["error", "warning", "info", "none"]  # --fail-on: the severity from which a run fails

SEVERITIES: tuple[Severity, ...] = get_args(Severity)
CONFIDENCES: tuple[Confidence, ...] = get_args(Confidence)
MODES: tuple[Mode, ...] = get_args(Mode)
STATUSES: tuple[RuleStatus, ...] = get_args(RuleStatus)
CHECK_OUTCOMES: tuple[CheckOutcome, ...] = get_args(CheckOutcome)
RULE_OUTCOMES: tuple[RuleOutcome, ...] = get_args(RuleOutcome)
VERIFY_OUTCOMES: tuple[VerifyOutcome, ...] = get_args(VerifyOutcome)

SEVERITY_RANK: dict[str, int] = {"error": 3, "warning": 2, "info": 1}
CONFIDENCE_RANK: dict[str, int] = {"high": 3, "medium": 2, "low": 1}


def is_severity(value: object) -> TypeGuard[Severity]:
    return value in SEVERITIES


def is_confidence(value: object) -> TypeGuard[Confidence]:
    return value in CONFIDENCES


def is_mode(value: object) -> TypeGuard[Mode]:
    return value in MODES


def is_status(value: object) -> TypeGuard[RuleStatus]:
    return value in STATUSES


def is_check_outcome(value: object) -> TypeGuard[CheckOutcome]:
    return value in CHECK_OUTCOMES


def is_rule_outcome(value: object) -> TypeGuard[RuleOutcome]:
    return value in RULE_OUTCOMES


def is_verify_outcome(value: object) -> TypeGuard[VerifyOutcome]:
    return value in VERIFY_OUTCOMES


# -- the engine's closed sets (llama.cpp's own limits and types) ---------------------------------

MAX_LAYERS = 512  # llama.cpp's LLAMA_MAX_LAYERS (src/llama-hparams.h): it refuses more

# ggml block size and bytes per block for the KV cache types llama.cpp accepts (-ctk / -ctv).
# Values from ggml-common.h; tests check them against gguf.GGML_QUANT_SIZES.
KV_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
    "iq4_nl": (32, 18),
}
