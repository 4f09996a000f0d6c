#!/usr/bin/env bash
# Build llama-bench from the llama.cpp source vendored in the pinned llama-cpp-python sdist, into
# ~/.cache/llm-doctor/llama-bench-<version>/bin/llama-bench: the reference bench/speed_table.py runs
# side by side with the embedded engine on the same GGUFs. The steps and the environment variables
# are scripts/build_llama_tools.sh's; prints llama-bench's path on its last line.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/build_llama_tools.sh" llama-bench llama-bench
