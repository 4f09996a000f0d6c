"""Never silent: a line that reads as an error and that nothing names is quoted in an info finding (LD970) and
the verdict says so, instead of "Nothing to judge" (exit 4) or "No problems found"
(doctor/sources/logs/unexplained.py).

Lines: mlx-lm's mlx_lm/models/cache.py (`raise NotImplementedError("RotatingKVCache Quantization NYI")`) as
its server returns it; Open WebUI's relay of an Ollama error (`500: Ollama: 500, message='Internal Server
Error', url='http://localhost:11434/api/chat'`); vLLM's v1 engine start-up failure
(`RuntimeError: Engine core initialization failed. See root cause above.`) and its CUDA OOM
(`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`); llama.cpp's loader line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from doctor.core.report import Report
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.logs.entry import analyze_bytes

ROOT = Path(__file__).resolve().parents[2]
# MLX v0.22 python/mlx/nn/layers/base.py Module.load_weights (strict): weights that are not the model's (no entry)
MLX = ("Traceback (most recent call last):\n"
       '  File "/opt/mlx/lib/python3.12/site-packages/mlx/nn/layers/base.py", line 178, in load_weights\n'
       '    raise ValueError(f"Received parameters not in model: {extras}.")\n'
       "ValueError: Received parameters not in model: model.layers.0.mlp.gate.bias.\n")
WEBUI = "500: Ollama: 500, message='Internal Server Error', url='http://localhost:11434/api/chat'\n"


def judge(text: str) -> Report:
    return diagnose(analyze_bytes(text.encode(), "pasted log"), load_rulebase(None), command="analyze",
                    mode="analyze")


def test_one_unknown_error_line_is_quoted_not_nothing_to_judge() -> None:
    report = judge(WEBUI)
    assert report.verdict() == "unexplained"
    note = next(f for f in report.findings if f.id == "LD970")
    assert note.severity == "info" and note.cls == "engine.unexplained"
    assert "line 1" in note.message and "Internal Server Error" in note.message
    assert "Nothing to judge" not in report.verdict_text()
    assert not report.recognised()  # one unknown line is not an engine's log


def test_the_cli_exits_0_not_4_for_an_unexplained_error(tmp_path: Path) -> None:
    log = tmp_path / "paste.log"
    log.write_text(MLX)
    done = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(log), "--no-tui", "--color", "never"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Received parameters not in model" in done.stdout
    other = tmp_path / "notes.txt"
    other.write_text("shopping list: milk, bread\n")
    done = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(other), "--no-tui", "--color", "never"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4  # nothing that reads as an error: still nothing to judge


def test_a_known_failure_takes_its_traceback_lines_with_it() -> None:
    text = ("ERROR 05-12 10:11:12 [core.py:396] EngineCore failed to start.\n"
            "ERROR 05-12 10:11:12 [core.py:396] Traceback (most recent call last):\n"
            "ERROR 05-12 10:11:12 [core.py:396] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.10 GiB is free.\n"
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    report = judge(text)
    assert report.assessment is not None and report.assessment.cls.startswith("oom.")
    assert "LD970" not in {f.id for f in report.findings}


def test_a_stray_error_beside_a_recognised_run_is_a_note() -> None:
    text = ("llama_model_loader: loaded meta data with 33 key-value pairs and 272 tensors from "
            "/models/m.gguf (version GGUF V3 (latest))\n" + MLX)
    report = judge(text)
    assert report.recognised()
    assert report.verdict() == "unexplained"
    assert "ValueError" in next(f for f in report.findings if f.id == "LD970").message


def test_many_unknown_lines_are_counted_and_only_a_few_quoted() -> None:
    text = "".join(f"2025-01-09 08:{i // 60 % 60:02d}:{i % 60:02d} worker {i % 8}: request failed with status 502\n"
                   for i in range(5000))
    facts = analyze_bytes(text.encode())
    assert facts.value("run.unexplained_errors") == 5000
    quoted = facts.value("run.unexplained_lines")
    assert quoted.count('line ') == 3 and quoted.endswith("and 4997 more")


def test_the_bare_word_in_a_message_counts_but_not_in_a_comment() -> None:
    facts = analyze_bytes(b"request 42: unexpected error in the tokenizer\n")
    assert facts.value("run.unexplained_errors") == 1
    facts = analyze_bytes(b'    "mypy==2.4.1",  # pinned: a newer checker may find a new error, and the suite runs\n')
    assert not facts.has("run.unexplained_errors")


def test_lines_that_say_no_error_happened_are_left_alone() -> None:
    facts = analyze_bytes(b"upload done: 12 files, errors: 0\nsync finished without errors\n")
    assert not facts.has("run.unexplained_errors")
