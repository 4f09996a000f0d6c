"""The crash table's set-up causes (doctor/sources/engines/_ggml/crash_setup.py) on real lines: hipBLASLt without
its kernel data, an illegal memory access in a DeepSpeed-Inference run, a llamafile the system cannot start. Lines
from the engines' format strings and from fit-split corpus cases (corpus/1088, 1261; ../shared/corpus/556), cited
beside each.
"""

from __future__ import annotations

from doctor.judge.evaluate import diagnose
from doctor.sources.logs.entry import analyze_bytes


def _report(text: str, rulebase):
    return diagnose(analyze_bytes(text.encode()), rulebase, command="analyze", mode="analyze")


def _causes(text: str) -> list[str]:
    return [e.data["cause"] for e in analyze_bytes(text.encode()).events("crash_cause")]


def test_hipblaslt_without_its_kernel_data_is_named_once(rulebase) -> None:
    # ../shared/corpus/556 (LocalAI#10672), hipBLASLt tensile_host.cpp "Cannot read %s: %s" / "Could not load %s"
    text = ('    rocblaslt error: Cannot read "TensileLibrary_lazy_gfx1201.dat": No such file or directory\n'
            '    rocblaslt error: Could not load "TensileLibrary_lazy_gfx1201.dat"\n')
    found = analyze_bytes(text.encode()).events("crash_cause")
    assert {e.data["cause"] for e in found} == {"hipblaslt_kernels_missing"}
    report = _report(text, rulebase)
    lead = next(f for f in report.findings if f.id == "LD960")
    assert "hipBLASLt" in lead.message and "HIPBLASLT_TENSILE_LIBPATH" in lead.fix.text
    # the warning form when the folder itself is absent
    warning = ("rocblaslt warning: No paths matched /opt/app/lib/hipblaslt/library/*gfx1100*co. Make sure that "
               "HIPBLASLT_TENSILE_LIBPATH is set correctly.\n")
    assert _causes(warning) == ["hipblaslt_kernels_missing"]


def test_rocblas_tensile_stays_the_arch_cause() -> None:
    # rocBLAS's own line names a TensileLibrary too: no kernels for the GPU at all, not hipBLASLt's fallback
    text = ("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory "
            "for GPU arch : gfx1036\n")
    assert _causes(text) == ["cuda_arch_missing"]


def test_an_illegal_memory_access_in_a_deepspeed_inference_run(rulebase) -> None:
    # corpus/1261 (deepspeedai/DeepSpeed#3758): the title, mp_size naming the DeepSpeed-Inference run
    text = ("[BUG] bs=1 mp_size=8 OPT/LLaMA inference CUDA error: an illegal memory access was encountered\n\n"
            "Actually, it seems the problem comes with long sequence lengths.\n")
    assert _causes(text) == ["deepspeed_tokens_past_reserve"]
    report = _report(text, rulebase)
    assert report.assessment is not None and report.assessment.id == "LD267"
    assert report.assessment.cls == "context.overflow"
    lead = next(f for f in report.findings if f.id == "LD267")
    assert "max_tokens" in lead.fix.text
    assert "LD960" not in {f.id for f in report.findings}


def test_the_deepspeed_run_named_by_a_frame_before_the_crash() -> None:
    # a traceback frame under deepspeed/ops/transformer/inference, then torch's CUDA error (its own sentence)
    text = ('  File "/usr/local/lib/python3.10/site-packages/deepspeed/ops/transformer/inference/ds_attention.py", '
            "line 156, in forward\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert _causes(text) == ["deepspeed_tokens_past_reserve"]


def test_an_illegal_memory_access_elsewhere_keeps_its_cause() -> None:
    text = ("RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
            "asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n")
    assert _causes(text) == ["cuda_illegal_address"]


def test_a_llamafile_the_system_cannot_start(rulebase) -> None:
    # corpus/1088 (mozilla-ai/llamafile#513): binfmt-support's run-detectors on an APE file
    text = ("$ ./llava-v1.5-7b-q4.llamafile --version\n"
            "run-detectors: unable to find an interpreter for ./llava-v1.5-7b-q4.llamafile\n")
    assert _causes(text) == ["ape_no_interpreter"]
    report = _report(text, rulebase)
    assert report.assessment is not None and report.assessment.id == "LD960"
    lead = next(f for f in report.findings if f.id == "LD960")
    assert "binfmt_misc" in lead.fix.text
