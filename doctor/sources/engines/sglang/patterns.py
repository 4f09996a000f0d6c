"""SGLang's log lines: the regular expressions and the table of line kinds its parser reads
(format strings and the releases they were read at: doctor/sources/engines/sglang/parser.py).

Pure.
"""

from __future__ import annotations

import re

from doctor.sources.logs.base import LineKind, LineKinds
from doctor.sources.logs.matcher import gated

GIB = 1 << 30
ARGS = gated(r"server_args=(?:ServerArgs\(|\{)")
# ServerArgs(key=value, ...) to 0.4; a dict {'key': value, ...} in 0.5
ARG = re.compile(r"\b(model_path|context_length|mem_fraction_static|max_running_requests|chunked_prefill_size"
                 r"|max_total_tokens|tp_size|dp_size|kv_cache_dtype|disable_cuda_graph|cuda_graph_max_bs"
                 r"|schedule_conservativeness)'?(?:=|: )('[^']*'|[\w.\-]+)")
POOL = gated(r"max_total_num_tokens=(\d+), (?:chunked_prefill_size=(-?\d+), )?max_prefill_tokens=(\d+), "
             r"max_running_requests=(\d+), context_len=(\d+)")
WEIGHTS = gated(r"Load weight end\.(?: elapsed=([\d.]+) s,)?.*?avail mem=([\d.]+) GB(?:, mem usage=([\d.]+) GB)?")
POOL_END = gated(r"Memory pool end\. avail mem=([\d.]+) GB")
BATCH = gated(r"(Prefill|Decode) batch\b[^#]*#")
STAT = re.compile(r"(#running-req|#queue-req|token usage|gen throughput \(token/s\)|#new-token): ([\d.]+)")
RETRACT = gated(r"(?:Decode out of memory happened|KV cache pool is full\. Retract requests)\. "
                r"#retracted_reqs: (\d+)")
NO_POOL = gated(r"Not enough memory\. Please try to increase --mem-fraction-static")
GRAPH_FAILED = gated(r"Capture cuda graph failed")
OUT_OF_MEMORY = re.compile(r"out of memory", re.IGNORECASE)
INPUT_TOO_LONG = gated(r"The input \((\d+) tokens\) is longer than the model's context length \((\d+) tokens\)"
                       r"(\. Truncating the input)?")
TOTAL_TOO_LONG = gated(r"Requested token count exceeds the model's maximum context length of (\d+) tokens\. "
                       r"You requested a total of (\d+) tokens: (\d+) tokens from the input messages and (\d+)")
TOTAL_TRUNCATED = gated(r"Requested token count \((\d+) input \+ (\d+) new\) exceeds the model's context "
                        r"length \((\d+) tokens\)")
READY = gated(r"The server is fired up and ready to roll")
# start-up steps only marked on the run's timeline (doctor/sources/logs/timeline.py): model_runner.py's
# "Load weight begin. avail mem=%.2f GB" and "Capture cuda graph begin. This can take up to several minutes."
# (0.3.0 on; the catalogue's sglang.capture_cuda_graph_begin)
LOAD_BEGIN = gated(r"Load weight begin\.")
CAPTURE_BEGIN = gated(r"Capture cuda graph begin\.")

ARGS_KIND = LineKind("args", (ARGS,), (r"server_args=(?:ServerArgs\(|\{)",))
POOL_KIND = LineKind("pool", (POOL, WEIGHTS, POOL_END),
                     (r"max_total_num_tokens=\d+", r"Load weight end\.", r"Memory pool end\."))
BATCH_KIND = LineKind("batch", (BATCH,), (r"(?:Prefill|Decode) batch\b[^#\n]*#",))
MEMORY_KIND = LineKind(
    "memory", (RETRACT, NO_POOL, GRAPH_FAILED),
    (r"Decode out of memory happened", r"KV cache pool is full\. Retract", r"Not enough memory\. Please try "
     r"to increase --mem-fraction-static", r"Capture cuda graph failed"))
LENGTH_KIND = LineKind("length", (INPUT_TOO_LONG, TOTAL_TOO_LONG, TOTAL_TRUNCATED),
                       (r"is longer than the model's context length", r"Requested token count"))
READY_KIND = LineKind("ready", (READY,), (r"The server is fired up and ready to roll",))
STEP_KIND = LineKind("step", (LOAD_BEGIN, CAPTURE_BEGIN), (r"Load weight begin\.", r"Capture cuda graph begin\."))

KINDS = LineKinds(ARGS_KIND, POOL_KIND, BATCH_KIND, MEMORY_KIND, LENGTH_KIND, READY_KIND, STEP_KIND)
