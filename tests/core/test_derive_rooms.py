"""doctor/derive as a package of rooms: each derived.* fact has one module that sets it, and no room
grows past 500 lines.

Read from the source (ast), not from a run: a fact set in two modules would be found even where no
fixture reaches both. A call counts when it writes a fact - `facts.set`, `facts.set_default` or
`facts.unknown` - with the name as a string literal, or as the variable of a `for` loop over a
literal tuple of names (`for name in ("derived.fits_vram", ...): facts.unknown(name, ...)`).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from doctor.core.catalog import CATALOG

ROOT = Path(__file__).resolve().parents[2]
DERIVE = ROOT / "doctor" / "derive"
WRITES = ("set", "set_default", "unknown")

# First arguments built at run time, by (module, expression): none of them is a derived.* fact.
DYNAMIC = {
    ("run.py", "out"): "host.gpu[i] bandwidth and PCIe ratios (measured / spec), indexed per GPU",
    ("change.py", "name"): "a fix's settings applied to the run's plan: config.*, sampling.* and an engine's own "
                           "setting facts (doctor/core/engines.py Semantics), never derived.*",
    ("whatif.py", "f'host.gpu[{i}].name'"): "a stated GPU budget, per GPU",
    ("whatif.py", "f'host.gpu[{i}].vram_total'"): "a stated GPU budget, per GPU",
    ("whatif.py", "f'host.gpu[{i}].vram_free'"): "a stated GPU budget, per GPU",
    **{("speed.py", f"f'{{p}}.{key}'"): "speed.<phase>.*: the verdict of each phase (prefill, decode)"
       for key in ("tok_s", "ceiling_source", "ceiling_tok_s", "fraction", "bound", "settle", "expected_tok_s",
                   "misfit_term", "threads_gain")},
    **{("speed_range.py", f"f'{{p}}.{key}'"): "speed.<phase>.*: where the phase falls in its device class's range"
       for key in ("efficiency", "usual_class", "usual_low", "usual_high", "usual_tok_s", "placement")},
    ("speed_causes.py", "f'speed.cause.{name}'"): "speed.cause.<cause>: one fact per slow cause a paste shows",
    ("spec_memory.py", "fact"): "the spec device's memory bandwidth as stated by the user: spec.mem_bw_gbs (CPU) "
                                "or the GPU's, whichever kind the device is",
}


def _loop_names(tree: ast.AST) -> dict[int, tuple[str, list[str]]]:
    """Calls inside `for NAME in ("a", "b"):` -> (NAME, the literal names), by node id."""
    inside: dict[int, tuple[str, list[str]]] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.For) and isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.Tuple | ast.List)
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.iter.elts)):
            names = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)]
            for sub in ast.walk(node):
                inside[id(sub)] = (node.target.id, names)
    return inside


def fact_writes(folder: Path) -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """(fact name -> modules that write it, [(module, expression)] of names built at run time)."""
    where: dict[str, set[str]] = defaultdict(set)
    dynamic: list[tuple[str, str]] = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        loops = _loop_names(tree)
        module = str(path.relative_to(folder))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in WRITES and node.args):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                where[first.value].add(module)
            elif isinstance(first, ast.Name) and id(node) in loops and loops[id(node)][0] == first.id:
                for name in loops[id(node)][1]:
                    where[name].add(module)
            else:
                dynamic.append((module, ast.unparse(first)))
    return where, dynamic


def test_each_derived_fact_is_set_in_exactly_one_derive_module() -> None:
    where, dynamic = fact_writes(DERIVE)
    catalogued = sorted(name for name in CATALOG if name.startswith("derived."))
    assert len(catalogued) > 80, "the catalogue's derived.* facts were not found"
    nowhere = [name for name in catalogued if name not in where]
    several = {name: sorted(where[name]) for name in catalogued if len(where.get(name, ())) > 1}
    assert not nowhere, f"catalogued but set by no module of doctor/derive: {nowhere}"
    assert not several, f"set in more than one module of doctor/derive: {several}"
    unlisted = [d for d in dynamic if d not in DYNAMIC]
    assert not unlisted, f"fact names built at run time: list them in DYNAMIC with the reason: {unlisted}"
    stale = [d for d in DYNAMIC if d not in dynamic]
    assert not stale, f"DYNAMIC lists calls that are gone: {stale}"
    uncatalogued = sorted(n for n in where if n.startswith("derived.") and n not in CATALOG)
    assert not uncatalogued, f"derived facts set but not in the catalogue: {uncatalogued}"


def test_no_derived_fact_is_set_outside_derive() -> None:
    for folder in sorted(p for p in (ROOT / "doctor").iterdir() if p.is_dir() and p.name != "derive"):
        where, _ = fact_writes(folder)
        outside = {name: sorted(mods) for name, mods in where.items() if name.startswith("derived.")}
        assert not outside, f"doctor/{folder.name} sets derived facts: {outside}"


def test_the_reader_sees_literal_and_looped_names(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('def f(facts):\n    facts.set("derived.x", 1, None)\n'
                                   '    for name in ("derived.y", "derived.z"):\n'
                                   '        facts.unknown(name, "", None)\n'
                                   '    facts.set(f"derived.{1}", 1, None)\n')
    (tmp_path / "b.py").write_text('def g(facts):\n    facts.set_default("derived.x", 2, None)\n')
    where, dynamic = fact_writes(tmp_path)
    assert where == {"derived.x": {"a.py", "b.py"}, "derived.y": {"a.py"}, "derived.z": {"a.py"}}
    assert dynamic == [("a.py", "f'derived.{1}'")]


def test_no_derive_module_over_500_lines() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in DERIVE.glob("*.py")}
    assert {"memory.py", "plan.py", "context.py", "run.py"} <= set(sizes)
    assert not (DERIVE / "estimate.py").exists()
    assert max(sizes.values()) <= 500, sizes
