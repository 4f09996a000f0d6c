"""llm-doctor: diagnoses LLM inference runs from logs, traces and machine probes.

One package in floors (docs/architecture.md): core (facts, catalogue, report model), derive (facts
computed from facts), sources | judge | views (observe; run the rules; render), and the commands on
top. The floors are a contract in pyproject.toml, checked by import-linter.
"""

__version__ = "0.1.0"
