"""watch in text mode and its recordings (issue 37, item 8): the generated text shown at the end, a
wrapped command's output once, and a recording cut before the run ended named as such."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from doctor.core.events import PhaseEvent, StepEvent
from doctor.sources.live.recording import read_recording
from doctor.views.render.style import choose_style
from doctor.views.render.ticker import OUTPUT_SHOWN, Ticker

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "fixtures" / "traces"


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "NO_COLOR": "1"}, check=False, timeout=120)


def _ticked(name: str, show_output: bool = True) -> tuple[str, str]:
    """The ticker's lines for a recorded run, and the text the run generated."""
    with (TRACES / f"{name}.jsonl").open("rb") as handle:
        _, events, _ = read_recording(handle)
    out = io.StringIO()
    ticker = Ticker(choose_style(False, "utf-8", "never"), out, show_output=show_output)
    for event in events:
        ticker(event)
    text = "".join(e.token for e in events if isinstance(e, StepEvent | PhaseEvent) and e.token)
    return out.getvalue(), text


def test_the_generated_text_is_shown_when_the_run_ends() -> None:
    lines, text = _ticked("healthy")
    assert text.strip(), "the recording generated nothing"
    assert "  output    " in lines and "every token: watch --record FILE" in lines
    shown = [line.removeprefix("    │ ") for line in lines.splitlines() if line.startswith("    │ ")]
    assert "\n".join(shown) == text.strip("\n")[-OUTPUT_SHOWN:]
    # where the report goes public, the text does not show
    redacted, _ = _ticked("healthy", show_output=False)
    assert "(not shown: --redact)" in redacted and "    │ " not in redacted


def test_a_long_output_shows_its_end_and_says_so() -> None:
    lines, text = _ticked("greedy-loop")
    if len(text) <= OUTPUT_SHOWN:
        assert "the last" not in lines
    else:
        assert f"the last {OUTPUT_SHOWN} shown" in lines


def test_a_wrapped_commands_output_is_printed_once() -> None:
    # the strings are built in the child, so that the command line the ticker echoes does not hold them
    script = ("import sys; print('hello' + '-from-child'); print('a middle' + ' line');"
              "print('err' + '-from-child', file=sys.stderr); sys.exit(3)")
    proc = doctor("watch", "--format", "text", "--", sys.executable, "-c", script)
    both = proc.stdout + proc.stderr
    # passed through once; the last line is also the report's evidence for the exit, nothing more
    assert both.count("hello-from-child") == 1 and both.count("a middle line") == 1, both
    assert "exit status 3" in proc.stderr


def test_a_recording_cut_before_the_end_reads_as_cut_short(tmp_path: Path) -> None:
    lines = (TRACES / "healthy.jsonl").read_text(encoding="utf-8").splitlines()
    ends = [i for i, line in enumerate(lines) if json.loads(line).get("kind") == "end"]
    assert ends, "the fixture has an end event"
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    whole = json.loads(doctor("analyze", str(TRACES / "healthy.jsonl"), "--format", "json").stdout)
    half = json.loads(doctor("analyze", str(cut), "--format", "json").stdout)
    assert "cut short" not in whole["verdict"]["text"] and whole["verdict"]["complete"] is True
    assert half["verdict"]["complete"] is False  # a program reading the JSON learns it too, not only a reader
    assert half["verdict"]["text"].startswith("No problems found in the part recorded. The recording was cut short")
    text = doctor("analyze", str(cut), "--format", "text").stdout
    assert "No problems found." not in text and "cut short" in text
    markdown = doctor("analyze", str(cut), "--format", "markdown").stdout
    assert "cut short" in markdown
