#!/usr/bin/env python3
"""Coverage of the message catalogue, per engine: catalogued warning/error messages, how many the
analyzer recognises, how many have a test built from the entry itself (tests/logs/test_catalogue.py:
its sample and a line with other values), and how many an engine parser reads too.

    python scripts/catalogue_coverage.py            # the table
    python scripts/catalogue_coverage.py --write    # docs/catalogue.md (generated; dated)

Run from the checkout root (PYTHONPATH=$PWD). The releases checked are the research's (the tags
each entry's `versions` was read at); docs/catalogue/ keeps scripts/extract_messages.py's runs.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from doctor.sources.catalogue import store  # noqa: E402
from doctor.sources.catalogue.coverage import Coverage, coverage  # noqa: E402

# where each engine's entries were read, and at which releases (the research notes, 2026-12)
CHECKED = {
    "llama_cpp": "ggerganov/llama.cpp b1500, b2000, b3500, b4000, b4747; upstream tags via ngxson/llama.cpp "
                 "b5000, b5345, b6000, b6500, b7077, b8794, b10573; --fit (llama_params_fit): b7416, b7728, b8132, "
                 "b8660, b9917, b10573",
    "ollama": "v0.1.14, v0.1.35, v0.2.2, v0.3.9, v0.5.1, v0.6.3, v0.9.4, v0.11.9, v0.13.0, v0.17.3, v0.20.6, "
              "v0.30.0, v0.30.3, v0.32.15, v0.33.0-rc2",
    "vllm": "wheels 0.4.0.post1, 0.6.3.post1, 0.8.5, 0.11.0, 0.34.0",
    "sglang": "wheels 0.3.0, 0.4.3, 0.5.23",
    "tgi": "v1.0.0, v1.4.0, v2.0.2, v2.4.0, v3.0.0, v3.2.1, v3.3.7",
    "lcp": "v0.1.78, v0.2.24, v0.2.56, v0.2.88, v0.3.5, v0.3.13, v0.3.35",
    "koboldcpp": "v1.35, v1.50.1, v1.65, v1.76 (the mirror ends there)",
    "textgen_webui": "v1.5, snapshot-2024-04-28, v2.4, v3.12, v4.7.3",
    "llama_box": "v0.0.25, v0.0.70, v0.0.118, v0.0.171",
    "lmstudio": "lms CLI commits e83b697, 90b739c, 8dbf8bf, 07b7252 (the app is closed source)",
    "lmdeploy": "InternLM/lmdeploy v0.0.11, v0.0.14, v0.1.0, v0.2.0, v0.2.6, v0.4.0, v0.5.0, v0.6.0, v0.7.0, v0.8.0, "
                "v0.9.0, v0.10.0, v0.11.0, v0.12.0, v0.13.0, v0.14.0, v0.15.0, v0.16.0",
    "mlx": "ml-explore/mlx v0.0.6, v0.1.0, v0.2.0, v0.5.0, v0.10.0, v0.14.0, v0.15.0, v0.18.0, v0.21.0, v0.22.0, v0.23.0, "
           "v0.24.0, v0.25.0, v0.26.0, v0.26.5, v0.28.0, v0.30.0, v0.32.1",
    "mlx_lm": "ml-explore/mlx-lm v0.22.0, v0.24.1, v0.26.0, v0.28.0, v0.30.0, v0.31.3",
    "deepspeed": "microsoft/DeepSpeed v0.8.0, v0.9.0, v0.9.2, v0.10.0, v0.10.3, v0.11.0, v0.12.0, v0.14.0, v0.16.0, v0.16.4",
    "cui_llama_rn": "Vali-98/cui-llama.rn v1.0.2, v1.0.3, v1.0.11, v1.1.7, v1.3.0, v1.4.0, v1.4.1, v1.11.10",
    "exllamav2": "turboderp/exllamav2 v0.0.4, v0.0.10, v0.0.15, v0.0.21, v0.1.0, v0.2.0, v0.2.7",
}
HEAD = ("engine", "entries", "warning/error", "recognised", "with a test", "read by a parser too", "info")


def rows(found: list[Coverage]) -> list[tuple[str, ...]]:
    by_engine: dict[str, Counter[str]] = {}
    for c in found:
        counts = by_engine.setdefault(c.entry.engine, Counter())
        counts["entries"] += 1
        if c.entry.level == "info":
            counts["info"] += 1
            continue
        counts["warn"] += 1
        counts["recognised"] += c.recognised
        counts["tested"] += c.tested
        counts["parser"] += c.parser_too
    out = []
    total: Counter[str] = Counter()
    for engine, counts in sorted(by_engine.items()):
        total.update(counts)
        out.append(_row(engine, counts))
    out.append(_row("**all**", total))
    return out


def _row(engine: str, c: Counter[str]) -> tuple[str, ...]:
    return (engine, str(c["entries"]), str(c["warn"]), str(c["recognised"]), str(c["tested"]), str(c["parser"]),
            str(c["info"]))


def table(found: list[Coverage]) -> list[str]:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(found)]
    return lines


def vocabulary_lines() -> list[str]:
    """The meaning layer's section: its vocabulary by section, and how much of the catalogue it reads."""
    from doctor.sources.catalogue import meaning, vocabulary

    v = vocabulary.builtin()
    diagnostic = [e for e in store.entries() if e.diagnostic]
    read = [e for e in diagnostic if (r := meaning.read(v, e.sample)) is not None and meaning.meaning_of(v, r)]
    return [
        "## Beyond the catalogue: the meaning layer",
        "",
        "A sentence no engine parser and no entry here knows - another program's words (a desktop app, a",
        "front-end, a fork, a hardware plugin, a test harness, a ggml-era message) - is read for its meaning",
        "by the vocabulary beside the catalogue (`doctor/sources/catalogue/vocabulary.yaml`, read and checked",
        "by vocabulary.py, a line read by meaning.py, in `analyze` by meaning_parser.py): a failure relation",
        "(exceeds, not enough, out of, preempted) over a resource (device or host memory, the KV cache, compute",
        "buffers, the context window, storage), with its quantities and their roles (needed, the limit). It",
        "becomes the typed event an engine parser makes (`oom` in its phase, `prompt_too_long`, `truncation`,",
        "`kv_capacity`, `preempted`), so the same rules judge it and say the fix in the engine's words. Its",
        "relation words are its triggers: it reads only the lines that hold one, and never a line an engine",
        "parser or a catalogued message (any level) read.",
        "",
        f"Vocabulary: {len(v.relations)} relations, {len(v.resources)} resources, {len(v.modifiers)} modifiers, "
        f"{len(v.steps)} steps, {len(v.events)} event rules, tested on {len(v.examples)} real lines it cites",
        f"(tests/logs/test_meaning.py). Of the {len(diagnostic)} warning/error entries here, the vocabulary reads "
        f"{len(read)} samples",
        "into a failure, none against the entry's class (the few readings of another class are listed, with",
        "the reason, in the test).",
        "",
    ]


def document(found: list[Coverage]) -> str:
    today = datetime.date.today().isoformat()
    missing = [c.entry.id for c in found if c.entry.level != "info" and not (c.recognised and c.tested)]
    lines = [
        "# The message catalogue: coverage",
        "",
        f"Generated by `scripts/catalogue_coverage.py --write` on {today}. Do not edit by hand.",
        "",
        "Each engine's log and exception messages, taken from its sources at the releases below, live in",
        "`doctor/sources/catalogue/messages/<engine>.yaml` (engine keys as in the engine table; wrappers",
        "by their own names). *Recognised*: `analyze` reads the entry's sample line (the entries that can",
        "change a report - a warning or error with a diagnosis class, or numbers set as facts - are matched",
        "in the analyzer's one RE2 set, then by their own patterns; a benign one is recognised by the whole",
        "catalogue's set and must make no event). *With a test*: tests/logs/test_catalogue.py",
        "builds two lines from the entry itself (its sample, and the sample with every number changed)",
        "and both are recognised with their numbers read. *Read by a parser too*: an engine parser",
        "makes an event or a fact from the same line, so the catalogue's `message` event for it is",
        "`known` and the generic rules (rules/LD*-catalogue.yaml) leave it to that parser's rules.",
        "",
        *table(found),
        "",
        "Warning/error entries not recognised or without a passing test: "
        + (", ".join(missing) if missing else "none") + " (tests/logs/test_catalogue.py fails on any).",
        "",
        "## In analyze",
        "",
        "The entries that can change a report (a warning or error with a class, or numbers set as facts)",
        "join the analyzer's scan with their rare literals (or their pattern, where they have none), and",
        "the same fragments join the router's one RE2 set per line (doctor/sources/logs/router.py): the",
        "catalogue's parser gets the set's answer instead of matching again, and a line only the",
        "catalogue selects goes to it alone, so the engines' parsers see exactly the lines they saw",
        "without it. A hit is confirmed by the entry's own pattern, which reads its numbers. The checked",
        "catalogue is kept as JSON (doctor/sources/catalogue/store.py), so no start parses its YAML.",
        "",
        *vocabulary_lines(),
        "## Releases checked",
        "",
        "| engine | releases |",
        "|---|---|",
        *[f"| {engine} | {tags} |" for engine, tags in CHECKED.items()],
        "",
        "`versions.first` / `versions.last` of an entry are the first and last of these releases whose",
        "source holds its text (`last: null`: still printed by the newest). A new release is a diff to",
        "review: `python scripts/extract_messages.py --engine ENGINE --source DIR_OR_GIT_DIR [--rev TAG]`",
        "prints CHANGED and GONE entries, then NEW messages; runs on several releases are kept in",
        "docs/catalogue/.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write docs/catalogue.md")
    args = parser.parse_args(argv)
    found = [coverage(entry) for entry in store.entries()]
    if args.write:
        (ROOT / "docs" / "catalogue.md").write_text(document(found))
    print("\n".join(table(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
