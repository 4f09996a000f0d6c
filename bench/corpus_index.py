"""`python -m bench.corpus_index [DIR]`: write DIR/INDEX.md (default: the repository's corpus/) from its cases.

Each case is a pair `NNNN_<engine>_<slug>.log` + `.yaml` (the form of ../shared/corpus: the thread's URL,
the engine, `failure_class`, the diagnosis the thread reached). The index is made from the yamls alone,
so it never disagrees with them: a table of every case (number, engine, class, split, source) and the
counts by engine, by class and by split. `--check` exits 1 when INDEX.md is not what the yamls make
(the suite runs it).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.corpus_score import repo_corpus, split_of  # noqa: E402

HEADER = """# Real logs from public threads, with the diagnosis each thread reached

The repository's own cases, numbered from 1001, beside the shared corpus (`../shared/corpus`, 101-566).
Each is a pair: `NNNN_<engine>_<slug>.log` holds the log lines as the user posted them (unrelated chatter
trimmed; user and host names, addresses and keys replaced by placeholders) and `NNNN_<engine>_<slug>.yaml`
holds the source thread, the engine, `failure_class`, the diagnosis the thread reached (a maintainer's
answer or the reporter's confirmed fix, in our words), the key numbers visible in the log, and
`excerpt_notes` on how the excerpt was cut.

**Check split:** the cases whose number is divisible by 3 are the check split. Never read their logs
while writing a rule, a vocabulary entry, a parser or a normaliser; run them only through the scorer
(`python -m bench.corpus_score --split check` counts them, never lists them), and report fit and check
accuracy apart.

`failure_class` -> llm-doctor diagnosis class: oom_weights -> oom.weights, oom_kv -> oom.kv_cache,
oom_compute -> oom.compute, oom_runtime -> oom.runtime, oom_concurrency -> oom.concurrency,
ctx_overflow -> context.overflow, kv_preemption -> kv.preemption, io_bound_load -> io.slow_load,
partial_offload -> offload.partial, no_gpu_offload -> offload.none, threads -> cpu.threads,
repetition_sampling -> sampling.repetition, healthy -> no warning or error finding, other -> see the yaml
(scored by bench/corpus_score.py's rule for `other`).

This file is generated: `python -m bench.corpus_index`.
"""


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    engine: str
    failure_class: str
    url: str
    title: str

    @property
    def split(self) -> str:
        return split_of(self.name)


def _entry(yaml_path: Path) -> Entry:
    import yaml

    data = yaml.safe_load(yaml_path.read_text(encoding="utf-8")) or {}
    source = data.get("source") if isinstance(data.get("source"), dict) else {}
    parts = yaml_path.stem.split("_")
    engine = parts[1] if len(parts) > 2 else "?"  # the file name's engine, a closed word (the yaml's is prose)
    return Entry(yaml_path.with_suffix(".log").name, engine, str(data.get("failure_class", "?")),
                 str(source.get("url", "")), str(source.get("title", "")))


def entries(folder: Path) -> list[Entry]:
    return [_entry(y) for y in sorted(folder.glob("*.yaml")) if y.with_suffix(".log").exists()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(items: list[Entry]) -> str:
    lines = [HEADER, f"{len(items)} cases.", "", "| file | engine | class | split | source |",
             "|---|---|---|---|---|"]
    for e in items:
        link = f"[{_cell(e.url.removeprefix('https://github.com/'))}]({e.url})" if e.url else "-"
        lines.append(f"| {e.name} | {_cell(e.engine)} | {e.failure_class} | {e.split} | {link} |")
    lines += ["", "## Counts", ""]
    for title, counter in (("By engine", Counter(e.engine for e in items)),
                           ("By class", Counter(e.failure_class for e in items)),
                           ("By split", Counter(e.split for e in items))):
        parts = ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"{title}: {parts or 'none'}.")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.corpus_index", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", nargs="?", help="corpus folder (default: the repository's corpus/)")
    p.add_argument("--check", action="store_true", help="exit 1 if INDEX.md is not what the yamls make")
    args = p.parse_args(argv)
    folder = Path(args.dir) if args.dir else repo_corpus()
    if not folder.is_dir():
        print(f"error: {folder}: no such folder", file=sys.stderr)
        return 2
    text = render(entries(folder))
    index = folder / "INDEX.md"
    if args.check:
        current = index.read_text(encoding="utf-8") if index.exists() else ""
        if current != text:
            print(f"{index} is out of date: run python -m bench.corpus_index", file=sys.stderr)
            return 1
        return 0
    index.write_text(text, encoding="utf-8")
    print(f"wrote {index} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
