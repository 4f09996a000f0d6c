"""The import contract (issue 14): "sources only observe; rules only read facts; views only render a report".

Every module of doctor/, engine_adapter/ and probes/ belongs to one layer, by its path:

  core     doctor/*.py and doctor/catalog/: facts, the estimate, rules, evaluation, the report model
  sources  probes/, engine_adapter/, doctor/logs/: observe (the machine, an engine, a log) and give facts
  views    doctor/render/, doctor/tui/: render a report or a live run
  edge     doctor/commands/, doctor/cli.py, doctor/__main__.py: wire the others, decide exit codes (free)

Every import is read from the source with `ast` (module level, inside functions and under
TYPE_CHECKING alike; relative imports resolved) and checked against FORBIDDEN, and the graph of
imports between project modules must have no cycle. A failure names the import and its file:line.
The checker itself is tested on a small made-up tree, so a contract that checks nothing would fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("doctor", "engine_adapter", "probes")
RULE_ENGINE = ("doctor.evaluate", "doctor.rulebase", "doctor.ruletest", "doctor.live_judge")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # the core reads facts and builds reports: no UI, no engine, no machine, no view, no command
    "core": ("textual", "rich", "llama_cpp", "torch", "probes", "engine_adapter",
             "doctor.render", "doctor.tui", "doctor.commands"),
    # sources observe: they never run the rules (a judge is handed in) nor render nor decide exit codes
    "sources": (*RULE_ENGINE, "doctor.render", "doctor.tui", "doctor.commands"),
    # views render what they are given: no command, no source of their own, no rule run
    "views": ("doctor.commands", "engine_adapter", "probes", *RULE_ENGINE),
}


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module
    path: str  # its file, relative to the root
    line: int
    targets: tuple[str, ...]  # `import a.b` -> a.b; `from a import b, c` -> a, a.b, a.c


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] in ("probes", "engine_adapter") or parts[:2] == ["doctor", "logs"]:
        return "sources"
    if parts[:2] in (["doctor", "render"], ["doctor", "tui"]):
        return "views"
    if parts[:2] == ["doctor", "commands"] or module in ("doctor.cli", "doctor.__main__"):
        return "edge"
    return "core"


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


def violations(root: Path) -> list[str]:
    out: list[str] = []
    for module, path in project_modules(root).items():
        layer = layer_of(module)
        for imp in imports_of(module, path, root):
            for banned in FORBIDDEN.get(layer, ()):
                hit = next((t for t in imp.targets if _under(t, banned)), None)
                if hit is not None:
                    out.append(f"{imp.path}:{imp.line}: {module} ({layer}) imports {hit}: "
                               f"{layer} must not import {banned}")
    return out


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


def test_the_project_keeps_its_layers() -> None:
    found = violations(ROOT)
    assert not found, "layer contract broken:\n" + "\n".join(found)


def test_no_two_modules_import_each_other() -> None:
    found = cycles(ROOT)
    assert not found, "\n".join(found)


def test_every_layer_is_populated() -> None:
    """A misspelt path in layer_of would put everything in the core and check nothing of the rest."""
    layers = {layer_of(m) for m in project_modules(ROOT)}
    assert layers == {"core", "sources", "views", "edge"}
    assert layer_of("doctor.logs.vllm") == "sources" and layer_of("doctor.tui.app") == "views"
    assert layer_of("doctor.catalog.arch") == "core" and layer_of("doctor.cli") == "edge"


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_catches_each_kind_of_break(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "doctor/__init__.py": "",
        "doctor/facts.py": "import json\n",
        "doctor/report.py": "from doctor.facts import Facts\n\n\ndef f():\n    import textual.app\n",
        "doctor/estimate.py": "from doctor import render\n",
        "doctor/evaluate.py": "from . import facts\n",
        "doctor/render/__init__.py": "",
        "doctor/render/text.py": "from doctor.report import Report\n",
        "doctor/logs/__init__.py": "",
        "doctor/logs/vllm.py": "from ..evaluate import diagnose\n",
        "doctor/tui/__init__.py": "",
        "doctor/tui/app.py": "from doctor.render import text\nif True:\n    from ..commands.output import exit_code\n",
        "doctor/tui/a.py": "from doctor.tui import b\n",
        "doctor/tui/b.py": "def g():\n    from . import a\n",
        "doctor/commands/__init__.py": "",
        "doctor/commands/output.py": "import doctor.tui.app\nimport engine_adapter.runner\nimport doctor.evaluate\n",
        "engine_adapter/__init__.py": "",
        "engine_adapter/runner.py": "import doctor.facts\nfrom doctor.live_judge import LiveJudge\n",
        "probes/__init__.py": "from doctor.facts import Facts\n",
    })
    assert sorted(violations(tmp_path)) == sorted([
        "doctor/report.py:5: doctor.report (core) imports textual.app: core must not import textual",
        "doctor/estimate.py:1: doctor.estimate (core) imports doctor.render: core must not import doctor.render",
        "doctor/logs/vllm.py:1: doctor.logs.vllm (sources) imports doctor.evaluate: "
        "sources must not import doctor.evaluate",
        "doctor/tui/app.py:3: doctor.tui.app (views) imports doctor.commands.output: "
        "views must not import doctor.commands",
        "engine_adapter/runner.py:2: engine_adapter.runner (sources) imports doctor.live_judge: "
        "sources must not import doctor.live_judge",
    ])
    assert cycles(tmp_path) == [
        "import cycle doctor.commands.output <-> doctor.tui.app: "
        "doctor/commands/output.py:1: doctor.commands.output imports doctor.tui.app; "
        "doctor/tui/app.py:3: doctor.tui.app imports doctor.commands.output",
        "import cycle doctor.tui.a <-> doctor.tui.b: "
        "doctor/tui/a.py:1: doctor.tui.a imports doctor.tui.b; "
        "doctor/tui/b.py:2: doctor.tui.b imports doctor.tui.a",
    ]
    # the edge may import anything: with the view's import gone, only the other cycle is left
    (tmp_path / "doctor/tui/app.py").write_text("from doctor.render import text\n", encoding="utf-8")
    assert [c.split(":")[0] for c in cycles(tmp_path)] == ["import cycle doctor.tui.a <-> doctor.tui.b"]
    assert not any("doctor/commands/" in v for v in violations(tmp_path))
