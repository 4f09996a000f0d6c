#!/usr/bin/env bash
# Build llama-bench from the llama.cpp source vendored in the pinned llama-cpp-python sdist (the same
# version as the embedded engine), CPU only, Release, native flags as the installed wheel was built,
# cached outside the clone - the reference bench/speed_table.py runs side by side with the embedded
# engine on the same GGUFs:
#   ~/.cache/llm-doctor/llama-bench-<version>/bin/llama-bench
# Usage: scripts/build_llama_bench.sh
#   LLAMA_CPP_PYTHON_VERSION  version to build (default: the installed llama_cpp's, else 0.3.36)
#   LLM_DOCTOR_CACHE          cache root (default ~/.cache/llm-doctor)
#   JOBS                      parallel compile jobs (default 2); the compile runs under nice
#   PYTHON                    python used to find the installed version and to run pip download
# Prints llama-bench's path on its last line; a second run with the binary present does nothing.
# The same steps as scripts/build_llama_server.sh (its own build folder, so the two never share one).
set -euo pipefail

PYTHON="${PYTHON:-python3}"
CACHE="${LLM_DOCTOR_CACHE:-$HOME/.cache/llm-doctor}"
JOBS="${JOBS:-2}"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-}"
if [[ -z "$VERSION" ]]; then
  VERSION="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null || true)"
fi
VERSION="${VERSION:-0.3.36}"
if [[ ! "$VERSION" =~ ^[0-9]+(\.[0-9]+)*$ ]]; then
  echo "build_llama_bench: bad llama-cpp-python version: $VERSION" >&2
  exit 2
fi

DEST="$CACHE/llama-bench-$VERSION"
BIN="$DEST/bin/llama-bench"
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE/src"
SDIST="$CACHE/src/llama_cpp_python-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
  "$PYTHON" -m pip download "llama-cpp-python==$VERSION" --no-deps --no-binary :all: -d "$CACHE/src" >&2
fi

WORK="$CACHE/build-bench-$VERSION"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [[ ! -f "$WORK/build/CMakeCache.txt" || ! -f "$SRC/CMakeLists.txt" ]]; then
  rm -rf "$WORK"
  mkdir -p "$WORK"
  tar -xzf "$SDIST" -C "$WORK"
fi
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
  echo "build_llama_bench: no vendored llama.cpp in $SDIST" >&2
  exit 2
fi

start=$(date +%s)
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S "$SRC" -B "$WORK/build" "${GEN[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
nice -n 19 cmake --build "$WORK/build" --target llama-bench -j "$JOBS" >&2
mkdir -p "$DEST/bin"
cp "$WORK/build/bin/llama-bench" "$DEST/bin/llama-bench.tmp"
mv "$DEST/bin/llama-bench.tmp" "$DEST/bin/llama-bench"
echo "built llama-bench $VERSION in $(( $(date +%s) - start ))s" >&2
rm -rf "$WORK"
echo "$BIN"
