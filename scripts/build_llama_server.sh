#!/usr/bin/env bash
# Build llama-server, and llama-fit-params (llama.cpp's own pre-load memory projection, which
# bench/fit_vs_llamacpp.py sets beside llm-doctor's estimate), from the llama.cpp source vendored in
# the pinned llama-cpp-python sdist (the same version as the embedded engine), CPU only, Release,
# cached outside the clone:
#   ~/.cache/llm-doctor/llama-server-<version>/bin/llama-server
#   ~/.cache/llm-doctor/llama-server-<version>/bin/llama-fit-params
# Usage: scripts/build_llama_server.sh [--print-path]
#   LLAMA_CPP_PYTHON_VERSION, LLM_DOCTOR_CACHE, JOBS, PYTHON: see scripts/build_llama_tools.sh (the steps)
# Prints llama-server's path on its last line. A second run with both binaries present does nothing;
# a cache from before llama-fit-params was built gets it added.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/build_llama_tools.sh" llama-server llama-server llama-fit-params
