"""The embedded engine: llama-cpp-python run in a child process on a real GGUF, traced step by step.

runner.py starts and reads the child (child.py), messages.py is the wire format between them,
sampler.py samples the child's CPU and memory, hostinfo.py the machine facts a watch needs, triage.py
re-runs a crashed engine to find the setting that crashes it. kernels.py times the engine's own kernels
on small real-shape GGUFs (kernel_gguf.py writes them, kernel_child.py runs them, kernel_times.py
turns the times into rates), kept per machine for the speed verdict.
"""

TRIAGE_BUDGET_S = 120.0  # all of triage's short re-runs together (here: the commands' help needs it, not triage.py)
