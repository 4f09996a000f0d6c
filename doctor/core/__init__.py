"""The core floor: what every other floor shares and nothing below it reads.

Facts (typed, dotted names with units and sources) and their catalogue, the closed vocabularies, the
one exception family, the engine type and table, the report model, sanitising and redaction, the
line policy every reader of log bytes follows, live-run events, and the small helpers (JSON cache,
path storage, repetition). Pure: no machine access, no clock, no UI, no engine. Imports nothing of
doctor.derive, doctor.sources, doctor.judge, doctor.views or doctor.commands (pyproject.toml's
import-linter contract).
"""
