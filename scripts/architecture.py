"""Writes docs/architecture.md from the tree itself: the floors of pyproject.toml's import contract
and every package's and module's docstring (its first sentence), so the picture cannot drift from
the code. `python scripts/architecture.py` rewrites the file; `--check` exits 1 when it is stale
(tests/core/test_architecture_doc.py runs the check).
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"

INTRO = """# Architecture

llm-doctor is one package, `doctor/`, built in floors. Each floor may import only the floors below it;
the three on the second floor are siblings that never import each other. The contract is
configuration (`[tool.importlinter]` in `pyproject.toml`), checked by `lint-imports` and proved again
by `tests/core/test_layers.py` on a made-up tree.

```
            commands  (cli.py, __main__.py, commands/)      wire the others, decide exit codes
   ┌────────────────┬──────────────────┬─────────────────┐
   │ views          │ judge            │ sources         │  independent siblings
   │ render a Report│ rules -> Report  │ observe -> Facts│
   └────────────────┴──────────────────┴─────────────────┘
            derive    facts computed from facts (memory model, fit, context, speed)
            core      Facts, catalogue, vocabularies, errors, engine table, report model
```

One direction of data: sources observe (a log, this machine, a GGUF, a live engine, a server's
metrics) and give **Facts**, each with its source (a log line, a probe, a trace step); derive adds the
facts computed from them; judge runs the YAML rule base (`rules/`) over the Facts and returns a
**Report**; views render it (text, JSON, Markdown, the Textual TUI). Core, derive and judge are pure: no
UI, no engine, no torch, no clock of their own. A fact that could not be read is *unknown* with the
reason, never a silent default; a rule whose facts are unknown reports `unknown`, not `ok`.

Extension points — each an obvious room (see docs/extending.md):

- **an engine** is a folder `doctor/sources/engines/<engine>/` (its row of the engine table, its start
  lines, its patterns and parser), found through the entry-point group `llm_doctor.engine`; what
  several engines share lives in `_ggml/` and `_torch/`;
- **a rule** is one YAML record in the family file of its id range (`rules/LD<n>-*.yaml`, families in
  `rules/families.yaml`) with its `fix:` (a settings change spelled per engine by the engine table),
  its `verify:` and its inline `tests:`;
- **a probe** is a module in `doctor/sources/probes/` registered in its `registry.py`, reading the
  machine through roots it is given, so recorded machines (`fixtures/machines/`) replay;
- **a vocabulary entry** is words in `doctor/sources/catalogue/vocabulary.yaml` (a relation, a resource, a
  role, a step, or a rule that turns a reading into an event), with the real line that tests it.

Reading a log, three layers name a failure, each only where the one before said nothing: the engine
parsers (each engine's own lines), the message catalogue (every engine's format strings as data,
`doctor/sources/catalogue/messages/`), and the meaning layer (the same failures in any program's words,
read by the vocabulary into the typed events the engine parsers make, so one rule base judges all three).
Where a failure falls in the run comes from one timeline (`doctor/sources/logs/timeline.py`): the engine
parsers mark the steps they read (weights placed, KV cache allocated, compute reserved, warm-up or graph
capture, serving, a request), and an out-of-memory event's phase is the step after the last one reached,
the line that placed it cited as evidence (`Event.placed_by`); a crash says what the run had done.

The rest of this page is generated from the tree (`python scripts/architecture.py`).
"""


def first_sentence(doc: str | None) -> str:
    if not doc:
        return ""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


def docstring(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


def floors() -> list[list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c for c in data["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    out = []
    for raw in layers:
        sep = "|" if "|" in raw else ":"
        out.append([part.strip() for part in raw.split(sep)])
    return out


def render() -> str:
    lines = [INTRO]
    for floor in floors():
        lines.append(f"\n## Floor: {' | '.join(floor)}\n")
        for member in floor:
            base = ROOT / "doctor" / member
            if base.with_suffix(".py").is_file():
                lines.append(f"- `doctor/{member}.py` — {first_sentence(docstring(base.with_suffix('.py')))}")
                continue
            lines.append(f"\n### `doctor/{member}/`\n")
            init = base / "__init__.py"
            if init.is_file() and docstring(init):
                lines.append(first_sentence(docstring(init)) + "\n")
            lines.append("| module | what it is |")
            lines.append("|---|---|")
            for path in sorted(base.rglob("*.py")):
                if "__pycache__" in path.parts:
                    continue
                rel = path.relative_to(ROOT)
                if path.name == "__init__.py":
                    if path.parent == base:
                        continue
                    rel = path.parent.relative_to(ROOT)
                    lines.append(f"| `{rel}/` | {first_sentence(docstring(path))} |")
                    continue
                lines.append(f"| `{rel}` | {first_sentence(docstring(path)).replace('|', '/')} |")
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/architecture.md is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = DOC.read_text(encoding="utf-8") if DOC.is_file() else ""
        if current != text:
            print("docs/architecture.md is stale: run python scripts/architecture.py", file=sys.stderr)
            return 1
        return 0
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
