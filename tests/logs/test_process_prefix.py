"""vLLM v0.10+ prefixes every line of its processes with "(name pid=N) " (vllm/utils decorate_logs ->
_add_prefix). Such lines are log records, never text a model wrote: after a request line with its sampling
parameters (the pasted-settings parser then reads the gaps between candidates as output), a server's access lines
must not be read as output that loops (LD401 fired on the bench's vLLM request log)."""

from __future__ import annotations

from pathlib import Path

from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import RuleBase
from doctor.sources.logs.entry import analyze_bytes

ROOT = Path(__file__).resolve().parents[2]
# a request decoded greedily (temperature=0.0): the pasted-settings parser then reads the text between candidates
REQUEST = next(line for log in sorted((ROOT / "fixtures" / "logs" / "vllm").glob("*.log"))
               for line in log.read_text().splitlines() if "Received request" in line and "temperature=0.0," in line)
# uvicorn's access line (uvicorn/logging.py AccessFormatter: '%s - "%s %s HTTP/%s" %d'), as vLLM's API server prints it
ACCESS = '(APIServer pid=1187) INFO:     10.44.0.7:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def test_prefixed_access_lines_are_no_output(rulebase: RuleBase) -> None:
    assert "SamplingParams(" in REQUEST
    lines = [f"(APIServer pid=1187) {REQUEST}"]  # a v0.10+ server: every line with its process
    lines += [ACCESS.format(port=52114 + i % 2 * 16) for i in range(400)]
    facts = analyze_bytes(("\n".join(lines) + "\n").encode())
    assert not facts.has("run.output_text")
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert "LD401" not in {f.id for f in report.findings}
