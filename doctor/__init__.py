"""llm-doctor: diagnoses LLM inference runs from logs, traces and machine probes.

The core (facts, estimate, rule engine, report model, log parsers) lives in this package and is
pure: no machine access, no clock, no Textual. Probes and the engine adapter live beside it.
"""

__version__ = "0.1.0"
