"""How a process ended, named with its meaning: signals, Windows NTSTATUS codes and exit statuses
(doctor/sources/logs/endings.py), the host running out of memory (doctor/sources/logs/host_oom.py) and what
the log shows around a crash (doctor/sources/engines/_ggml/crash_parser.py).

The lines are the reporters' own formats: glibc's strsignal texts as bash prints them (`Segmentation fault
(core dumped)`, `Aborted (core dumped)`, bash's job line `./run.sh: line 3: 12345 Killed  ...`), zsh's
(`zsh: killed`), macOS's (`Abort trap: 6`); Go's os.ProcessState.String() as Ollama quotes it (`signal:
killed`, `exit status 0xc0000409`); Python's subprocess.CalledProcessError (`died with <Signals.SIGKILL: 9>.`,
`returned non-zero exit status 139.`) and torch.distributed.elastic (`exitcode  : -9 (pid: N)`); docker
compose (`NAME exited with code 137`) and kubectl describe (`Exit Code: 137`, `Reason: OOMKilled`); Windows
ntstatus.h codes in hex and as unsigned or signed decimals; Linux mm/oom_kill.c (`%s: Killed process %d (%s)
total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB, UID:%u pgtables:%lukB oom_score_adj:%hd`, the
pre-4.x `Out of memory: Kill process %d (%s) score %u or sacrifice child`, `oom-kill:constraint=...,task=%s,
pid=%d,uid=%d`); systemd (`A process of this unit has been killed by the OOM killer.`, `Failed with result
'oom-kill'.`); llama.cpp's tools (`main: server is listening on http://%s:%d`, `srv prompt_save: - saving
prompt with length %d, total state size = %.3f MiB`, ggml-cuda.cu's device lines `Device %d: %s, compute
capability %d.%d, VMM: %s` and, under HIP, `Device %d: %s, %s (0x%x), VMM: %s, Wave Size: %d`).
"""

from __future__ import annotations

import pytest

from doctor.core.report import Report
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.logs import endings
from doctor.sources.logs.entry import analyze_bytes


def judge(text: str) -> Report:
    return diagnose(analyze_bytes(text.encode(), "pasted log"), load_rulebase(None), command="analyze",
                    mode="analyze")


def finding(report: Report, rule: str):
    return next(f for f in report.findings if f.id == rule)


# -- the endings table ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "name"), [
    ("Segmentation fault (core dumped)", "SIGSEGV"),
    ("Aborted (core dumped)", "SIGABRT"),
    ("Abort trap: 6", "SIGABRT"),
    ("Fatal Python error: Aborted", "SIGABRT"),
    ("llama-1  | Bus error (core dumped)", "SIGBUS"),
    ("./start.sh: line 7: 80412 Killed                  python -m vllm.entrypoints.openai.api_server --model m",
     "SIGKILL"),
    ("zsh: killed     ./llama-server -m qwen.gguf -c 32768", "SIGKILL"),
    ('msg="error loading llama server" error="llama runner process has terminated: signal: killed"', "SIGKILL"),
    ("subprocess.CalledProcessError: Command '['python3', 'serve.py']' died with <Signals.SIGKILL: 9>.", "SIGKILL"),
    ("    exitcode  : -9 (pid: 20418)", "SIGKILL"),
    ("Signal 11 (SIGSEGV) received by PID 20418", "SIGSEGV"),
    ("vllm-1 exited with code 137", "SIGKILL"),
    ("    Exit Code:    139", "SIGSEGV"),
    ("Command '['./main', '-m', 'x.gguf']' returned non-zero exit status 134.", "SIGABRT"),
    ("Error: llama runner process has terminated: exit status 0xc0000409", "STATUS_STACK_BUFFER_OVERRUN"),
    ("Process finished with exit code -1073741819 (0xC0000005)", "STATUS_ACCESS_VIOLATION"),
    ("llama-server.exe exited with code 3221225501", "STATUS_ILLEGAL_INSTRUCTION"),
    ("exit status 0xc0000135", "STATUS_DLL_NOT_FOUND"),
    # LM Studio: the 64-bit unsigned code through a JavaScript number (corpus/1013, the catalogue's lmstudio sample)
    ("(Exit code: 18446744072635812000). Unknown error. Try a different model and/or config.",
     "STATUS_STACK_BUFFER_OVERRUN"),
    ("Process exited with exit code 18446744072635809797", "STATUS_ACCESS_VIOLATION"),  # the exact 64-bit number
    ("(Exit code: 18446744072635810000). Unknown error.", "NTSTATUS 0xC0000xxx"),  # 0xC0000005, 0xC0000135 ... alike
])
def test_each_reporter_of_an_ending_is_read(line: str, name: str) -> None:
    found = endings.read(line)
    assert found is not None and found[0].name == name
    assert found[1] in line


@pytest.mark.parametrize("line", [
    "exit status 1", "Process finished with exit code 0", "Request aborted by the client", "Aborted!",
    "llama_model_loader: - kv  12: general.version str = 0.3221225477", "exitcode  : -15 (pid: 1)",
])
def test_ordinary_statuses_and_prose_are_no_ending(line: str) -> None:
    assert endings.read(line) is None


def test_statuses_map_to_signals_and_windows_codes() -> None:
    assert endings.from_status(137) is endings.KILL and endings.from_status(-9) is endings.KILL
    assert endings.from_status(139).name == "SIGSEGV"  # type: ignore[union-attr]
    assert endings.from_status(3221225477).name == endings.from_status(-1073741819).name == "STATUS_ACCESS_VIOLATION"  # type: ignore[union-attr]
    assert endings.from_status(2) is None and endings.from_status(255) is None
    assert endings.NTSTATUS[0xC000012D].memory  # the commit limit is the host's memory
    assert endings.from_status((1 << 64) - 1) is None  # -1 as 64 bits: an ordinary failure
    assert endings.from_status((1 << 64) - 9) is endings.KILL  # -9 as 64 bits


# -- the host ran out of memory -------------------------------------------------------------------------------

KERNEL = ("[ 8123.441202] Out of memory: Killed process 52114 (llama-server) total-vm:61240388kB, "
          "anon-rss:30412876kB, file-rss:1024kB, shmem-rss:0kB, UID:1000 pgtables:60124kB oom_score_adj:0\n")
LOADING = ("llama_model_loader: loaded meta data with 35 key-value pairs and 579 tensors from "
           "/models/Qwen2.5-32B-Instruct-Q8_0.gguf (version GGUF V3 (latest))\n"
           "load_tensors:          CPU model buffer size = 33202.08 MiB\n")
SERVING = ("main: server is listening on http://127.0.0.1:8080 - starting the main loop\n"
           "srv  update_slots: all slots are idle\n")


def test_the_kernel_kill_during_the_load_is_weights() -> None:
    report = judge(LOADING + KERNEL)
    assert report.assessment is not None and report.assessment.id == "LD364"
    lead = finding(report, "LD364")
    assert lead.cls == "oom.weights" and lead.confidence == "high"
    assert "29.00 GiB" in lead.message  # anon-rss, the RAM it held
    assert "--no-mmap" in lead.fix.by_engine["llama.cpp"]
    assert not [f for f in report.findings if f.id in ("LD950", "LD961")]


def test_the_kernel_kill_alone_is_weights_with_less_confidence() -> None:
    report = judge(KERNEL)
    assert report.assessment is not None and report.assessment.cls == "oom.weights"
    assert report.assessment.confidence == "medium"


def test_the_kernel_kill_after_serving_is_runtime() -> None:
    report = judge(LOADING + SERVING + KERNEL)
    assert report.assessment is not None and report.assessment.id == "LD365"
    assert report.assessment.cls == "oom.runtime"


def test_systemd_kill_right_after_a_prompt_cache_save_names_the_cache() -> None:
    text = ("srv  params_from_: Chat format: Hermes 2 Pro\n"
            "srv   prompt_save:  - saving prompt with length 31214, total state size = 3880.125 MiB\n"
            "\n"
            "llama.service: A process of this unit has been killed by the OOM killer.\n"
            "llama.service: Failed with result 'oom-kill'.\n")
    report = judge(text)
    assert report.assessment is not None and report.assessment.id == "LD365"
    lead = finding(report, "LD365")
    assert "prompt_save" in lead.message and lead.confidence == "high"
    assert "--cache-ram" in lead.fix.by_engine["llama.cpp"]
    facts = analyze_bytes(text.encode())
    assert [e.data["reporter"] for e in facts.events("host_oom_evidence")] == ["systemd"]


def test_the_old_kernel_format_and_the_oom_kill_summary_are_one_kill() -> None:
    text = ("[ 8123.401101] python3 invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, "
            "oom_score_adj=0\n"
            "[ 8123.441202] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
            "task_memcg=/user.slice,task=python3,pid=9921,uid=1000\n"
            "[ 8123.441210] Out of memory: Kill process 9921 (python3) score 912 or sacrifice child\n"
            "[ 8123.441300] Killed process 9921 (python3) total-vm:48213100kB, anon-rss:23110020kB, file-rss:0kB\n")
    facts = analyze_bytes(text.encode())
    kills = facts.events("host_oom_kill")
    assert len(kills) == 1 and kills[0].data["process"] == "python3"
    assert len(facts.events("host_oom_evidence")) == 2


def test_another_programs_kill_is_not_the_engines() -> None:
    facts = analyze_bytes(b"Out of memory: Killed process 3100 (chrome) total-vm:9123400kB, anon-rss:4100200kB, "
                          b"file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:9000kB oom_score_adj:300\n")
    assert facts.events("host_oom_kill") == []


def test_a_container_killed_with_137_during_a_vllm_load() -> None:
    text = ("INFO 03-02 10:11:12 [model_runner.py:1110] Starting to load model meta-llama/Llama-3.1-70B-Instruct...\n"
            "vllm-1 exited with code 137\n")
    report = judge(text)
    assert report.assessment is not None and report.assessment.id == "LD364"
    assert report.assessment.confidence == "medium"


def test_a_bare_killed_is_low_confidence() -> None:
    report = judge("Killed\n")
    assert report.assessment is not None and report.assessment.cls == "oom.weights"
    assert report.assessment.confidence == "low"


def test_sigkill_after_a_gpu_oom_is_that_oom() -> None:
    text = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 20480.00 MiB on device 0: cudaMalloc failed: "
            "out of memory\n"
            'time=2025-02-01T10:00:00.000Z level=ERROR source=sched.go:455 msg="error loading llama server" '
            'error="llama runner process has terminated: signal: killed"\n')
    facts = analyze_bytes(text.encode())
    assert facts.events("host_oom_kill") == []


# -- a crash no cause explains: its ending in words, and what was around it -----------------------------------

def test_an_abort_is_named_by_its_signal() -> None:
    report = judge(LOADING + "Aborted (core dumped)\n")
    lead = finding(report, "LD950")
    assert "SIGABRT" in lead.message and "aborted itself" in lead.message


def test_a_container_status_alone_is_a_crash_named_by_its_signal() -> None:
    report = judge("llama-1 exited with code 139\n")
    assert report.assessment is not None and report.assessment.id == "LD950"
    assert "SIGSEGV" in report.assessment.message


def test_an_ordinary_exit_status_is_no_crash() -> None:
    facts = analyze_bytes(b"llama-1 exited with code 1\n")
    assert not facts.has("run.end_signal") and not facts.has("run.crashed")


def test_a_segfault_on_a_jetson_says_the_board() -> None:
    text = ("ggml_cuda_init: found 1 CUDA devices:\n  Device 0: Orin, compute capability 8.7, VMM: yes\n"
            + LOADING + "Segmentation fault (core dumped)\n")
    lead = finding(judge(text), "LD950")
    assert "Orin" in lead.message and "embedded board" in lead.message


def test_an_illegal_instruction_on_a_cpu_without_avx2() -> None:
    text = ("system_info: n_threads = 4 / 4 | AVX = 1 | AVX_VNNI = 0 | AVX2 = 0 | AVX512 = 0 | FMA = 0 | "
            "NEON = 0 | ARM_FMA = 0 | F16C = 1 | FP16_VA = 0 | SSE3 = 1 | SSSE3 = 1 | VSX = 0 |\n"
            "Illegal instruction (core dumped)\n")
    lead = finding(judge(text), "LD960")
    assert "without AVX2" in lead.message


def test_no_kernel_for_the_gpu_names_its_gfx_target() -> None:
    text = ("ggml_cuda_init: found 1 ROCm devices:\n"
            "  Device 0: AMD Radeon 780M, gfx1103 (0x1103), VMM: no, Wave Size: 32\n"
            "ggml_cuda_compute_forward: RMS_NORM failed\nCUDA error: invalid device function\n"
            "  current device: 0, in function ggml_cuda_compute_forward at /src/ggml/src/ggml-cuda/ggml-cuda.cu:2513\n")
    report = judge(text)
    lead = finding(report, "LD960")
    assert "not built for this GPU" in lead.message and "gfx1103" in lead.message
    assert "HSA_OVERRIDE_GFX_VERSION" in lead.fix.by_engine["ollama"]


def test_an_engine_bug_names_the_release_it_ran_on() -> None:
    """Ollama's `Listening on %s (version %s)` (server/routes.go) before ggml_cuda_error's block: the release
    is part of a crash that is an engine or driver bug (a regression when an earlier release ran)."""
    text = ('time=2025-01-09T08:01:02.003Z level=INFO source=routes.go:1259 msg="Listening on 127.0.0.1:11434 '
            '(version 0.5.7)"\n'
            "CUDA error: an illegal memory access was encountered\n"
            "  current device: 0, in function ggml_backend_cuda_synchronize at /src/ggml/src/ggml-cuda/ggml-cuda.cu:"
            "2380\n")
    lead = finding(judge(text), "LD960")
    assert "engine version 0.5.7" in lead.message and "regression" in lead.message


# -- a Windows structured exception through ctypes, and LM Studio's 64-bit exit code ----------------------------

@pytest.mark.parametrize(("line", "name"), [
    # LostRuins/koboldcpp#648 (corpus case 1061): CPython Modules/_ctypes/callproc.c SetException's words
    ("OSError: exception: access violation reading 0x0000000000000000", "STATUS_ACCESS_VIOLATION"),
    ("OSError: exception: stack overflow", "STATUS_STACK_OVERFLOW"),
    ("OSError: exception: illegal instruction", "STATUS_ILLEGAL_INSTRUCTION"),
    # lmstudio-ai/lmstudio-bug-tracker#1204 (corpus case 1013): -1073740791 (0xC0000409) widened to 64 bits,
    # printed unsigned through a JavaScript double (its low digits rounded)
    ("(Exit code: 18446744072635812000). Unknown error. Try a different model and/or config.",
     "STATUS_STACK_BUFFER_OVERRUN"),
])
def test_seh_words_and_a_widened_status_are_windows_codes(line: str, name: str) -> None:
    found = endings.read(line)
    assert found is not None and found[0].name == name, found


def test_the_koboldcpp_load_crash_through_ctypes_is_a_crash() -> None:
    report = judge('  File "G:\\koboldcpp\\koboldcpp.py", line 328, in load_model\n'
                   "    ret = handle.load_model(inputs)\n"
                   "OSError: exception: access violation reading 0x0000000000000000\n")
    assert report.facts.value("run.crashed") is True
    assert report.assessment is not None and report.assessment.cls == "engine.crash"
