"""docs/architecture.md is generated from the tree (scripts/architecture.py): the floors of the import
contract and each module's docstring. A module added, moved or re-described without regenerating it
fails here, so the picture a newcomer reads is the code's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_architecture_doc_is_current() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "architecture.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_every_module_says_what_it_is() -> None:
    """Each module opens with a docstring (its room and where its strings come from): the doc is built from them."""
    missing = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "doctor").rglob("*.py"))
               if "__pycache__" not in p.parts and p.stat().st_size > 0
               and not p.read_text(encoding="utf-8").lstrip().startswith(('"""', "'''", 'r"""'))]
    assert not missing, f"modules without a docstring: {missing}"
