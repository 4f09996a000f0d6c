"""The vLLM parser's folded lines: a busy server's request lines, read a run at a time.

With request logging on (vLLM's default before 0.10), a server prints for each request a `Received request`
line that holds the whole prompt and its sampling parameters (one line of a kilobyte or more), an `Added
request` line and the API server's access line, and every few seconds its stats line; a long log is nearly all
of them. A run of these (doctor/sources/logs/fold.py) costs one match of its shape and, for each parser that
reads some of its lines, one search of the run for what that parser could read in a line: only the lines
found are read, one by one, as the per-line path reads them (HotRun.hits, HotRun.feed): this parser's stats
lines (its gate), and in a prompt's free text whatever another parser's patterns find (the llama.cpp parser's
handlers, the catalogue's entries, a client's usage numbers). The parsers that read every request line keep
only a little of them: the pasted-settings parser the first sampling settings (doctor/sources/logs/pasted.py:
the first line that has them), the client parser the last reply budget (doctor/sources/clients/parser.py: the
last `max_tokens`); they read those lines only. A line that may set greedy sampling (the pasted-settings
parser then keeps the text between candidate lines as the model's output: a capture, under which nothing is
folded) ends a run, as does a line another parser reads (fold.py `_guard`), a line longer than the scanner's
cut and a line that is not printable ASCII (its text is not its bytes).

Shapes: vLLM's own lines as the recordings in fixtures/logs/vllm/ show them, V0 and V1, bare or behind the
`(APIServer pid=N) ` prefix of 0.10's processes: the logger's `INFO 10-18 09:13:02 logger.py:37] ` header
(`[logger.py:39]` in V1), `Received request %s: prompt: %r, params: %s, ...` (entrypoints/logger.py), `Added
request %s.` (engine.py, async_llm.py), uvicorn's access line (`INFO:     127.0.0.1:50412 - "POST
/v1/chat/completions HTTP/1.1" 200 OK`), the stats line of metrics.py (V0: `Avg prompt throughput: ..., Running:
N reqs, Swapped: N reqs, Pending: N reqs, GPU KV cache usage: x%, CPU KV cache usage: y%.`) and of loggers.py
(V1: `Engine 000: Avg prompt throughput: ..., Running: N reqs, Waiting: N reqs[, Preemptions: N], GPU KV cache
usage: x%, Prefix cache hit rate: y%`).

Pure.
"""

from __future__ import annotations

from doctor.sources.logs.base import LogParser
from doctor.sources.logs.hot import FedLine, HotLines, HotRun
from doctor.sources.logs.shapes import shape_finder

KINDS = ("vllm_request",)  # what a run stands for, to the parsers that read some of its lines (their `absorbs`)

_PID = r"(?:\((?:APIServer|EngineCore[A-Za-z0-9_-]*) pid=[0-9]+\) )?"
_HEAD = r"(?:INFO|DEBUG) [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)? \[?[a-z_]+\.py:[0-9]+\] "
_RECEIVED = rf"{_PID}{_HEAD}Received request [ -~]+\."  # the prompt is free text: printable ASCII, any length
_ADDED = rf"{_PID}{_HEAD}Added request [!-~]+\."
_ACCESS = rf"{_PID}INFO: +[0-9A-Fa-f:.]+:[0-9]+ - \"[A-Z]+ [!-~]+ HTTP/[0-9.]+\" [0-9]{{3}}(?: [A-Za-z' -]+)?"
_STATS = (rf"{_PID}{_HEAD}(?:Engine [0-9]+: )?Avg prompt throughput: [0-9.]+ tokens/s, Avg generation throughput: "
          r"[0-9.]+ tokens/s(?:, [A-Za-z ]+: [0-9.]+(?: reqs|%)?)+\.?")

HOT = HotLines(
    line="|".join((_RECEIVED, _ADDED, _ACCESS, _STATS)),
    samples=(  # fixtures/logs/vllm/healthy-v0.6.3.log, healthy-v0.8.5-v1-tp2.log, preemption-v0.34.log
        b"INFO 10-18 09:13:02 logger.py:37] Received request chat-7c1e0b2a4f5d4e3f9a1b2c3d4e5f6a7b: prompt: '<|begin_"
        b"of_text|><|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December 2023\\nToday Date:"
        b" 18 Oct 2024\\n\\n<|eot_id|><|start_header_id|>user<|end_header_id|>\\n\\nWrite a haiku about GPUs.<|eot_id|"
        b"><|start_header_id|>assistant<|end_header_id|>\\n\\n', params: SamplingParams(n=1, presence_penalty=0.0, fre"
        b"quency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, top_p=1.0, top_k=-1, min_p=0.0, seed=None, sto"
        b"p=[], stop_token_ids=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens=256, min_tokens=0, l"
        b"ogprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, truncate_p"
        b"rompt_tokens=None), guided_decoding=None, prompt_token_ids: [128000, 128006, 9125, 128007, 271, 38766, 1303, "
        b"33025, 2696, 25, 6790, 220, 2366, 18, 198, 15724, 2696, 25, 220, 972, 5020, 220, 2366, 19, 271, 128009, 1280"
        b"06, 882, 128007, 271, 8144, 264, 6520, 39342, 922, 71503, 13, 128009, 128006, 78191, 128007, 271], lora_req"
        b"uest: None, prompt_adapter_request: None.",
        b"INFO 05-06 10:04:02 [logger.py:39] Received request chatcmpl-9d1e2f3a4b5c6d7e8f901a2b3c4d5e6f: prompt: '<|im"
        b"_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n<|im_start|"
        b">user\\nSummarise the attached report.<|im_end|>\\n<|im_start|>assistant\\n', params: SamplingParams(n=1, pr"
        b"esence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.05, temperature=0.7, top_p=0.8, top_k=20, mi"
        b"n_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], include_stop_str_in_output=False, ignore_eos=F"
        b"alse, max_tokens=1024, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_b"
        b"etween_special_tokens=True, truncate_prompt_tokens=None, guided_decoding=None, extra_args=None), prompt_toke"
        b"n_ids: None, lora_request: None, prompt_adapter_request: None.",
        b"INFO 10-18 09:13:03 metrics.py:345] Avg prompt throughput: 8.2 tokens/s, Avg generation throughput: 5.9 toke"
        b"ns/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%.",
        b"(APIServer pid=1187) INFO 09-16 13:52:20 [loggers.py:335] Engine 000: Avg prompt throughput: 1411.0 tokens/s"
        b", Avg generation throughput: 301.4 tokens/s, Running: 12 reqs, Waiting: 52 reqs, Preemptions: 4, GPU KV cac"
        b"he usage: 99.2%, Prefix cache hit rate: 18.9%",
        b"INFO 05-06 10:04:05 [loggers.py:111] Engine 000: Avg prompt throughput: 184.2 tokens/s, Avg generation throu"
        b"ghput: 62.5 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.1%, Prefix cache hit rate: "
        b"41.2%",
    ),
    quiet=(  # the same recordings: lines no trigger selects
        b"INFO 10-18 09:13:02 engine.py:290] Added request chat-7c1e0b2a4f5d4e3f9a1b2c3d4e5f6a7b.",
        b"INFO 05-06 10:04:02 [async_llm.py:252] Added request chatcmpl-9d1e2f3a4b5c6d7e8f901a2b3c4d5e6f.",
        b'INFO:     127.0.0.1:50412 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        b'(APIServer pid=1187) INFO:     10.44.0.7:52130 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ),
    kinds=KINDS,
    probes=(b"Received request ", b"Avg prompt throughput: ", b"INFO:  "),  # after the process prefix, the header
    probe_within=len("(EngineCore_DP0123 pid=1234567890) DEBUG 12-31 23:59:59.123456 [some_long_module.py:123456] ")
    + len("Engine 000: Avg prompt throughput: "),
    unbounded=True,
)


class RequestFold(LogParser):
    """The fold of a vLLM server's request lines: this parser reads only its stats lines (and what else in a run
    passes its gate) one by one."""

    hot = HOT

    def fold_ready(self, kinds: tuple[str, ...]) -> bool:
        return True  # a stats line is read alone (its continuation, where one would be read, is in the run)

    def fold_patterns(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(type(self).gate or ()) if kinds == KINDS else ()

    def read_run(self, run: HotRun) -> list[FedLine]:
        return run.wanted_lines(shape_finder(self.fold_patterns(run.kinds), run.shape))

    def take_run(self, read: list[FedLine], run: HotRun) -> None:
        run.feed(self, read, run.kinds)
