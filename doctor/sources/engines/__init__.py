"""The engines llm-doctor reads, one folder each. An engine's folder holds:

- `engine.py`: its row of the engine table (doctor/core/engines.py): name, label, aliases, what it
  wraps, defaults, how it spells a settings change, the lines that show it starting, and what it
  publishes to Prometheus (`metrics.py`) and says for known crashes (`crash_fixes.py`), where it has
  them;
- `patterns.py`: the regular expressions of its log lines and its line kinds (`LineKind`s), in the
  order its parser tries them;
- `parser.py`: the handlers, each marked `@reads(KIND)` (llama.cpp's parser is one class in several
  parts: state, context, memory, hardware, summary).

What several engines share has one home: `_ggml/` (ggml's GPU out-of-memory messages, GPU backends
that fail to start, the crash causes of the engines that run ggml, with their parser) and `_torch/`
(PyTorch's out-of-memory text and traceback frames, shared by the PyTorch servers).

Each row is found through the entry-point group `llm_doctor.engine` (pyproject.toml): a third-party
engine is a folder like these in its own distribution plus one entry point naming its row
(tests/logs/toy_engine/ and tests/logs/test_engine_table.py show one).
"""
