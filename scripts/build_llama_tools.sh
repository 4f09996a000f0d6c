#!/usr/bin/env bash
# Build llama.cpp tools from the llama.cpp source vendored in the pinned llama-cpp-python sdist (the
# same version as the embedded engine), CPU only, Release, native flags as the installed wheel was
# built, cached outside the clone:
#   ~/.cache/llm-doctor/<NAME>-<version>/bin/<TARGET>...
# Usage: scripts/build_llama_tools.sh NAME TARGET [TARGET...]
#   (scripts/build_llama_server.sh: llama-server and llama-fit-params; scripts/build_llama_bench.sh: llama-bench)
#   LLAMA_CPP_PYTHON_VERSION  version to build (default: the installed llama_cpp's, else 0.3.36)
#   LLM_DOCTOR_CACHE          cache root (default ~/.cache/llm-doctor)
#   JOBS                      parallel compile jobs (default 2); the compile runs under nice
#   PYTHON                    python used to find the installed version and to run pip download
# Prints the first target's path on its last line. A run with every target present does nothing; a
# missing one is built (in the kept build folder when there is one: an interrupted build goes on).
set -euo pipefail

NAME="${1:?usage: build_llama_tools.sh NAME TARGET...}"
shift
TARGETS=("$@")
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  echo "build_llama_tools: no target to build" >&2
  exit 2
fi
PYTHON="${PYTHON:-python3}"
CACHE="${LLM_DOCTOR_CACHE:-$HOME/.cache/llm-doctor}"
JOBS="${JOBS:-2}"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-}"
if [[ -z "$VERSION" ]]; then
  VERSION="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null || true)"
fi
VERSION="${VERSION:-0.3.36}"
if [[ ! "$VERSION" =~ ^[0-9]+(\.[0-9]+)*$ ]]; then
  echo "build_llama_tools: bad llama-cpp-python version: $VERSION" >&2
  exit 2
fi

DEST="$CACHE/$NAME-$VERSION"
FIRST="$DEST/bin/${TARGETS[0]}"
missing=0
for target in "${TARGETS[@]}"; do
  [[ -x "$DEST/bin/$target" ]] || missing=1
done
if [[ $missing -eq 0 ]]; then
  echo "$FIRST"
  exit 0
fi

mkdir -p "$CACHE/src"
SDIST="$CACHE/src/llama_cpp_python-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
  "$PYTHON" -m pip download "llama-cpp-python==$VERSION" --no-deps --no-binary :all: -d "$CACHE/src" >&2
fi

WORK="$CACHE/build-$NAME-$VERSION"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [[ -f "$WORK/build/CMakeCache.txt" && -f "$SRC/CMakeLists.txt" ]]; then
  echo "build_llama_tools: reusing the build folder $WORK/build" >&2
else
  rm -rf "$WORK"
  mkdir -p "$WORK"
  tar -xzf "$SDIST" -C "$WORK"
fi
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
  echo "build_llama_tools: no vendored llama.cpp in $SDIST" >&2
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
nice -n 10 cmake --build "$WORK/build" --target "${TARGETS[@]}" -j "$JOBS" >&2
mkdir -p "$DEST/bin"
for target in "${TARGETS[@]}"; do
  cp "$WORK/build/bin/$target" "$DEST/bin/$target.tmp"
  mv "$DEST/bin/$target.tmp" "$DEST/bin/$target"
done
echo "built ${TARGETS[*]} $VERSION in $(( $(date +%s) - start ))s" >&2
rm -rf "$WORK"
echo "$FIRST"
