"""The embedded engine: llama-cpp-python run in a child process on a real GGUF, traced step by step.

runner.py starts and reads the child (child.py), messages.py is the wire format between them,
sampler.py samples the child's CPU and memory, hostinfo.py the machine facts a watch needs, triage.py
re-runs a crashed engine to find the setting that crashes it.
"""

TRIAGE_BUDGET_S = 120.0  # all of triage's short re-runs together (here: the commands' help needs it, not triage.py)
