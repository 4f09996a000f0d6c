#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run of under 5 minutes (where a GPU machine is lent):
#   1. the gpu-marked tests (real NVML, the recorder vs the replay stand-in, torch copies, scan --bench);
#   2. `llm-doctor scan --bench` in text and JSON, kept under $OUT (or bench/results/);
#   3. a recording of the machine (python -m doctor.sources.probes.record) to add under fixtures/machines/.
# Usage: bench/gpu_check.sh [python]   (default: python3; set OUT to collect the results elsewhere)
set -u
PY="${1:-python3}"
cd "$(dirname "$0")/.." || exit 2
OUT="${OUT:-bench/results/gpu_check}"
mkdir -p "$OUT"
{
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv || true
  echo "== torch"; "$PY" -c 'import torch; print(torch.__version__, torch.cuda.is_available())' || true
  echo "== llama-cpp-python"; "$PY" -c 'import llama_cpp; print(llama_cpp.__version__, llama_cpp.llama_supports_gpu_offload())' || true
} > "$OUT/environment.txt" 2>&1
timeout 200 "$PY" -m pytest -q -m gpu tests/scan/test_gpu_real.py -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1
tests_rc=$?
timeout 60 "$PY" -m doctor scan --bench --format text --color never -v > "$OUT/scan_bench.txt" 2> "$OUT/scan_bench.stderr"
timeout 60 "$PY" -m doctor scan --bench --format json > "$OUT/scan_bench.json" 2>> "$OUT/scan_bench.stderr"
timeout 60 "$PY" -m doctor.sources.probes.record "$OUT/machine" --force --bench \
  --model "$("$PY" -c 'from doctor.sources.models.default import default_model_path; print(default_model_path())')" \
  > "$OUT/record.txt" 2>&1
tail -n 3 "$OUT/pytest_gpu.txt"
exit $tests_rc
