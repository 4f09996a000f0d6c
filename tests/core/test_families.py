"""The rule families (rules/families.yaml): every built-in rule file holds one family's ids and is
named after it, the README's id <-> file table says the same, every class a rule names is a
family's, and a broken families.yaml is one error naming file, line and field."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from doctor.core.errors import RuleError
from doctor.judge import families
from doctor.judge.rulebase import RuleBase, builtin_rules_dir, load_rulebase, rule_files

GOOD = """
- ids: LD2xx
  title: context
  classes:
    context.overflow:
      area: Context
      verify: {not_tried: "a server setting"}
- ids: LD5xx
  title: offload
  classes:
    offload.partial:
      area: GPU offload
      verify:
        try:
          - {n_gpu_layers: -1}
        needs_gpu: true
"""


def _families(tmp_path: Path, text: str) -> families.Families:
    path = tmp_path / "families.yaml"
    path.write_text(text, encoding="utf-8")
    return families.load_families(path)


def _broken(tmp_path: Path, text: str) -> RuleError:
    with pytest.raises(RuleError) as info:
        _families(tmp_path, text)
    return info.value


def test_every_rule_file_holds_one_family_and_is_named_after_it(rulebase: RuleBase) -> None:
    ids_by_file: dict[str, list[str]] = defaultdict(list)
    for rule in rulebase.rules:
        if rule.builtin:
            ids_by_file[Path(rule.path).name].append(rule.id)
    keys = {f.key: f for f in rulebase.families.families}
    for path in rule_files(builtin_rules_dir()):
        family = keys.get(path.name.split("-")[0])
        assert family is not None, f"{path.name} is not named after a family (LD2-context.yaml)"
        ids = ids_by_file[path.name]
        assert ids, f"{path.name} holds no rules"
        outside = [i for i in ids if not family.holds(i)]
        assert not outside, f"{path.name} holds ids outside {family.ids}: {outside}"
    assert {p.name.split("-")[0] for p in rule_files(builtin_rules_dir())} == set(keys), "a family without a file"


def test_the_readme_table_is_the_families_and_their_files(rulebase: RuleBase) -> None:
    text = (builtin_rules_dir() / "README.md").read_text(encoding="utf-8")
    rows = {m[1]: set(re.findall(r"LD\d-[a-z-]+\.yaml", m[2]))
            for m in re.finditer(r"^\| (LD\dxx) \|(.*)$", text, flags=re.MULTILINE)}
    files: dict[str, set[str]] = defaultdict(set)
    for path in rule_files(builtin_rules_dir()):
        files[path.name.split("-")[0] + "xx"].add(path.name)
    assert rows == dict(files)
    assert set(rows) == {f.ids for f in rulebase.families.families}


def test_every_class_is_listed_once_with_its_area(rulebase: RuleBase) -> None:
    classes = rulebase.families.classes
    assert {r.cls for r in rulebase.rules} <= set(classes)
    assert all(rule.area == classes[rule.cls].area for rule in rulebase.rules)
    assert classes["context.overflow"].area == "Context" and classes["engine.crash"].area == "Engine process"
    # the speed branch's classes are the decode family's, under "Speed"
    assert {c: classes[c].area for c in ("speed.prefill", "speed.decode", "speed.contention")} == \
        dict.fromkeys(("speed.prefill", "speed.decode", "speed.contention"), "Speed")
    assert all(classes[c].family == "LD8" for c in ("decode.jitter", "speed.prefill"))


def test_ranges_and_lookups(tmp_path: Path) -> None:
    fams = _families(tmp_path, GOOD)
    first, second = fams.families
    assert (first.key, first.low, first.high, first.ids) == ("LD2", 200, 299, "LD2xx")
    assert first.holds("LD250") and not first.holds("LD350") and not first.holds("XX250")
    assert fams.family_of("LD507") is second and fams.family_of("LD999") is None
    assert fams.class_for("context-overflow") == "context.overflow" and fams.class_for("nope") is None
    assert fams.area("offload.partial") == "GPU offload" and fams.area("unknown.class") == "unknown.class"
    verify = fams.classes["offload.partial"].verify
    assert verify is not None and verify.needs_gpu and verify.candidates == ((("n_gpu_layers", -1),),)


@pytest.mark.parametrize(("change", "field", "words"), [
    (("ids: LD5xx", "ids: LD5"), "ids", "written like LD2xx"),
    (("ids: LD5xx", "ids: LD2xx"), "ids", "listed twice"),
    (("ids: LD5xx", "ids: LD25x"), "ids", "overlaps LD2xx"),
    (("title: offload", "titel: offload"), "titel", "unknown field 'titel'"),
    (("offload.partial:", "Offload:"), "classes", "must look like area.kind"),
    (("offload.partial:", "context.overflow:"), "classes", "listed twice"),
    (("area: GPU offload", "area: ''"), "classes.offload.partial.area", "needs an 'area'"),
    (("needs_gpu: true", "needs_gpu: maybe"), "classes.offload.partial.verify.needs_gpu", "true or false"),
    (("{n_gpu_layers: -1}", "{n_gpu_layer: -1}"), "classes.offload.partial.verify.try[0]", "unknown setting"),
])
def test_a_broken_families_file_is_one_line(tmp_path: Path, change: tuple[str, str], field: str, words: str) -> None:
    err = _broken(tmp_path, GOOD.replace(*change))
    assert err.field == field and words in err.message, str(err)
    assert err.path.endswith("families.yaml") and err.line is not None


def test_a_rule_folder_may_add_a_class_but_not_move_one(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "families.yaml").write_text("""
- ids: XY1xx
  title: my checks
  classes:
    my.check: {area: Mine}
""", encoding="utf-8")
    (folder / "XY1-mine.yaml").write_text("""
- id: XY101
  slug: my-check
  class: my.check
  severity: info
  title: Mine
  when: {fact: config.n_ctx, lt: 1024}
  fix: raise it
""", encoding="utf-8")
    rule = load_rulebase([str(folder)], env={}).by_id("XY101")
    assert rule is not None and rule.area == "Mine" and rule.verify is None
    (folder / "families.yaml").write_text("""
- ids: XY1xx
  title: my checks
  classes:
    context.overflow: {area: Elsewhere}
""", encoding="utf-8")
    with pytest.raises(RuleError, match="shows under 'Context' already"):
        load_rulebase([str(folder)], env={})
