"""Write doctor/derive/specs/hardware.json from hardware.yaml beside it (the YAML is the one people
edit; the JSON is what the tool reads: json parses it in a millisecond, PyYAML needs 100 ms to import
and 80 ms to parse). tests/speed/test_spec_table.py fails when the two differ.

    python scripts/specs_json.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

SPECS = Path(__file__).resolve().parent.parent / "doctor" / "derive" / "specs"


def as_json(data: object) -> str:
    note = "generated from hardware.yaml by scripts/specs_json.py: edit the YAML and run the script"
    return json.dumps({"_generated": note, **data} if isinstance(data, dict) else data, indent=1,
                      ensure_ascii=False) + "\n"


def main() -> int:
    data = yaml.safe_load((SPECS / "hardware.yaml").read_text(encoding="utf-8"))
    (SPECS / "hardware.json").write_text(as_json(data), encoding="utf-8")
    print(f"wrote {SPECS / 'hardware.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
