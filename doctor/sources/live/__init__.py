"""The embedded engine and external engines: runs llama-cpp-python with per-step tracing in a child
process, follows a growing log, wraps an engine command. Machine access lives here, not in doctor/."""
