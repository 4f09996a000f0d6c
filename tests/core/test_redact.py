"""--redact: a report a user can paste publicly keeps the diagnosis and loses the personal details."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from doctor.core.facts import Event, Facts, Source
from doctor.core.redact import Redactor

ROOT = Path(__file__).resolve().parents[2]


def test_text_redaction() -> None:
    r = Redactor(users=["ana"], hosts=["gpu-box"])
    line = ("loaded meta data from /home/ana/models/x.gguf on gpu-box (10.0.0.12, fe80::1ff:fe23:4567:890a) "
            "by ana@example.org C:\\Users\\ana\\llama GPU-5f4e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f 00:1a:2b:3c:4d:5e")
    out = r.text(line)
    for secret in ("/home/ana", "gpu-box", "10.0.0.12", "fe80::", "ana@example.org", "Users\\ana", "5f4e3d2c", "00:1a"):
        assert secret not in out, secret
    assert "~/models/x.gguf" in out and "<ip>" in out and "<uuid>" in out
    assert r.text("n_ctx = 4096, ana_model v1.2.3.4") == "n_ctx = 4096, ana_model v1.2.3.4"


def test_prompts_and_output_are_replaced_by_their_length() -> None:
    facts = Facts()
    facts.set("run.output_text", "my secret project plan", Source("log", "x", 3, "/home/ana/p"))
    facts.set("config.n_ctx", 4096, Source("log", "x", 4, "n_ctx = 4096"))
    out = Redactor(users=["ana"]).facts(facts)
    assert out.value("run.output_text") == "<22 characters of prompt or output removed>"
    assert out.get("run.output_text").source.text == "~/p"
    assert out.value("config.n_ctx") == 4096


def test_the_lines_that_place_an_event_are_redacted_too() -> None:
    facts = Facts()
    facts.add_event(Event("oom", 9, "CUDA error: out of memory", "llama.cpp", "kv_cache",
                          placed_by=((5, "[the weights had been placed] loading /home/ana/models/x.gguf"),)))
    [event] = Redactor(users=["ana"]).facts(facts).events("oom")
    assert event.placed_by == ((5, "[the weights had been placed] loading ~/models/x.gguf"),)


def test_timestamps_are_not_addresses() -> None:
    assert Redactor().text("12:34:56 and 2024-05-01T12:00:00Z") == "12:34:56 and 2024-05-01T12:00:00Z"


def test_cli_redact_keeps_the_diagnosis() -> None:
    log = ROOT / "fixtures/logs/llama-cpp-python/prompt-too-long.log"
    env = {**os.environ, "NO_COLOR": "1"}
    plain = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(log), "--format", "json"],
                           capture_output=True, env=env, check=False).stdout
    red = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(log), "--format", "json", "--redact"],
                         capture_output=True, env=env, check=False).stdout
    a, b = json.loads(plain), json.loads(red)
    assert a["assessment"]["id"] == b["assessment"]["id"] == "LD201"
    assert "/home/ana/models" in plain.decode()
    assert "/home/ana" not in red.decode() and "~/models/SmolLM2" in red.decode()


def test_a_home_folder_anywhere_becomes_tilde_and_never_glues_to_its_parent() -> None:
    r = Redactor(users=["ana"], homes=["/tmp/x/home/ana"])
    assert r.text("model /tmp/x/home/ana/models/m.gguf") == "model ~/models/m.gguf"
    assert r.text("path=/tmp/x/home/ana") == "path=~"
    # a /home/NAME inside another path is not a home folder: only the name goes, nothing is glued
    out = Redactor(users=["ana"]).text("/tmp/x/home/bob/models/m.gguf")
    assert "~" not in out and out == "/tmp/x/home/<user>/models/m.gguf"
    assert Redactor(homes=["/tmp/x"]).text("/tmp/x/models/a.gguf and /tmp/xy/b") == "~/models/a.gguf and /tmp/xy/b"


def test_a_host_named_like_a_label_does_not_blank_the_label() -> None:
    from doctor.core.report import Evidence, Finding, Fix, Report
    from doctor.judge.evaluate import diagnose
    from doctor.judge.rulebase import RuleBase

    facts = Facts()
    facts.set("host.virtualized", "vm", Source("probe", "probe.cpu"))
    facts.set("model.storage.kind", "nvme", Source("probe", "probe.storage"))
    facts.set("model.path", "/srv/vm/models/m.gguf", Source("probe", "probe.gguf"))
    r = Redactor(users=["nvme"], hosts=["vm"])
    out = r.facts(facts)
    assert out.value("host.virtualized") == "vm" and out.value("model.storage.kind") == "nvme"
    assert out.value("model.path") == "/srv/<redacted>/models/m.gguf"  # free text: the name goes
    assert r.text("connected to vm:8080") == "connected to <redacted>:8080"
    report = diagnose(Facts(), RuleBase(), command="scan", mode="scan")
    report.facts = facts
    ev = Evidence("fact", "host.virtualized = vm (probe:probe.cpu on vm)", None, "host.virtualized", "vm", None,
                  "probe:probe.cpu on vm")
    report.findings = [Finding("LD999", "x", "cpu.threads", "CPU threads", "info", "low", "t", "m", "", [ev],
                               Fix("f", None, None), [])]
    red: Report = r.report(report)
    text = red.findings[0].evidence[0].text
    assert text.startswith("host.virtualized = vm (") and text.endswith("on <redacted>)")
    assert red.findings[0].evidence[0].value == "vm"


def test_cli_redact_with_home_under_another_folder(tmp_path: Path) -> None:
    home = tmp_path / "x" / "home" / "ana"
    home.mkdir(parents=True)
    log = (ROOT / "fixtures/logs/llama-cpp-python/prompt-too-long.log").read_text(encoding="utf-8")
    log = log.replace("/home/ana/models", f"{home}/models")
    path = tmp_path / "run.log"
    path.write_text(log, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(path), "--format", "json", "--redact"],
                          capture_output=True, env={**os.environ, "HOME": str(home), "NO_COLOR": "1"}, check=False)
    out = proc.stdout.decode()
    assert "~/models/SmolLM2" in out and str(home) not in out and "x~" not in out
