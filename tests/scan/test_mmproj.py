"""The vision projector (`scan --mmproj FILE`): its weights and image compute buffer against what
llama.cpp's mtmd/clip printed for the same sparse mmproj file (fixtures/record_arch.py), and the
scan charging them beside the text model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fixtures" / "gguf"))

from make_arch_gguf import build, load_arch_spec  # noqa: E402

from bench.arch_table import ARCH_LOGS, projector_row  # noqa: E402
from doctor.cli import main  # noqa: E402
from doctor.derive.split import DeviceSum  # noqa: E402
from doctor.sources.probes.gguf_mmproj import collect_mmproj  # noqa: E402

INDEX = json.loads((ARCH_LOGS / "index.json").read_text())["mmproj"]
MIB = 1 << 20


@pytest.fixture(scope="module")
def mmproj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(load_arch_spec("gemma-3-4b-mmproj"), tmp_path_factory.mktemp("mmproj") / "mmproj.gguf")


def test_the_projector_was_loaded_by_llama_cpp_with_and_without_flash_attention() -> None:
    assert not INDEX["failed"]
    assert {run["setting"] for run in INDEX["runs"].values()} == {"fa_on", "fa_off"}


@pytest.mark.parametrize("key", sorted(INDEX["runs"]))
def test_projector_figures_match_clip_cpp(key: str, mmproj: Path) -> None:
    run = INDEX["runs"][key]
    text = (ARCH_LOGS / "mmproj" / f"{key}.log").read_text()
    row = projector_row(run["spec"], run["setting"], text, collect_mmproj(str(mmproj)))
    assert row.weights_mib == 801.50 and abs(row.weights_est - row.weights_mib) < 0.005
    assert row.compute_est is not None and abs(row.compute_est - row.compute_mib) < 0.005
    # one 896 px image in 14 px patches: 4096 patches; KQ (16 heads x 4096^2 f32) only without flash attention
    assert row.compute_mib == (121.25 if row.flash_attn else 1132.00)
    assert row.image_tokens == 256  # 64 x 64 patches pooled 4 x 4


def _scan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["scan", "--no-trace", "--format", "json", "--ram", "8G", "-fa", "on", *args]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    return {name: fact.get("value") for name, fact in report["facts"]["facts"].items()}


def test_scan_charges_the_projector_beside_the_model(capsys: pytest.CaptureFixture[str], mmproj: Path,
                                                      smollm2: Path) -> None:
    plain = _scan(capsys)
    with_proj = _scan(capsys, "--mmproj", str(mmproj))
    assert "derived.mmproj_bytes" not in plain
    assert with_proj["mmproj.projector"] == "gemma3" and with_proj["mmproj.n_layer"] == 27
    assert with_proj["derived.mmproj_weights_bytes"] == with_proj["mmproj.weights_bytes"]
    assert with_proj["derived.mmproj_compute_bytes"] == 4096 * 4 * (4304 + 3 * 1152)  # 121.25 MiB
    assert with_proj["derived.image_tokens"] == 256
    added = int(with_proj["derived.host_need_bytes"]) - int(plain["derived.host_need_bytes"])
    assert added == with_proj["derived.mmproj_bytes"]


def test_a_file_that_is_not_a_projector_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                              smollm2: Path, tmp_path: Path) -> None:
    for path, message in ((smollm2, "not 'clip'"), (tmp_path / "none.gguf", "no such file")):
        assert main(["scan", "--no-trace", "--format", "json", "--mmproj", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("llm-doctor: error: --mmproj") and message in err[0]


def test_the_split_names_the_projector_when_it_is_what_no_longer_fits() -> None:
    gib = 1 << 30
    fits_without = DeviceSum("GPU", 6 * gib, 0, gib, gib // 2, 8 * gib, projector=gib)
    assert fits_without.constraint == "projector"
    assert "+ vision projector 1.00 GiB = 8.50 GiB" in fits_without.text()
    assert DeviceSum("GPU", 6 * gib, 0, gib, gib // 2, 9 * gib, projector=gib).constraint == "none"


def test_the_text_report_names_the_projector(capsys: pytest.CaptureFixture[str], mmproj: Path, smollm2: Path) -> None:
    main(["scan", "--no-trace", "--format", "text", "--ram", "8G", "-fa", "on", "--mmproj", str(mmproj)])
    model_line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("model:"))
    assert "vision projector 801.50 MiB + 121.25 MiB compute (256 tokens per image)" in model_line
