"""What the ggml engines (llama.cpp, and every engine that runs it) print alike: out-of-memory
messages (`oom`), GPU backends that did not start (`gpu_failures`) and the crash causes with their
fixes (`crashes`, read by `crash_parser`)."""
