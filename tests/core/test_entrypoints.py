"""The entry-point reader (doctor/core/entrypoints.py) lists what importlib.metadata lists: same
entry points, same order, same distribution names, on this environment and on made-up site folders."""

from __future__ import annotations

import importlib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from doctor.core import entrypoints
from doctor.core.entrypoints import group_entry_points

GROUP = "llm_doctor.test_group"


def _dist(site: Path, folder: str, name: str, text: str, metadata: str = "METADATA") -> None:
    info = site / folder
    info.mkdir(parents=True)
    (info / metadata).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n\nA description: here\n")
    (info / "entry_points.txt").write_text(text)


@pytest.fixture
def sites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    first, second = tmp_path / "one", tmp_path / "two"
    _dist(first, "alpha_pkg-1.0.dist-info", "alpha-pkg",
          f"# a comment\n[console_scripts]\nalpha = alpha:main\n\n[{GROUP}]\n  a1 = alpha.one:ROW  \n"
          f"a2=alpha.two:ROW\n; not a comment for importlib = kept\n")
    _dist(first, "Beta.Pkg-2.0.dist-info", "Beta.Pkg", f"[{GROUP}]\nb = beta:ROW\n")
    _dist(first, "gamma-0.1.egg-info", "gamma", f"[{GROUP}]\ng = gamma:ROW\n", metadata="PKG-INFO")
    _dist(second, "alpha_pkg-0.9.dist-info", "alpha-pkg", f"[{GROUP}]\nold = alpha.old:ROW\n")  # shadowed
    _dist(second, "delta-3.dist-info", "delta", f"[other]\nx = y\n[{GROUP}]\nd = delta:ROW\n")
    (second / "not-a-dist.txt").write_text("x")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    importlib.invalidate_caches()
    yield first, second
    importlib.invalidate_caches()


def test_the_reader_lists_what_importlib_metadata_lists(sites: tuple[Path, Path]) -> None:
    found = entrypoints._read(GROUP)
    assert found == entrypoints._from_importlib(GROUP)
    assert ("old", "alpha.old:ROW", "alpha-pkg") not in found  # the first distribution of a name wins
    assert ("a1", "alpha.one:ROW", "alpha-pkg") in found and ("g", "gamma:ROW", "gamma") in found
    assert ("; not a comment for importlib", "kept", "alpha-pkg") in found


@pytest.mark.parametrize("group", ["console_scripts", "pytest11", "llm_doctor.engine"])
def test_the_reader_agrees_with_importlib_metadata_on_this_environment(group: str) -> None:
    assert entrypoints._read(group) == entrypoints._from_importlib(group)


def test_a_zip_on_the_path_is_left_to_importlib_metadata(sites: tuple[Path, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zeta-1.dist-info/METADATA", "Metadata-Version: 2.1\nName: zeta\n")
        zf.writestr("zeta-1.dist-info/entry_points.txt", f"[{GROUP}]\nz = zeta:ROW\n")
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    with pytest.raises(entrypoints._Unusual):
        entrypoints._read(GROUP)
    found = group_entry_points(GROUP)
    assert found == entrypoints._from_importlib(GROUP)
    assert found[0] == ("z", "zeta:ROW", "zeta")


def test_a_folded_name_header_is_left_to_importlib_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "site" / "eta-1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: eta\n  -folded\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\ne = eta:ROW\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    with pytest.raises(entrypoints._Unusual):
        entrypoints._read(GROUP)
    assert group_entry_points(GROUP) == entrypoints._from_importlib(GROUP)
