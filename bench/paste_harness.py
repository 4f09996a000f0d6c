"""`python -m bench.paste_harness`: does a diagnosis survive the way a log was pasted?

Every case of the corpus (bench/corpus_score.py: the shared corpus and the repository's corpus/) is
scored as it is, then re-pasted each of the ways below and scored again, through the same reader
(`analyze FILE`), rule base and verdict as the scorer. For each way: of the cases named right as
they are (healthy ones: clean), how many are still right re-pasted ("kept"; the target is >= 95%).
The fit split's losses are listed by name; the check split's cases (numbered by a multiple of 3)
are only counted.

The ways are what happens to a log on its way into an issue, a chat or a file:

  wrap80     a terminal's hard wrap at 80 columns (a line cut every 80 characters, numbers included)
  crlf       Windows line ends
  docker     docker compose's service prefix (`server-1  | `)
  kubectl    `kubectl logs --prefix` (`[pod/NAME/CONTAINER] `)
  quote      a markdown quote (`> ` on each line)
  json       the whole text as the message of a JSON error body, on one line (`\\n`, `\\"`, `\\u00XX`)
  repr       the whole text as a Python string's repr, on one line (`'...\\n...'`, `\\'`)
  utf16      PowerShell 5's `>`: UTF-16 LE with a byte-order mark, CRLF ends
  utf16-nobom  the same without the byte-order mark (NUL-interleaved ASCII)
  vscode     a notification's word wrap at 60 columns (breaks at spaces, which are lost; a longer
             word cut at the width)

    python -m bench.paste_harness [DIR ...] [--ways a,b] [--split fit|check|all] [--json] [--write]

--write puts the table in bench/results/paste_harness.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.corpus_score import CaseResult, corpus_logs, default_folders, score_case, split_of  # noqa: E402

RESULT = ROOT / "bench" / "results" / "paste_harness.md"
TARGET = 95.0


def _lines(text: str) -> list[str]:
    return text.split("\n")


def wrap80(text: str) -> bytes:
    out = []
    for line in _lines(text):
        out += [line[i:i + 80] for i in range(0, len(line), 80)] or [""]
    return "\n".join(out).encode()


def vscode(text: str) -> bytes:
    out = []
    for line in _lines(text):
        out += textwrap.wrap(line, 60, break_long_words=True, break_on_hyphens=False) or [""]
    return "\n".join(out).encode()


def _prefixed(prefix: str, text: str) -> bytes:
    body = text[:-1] if text.endswith("\n") else text
    return "".join(f"{prefix}{line}\n" for line in _lines(body)).encode()


def quote(text: str) -> bytes:
    body = text[:-1] if text.endswith("\n") else text
    return "".join(f"> {line}\n" if line else ">\n" for line in _lines(body)).encode()


def as_json(text: str) -> bytes:
    body = {"error": {"message": text.rstrip("\n"), "type": "BadRequestError", "param": None, "code": 400}}
    return (json.dumps(body) + "\n").encode()


def as_repr(text: str) -> bytes:
    return (repr(text.rstrip("\n")) + "\n").encode()


def utf16(text: str, bom: bool = True) -> bytes:
    return (("\ufeff" if bom else "") + text.replace("\n", "\r\n")).encode("utf-16-le")


WAYS: dict[str, Callable[[str], bytes]] = {
    "wrap80": wrap80,
    "crlf": lambda t: t.replace("\n", "\r\n").encode(),
    "docker": lambda t: _prefixed("server-1  | ", t),
    "kubectl": lambda t: _prefixed("[pod/server-6d5f7c9b8-x2x7q/server] ", t),
    "quote": quote,
    "json": as_json,
    "repr": as_repr,
    "utf16": utf16,
    "utf16-nobom": lambda t: utf16(t, bom=False),
    "vscode": vscode,
}


@dataclass(slots=True)
class WayTally:
    """One way's figures per split: kept of right-as-is, and right now though wrong as is (gained)."""

    kept: dict[str, list[int]] = field(default_factory=lambda: {"fit": [0, 0], "check": [0, 0]})
    gained: dict[str, int] = field(default_factory=lambda: {"fit": 0, "check": 0})
    lost: list[str] = field(default_factory=list)  # the fit split's only

    def add(self, name: str, before: CaseResult, after: CaseResult) -> None:
        part = split_of(name)
        if before.right:
            self.kept[part][1] += 1
            self.kept[part][0] += after.right
            if not after.right and part == "fit":
                why = (after.error or "")[:48] or f"root cause {after.got or 'none'}"
                self.lost.append(f"{name} ({why})")
        elif after.right:
            self.gained[part] += 1

    def total(self) -> tuple[int, int]:
        return self.kept["fit"][0] + self.kept["check"][0], self.kept["fit"][1] + self.kept["check"][1]


def run(folders: list[Path], ways: list[str], split: str = "all") -> tuple[dict[str, int], dict[str, WayTally]]:
    """Score every case as is and re-pasted each way: (right as is per split, the ways' tallies)."""
    right = {"fit": 0, "check": 0, "fit_total": 0, "check_total": 0}
    tallies = {way: WayTally() for way in ways}
    with tempfile.TemporaryDirectory(prefix="llm-doctor-paste-") as tmp:
        for log in corpus_logs(folders, split):
            before = score_case(log)
            part = split_of(log.name)
            right[part] += before.right
            right[f"{part}_total"] += 1
            text = log.read_bytes().decode("utf-8", errors="replace")
            for way in ways:
                pasted = Path(tmp) / f"{way}-{log.name}"
                pasted.write_bytes(WAYS[way](text))
                tallies[way].add(log.name, before, score_case(log, pasted))
                pasted.unlink()
    return right, tallies


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.0f}%" if b else "-"


def table(right: dict[str, int], tallies: dict[str, WayTally]) -> str:
    lines = [f"Right as pasted originally: fit {right['fit']} / {right['fit_total']}, check {right['check']} / "
             f"{right['check_total']}.", "",
             "| way | kept (all) | kept % | fit kept | check kept | gained (fit / check) | >= 95% |",
             "|---|---|---|---|---|---|---|"]
    for way, t in tallies.items():
        k, n = t.total()
        met = "yes" if n and 100.0 * k / n >= TARGET else "NO"
        lines.append(f"| {way} | {k} / {n} | {_pct(k, n)} | {t.kept['fit'][0]} / {t.kept['fit'][1]} | "
                     f"{t.kept['check'][0]} / {t.kept['check'][1]} | {t.gained['fit']} / {t.gained['check']} | {met} |")
    losses = [(way, t.lost) for way, t in tallies.items() if t.lost]
    if losses:
        lines += ["", "Lost on the fit split (the check split's are only counted):", ""]
        for way, lost in losses:
            lines += [f"- {way}: " + "; ".join(lost)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.paste_harness", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", nargs="*", help="corpus folders (default: the scorer's)")
    p.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of {', '.join(WAYS)}")
    p.add_argument("--split", choices=("all", "fit", "check"), default="all")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--write", action="store_true", help=f"write the table to {RESULT.relative_to(ROOT)}")
    args = p.parse_args(argv)
    ways = [w for w in args.ways.split(",") if w]
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        print(f"error: unknown way(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    folders = [Path(d) for d in args.dir] or default_folders()
    if not folders or not all(f.is_dir() for f in folders):
        print("error: no corpus folder (give DIR or set LLM_DOCTOR_CORPUS)", file=sys.stderr)
        return 2
    right, tallies = run(folders, ways, args.split)
    if args.json:
        print(json.dumps({"right": right, "ways": {w: {"kept": t.kept, "gained": t.gained, "lost_fit": t.lost}
                                                    for w, t in tallies.items()}}, indent=1))
    else:
        print(table(right, tallies))
    if args.write:
        RESULT.write_text("# Paste harness (`python -m bench.paste_harness --write`)\n\n"
                          + table(right, tallies) + "\n", encoding="utf-8")
    return 0 if all(t.total()[1] and 100.0 * t.total()[0] / t.total()[1] >= TARGET for t in tallies.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
