"""The toy engine's row of the engine table: a made-up server "toyd" (not a real engine), with its
parser, its start line and its rules folder."""

from __future__ import annotations

from pathlib import Path

from doctor.core.engines import Engine, Starts

ENGINE = Engine("toy", "Toy", "tests.logs.toy_engine.parser:ToyParser", rules=Path(__file__).parent / "rules",
                starts=Starts((r"\btoyd \d+\.\d+\.\d+ listening on ",)))
