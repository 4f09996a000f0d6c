"""An engine is a folder: what belongs to one engine stays in doctor/sources/engines/<engine>/.

- an engine's name (or alias) appears as a string literal only in its own folder and in the engine
  table's API (doctor/core/engines.py): the rest of the tool reads rows, never names;
- no Python file in doctor/ is over 600 lines;
- no regular expression of a log line is written in two places (ggml's OOM messages, PyTorch's OOM
  text: one home each, _ggml/ and _torch/);
- no rule id in the sources: a crash cause names a class or a key, never a rule.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from pathlib import Path

from doctor.core import engines

ROOT = Path(__file__).resolve().parents[2]
DOCTOR = ROOT / "doctor"
FOLDERS = ROOT / "doctor" / "sources" / "engines"
MAX_LINES = 600
# split by the branches that own them (derive: the estimator; rules: the rule base); drop each entry as
# its split is merged
SPLIT_ELSEWHERE = {"doctor/derive/estimate.py", "doctor/judge/rulebase.py"}


def _folders() -> dict[str, Path]:
    """Engine name or alias -> the folder whose engine.py holds its row."""
    owner: dict[str, Path] = {}
    for engine_py in sorted(FOLDERS.glob("*/engine.py")):
        row = importlib.import_module(f"doctor.sources.engines.{engine_py.parent.name}.engine").ENGINE
        for name in (row.name, *row.aliases):
            owner[name] = engine_py.parent
    return owner


def _string_literals(path: Path) -> list[tuple[int, str]]:
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):  # an f-string part
                continue
            if isinstance(value, str):
                found.append((tok.start[0], value))
    return found


def test_every_table_engine_is_a_folder() -> None:
    owner = _folders()
    assert set(engines.names()) <= set(owner), set(engines.names()) - set(owner)


def test_engine_names_appear_only_in_their_own_folder_and_the_table_api() -> None:
    owner = _folders()
    table_api = DOCTOR / "core" / "engines.py"
    stray = []
    for path in sorted(DOCTOR.rglob("*.py")):
        for line, value in _string_literals(path):
            home = owner.get(value)
            if home is not None and path != table_api and home not in path.parents:
                stray.append(f"{path.relative_to(ROOT)}:{line}: {value!r}")
    assert not stray, "engine names outside their folder:\n" + "\n".join(stray)


def test_the_name_check_sees_a_stray_name(tmp_path: Path) -> None:
    module = tmp_path / "stray.py"
    module.write_text('ENGINE = "ollama"\nTEXT = "Ollama\'s runner"  # prose is not a name\n')
    assert [v for _, v in _string_literals(module) if v in _folders()] == ["ollama"]


def test_no_python_file_in_doctor_is_over_600_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in sorted(DOCTOR.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
            and str(p.relative_to(ROOT)) not in SPLIT_ELSEWHERE}
    assert not long, long


def test_no_line_pattern_is_written_twice_across_the_engines() -> None:
    from doctor.sources.logs.matcher import GatedPattern

    modules = [f"doctor.sources.engines.{p.parent.name}.{p.stem}" if p.parent != FOLDERS
               else f"doctor.sources.engines.{p.stem}" for p in sorted(FOLDERS.rglob("*.py")) if p.stem != "__init__"]
    modules += ["doctor.sources.logs.pasted"]
    seen: dict[str, tuple[str, int]] = {}
    twice = []
    for name in modules:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if isinstance(value, GatedPattern | re.Pattern):
                key = value.pattern if isinstance(value.pattern, str) else value.pattern.decode()
                where = seen.setdefault(key, (f"{name}.{attr}", id(value)))
                if where[1] != id(value):  # the same text compiled again elsewhere, not imported
                    twice.append(f"{name}.{attr} repeats {where[0]}")
    assert seen, "no pattern found: this test reads the modules wrongly"
    assert not twice, twice


def test_no_rule_id_in_the_sources() -> None:
    rule_id = re.compile(r"\bLD\d{3}\b")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((DOCTOR / "sources").rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if rule_id.search(line)]
    assert not found, found
