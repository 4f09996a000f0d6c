"""The engines llm-doctor reads, one folder each: `<engine>/engine.py` (its row of the engine table,
doctor/core/engines.py: defaults, settings spelling, aliases, what it wraps, the lines that show it
starting), `patterns.py` (the regular expressions of its log lines and the table of line kinds)
and `parser.py` (the handlers that turn those lines into facts and events).

What several engines share has one home: `_ggml/` (ggml's out-of-memory messages, GPU backends that
fail to start, the crash causes of the ggml engines) and `_torch/` (PyTorch's out-of-memory text
and traceback frames, shared by the PyTorch servers). Each folder's row is found through the
entry-point group `llm_doctor.engine` (pyproject.toml), as a third-party engine's is.
"""
