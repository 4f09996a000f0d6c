"""Hugging Face text-generation-inference (TGI) logs: launcher, router and shard messages.

What is read (format strings from TGI's source, see fixtures/logs/tgi/README.md):
- the launcher's `Args { ... }` (one line before v2, pretty-printed over many lines from v2), the
  `Default max_batch_prefill_tokens`, `Reducing the max batch prefill ...` and sharding lines;
- shard start and failure (`Starting shard`, `Shard ready in`, `Shard N failed to start`,
  `Error: ShardCannotStart`, `Shard N crashed`, `Webserver Crashed`);
- warm-up: `Warming up model`, the shard's `KV-cache blocks: N, size: S`, `Setting max batch total
  tokens to N`, and its failures: `Not enough memory to handle N prefill tokens` (the warm-up batch
  of --max-batch-prefill-tokens did not fit), `Not enough memory to handle max_total_tokens=N` (the
  KV blocks cannot hold one request of --max-total-tokens);
- request validation against --max-input-tokens / --max-total-tokens, and whether the prompt alone
  or the prompt plus max_new_tokens was too long;
- PyTorch out-of-memory errors (shared with the vLLM parser through `TorchOomBoard`), placed by the
  shard method that failed (`Method Warmup encountered an error`) or the start-up step.

Lines are recognised by message text; the tracing targets (`text_generation_launcher`,
`text_generation_router`, ...) are what the engine detection counts.

This module holds the patterns and the table of line kinds; the handlers are in parser.py.

Pure.
"""

from __future__ import annotations

import re

from doctor.sources.engines._torch.pytorch import FRAME_LINES, FRAME_PATTERNS, OOM_LINES, OOM_PATTERNS
from doctor.sources.logs.base import LineKind, LineKinds
from doctor.sources.logs.matcher import gated

TARGET = gated(r"\btext_generation_(?:launcher|router|server|client|router_v\d)\b")
ARG = gated(r"\b(max_input_tokens|max_input_length|max_total_tokens|max_batch_prefill_tokens"
            r"|max_batch_total_tokens|num_shard|quantize|cuda_memory_fraction|max_concurrent_requests"
            r"|kv_cache_dtype|model_id): (Some\(\s*)?(\"[^\"]*\"|[\w.\-]+)?")
DEFAULTS = gated(r"Default `(max_input_tokens|max_total_tokens|max_batch_prefill_tokens)` to (\d+)"
                 r"|Maximum (input|total) tokens defaulted to (\d+)")
MODEL_SUPPORTS = gated(r"Model supports up to (\d+) but tgi will now set its default to (\d+)")
REDUCED_PREFILL = gated(r"Reducing the max batch prefill from (\d+) to (\d+) because there is not enough VRAM")
SHARDING = gated(r"Sharding model on (\d+) processes")
SHARD_START = gated(r"Starting shard\b")
SHARD_READY = gated(r"Shard ready in ([\d.]+)(ms|s|µs|us|m)\b")
WARMING = gated(r"Warming up model")
KV_BLOCKS = gated(r"KV-cache blocks: (\d+), size: (\d+)")
BATCH_TOTAL = gated(r"Setting max batch total tokens to (\d+)|Inferred max batch total tokens: (\d+)")
METHOD_FAILED = gated(r"Method (\w+) encountered an error")
INIT_FAILED = gated(r"Error when initializing model")
# the message is also quoted back lower-cased or without its Error: Warmup(...) frame
PREFILL_OOM = gated(r"[Nn]ot enough memory to handle (\d+) prefill tokens")
TOTAL_OOM = gated(r"[Nn]ot enough memory to handle `max_total_tokens=(\d+)`|NotEnoughMemory\((\d+)\)")
TOTAL_OVER_BATCH = gated(r"`max_total_tokens` must be <= `max_batch_total_tokens`\. Given: (\d+) and (\d+)")
INPUT_TOTAL = gated(r"`inputs` tokens \+ `max_new_tokens` must be <= (\d+)\. "
                    r"Given: (\d+) `inputs` tokens and (\d+) `max_new_tokens`")
INPUT_LEN = gated(r"`inputs` must have less than (\d+) tokens\. Given: (\d+)")
# router/src/validation.rs MaxNewTokens (1.x); quoted back without its ". Given: N" too (not the tail of
# "`inputs` tokens + `max_new_tokens` must be <= N", which is INPUT_TOTAL's)
MAX_NEW = gated(r"(?<!\+ )`max_new_tokens` must be <= (\d+)(?:\. Given: (\d+))?")
# the launcher's settings as the environment gives them (clap `env`: MAX_INPUT_LENGTH to 1.x,
# MAX_INPUT_TOKENS from 2.0) or as its own flags, pasted from a docker -e, a compose file or a shell
ENV = gated(r"\b(MAX_INPUT_LENGTH|MAX_INPUT_TOKENS|MAX_TOTAL_TOKENS|MAX_BATCH_PREFILL_TOKENS)['\"]?\s*[:=]"
            r"\s*['\"]?(\d+)|--(max-input-length|max-input-tokens)[ =](\d+)")
ARGS_INPUT_TOTAL = gated(r"`max_input_(?:tokens|length)`\s*\((\d+)\) must be < `max_total_tokens`\s*\((\d+)\)")
SHARD_FAILED = gated(r"Shard (\d+) failed to start|Error: ShardCannotStart|Error: ShardDisconnected")
# a shard died while serving; "Webserver Crashed" after a failed warm-up is a consequence, not a crash
CRASHED = gated(r"Shard (\d+) crashed|Error: ShardFailed")
GRAPH_WARMUP_FAILED = gated(r"cuda graph warmup failed", re.IGNORECASE)
SIGNATURE = gated(r"Error: (?:ShardCannotStart|Warmup\(|Backend\(|WebserverFailed)"
                  r"|`inputs` tokens \+ `max_new_tokens`|(?<!\+ )`max_new_tokens` must be <= \d+"
                  r"|prefill tokens\. You need to decrease `--max-batch-prefill-tokens`"
                  r"|KV-cache blocks: \d+, size: \d+")

METHOD_PHASE: dict[str, tuple[str, str]] = {
    "Warmup": ("compute", "warmup"), "Prefill": ("runtime", "prefill"), "Decode": ("runtime", "decode"),
}
HINT_WINDOW = 200  # lines a method failure or handled warm-up covers


def duration_ms(value: str, unit: str) -> float:
    scale = {"ms": 1.0, "s": 1000.0, "µs": 0.001, "us": 0.001, "m": 60000.0}[unit]
    return round(float(value) * scale, 1)


# The lines read, by kind. Phases: "frame" reads traceback frames, "oom" PyTorch's OOM messages,
# "read" TGI's own; a message wrapped over two lines is read joined with the next ("oom" and "read"
# again). The PyTorch lines are in the vLLM parser's triggers already: TGI adds them to its gate only.
HEADER_KIND = LineKind("header", (), (r"text_generation_launcher",), handled=False)
FRAME_KIND = LineKind("frame", FRAME_PATTERNS, FRAME_LINES, scan=(), phase="frame")
OOM_KIND = LineKind("oom", OOM_PATTERNS, OOM_LINES, scan=(), phase="oom")
ARGS_KIND = LineKind(
    "args", (ARG, "Args {"),
    (r"Args \{", r"(?:max_input_tokens|max_input_length|max_total_tokens|max_batch_prefill_tokens"
     r"|max_batch_total_tokens|num_shard|quantize|cuda_memory_fraction|model_id): "))
STARTUP_KIND = LineKind(
    "startup",
    (DEFAULTS, MODEL_SUPPORTS, REDUCED_PREFILL, SHARDING, SHARD_START, SHARD_READY, WARMING, KV_BLOCKS,
     BATCH_TOTAL, METHOD_FAILED, INIT_FAILED),
    (r"max batch prefill", r"Sharding model on", r"Default `max_", r"tokens defaulted to",
     r"Model supports up to", r"Shard ", r"Warming up model", r"KV-cache blocks", r"max batch total tokens",
     r"encountered an error", r"Error when initializing model"))
GRAPH_WARMUP_KIND = LineKind("graph_warmup", (GRAPH_WARMUP_FAILED,), (r"cuda graph warmup failed",))
MEMORY_KIND = LineKind(
    "memory", (PREFILL_OOM, TOTAL_OOM, TOTAL_OVER_BATCH),
    (r"NotEnoughMemory", r"must be <= `max_batch_total_tokens`", r"[Nn]ot enough memory to handle"))
ENV_KIND = LineKind(
    "env", (ENV,),
    (r"MAX_(?:INPUT_LENGTH|INPUT_TOKENS|TOTAL_TOKENS|BATCH_PREFILL_TOKENS)['\"]?\s*[:=]",
     r"--max-input-(?:length|tokens)[ =]\d"))
VALIDATION_KIND = LineKind(
    "validation", (INPUT_TOTAL, INPUT_LEN, MAX_NEW, ARGS_INPUT_TOTAL),
    (r"`inputs` ", r"`max_new_tokens` must be", r"must be < `max_total_tokens`"))
FAILURE_KIND = LineKind(
    "failure", (SHARD_FAILED, CRASHED),
    (r"Error: (?:Shard|Webserver|Warmup|Backend)", r"Webserver Crashed"))

KINDS = LineKinds(
    HEADER_KIND,
    FRAME_KIND,
    OOM_KIND,
    ARGS_KIND,
    STARTUP_KIND,
    GRAPH_WARMUP_KIND,
    MEMORY_KIND,
    ENV_KIND,
    VALIDATION_KIND,
    FAILURE_KIND,
    phases=("frame", "oom", "read"),
)
TRIGGERS = KINDS.triggers
FRAME_PHASE, OOM, READ = (KINDS.phase(p) for p in KINDS.phases)
