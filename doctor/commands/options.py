"""One option vocabulary for scan, watch and analyze: every option is declared once, here.

Each row of OPTIONS names the commands that take it; `add_options(parser, command)` adds that
command's rows in table order, in argument groups. Where an option means what a llama.cpp flag
means, it has llama.cpp's name and short flag (-m, -c, -ngl, -t, -tb, -b, -ub, -fa, -n, -np,
-ctk/-ctv, -p, -f, -s); the spellings older llm-doctor versions used stay as aliases. A branch
that needs a new option adds one row (and the table in docs/usage.md, `vocabulary_table()`, follows).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Any

from doctor.core import engines
from doctor.core.vocab import KV_TYPES
from doctor.sources.live.embedded import TRIAGE_BUDGET_S

COMMANDS = ("scan", "watch", "analyze")
# The defaults scan plans with and watch runs with (the embedded engine), in one place: the context is
# the model's training context, at most DEFAULT_CTX_CAP (llama.cpp's own default n_ctx) and that when
# the model does not say; the reply is DEFAULT_MAX_TOKENS; scan plans a prompt of DEFAULT_PROMPT_TOKENS.
DEFAULT_CTX_CAP = 4096
DEFAULT_MAX_TOKENS = 512
DEFAULT_PROMPT_TOKENS = 512
VERIFY_BUDGET_S = 120.0  # --verify: every re-run and sweep together (here, so --help does not import verify)
OUTPUT_FORMATS = ("text", "json", "markdown")
WATCH_FORMATS = ("text", "json", "ndjson", "markdown")
FAIL_ON = ("error", "warning", "info", "none")
FLASH_ATTN = ("on", "off", "auto")

# argument groups, in the order --help shows them
GROUPS = {
    "settings": "model and settings (llama.cpp's names)",
    "sampling": "sampling (watch: the embedded engine)",
    "source": "what to read",
    "selection": "what to check",
    "output": "output",
}


def csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def duration(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30, 30s, 5m, 1h)")
    value = float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    if value <= 0:
        raise argparse.ArgumentTypeError("the duration must be positive")
    return value


@dataclass(frozen=True)
class Option:
    """One option: its flags (llama.cpp's short flag first, then the long name, then aliases)."""

    dest: str
    flags: tuple[str, ...]
    help: str
    commands: tuple[str, ...]
    group: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    help_for: dict[str, str] = field(default_factory=dict)  # a command's own help (its defaults differ)
    mutex: str | None = None  # options sharing this key exclude each other

    @property
    def name(self) -> str:
        """The long name shown in messages and the README (the first --flag)."""
        return next(f for f in self.flags if f.startswith("--"))

    @property
    def short(self) -> str | None:
        return next((f for f in self.flags if not f.startswith("--")), None)

    @property
    def aliases(self) -> tuple[str, ...]:
        longs = [f for f in self.flags if f.startswith("--")]
        return tuple(longs[1:])


def _o(dest: str, flags: str, help: str, commands: str, group: str, **kwargs: Any) -> Option:
    help_for = kwargs.pop("help_for", {})
    mutex = kwargs.pop("mutex", None)
    return Option(dest, tuple(flags.split()), help, tuple(commands.split()), group, kwargs, help_for, mutex)


SW = "scan watch"
ALL = "scan watch analyze"

OPTIONS: tuple[Option, ...] = (
    # -- model and settings: the same names as llama.cpp where they mean the same --------------
    _o("model", "-m --model", "GGUF file, or a model name: Ollama's (llama3.2:1b), a Hugging Face repo id in the "
       "Hub or llama.cpp cache (org/repo:Q4_K_M, org/repo/file.gguf), an LM Studio model (`llm-doctor models` "
       "lists them; default: SmolLM2-135M, fetched on first use)", ALL, "settings",
       metavar="MODEL", help_for={"analyze": "with --verify: the GGUF file or model name to re-run (default: the "
                                              "one the log names)"}),
    _o("mmproj", "-mm --mmproj --clip-model-path", "vision projector GGUF (an mmproj file): its weights and image "
       "compute buffer are charged beside the model's (llama-cpp-python: clip_model_path; Ollama: the "
       "model's projector layer)", "scan", "settings", metavar="FILE"),
    _o("ctx_size", "-c --ctx-size", f"context size in tokens (default: the model's training context, at most "
       f"{DEFAULT_CTX_CAP})", SW, "settings", type=int, metavar="N",
       help_for={"scan": f"planned context (default: the model's training context, at most {DEFAULT_CTX_CAP})"}),
    _o("n_gpu_layers", "-ngl --n-gpu-layers --gpu-layers", "layers on the GPU, -1 = all", SW, "settings",
       type=int, metavar="N",
       help_for={"scan": "layers on the GPU, -1 = all (default: all when there is a GPU)",
                 "watch": "layers on the GPU, -1 = all (default 0, llama-cpp-python's)"}),
    _o("threads", "-t --threads", "generation threads", SW, "settings", type=int, metavar="N",
       help_for={"scan": "generation threads (default: what the engine would start with)",
                 "watch": "generation threads (default: llama-cpp-python's, logical CPUs / 2)"}),
    _o("threads_batch", "-tb --threads-batch", "prompt threads (default: llama-cpp-python's, logical CPUs)",
       "watch", "settings", type=int, metavar="N"),
    _o("parallel", "-np --parallel", "parallel sequences / server slots; the context is split between them "
       "(default 1)", "scan", "settings", type=int, metavar="N"),
    _o("batch_size", "-b --batch-size", "logical batch (default 512)", SW, "settings", type=int, metavar="N"),
    _o("ubatch_size", "-ub --ubatch-size", "physical batch (default 512)", SW, "settings", type=int, metavar="N"),
    _o("type_k", "-ctk --cache-type-k --type-k", f"KV cache key type: {', '.join(KV_TYPES)} (default f16)", SW,
       "settings", choices=tuple(KV_TYPES), metavar="TYPE", type=str.lower),
    _o("type_v", "-ctv --cache-type-v --type-v", "KV cache value type, as for -ctk (default f16; a quantised V cache "
       "needs flash attention)", SW, "settings", choices=tuple(KV_TYPES), metavar="TYPE", type=str.lower),
    _o("flash_attn", "-fa --flash-attn", "flash attention: on, off or auto; -fa alone = on (default: the engine's)",
       SW, "settings", nargs="?", const="on", choices=FLASH_ATTN, metavar="on|off|auto"),
    _o("no_mmap", "--no-mmap", "load the model without mmap", SW, "settings", action="store_true", default=None),
    _o("no_repack", "-nr --no-repack", "no weight repacking (llama.cpp's extra buffer types, such as the AMX kernels)",
       SW, "settings", action="store_true", default=None),
    _o("prompt", "-p --prompt", "the prompt (default: a short story request)", "watch", "settings",
       mutex="prompt"),
    _o("prompt_file", "-f --file --prompt-file", "read the prompt from FILE", "watch", "settings",
       metavar="FILE", mutex="prompt"),
    _o("prompt_tokens", "--prompt-tokens", f"planned prompt length in tokens (default {DEFAULT_PROMPT_TOKENS}; the "
       "short trace runs a prompt of its own, at most 256 words, and the plan says its size)", "scan", "settings",
       type=int, metavar="N"),
    _o("max_tokens", "-n --n-predict --max-tokens --max-new-tokens", "tokens to generate", SW, "settings",
       type=int, metavar="N",
       help_for={"scan": f"planned reply length in tokens (default {DEFAULT_MAX_TOKENS})",
                 "watch": f"tokens to generate (default {DEFAULT_MAX_TOKENS}; 0 = until the context is full)"}),
    _o("chat", "--chat", "wrap the prompt in the model's chat template", "watch", "settings",
       action="store_true", default=None),
    _o("context_full", "--context-full", "when prompt + max tokens exceed the context: cut max tokens as "
       "create_completion does (truncate, default) or decode until the engine refuses (fail)", "watch",
       "settings", choices=("truncate", "fail"), default=None),
    # -- sampling (watch's embedded engine) ----------------------------------------------------
    _o("temperature", "--temperature --temp", "temperature (default 0.8; 0 = greedy)", "watch", "sampling",
       type=float, metavar="T"),
    _o("top_p", "--top-p", "top-p (default 0.95)", "watch", "sampling", type=float, metavar="P"),
    _o("top_k", "--top-k", "top-k (default 40)", "watch", "sampling", type=int, metavar="K"),
    _o("min_p", "--min-p", "min-p (default 0.05)", "watch", "sampling", type=float, metavar="P"),
    _o("repeat_penalty", "--repeat-penalty", "repeat penalty (default 1.0, off)", "watch", "sampling",
       type=float, metavar="X"),
    _o("repeat_last_n", "--repeat-last-n", "tokens the repeat penalty looks back (default 64)", "watch",
       "sampling", type=int, metavar="N"),
    _o("seed", "-s --seed", "sampling seed (default: random, and recorded)", "watch", "sampling", type=int,
       metavar="N"),
    # -- what to read --------------------------------------------------------------------------
    _o("bench", "--bench", "also measure: model file read speed, RAM/GPU/PCIe bandwidth", "scan", "source",
       action="store_true"),
    _o("url", "--url", "a running server (llama-server, Ollama, vLLM, SGLang): the model it has loaded and its "
       "settings are the plan, checked against this machine (no trace: the server runs it)", "scan", "source",
       metavar="URL"),
    _o("no_trace", "--no-trace", "skip the short real run through llama-cpp-python", "scan", "source",
       action="store_true"),
    _o("no_triage", "--no-triage", "when the embedded engine crashes, do not re-run it to find the setting that "
       f"avoids the crash (triage: short re-runs in fresh processes, one setting changed at a time, "
       f"{TRIAGE_BUDGET_S:.0f} s at most; nothing runs when nothing crashes)", SW, "source", action="store_true"),
    _o("ram", "--ram", "what-if: plan for this much RAM (e.g. 16G) instead of this machine's; no trace", "scan",
       "source", metavar="SIZE"),
    _o("vram", "--vram", "what-if: plan for GPUs with this much free VRAM each (e.g. 24G,24G) instead of this "
       "machine's; no trace", "scan", "source", metavar="SIZE[,SIZE]"),
    _o("verify", "--verify", "try each fix that is a setting: the same short job re-run in a fresh engine with the fix "
       "applied (same prompt and seed) and judged again, shown as before -> after; also sweep threads and the batch "
       "size (off: nothing extra runs)", ALL, "source", action="store_true",
       help_for={"analyze": "try each fix that is a setting on this machine with the embedded engine, when the model "
                            "file the log names is here (or --model); otherwise say which command checks it"}),
    _o("verify_budget", "--verify-budget", f"time for all of --verify's runs together (default {VERIFY_BUDGET_S:.0f})",
       ALL, "source", type=float, metavar="SECONDS"),
    _o("hardware", "--hardware", "the machine that ran a pasted result, as you would write it ('RTX 3090', "
       "'M1 Ultra 64-core GPU, 128 GB', 'Raspberry Pi 5', 'i5-4278U, DDR3', '2x 4090', 'RX 7900 XTX, Resizable "
       "BAR off'): the speed verdict holds the result against its published figures; what the paste itself "
       "names wins", "analyze", "source", metavar="TEXT"),
    _o("save", "--save", "write the facts so `llm-doctor analyze FILE` can re-judge them", "scan", "source",
       metavar="FILE"),
    _o("log", "--log", "follow a growing log (appends, truncation, rotation, like tail -F)", "watch", "source",
       metavar="FILE"),
    _o("from_end", "--from-end", "with --log: skip what the file already holds", "watch", "source",
       action="store_true"),
    _o("metrics", "--metrics", "also read a server's Prometheus /metrics (vLLM, llama-server --metrics)",
       "watch", "source", metavar="URL"),
    _o("metrics_interval", "--metrics-interval", "between scrapes (default 5s)", "watch", "source",
       metavar="SECONDS", default="5s"),
    _o("duration", "--duration", "stop after this long (30s, 5m, 1h); Ctrl-C or SIGTERM also stops with the report",
       "watch", "source", metavar="TIME"),
    _o("record", "--record", "write every event to FILE (NDJSON, flushed as it goes); analyze FILE replays it",
       "watch", "source", metavar="FILE"),
    # -- what to check -------------------------------------------------------------------------
    _o("only", "--only", "only these checks: rule id (LDnnn), slug, class or class family (e.g. context.overflow,oom)",
       ALL, "selection", action="append", default=[], type=csv_list, metavar="X[,Y]",
       help_for={"scan": "only these probes (gguf, storage, cpu, memory, gpu, engine, readbench, gpubench, "
                         "bench, trace) and/or checks (rule id, slug, class or class family)"}),
    _o("skip", "--skip", "skip these checks; names as for --only", ALL, "selection",
       action="append", default=[], type=csv_list, metavar="X[,Y]",
       help_for={"scan": "skip these probes and/or checks; names as for --only"}),
    _o("rules", "--rules", "extra rule folder (repeatable; also LLM_DOCTOR_RULES)", ALL, "selection",
       action="append", default=[], metavar="DIR"),
    # -- output --------------------------------------------------------------------------------
    _o("format", "--format", "output format (default: the TUI on a terminal when installed, else text)", ALL,
       "output", default=None,
       help_for={"watch": "output format; ndjson is one event per line as the run goes (default: the TUI on a "
                          "terminal when installed, else text)"}),
    _o("fail_on", "--fail-on", "exit 1 when a finding is at or above this severity (default: error)", ALL,
       "output", choices=FAIL_ON, default="error"),
    _o("engine", "--engine", "whose flags the fixes use (default: the engine detected)", ALL, "output"),
    _o("engine_binary", "--engine-binary", "the llama.cpp binary (llama-server) whose --help the llama.cpp fixes are "
       "checked against and spelled in (default: the path the log names, $LLM_DOCTOR_LLAMA_SERVER, llama-server on "
       "PATH)", "analyze", "output", metavar="FILE"),
    _o("verbose", "-v --verbose", "every check, all evidence, every engine's fix", ALL, "output",
       action="store_true"),
    _o("color", "--color", "colour in text output (NO_COLOR is honoured)", ALL, "output",
       choices=("auto", "always", "never"), default="auto"),
    _o("redact", "--redact", "remove home paths, user and host names (this machine's and those the log's prefixes "
       "and URLs show), IP/MAC/e-mail addresses, UUIDs, API keys and the prompt/output text from every view, so "
       "the report can be pasted into a public issue", ALL, "output",
       action="store_true"),
    _o("tui", "--tui", "force the interactive view", ALL, "output", action="store_true", default=None,
       mutex="tui"),
    _o("no_tui", "--no-tui", "never open the interactive view", ALL, "output", action="store_false",
       dest_override="tui", mutex="tui"),
)


def default_ctx(n_ctx_train: object) -> tuple[int, str]:
    """The context scan plans and watch runs with when -c is not given, and why."""
    if isinstance(n_ctx_train, int) and not isinstance(n_ctx_train, bool) and n_ctx_train > 0:
        capped = f" capped at {DEFAULT_CTX_CAP}" if n_ctx_train > DEFAULT_CTX_CAP else ""
        return min(n_ctx_train, DEFAULT_CTX_CAP), f"default: the training context {n_ctx_train}{capped}"
    return DEFAULT_CTX_CAP, f"default: {DEFAULT_CTX_CAP} (training context unknown)"


def by_dest(dest: str) -> Option:
    return next(o for o in OPTIONS if o.dest == dest)


def add_options(parser: argparse.ArgumentParser, command: str, groups: tuple[str, ...] | None = None) -> None:
    """Add `command`'s options from the table (only those of `groups`, when given)."""
    made: dict[str, Any] = {}
    mutexes: dict[str, Any] = {}
    for option in OPTIONS:
        if command not in option.commands or (groups is not None and option.group not in groups):
            continue
        if option.group not in made:
            made[option.group] = parser.add_argument_group(GROUPS[option.group])
        target = made[option.group]
        if option.mutex is not None:
            if option.mutex not in mutexes:
                mutexes[option.mutex] = target.add_mutually_exclusive_group()
            target = mutexes[option.mutex]
        kwargs = dict(option.kwargs)
        dest = kwargs.pop("dest_override", option.dest)
        if option.dest == "format":
            kwargs["choices"] = WATCH_FORMATS if command == "watch" else OUTPUT_FORMATS
        if option.dest == "engine":
            kwargs["choices"] = engines.names()  # the engine table as it is when the parser is built
        if option.dest in ("metrics_interval", "duration"):
            kwargs["type"] = duration
        target.add_argument(*option.flags, dest=dest, help=option.help_for.get(command, option.help), **kwargs)


def vocabulary_table() -> str:
    """The option table of docs/usage.md: option x scan / watch / analyze."""
    rows = ["| option | short | also | scan | watch | analyze |", "|---|---|---|---|---|---|"]
    for option in OPTIONS:
        if option.dest == "no_tui":
            continue
        name = option.name + (" / --no-tui" if option.dest == "tui" else "")
        marks = " | ".join("✓" if c in option.commands else "" for c in COMMANDS)
        also = ", ".join(f"`{a}`" for a in option.aliases)
        short = f"`{option.short}`" if option.short else ""
        rows.append(f"| `{name}` | {short} | {also} | {marks} |")
    return "\n".join(rows)
