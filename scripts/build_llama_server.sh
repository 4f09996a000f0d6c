#!/usr/bin/env bash
# Build llama-server, and llama-fit-params (llama.cpp's own pre-load memory projection, which
# bench/fit_vs_llamacpp.py sets beside llm-doctor's estimate), from the llama.cpp source vendored in
# the pinned llama-cpp-python sdist (the same version as the embedded engine), CPU only, Release,
# cached outside the clone:
#   ~/.cache/llm-doctor/llama-server-<version>/bin/llama-server
#   ~/.cache/llm-doctor/llama-server-<version>/bin/llama-fit-params
# Usage: scripts/build_llama_server.sh [--print-path]
#   LLAMA_CPP_PYTHON_VERSION  version to build (default: the installed llama_cpp's, else 0.3.36)
#   LLM_DOCTOR_CACHE          cache root (default ~/.cache/llm-doctor)
#   JOBS                      parallel compile jobs (default 2)
#   PYTHON                    python used to find the installed version and to run pip download
# Prints llama-server's path on its last line. A second run with both binaries present does nothing;
# a cache from before llama-fit-params was built gets it added (in the kept build folder when there is one).
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
  echo "build_llama_server: bad llama-cpp-python version: $VERSION" >&2
  exit 2
fi

DEST="$CACHE/llama-server-$VERSION"
BIN="$DEST/bin/llama-server"
FIT="$DEST/bin/llama-fit-params"
if [[ -x "$BIN" && -x "$FIT" ]]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE/src"
SDIST="$CACHE/src/llama_cpp_python-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
  "$PYTHON" -m pip download "llama-cpp-python==$VERSION" --no-deps --no-binary :all: \
    -d "$CACHE/src" >&2
fi

WORK="$CACHE/build-$VERSION"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [[ -f "$WORK/build/CMakeCache.txt" && -f "$SRC/CMakeLists.txt" ]]; then
  echo "build_llama_server: reusing the build folder $WORK/build" >&2
else
  rm -rf "$WORK"
  mkdir -p "$WORK"
  tar -xzf "$SDIST" -C "$WORK"
fi
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
  echo "build_llama_server: no vendored llama.cpp in $SDIST" >&2
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
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
nice -n 10 cmake --build "$WORK/build" --target llama-server llama-fit-params -j "$JOBS" >&2
mkdir -p "$DEST/bin"
for name in llama-server llama-fit-params; do
  cp "$WORK/build/bin/$name" "$DEST/bin/$name.tmp"
  mv "$DEST/bin/$name.tmp" "$DEST/bin/$name"
done
echo "built llama-server and llama-fit-params $VERSION in $(( $(date +%s) - start ))s" >&2
rm -rf "$WORK"
echo "$BIN"
