#!/usr/bin/env python3
"""Re-extract log/exception format strings from an LLM engine's source tree, against the catalogue.

The script walks the source of one engine (a checkout or unpacked wheel
directory, or a bare git directory plus a revision), pulls out the format
strings passed to that engine's logging / exception call sites, keeps those
that carry diagnostic words, and prints a diff against a message catalogue
(by default the shipped one, doctor/sources/catalogue/messages/<engine>.yaml):

* ``NEW``     - a format string in the source that no catalogue entry covers;
* ``GONE``    - a catalogue entry whose literal text is absent from the source;
* ``CHANGED`` - a GONE entry for which a similar (but not equal) source
  string exists; the likely new wording is shown.

Usage::

    python scripts/extract_messages.py --engine llama_cpp --source /path/to/llama.cpp
    python scripts/extract_messages.py --engine ollama --source /mirror/ollama.git --rev v0.5.0
    python scripts/extract_messages.py --engine vllm --source /tmp/src/vllm-0.8.5 --max-lines 300

Engine keys are the catalogue's file names (the engine table's keys, wrappers by their own
names). CHANGED and GONE come first: they are the review list when a new release appears; NEW
lists every logged string with a diagnostic word that no entry covers, the likeliest first.
The runs kept in docs/catalogue/ are this script's output on three or more releases per engine.
Only the standard library and PyYAML are used (no import of llm-doctor).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

CATALOGUE = Path(__file__).resolve().parent.parent / "doctor" / "sources" / "catalogue" / "messages"

DIAGNOSTIC_WORDS = re.compile(
    r"memory|\bmem\b|context|\bctx|offload|layer|\bkv\b|cache|thread|token|failed|"
    r"fail|error|exceed|alloc|oom|out of|cuda|rocm|hip|vulkan|metal|sycl|gpu|vram|"
    r"device|buffer|block|batch|preempt|truncat|too (?:large|long|big)|mmap|mlock|"
    r"graph|kernel|throughput|tokens per second|tok/s|t/s|eval time|load time|"
    r"unknown|unsupported|not supported|architecture|swap|shift|slot|concurren|"
    r"capacity|limit|warmup|shard|numa|driver|compute capability|fallback",
    re.IGNORECASE,
)


# words that make a NEW message more likely to matter; NEW lines are sorted by them
STRONG_WORDS = re.compile(
    r"out of memory|\boom\b|memory|context|offload|\bkv\b|cache|exceed|too long|"
    r"truncat|preempt|layers|alloc|cuda|vram|tokens per second|throughput|kernel",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class EngineSpec:
    """Where an engine keeps its sources and how its call sites look."""

    exts: tuple[str, ...]
    include: tuple[str, ...] = ()  # path prefixes; empty = everything
    exclude: tuple[str, ...] = ("test", "tests/", "docs/", ".github/", "benchmarks/")
    call_regexes: tuple[str, ...] = ()  # for the regex-based (non-Python) scanner
    python_loggers: bool = False


C_CALLS = (
    r"\b(?:LLAMA_LOG_(?:INFO|WARN|ERROR|DEBUG|CONT)|GGML_LOG_(?:INFO|WARN|ERROR|DEBUG|CONT)"
    r"|LOG_(?:INF|WRN|ERR|DBG|TEE|CNT)|LOG|LOG_TEE|LOG_INFO|LOG_WARNING|LOG_ERROR"
    r"|SRV_(?:INF|WRN|ERR|DBG|TRC)|SLT_(?:INF|WRN|ERR|DBG|TRC)|QUE_(?:INF|WRN|ERR|DBG)"
    r"|COM_(?:INF|WRN|ERR|TRC)|GGML_ABORT|GGML_ASSERT|fprintf\s*\(\s*stderr\s*,"
    r"|printf|send_error|std::runtime_error|std::invalid_argument|format"
    r"|SRV_ERR|LOG_S?(?:INFO|WARN|ERR)|LOGI|LOGW|LOGE)\s*\(",
)
GO_CALLS = (
    r"\b(?:slog|log|logutil)\.(?:Info|Warn|Error|Debug|Trace)(?:Context)?\s*\(\s*(?:ctx\s*,\s*)?",
    r"\b(?:fmt\.Errorf|errors\.New|log\.Printf|log\.Fatalf|log\.Println|fmt\.Sprintf)\s*\(",
)
RUST_CALLS = (
    r"\b(?:tracing::)?(?:warn|error|info|debug|panic|format|bail|anyhow)!\s*\(",
    r"#\[error\(",
)
TS_CALLS = (
    r"\b(?:logger|console|this\.logger|log)\.(?:warn|error|info|log|debug)\s*\(",
    r"\bnew\s+\w*Error\s*\(",
    r"\btext`",
)

ENGINES: dict[str, EngineSpec] = {
    "llama_cpp": EngineSpec(
        exts=(".c", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".m", ".mm"),
        include=(
            "src/", "ggml/src/", "ggml/include/", "common/", "tools/server/", "tools/main/",
            "tools/completion/", "tools/cli/", "examples/server/", "examples/main/",
            "llama.cpp", "ggml.c", "ggml-cuda.cu", "ggml-metal.m", "ggml-alloc.c",
            "ggml-backend.c", "ggml-vulkan.cpp", "ggml-sycl.cpp", "ggml-opencl.cpp",
        ),
        exclude=("tests/", "docs/", ".github/", "vendor/", "ggml/src/ggml-kompute/"),
        call_regexes=C_CALLS,
    ),
    "ollama": EngineSpec(
        exts=(".go",),
        exclude=("_test.go", "docs/", ".github/", "integration/", "llama/llama.cpp/",
                 "ml/backend/ggml/ggml/", "vendor/"),
        call_regexes=GO_CALLS,
    ),
    "vllm": EngineSpec(exts=(".py",), include=("vllm/",), python_loggers=True),
    "sglang": EngineSpec(
        exts=(".py",), include=("sglang/", "python/sglang/"), python_loggers=True,
    ),
    "tgi": EngineSpec(
        exts=(".rs", ".py"),
        include=("launcher/", "router/", "backends/v3/", "backends/v2/",
                 "server/text_generation_server/"),
        call_regexes=RUST_CALLS,
        python_loggers=True,
    ),
    "lcp": EngineSpec(exts=(".py",), include=("llama_cpp/",), python_loggers=True),
    "koboldcpp": EngineSpec(
        exts=(".py", ".cpp", ".h"),
        include=("koboldcpp.py", "gpttype_adapter.cpp", "expose.cpp", "expose.h"),
        call_regexes=C_CALLS,
        python_loggers=True,
    ),
    "textgen_webui": EngineSpec(
        exts=(".py",), include=("modules/", "server.py"), python_loggers=True,
    ),
    "llama_box": EngineSpec(
        exts=(".cpp", ".hpp", ".h"), include=("llama-box/",), call_regexes=C_CALLS,
    ),
    "lmstudio": EngineSpec(exts=(".ts",), include=("src/",), call_regexes=TS_CALLS),
}

PY_LOG_METHODS = {
    "info", "warning", "warn", "error", "exception", "critical", "debug",
    "info_once", "warning_once", "debug_once", "error_once", "log", "print",
    "log_master", "print_warning_once",
}


@dataclass
class Message:
    """One format string found in the source."""

    text: str
    path: str
    line: int


@dataclass
class SourceTree:
    """A readable view on a directory or a bare git repo at a revision."""

    root: str
    rev: str | None = None
    _git: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        p = Path(self.root)
        if self.rev is not None or ((p / "HEAD").is_file() and (p / "objects").is_dir()):
            self._git = True
            if self.rev is None:
                self.rev = "HEAD"

    def _git_cmd(self, *args: str, data: bytes | None = None) -> bytes:
        git_dir = self.root
        if not (Path(git_dir) / "HEAD").is_file() and (Path(git_dir) / ".git").exists():
            git_dir = str(Path(git_dir) / ".git")
        return subprocess.run(
            ["git", f"--git-dir={git_dir}", *args],
            input=data, capture_output=True, check=True,
        ).stdout

    def files(self, spec: EngineSpec) -> Iterator[tuple[str, str]]:
        """Yield (relative path, text) for the engine's source files."""
        if self._git:
            yield from self._git_files(spec)
        else:
            base = Path(self.root)
            for path in sorted(base.rglob("*")):
                rel = path.relative_to(base).as_posix()
                if path.is_file() and _wanted(rel, spec):
                    yield rel, path.read_text(encoding="utf-8", errors="replace")

    def _git_files(self, spec: EngineSpec) -> Iterator[tuple[str, str]]:
        assert self.rev is not None
        rev = self.rev
        for candidate in (f"refs/tags/{rev}", rev):
            try:
                self._git_cmd("rev-parse", "--verify", "--quiet", candidate + "^{commit}")
            except subprocess.CalledProcessError:
                continue
            rev = candidate
            break
        listing = self._git_cmd("ls-tree", "-r", rev).decode("utf-8", "replace")
        wanted: list[tuple[str, str]] = []
        for row in listing.splitlines():
            meta, _, rel = row.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob" and _wanted(rel, spec):
                wanted.append((rel, parts[2]))
        if not wanted:
            return
        blob = self._git_cmd("cat-file", "--batch", data="\n".join(s for _, s in wanted).encode())
        pos = 0
        for rel, _sha in wanted:
            nl = blob.index(b"\n", pos)
            header = blob[pos:nl].split()
            if len(header) != 3:  # "<sha> missing": blob absent from a partial mirror
                pos = nl + 1
                continue
            size = int(header[2])
            body = blob[nl + 1 : nl + 1 + size]
            pos = nl + 1 + size + 1
            yield rel, body.decode("utf-8", "replace")


def _wanted(rel: str, spec: EngineSpec) -> bool:
    if not rel.endswith(spec.exts):
        return False
    if any(x in rel for x in spec.exclude):
        return False
    return not spec.include or any(rel.startswith(p) for p in spec.include)


# ---------------------------------------------------------------- extraction

C_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
GO_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"|`([^`]*)`')
RUST_STRING = re.compile(r'r#"(.*?)"#|"((?:[^"\\]|\\.)*)"', re.DOTALL)
TS_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'|`((?:[^`\\]|\\.)*)`')


def _first_literals(code: str, start: int, lang: str) -> str | None:
    """Collect the string literal(s) of the first argument after ``start``.

    Adjacent literals are concatenated; identifiers between them (macros such
    as GGML_CUDA_NAME) become ``%s``. Stops at a top-level comma or ``)``.
    """
    i, n = start, min(len(code), start + 1500)
    pieces: list[str] = []
    depth = 0
    pending_ident = False
    pattern = {"c": C_STRING, "go": GO_STRING, "rust": RUST_STRING, "ts": TS_STRING}[lang]
    while i < n:
        ch = code[i]
        if ch in " \t\r\n":
            i += 1
            continue
        m = pattern.match(code, i)
        if m:
            if pending_ident:
                pieces.append("%s")
                pending_ident = False
            pieces.append(next(g for g in m.groups() if g is not None))
            i = m.end()
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            if pieces or lang != "c":
                break
            pending_ident = False  # e.g. LOG(level, "...") or SLT_WRN(slot, "..."): next arg
        elif re.match(r"[A-Za-z_]", ch):
            m2 = re.match(r"[A-Za-z_][A-Za-z0-9_:.]*", code[i:])
            assert m2
            if pieces:
                pieces.append("%s")
            elif lang == "c" and depth == 0:
                pending_ident = True
            i += m2.end()
            continue
        i += 1
    text = "".join(pieces).strip()
    text = re.sub(r"^(?:%s)+", "", text) if not any(c.isalpha() for c in text[:2]) else text
    return text or None


def extract_regex(path: str, code: str, spec: EngineSpec, lang: str) -> Iterator[Message]:
    """Scan C/C++/Go/Rust/TS code with call-site regexes."""
    for call in spec.call_regexes:
        for m in re.finditer(call, code):
            text = _first_literals(code, m.end(), lang)
            if text:
                yield Message(_unescape(text), path, code.count("\n", 0, m.start()) + 1)


def _unescape(text: str) -> str:
    return (text.replace("\\n", "\n").replace('\\"', '"').replace("\\t", "\t")
            .replace("\\\\", "\\").strip())


def _py_fmt(node: ast.AST) -> str | None:
    """Render a Python string expression as a format template."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out: list[str] = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                spec = ""
                if v.format_spec is not None:
                    spec = ":" + (_py_fmt(v.format_spec) or "")
                out.append("{" + ast.unparse(v.value) + spec + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = _py_fmt(node.left)
        if isinstance(node.op, ast.Add):
            right = _py_fmt(node.right)
            if left is None and right is None:
                return None
            return (left or "{...}") + (right or "{...}")
        return left
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"):
        return _py_fmt(node.func.value)
    return None


def extract_python(path: str, code: str) -> Iterator[Message]:
    """Use the ``ast`` module to find logger calls and raised exceptions."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        target: ast.AST | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else (
                func.id if isinstance(func, ast.Name) else "")
            owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            if name in PY_LOG_METHODS and ("log" in owner.lower() or name == "log_master"
                                           or name == "print_warning_once"):
                use_second = name == "log_master" and len(node.args) > 1
                target = node.args[1] if use_second else node.args[0]
            elif name.endswith(("Error", "Exception", "Warning")) or name in {"warn", "print"}:
                target = node.args[0]
        if target is not None:
            text = _py_fmt(target)
            if text:
                yield Message(text.strip(), path, getattr(node, "lineno", 0))


def python_literals(code: str) -> str:
    """All string literals of a Python file, implicit concatenations joined."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return ""
    return "\n".join(_py_fmt(n) or "" for n in ast.walk(tree)
                     if isinstance(n, ast.JoinedStr)
                     or (isinstance(n, ast.Constant) and isinstance(n.value, str)))


def extract(tree: SourceTree, spec: EngineSpec) -> tuple[list[Message], str]:
    """Return (messages with diagnostic words, concatenated source text)."""
    found: list[Message] = []
    corpus: list[str] = []
    for rel, code in tree.files(spec):
        corpus.append(code)
        if rel.endswith(".py"):
            corpus.append(python_literals(code))
            if spec.python_loggers:
                found.extend(extract_python(rel, code))
            continue
        lang = {".go": "go", ".rs": "rust", ".ts": "ts"}.get(Path(rel).suffix, "c")
        found.extend(extract_regex(rel, code, spec, lang))
    seen: set[str] = set()
    kept: list[Message] = []
    for msg in found:
        if msg.text in seen or len(msg.text) < 8 or not DIAGNOSTIC_WORDS.search(msg.text):
            continue
        seen.add(msg.text)
        kept.append(msg)
    return kept, "\n".join(corpus)


# ---------------------------------------------------------------- comparison

FMT_SPEC = re.compile(
    r"%(?:\([^)]*\))?[-+ #0']*\d*(?:\.\d+|\.\*)?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfFgGsScpvqwT%]"
    r"|\{[^{}]*\}|\$\{[^{}]*\}|PRI[du]64"
)


def skeleton(text: str) -> str:
    """Replace placeholders by a marker and squeeze whitespace."""
    return re.sub(r"\s+", " ", FMT_SPEC.sub("\u2026", text)).strip()


def template_regex(text: str) -> re.Pattern[str] | None:
    """Turn a format string into a regex matching its printed form."""
    parts = FMT_SPEC.split(text)
    body = ".*?".join(re.sub(r"\\\s+|\s+", r"\\s*", re.escape(p.strip())) for p in parts)
    try:
        return re.compile(body, re.DOTALL)
    except re.error:
        return None


def literal_runs(pattern: str) -> list[str]:
    """Literal text runs of a regex (for locating an entry in source)."""
    runs: list[str] = []
    cur: list[str] = []
    i = 0
    depth_group = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in "dDsSwWbB":
                runs.append("".join(cur))
                cur = []
            else:
                cur.append(nxt)
            i += 2
            continue
        if ch in "([{":
            runs.append("".join(cur))
            cur = []
            close = {"(": ")", "[": "]", "{": "}"}[ch]
            depth_group = 1
            j = i + 1
            while j < len(pattern) and depth_group:
                if pattern[j] == "\\":
                    j += 2
                    continue
                if pattern[j] == ch:
                    depth_group += 1
                elif pattern[j] == close:
                    depth_group -= 1
                j += 1
            i = j
            if i < len(pattern) and pattern[i] in "?*+":
                i += 1
            continue
        if ch in ".^$|":
            runs.append("".join(cur))
            cur = []
            i += 1
            continue
        if ch in "?*+":
            if cur:
                cur.pop()
            runs.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    runs.append("".join(cur))
    return [r for r in runs if r.strip()]


def entry_literals(entry: dict[str, object]) -> list[str]:
    """Texts that locate an entry in source (any one suffices).

    ``literal_any`` gives alternatives; ``literal`` (a string, or a list of
    strings that must all occur, of which the longest is used) overrides the
    default, the longest literal run of ``pattern``.
    """
    alts = entry.get("literal_any")
    if isinstance(alts, list) and alts:
        return [str(a) for a in alts]
    lit = entry.get("literal")
    if isinstance(lit, list) and lit:
        return [max((str(x) for x in lit), key=len)]
    if isinstance(lit, str) and lit:
        return [lit]
    runs = literal_runs(str(entry.get("pattern", "")))
    return [max(runs, key=lambda r: len(r.strip()), default="").strip()]


def entry_literal(entry: dict[str, object]) -> str:
    """The first locating text of an entry (see entry_literals)."""
    return entry_literals(entry)[0]


def load_catalogue(path: str) -> list[dict[str, object]]:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or []
    if not isinstance(data, list):
        raise SystemExit(f"{path}: expected a YAML list of entries")
    return [e for e in data if isinstance(e, dict)]


def compare(
    messages: list[Message], corpus: str, catalogue: list[dict[str, object]],
    threshold: float = 0.72,
) -> tuple[list[Message], list[tuple[dict[str, object], str]],
           list[tuple[dict[str, object], Message, float]]]:
    """Compute NEW, GONE and CHANGED lists."""
    samples = [_squeeze(str(e.get("sample", ""))) for e in catalogue]
    literals = [entry_literals(e) for e in catalogue]
    squeezed_lits = [_squeeze(lit) for alts in literals for lit in alts]
    new: list[Message] = []
    for msg in messages:
        flat = _squeeze(msg.text)
        covered = any(lit and lit in flat for lit in squeezed_lits)
        if not covered:
            # cheap prefilter: the longest fixed piece of the format must occur in a sample
            pieces = [p.strip() for p in FMT_SPEC.split(msg.text)]
            key = _squeeze(max(pieces, key=len)) if pieces else ""
            candidates = [s for s in samples if s and key and key in s]
            rx = template_regex(msg.text) if candidates else None
            covered = rx is not None and any(rx.search(s) for s in candidates)
        if not covered:
            new.append(msg)
    squeezed_corpus = ""
    gone: list[tuple[dict[str, object], str]] = []
    changed: list[tuple[dict[str, object], Message, float]] = []
    for entry, alts in zip(catalogue, literals, strict=True):
        if any(not lit or lit in corpus for lit in alts):
            continue
        if not squeezed_corpus:
            squeezed_corpus = _squeeze(corpus)
        if any(_squeeze(lit) in squeezed_corpus for lit in alts):
            continue
        lit = alts[0]
        best: tuple[float, Message | None] = (0.0, None)
        words = [w.lower() for w in re.findall(r"[A-Za-z_]{5,}", lit)]
        for msg in messages:
            low = msg.text.lower()
            if words and not any(w in low for w in words):
                continue
            sm = difflib.SequenceMatcher(None, lit, skeleton(msg.text), autojunk=False)
            if sm.real_quick_ratio() < threshold or sm.quick_ratio() < threshold:
                continue
            r = sm.ratio()
            if r > best[0]:
                best = (r, msg)
        if best[1] is not None and best[0] >= threshold:
            changed.append((entry, best[1], best[0]))
        else:
            gone.append((entry, lit))
    return new, gone, changed


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _one_line(text: str, width: int = 220) -> str:
    flat = text.replace("\n", "\\n")
    return flat if len(flat) <= width else flat[: width - 1] + "\u2026"


def report(args: argparse.Namespace, messages: list[Message], corpus: str,
           catalogue: list[dict[str, object]], elapsed: float) -> Iterable[str]:
    new, gone, changed = compare(messages, corpus, catalogue)
    yield f"# engine={args.engine} source={args.source} rev={args.rev or '-'}"
    yield (f"# extracted={len(messages)} catalogue={len(catalogue)} new={len(new)} "
           f"gone={len(gone)} changed={len(changed)} ({elapsed:.1f}s)")
    for entry, msg, ratio in changed:
        yield f"CHANGED {entry.get('id')} ({ratio:.2f}) {msg.path}:{msg.line}"
        yield f"    catalogue: {_one_line(entry_literal(entry))}"
        yield f"    source:    {_one_line(msg.text)}"
    for entry, lit in gone:
        yield f"GONE    {entry.get('id')}  literal={_one_line(lit)!r}"
    for msg in sorted(new, key=lambda m: -len(STRONG_WORDS.findall(m.text))):
        yield f"NEW     {msg.path}:{msg.line}  {_one_line(msg.text)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", required=True, choices=sorted(ENGINES))
    parser.add_argument("--source", required=True, help="checkout dir, unpacked wheel, or git dir")
    parser.add_argument("--rev", help="revision/tag when --source is a git directory")
    parser.add_argument("--catalogue", help="catalogue YAML to diff against (default: the shipped one)")
    parser.add_argument("--max-lines", type=int, default=0, help="print at most this many lines (0: all)")
    parser.add_argument("--list", action="store_true", help="print every extracted message")
    parser.add_argument("--output", help="write the report here instead of stdout")
    args = parser.parse_args(argv)

    t0 = time.monotonic()
    tree = SourceTree(args.source, args.rev)
    messages, corpus = extract(tree, ENGINES[args.engine])
    if not corpus:
        print(f"no {args.engine} source files found under {args.source}", file=sys.stderr)
        return 2
    catalogue = load_catalogue(args.catalogue or str(CATALOGUE / f"{args.engine}.yaml"))
    if args.list:
        lines: Iterable[str] = (f"{m.path}:{m.line}\t{_one_line(m.text, 400)}" for m in messages)
    else:
        lines = report(args, messages, corpus, catalogue, time.monotonic() - t0)
    if args.max_lines > 0:
        lines = list(lines)
        cut = len(lines) - args.max_lines
        lines = lines[: args.max_lines] + ([f"# ... {cut} more line(s) left out (--max-lines)"] if cut > 0 else [])
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            for line in lines:
                print(line, file=out)
    else:
        for line in lines:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
