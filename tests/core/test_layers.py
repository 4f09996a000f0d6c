"""The floors (issue 25): the contract is configuration, this suite is its proof.

`pyproject.toml`'s `[tool.importlinter]` says which floor may import which: commands over views | judge |
sources (siblings that never import each other), over derive, over core; core, derive and judge import no
UI, engine or torch; views nothing of derive. `lint-imports` checks it on the real tree. This file
proves it twice: its own reader of imports (`ast`: module level, inside functions and under
TYPE_CHECKING alike; relative imports resolved) applies the same contract, read from the same table,
and both it and `lint-imports` are shown a made-up tree with every kind of break, so a contract that
checks nothing would fail here. The graph of imports between modules must also have no cycle.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("doctor",)


def contracts(root: Path = ROOT) -> list[dict[str, object]]:
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return list(data["tool"]["importlinter"]["contracts"])


def floors(root: Path = ROOT) -> list[tuple[list[str], bool]]:
    """The layers contract as [(modules on the floor, independent siblings?)], top floor first."""
    layers = next(c for c in contracts(root) if c["type"] == "layers")
    out: list[tuple[list[str], bool]] = []
    for raw in layers["layers"]:  # type: ignore[attr-defined]
        sep = "|" if "|" in raw else ":"
        out.append(([f"doctor.{part.strip()}" for part in raw.split(sep)], sep == "|"))
    return out


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module
    path: str  # its file, relative to the root
    line: int
    targets: tuple[str, ...]  # `import a.b` -> a.b; `from a import b, c` -> a, a.b, a.c


def project_modules(root: Path) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imports_of(module: str, path: Path, root: Path) -> Iterator[Import]:
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    rel = str(path.relative_to(root))
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, rel, node.lineno, (alias.name,))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            yield Import(module, rel, node.lineno, (source, *(f"{source}.{a.name}" for a in node.names)))


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def floor_of(module: str, table: list[tuple[list[str], bool]]) -> tuple[int, str] | None:
    """(floor index, the sibling it belongs to), None for the package root."""
    for index, (members, _) in enumerate(table):
        for member in members:
            if _under(module, member):
                return index, member
    return None


def violations(root: Path) -> list[str]:
    table = floors(root)
    forbidden = [(list(c["source_modules"]), list(c["forbidden_modules"]))  # type: ignore[call-overload]
                 for c in contracts(root) if c["type"] == "forbidden"]
    out: list[str] = []
    for module, path in project_modules(root).items():
        here = floor_of(module, table)
        for imp in imports_of(module, path, root):
            for target in imp.targets:
                there = floor_of(target, table) if _under(target, "doctor") else None
                if here is not None and there is not None and there[1] != here[1]:
                    if there[0] < here[0]:
                        out.append(f"{imp.path}:{imp.line}: {module} imports {target}: {there[1]} is a floor above")
                        break
                    if there[0] == here[0] and table[here[0]][1]:
                        out.append(f"{imp.path}:{imp.line}: {module} imports {target}: "
                                   f"{here[1]} and {there[1]} are independent siblings")
                        break
            for sources, banned in forbidden:
                if not any(_under(module, s) for s in sources):
                    continue
                hit = next(((t, b) for t in imp.targets for b in banned if _under(t, b)), None)
                if hit is not None:
                    out.append(f"{imp.path}:{imp.line}: {module} imports {hit[0]}: forbidden ({hit[1]})")
    return sorted(set(out))


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported name lives in (the longest module prefix), if any."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def cycles(root: Path) -> list[str]:
    """Strongly connected components of more than one module, each with the imports that close it."""
    modules = project_modules(root)
    edges: dict[str, dict[str, str]] = {m: {} for m in modules}  # module -> {imported module: file:line}
    for module, path in modules.items():
        for imp in imports_of(module, path, root):
            for target in imp.targets:
                found = _resolve(target, modules)
                if found is not None and found != module:
                    edges[module].setdefault(found, f"{imp.path}:{imp.line}")
    # Tarjan's algorithm, iterative
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return ["import cycle " + " <-> ".join(c) + ": "
            + "; ".join(f"{edges[a][b]}: {a} imports {b}" for a in c for b in c if b in edges[a])
            for c in sorted(components)]


def test_lint_imports_keeps_the_contract() -> None:
    run = subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "0 broken" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]


def test_the_project_keeps_its_floors() -> None:
    found = violations(ROOT)
    assert not found, "floor contract broken:\n" + "\n".join(found)


def test_no_two_modules_import_each_other() -> None:
    found = cycles(ROOT)
    assert not found, "\n".join(found)


def test_every_module_is_on_a_floor() -> None:
    """A module outside every floor (a new top-level file, a misspelt floor) would be checked by nothing."""
    table = floors()
    assert [m for f, _ in table for m in f] == [
        "doctor.cli", "doctor.__main__", "doctor.commands", "doctor.views", "doctor.judge", "doctor.sources",
        "doctor.derive", "doctor.core"]
    loose = [m for m in project_modules(ROOT) if m != "doctor" and floor_of(m, table) is None]
    assert not loose, f"modules on no floor: {loose}"
    populated = {floor_of(m, table)[1] for m in project_modules(ROOT) if floor_of(m, table)}  # type: ignore[index]
    assert populated == {m for f, _ in table for m in f}


def test_the_wheel_ships_one_package() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["doctor"]
    assert sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()) == ["bench", "doctor", "tests"]


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


BROKEN_TREE = {
    "doctor/__init__.py": "",
    "doctor/cli.py": "",
    "doctor/__main__.py": "from doctor import cli\n",
    "doctor/core/__init__.py": "",
    "doctor/core/facts.py": "import json\n",
    "doctor/core/report.py": "from doctor.core.facts import Facts\n\n\ndef f():\n    import textual.app\n",
    "doctor/derive/__init__.py": "",
    "doctor/derive/estimate.py": "from doctor.views import render\n",
    "doctor/judge/__init__.py": "",
    "doctor/judge/evaluate.py": "from ..core import facts\n",
    "doctor/views/__init__.py": "",
    "doctor/views/render/__init__.py": "",
    "doctor/views/render/text.py": "from doctor.core.report import Report\nfrom doctor.derive import estimate\n",
    "doctor/sources/__init__.py": "",
    "doctor/sources/logs/__init__.py": "",
    "doctor/sources/logs/vllm.py": "from ...judge.evaluate import diagnose\n",
    "doctor/views/tui/__init__.py": "",
    "doctor/views/tui/app.py":
        "from doctor.views.render import text\nif True:\n    from ...commands.output import exit_code\n",
    "doctor/views/tui/a.py": "from doctor.views.tui import b\n",
    "doctor/views/tui/b.py": "def g():\n    from . import a\n",
    "doctor/commands/__init__.py": "",
    "doctor/commands/output.py":
        "import doctor.views.tui.app\nimport doctor.sources.live.runner\nimport doctor.judge.evaluate\n",
    "doctor/sources/live/__init__.py": "",
    "doctor/sources/live/runner.py": "import doctor.core.facts\nfrom doctor.judge.evaluate import diagnose\n",
}
BREAKS = [
    "doctor/core/report.py:5: doctor.core.report imports textual.app: forbidden (textual)",
    "doctor/derive/estimate.py:1: doctor.derive.estimate imports doctor.views: doctor.views is a floor above",
    "doctor/sources/live/runner.py:2: doctor.sources.live.runner imports doctor.judge.evaluate: "
    "doctor.sources and doctor.judge are independent siblings",
    "doctor/sources/logs/vllm.py:1: doctor.sources.logs.vllm imports doctor.judge.evaluate: "
    "doctor.sources and doctor.judge are independent siblings",
    "doctor/views/render/text.py:2: doctor.views.render.text imports doctor.derive: forbidden (doctor.derive)",
    "doctor/views/tui/app.py:3: doctor.views.tui.app imports doctor.commands.output: doctor.commands is a floor above",
]


def test_the_checker_catches_each_kind_of_break(tmp_path: Path) -> None:
    _tree(tmp_path, BROKEN_TREE)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert violations(tmp_path) == BREAKS
    assert cycles(tmp_path) == [
        "import cycle doctor.commands.output <-> doctor.views.tui.app: "
        "doctor/commands/output.py:1: doctor.commands.output imports doctor.views.tui.app; "
        "doctor/views/tui/app.py:3: doctor.views.tui.app imports doctor.commands.output",
        "import cycle doctor.views.tui.a <-> doctor.views.tui.b: "
        "doctor/views/tui/a.py:1: doctor.views.tui.a imports doctor.views.tui.b; "
        "doctor/views/tui/b.py:2: doctor.views.tui.b imports doctor.views.tui.a",
    ]
    # the top floor may import anything: with the view's import gone, only the other cycle is left
    (tmp_path / "doctor/views/tui/app.py").write_text("from doctor.views.render import text\n", encoding="utf-8")
    assert [c.split(":")[0] for c in cycles(tmp_path)] == ["import cycle doctor.views.tui.a <-> doctor.views.tui.b"]
    assert not any("doctor/commands/" in v for v in violations(tmp_path))


def test_lint_imports_catches_the_same_breaks(tmp_path: Path) -> None:
    """The configuration is live: lint-imports, given the project's contract, breaks all three on a bad tree."""
    _tree(tmp_path, BROKEN_TREE)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    run = subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout[-3000:]
    assert "0 kept, 3 broken" in run.stdout, run.stdout[-3000:]
    for needle in ("doctor.derive.estimate -> doctor.views.render (l.1)",
                   "doctor.sources.logs.vllm -> doctor.judge.evaluate (l.1)",
                   "doctor.sources.live.runner -> doctor.judge.evaluate (l.2)",
                   "doctor.views.tui.app -> doctor.commands.output (l.3)",
                   "doctor.core.report -> textual (l.5)",
                   "doctor.views.render.text -> doctor.derive.estimate (l.2)"):
        assert needle in run.stdout, (needle, run.stdout[-3000:])
