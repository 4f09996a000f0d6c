"""Limits set by the client, not the engine: what a request asked for and what the replies say.

People paste the reply bodies their client got, the request or the call they made, and the lines
their front-end printed. No engine printed those, so no engine parser reads them; this one does,
casts no engine vote, and writes `client.*` facts the client-limit rules read (rules/ LD2xx):

- OpenAI-style reply bodies (OpenAI's API, llama-cpp-python's `create_completion` /
  `create_chat_completion` dicts, vLLM's, llama-server's and Ollama's OpenAI-compatible endpoints,
  as JSON or as a Python dict): `"finish_reason": "length"` with `"usage": {"prompt_tokens": N,
  "completion_tokens": M, ...}`, on one line or pretty-printed; Ollama's own API (`"done_reason":
  "length"`, `"prompt_eval_count"`, `"eval_count"`); TGI's (`"finish_reason":"length"`,
  `"generated_tokens":N`); a reply that stopped for length with no token generated says the context was full
  before it began, and a `total_tokens` above prompt + completion counts a history the server kept for the
  session (LMDeploy's api_server with interactive sessions, lmdeploy/serve/openai/api_server.py);
- the reply budget a request or front-end set: `max_tokens` (OpenAI, llama-cpp-python: default 16 in
  `create_completion`, llama_cpp/llama.py), `max_new_tokens` (TGI, text-generation-webui),
  `n_predict` (llama-server), `num_predict` (Ollama), in JSON, a Python call, a YAML or settings paste;
  text-generation-webui's `truncation_length`;
- text-generation-webui (modules/text_generation.py): `Output generated in S seconds (R tokens/s, N
  tokens, context C, seed X)` - the prompt it sent (C) and what came back (N) - and its module frames
  (`modules/llamacpp_model.py`: llama-cpp-python inside; `modules/llama_cpp_server.py`: llama-server);
  since it runs llama-server (modules/llama_cpp_server.py, 2025-2026): `Using gpu_layers=G | ctx_size=C |
  cache_type=T` and `The request exceeds the available context size, try increasing it`.

Pure.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from doctor.core.facts import Facts, Source
from doctor.sources.engines.llama_cpp_python.engine import ENGINE as LCP
from doctor.sources.engines.llamacpp.engine import ENGINE as LLAMACPP
from doctor.sources.logs.base import LineKind, LineKinds, LogParser, reads
from doctor.sources.logs.hot import FedLine, HotRun
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated, rough
from doctor.sources.logs.shapes import shape_finder

_Q = r"""['"]?"""  # a key in JSON ("key"), a Python dict ('key') or bare (key: / key=)
FINISH = gated(rf"""{_Q}(finish_reason|done_reason){_Q}\s*[:=]\s*"""
               r"""['"](length|stop|eos_token|stop_sequence|max_tokens)['"]""")
COMPLETION = gated(rf"""{_Q}(completion_tokens|eval_count|generated_tokens){_Q}\s*[:=]\s*(\d+)""")
PROMPT = gated(rf"""{_Q}(prompt_tokens|prompt_eval_count){_Q}\s*[:=]\s*(\d+)""")
TOTAL = gated(rf"""{_Q}(total_tokens){_Q}\s*[:=]\s*(\d+)""")
BUDGET = gated(rf"""(?<![\w-]){_Q}(max_tokens|max_new_tokens|max_completion_tokens|n_predict|num_predict){_Q}"""
               r"""\s*[:=]\s*(-?\d+)|PARAMETER num_predict (-?\d+)""")
TRUNCATION = gated(rf"""{_Q}truncation_length{_Q}\s*[:=]\s*(\d+)""")
WEBUI_OUTPUT = gated(r"Output generated in ([\d.]+) seconds \(([\d.]+) tokens/s, (\d+) tokens, context (\d+)")
WEBUI_FRAME = gated(r"(?:text-generation-webui|textgen)?/?modules/(llamacpp_model|llamacpp_hf|llama_cpp_server"
                    r"|text_generation|exllamav2|models)\.py")
WEBUI_SERVER = gated(r"Using gpu_layers=(\w+) \| ctx_size=(\w+) \| cache_type=(\w+)")
WEBUI_EXCEEDS = gated(r"The request exceeds the available context size, try increasing it")
PAIR_WINDOW = 40  # lines between a pretty-printed finish_reason and its usage block
REPLIES_KEPT = 4096

FINISH_KIND = LineKind("finish", (FINISH,), (r"(?:finish_reason|done_reason)['\"]?\s*[:=]",))
USAGE_KIND = LineKind(
    "usage", (COMPLETION, PROMPT, TOTAL),
    (r"(?:completion_tokens|eval_count|generated_tokens|prompt_tokens|prompt_eval_count|total_tokens)['\"]?\s*[:=]",))
BUDGET_KIND = LineKind(
    "budget", (BUDGET, TRUNCATION),
    (r"(?:max_tokens|max_new_tokens|max_completion_tokens|n_predict|num_predict|truncation_length)['\"]?\s*[:=]",
     r"PARAMETER num_predict"))
WEBUI_KIND = LineKind(
    "webui", (WEBUI_OUTPUT, WEBUI_FRAME, WEBUI_SERVER, WEBUI_EXCEEDS),
    (r"Output generated in [\d.]+ seconds", r"modules/\w+\.py", r"Using gpu_layers=\w+ \| ctx_size=",
     r"The request exceeds the available context size"))
KINDS = LineKinds(FINISH_KIND, USAGE_KIND, BUDGET_KIND, WEBUI_KIND)



@functools.lru_cache(maxsize=1)
def _last_sources() -> tuple[str, ...]:
    """The reply budget's and the truncation length's patterns (RE2): each kept from the last line that has it."""
    return tuple(rough(p.pattern, p._flags, p.literals) for p in (BUDGET, TRUNCATION))


FRONTEND = "text-generation-webui"
# the module a text-generation-webui traceback runs through -> the engine inside it
WEBUI_ENGINE = {"llamacpp_model": LCP.name, "llamacpp_hf": LCP.name, "llama_cpp_server": LLAMACPP.name}


@dataclass(slots=True)
class _Reply:
    finish: str | None = None
    completion: int | None = None
    prompt: int | None = None
    total: int | None = None  # the usage's total_tokens: more than prompt + completion counts a kept history
    line: int = 0
    source: Source | None = None


@dataclass(slots=True)
class _State:
    replies: list[_Reply] = field(default_factory=list)
    open: _Reply | None = None  # a reply whose finish reason or usage is still to come
    budget: tuple[int, str, Source] | None = None
    truncation: tuple[int, Source] | None = None
    webui: Source | None = None
    webui_engine: str | None = None
    webui_prompt: tuple[int, Source] | None = None
    webui_generated: tuple[int, Source] | None = None
    webui_ctx: tuple[int, Source] | None = None


class ClientParser(LogParser):
    name = "client"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()

    def feed(self, line: LogLine) -> None:
        if self.passes_gate(line.text):
            self.dispatch(line)

    # -- a server's folded request lines (doctor/sources/engines/vllm/fold.py) -------------------------
    absorbs = frozenset({"vllm_request"})

    def fold_ready(self, kinds: tuple[str, ...]) -> bool:
        return True  # its lines are read alone

    def read_run(self, run: HotRun) -> list[FedLine]:
        """The lines of the run it may read something from (`fold_patterns`), and the last line with a reply budget
        and the last with a truncation length (each kept from the last line that has one: every request line of a
        server names its `max_tokens`)."""
        found = run.wanted_lines(shape_finder(self.fold_patterns(run.kinds), run.shape))
        for source in _last_sources():
            find = shape_finder((source,), run.shape)
            last = run.last_hit(find) if find is not None else None
            if last is not None:
                found.append(last)
        return sorted(dict((item[0], item) for item in found).values())

    def take_run(self, read: list[FedLine], run: HotRun) -> None:
        run.feed(self, read, run.kinds)

    def fold_patterns(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        """The lines of every kind but the reply budget's (kept from the last line that has one), each read one by
        one: replies (a reply pairs lines), the web UI's, and any kind added later."""
        return KINDS.sources_without(BUDGET_KIND) if "vllm_request" in kinds else ()

    # -- replies -----------------------------------------------------------------------------------
    def _reply(self, line: LogLine) -> _Reply:
        s = self.s
        if s.open is None or line.number - s.open.line > PAIR_WINDOW:
            s.open = _Reply(line=line.number, source=self.src(line))
        return s.open

    def _close(self, reply: _Reply) -> None:
        s = self.s
        if reply.finish is not None and reply.completion is not None:
            if len(s.replies) < REPLIES_KEPT:
                s.replies.append(reply)
            s.open = None

    @reads(FINISH_KIND)
    def _finish(self, line: LogLine) -> bool:
        m = FINISH.search(line.text)
        if not m:
            return False
        reply = self._reply(line)
        if reply.finish is not None:  # a second reply began before the first one's usage
            reply = self.s.open = _Reply(line=line.number, source=self.src(line))
        reply.finish = m.group(2)
        self._usage_of(line, reply)
        self._close(reply)
        return False  # the same line may carry the usage and the budget

    @reads(USAGE_KIND)
    def _usage(self, line: LogLine) -> bool:
        if FINISH.search(line.text):
            return False  # read with its finish reason
        if not (COMPLETION.search(line.text) or PROMPT.search(line.text)):
            # no usage numbers (a request line's `prompt_token_ids`): no reply opened; a total on a line of its
            # own (a usage block printed one key a line) belongs to the reply open
            m = TOTAL.search(line.text)
            open_ = self.s.open
            if m and open_ is not None and line.number - open_.line <= PAIR_WINDOW:
                open_.total = int(m.group(2))
            return False
        reply = self._reply(line)
        if self._usage_of(line, reply):
            self._close(reply)
        return False

    @staticmethod
    def _usage_of(line: LogLine, reply: _Reply) -> bool:
        found = False
        m = COMPLETION.search(line.text)
        if m:
            reply.completion, found = int(m.group(2)), True
        m = PROMPT.search(line.text)
        if m:
            reply.prompt, found = int(m.group(2)), True
        m = TOTAL.search(line.text)
        if m:
            reply.total = int(m.group(2))  # a total alone opens no reply (usage blocks of other kinds carry one)
        return found

    # -- settings ----------------------------------------------------------------------------------
    @reads(BUDGET_KIND)
    def _budget(self, line: LogLine) -> bool:
        m = BUDGET.search(line.text)
        if m:
            value = int(m.group(2) or m.group(3))
            name = m.group(1) or "num_predict"
            self.s.budget = (value, name, self.src(line))
        m = TRUNCATION.search(line.text)
        if m:
            self.s.truncation = (int(m.group(1)), self.src(line))
        return False

    # -- text-generation-webui ---------------------------------------------------------------------
    @reads(WEBUI_KIND)
    def _webui(self, line: LogLine) -> bool:
        s = self.s
        m = WEBUI_OUTPUT.search(line.text)
        if m:
            s.webui = s.webui or self.src(line)
            generated, context = int(m.group(3)), int(m.group(4))
            if s.webui_prompt is None or context > s.webui_prompt[0]:
                s.webui_prompt = (context, self.src(line))
            s.webui_generated = (generated, self.src(line))
            return True
        m = WEBUI_FRAME.search(line.text)
        if m:
            s.webui = s.webui or self.src(line)
            s.webui_engine = WEBUI_ENGINE.get(m.group(1), s.webui_engine)
            return False
        m = WEBUI_SERVER.search(line.text)
        if m:
            s.webui, s.webui_engine = s.webui or self.src(line), LLAMACPP.name
            if m.group(2).isdigit():
                s.webui_ctx = (int(m.group(2)), self.src(line))
            return True
        if WEBUI_EXCEEDS.search(line.text):
            s.webui = s.webui or self.src(line)
            if s.webui_ctx is not None:
                self.event("prompt_too_long", line, limit="ctx_size", n_ctx=s.webui_ctx[0])
            else:
                self.event("prompt_too_long", line, limit="ctx_size")
            return True
        return False

    # -- summary -----------------------------------------------------------------------------------
    def summarize(self, facts: Facts) -> None:
        s = self.s
        if s.budget is not None:
            value, name, src = s.budget
            facts.set("client.max_tokens", value, src)
            facts.set("client.max_tokens_name", name, src)
        if s.truncation is not None:
            facts.set("client.truncation_length", s.truncation[0], s.truncation[1])
        if s.webui is not None:
            facts.set("client.frontend", FRONTEND, s.webui)
            if s.webui_engine is not None:
                facts.set("client.frontend_engine", s.webui_engine, s.webui)
        if s.webui_prompt is not None:
            facts.set("client.prompt_tokens_max", s.webui_prompt[0], s.webui_prompt[1])
        if s.webui_ctx is not None and not facts.has("config.n_ctx"):
            facts.set("config.n_ctx", s.webui_ctx[0], s.webui_ctx[1])
        if s.webui_generated is not None:
            facts.set("client.completion_tokens_last", s.webui_generated[0], s.webui_generated[1])
        self._summarize_replies(facts)
        self._reply_room(facts)

    def _summarize_replies(self, facts: Facts) -> None:
        replies = self.s.replies
        if not replies:
            return
        first = replies[0].source
        assert first is not None
        capped = [r for r in replies if r.finish in ("length", "max_tokens")]
        facts.set("client.replies", len(replies), first)
        facts.set("client.replies_capped", len(capped), first)
        prompts = [r.prompt for r in replies if r.prompt is not None]
        if prompts:
            top = max(replies, key=lambda r: r.prompt or 0)
            facts.set("client.prompt_tokens_max", max(prompts), top.source or first)
            facts.set("client.prompt_tokens_min", min(prompts), first)
        # nothing generated, stopped for length: the prompt (and any history the server kept) filled the context
        empty = [r for r in capped if r.completion == 0]
        facts.set("client.replies_empty_length", len(empty), (empty[0].source if empty else None) or first)
        if empty:
            kept = [r.total - r.prompt for r in empty
                    if r.total is not None and r.prompt is not None and r.total > r.prompt]
            if kept:
                facts.set("client.history_tokens", max(kept), empty[0].source or first)
        sizes = {r.completion for r in capped}
        if capped and len(sizes) == 1 and capped[0].completion:  # a cap of 0 tokens is no budget: see above
            # every reply cut at the same length: a reply budget, whatever the prompt
            facts.set("client.reply_cap", capped[0].completion, capped[0].source or first)

    def _reply_room(self, facts: Facts) -> None:
        """An engine refused a request whose prompt fits: the reply budget asked for the rest."""
        prompt = facts.value("client.prompt_tokens_max")
        if not isinstance(prompt, int):
            return
        for event in facts.events("prompt_too_long"):
            n_ctx = event.data.get("n_ctx")
            if isinstance(n_ctx, int) and 0 < prompt < n_ctx and event.data.get("limit") != "max_new_tokens":
                facts.set("client.reply_room", n_ctx - prompt, Source("log", self.name, event.line, event.text[:300]))
                return
