"""The type checker over the package (doctor, probes, engine_adapter; not the Textual views in doctor/tui):
mypy with the config in pyproject.toml ([tool.mypy]), run as part of the suite so a type error, or a
`type: ignore` that no longer ignores anything, fails like any other test. Offline; mypy comes with the
`test` extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_type_checks_clean() -> None:
    try:
        import mypy  # noqa: F401
    except ImportError:  # pragma: no cover - an install without the test extra
        raise AssertionError("mypy is not installed: pip install -e '.[test]'") from None
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
