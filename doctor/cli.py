"""The command line: parse arguments, run a command, turn errors into one line and an exit code.

Exit codes: 0 nothing at or above --fail-on; 1 something is; 2 usage or input error; 3 internal
error; 4 nothing recognised in the input, so nothing was judged (README, "Exit status"). Heavy
parts (textual, torch, llama_cpp) are imported only by the commands that need them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, NoReturn, TextIO

from doctor import __version__
from doctor.core import engines
from doctor.core.errors import DoctorError, OutputError

COMMAND_MODULES = ("analyze", "scan", "watch", "models", "rules", "fleet")
MODULE_OF = {"analyze": "analyze", "scan": "scan", "watch": "watch", "models": "models", "rules": "rules",
             "explain": "rules", "facts": "rules", "fleet": "fleet"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(2, f"llm-doctor: error: {message} (see --help)\n")


def _engine_list() -> str:
    """"llama.cpp, llama-cpp-python, Ollama, vLLM and TGI": the engine table's labels."""
    labels = engines.labels()
    return ", ".join(labels[:-1]) + " and " + labels[-1] if len(labels) > 1 else "".join(labels)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the arguments, only the named command's module is imported (each
    pulls in its own part of the tool: the scan's estimate path should not pay for analyze or watch)."""
    parser = _Parser(
        prog="llm-doctor",
        description="Diagnoses LLM inference: slow prefill, stalled decode, out-of-memory, context overflow "
                    f"and looping output, for {_engine_list()}.",
    )
    parser.add_argument("--version", action="version", version=f"llm-doctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{analyze,scan,watch,models,fleet,rules,explain,facts}",
                                parser_class=_Parser)
    command = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    for name in (MODULE_OF[command],) if command in MODULE_OF else COMMAND_MODULES:
        try:
            module = importlib.import_module(f"doctor.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"doctor.commands.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    guarded = None if sys.stdout is None or sys.stdout.isatty() else _Output(sys.stdout)
    if guarded is not None:
        sys.stdout = guarded
    try:
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit:  # --help, --version: their text is output too
            sys.stdout.flush()
            raise
        if not getattr(args, "run", None):
            parser.print_help(sys.stderr)
            return 2
        run = args.run
        if isinstance(run, str):  # "module:function": a front door above other commands (commands/pick.py)
            module, _, name = run.partition(":")
            run = getattr(importlib.import_module(module), name)
        code = int(run(args))
        sys.stdout.flush()  # here, not at exit: a full disk or a closed pipe is seen while it can be said
        return code
    except DoctorError as exc:
        print(f"llm-doctor: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("llm-doctor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): not an error of ours, and nothing more to say
        _silence_stdout()
        return 0
    except Exception as exc:
        if os.environ.get("LLM_DOCTOR_DEBUG"):
            raise
        from doctor.core.sanitize import inert

        print(f"llm-doctor: internal error: {type(exc).__name__}: {inert(' '.join(str(exc).split()), 500)} "
              "(set LLM_DOCTOR_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 3
    finally:
        if guarded is not None and sys.stdout is guarded:
            sys.stdout = guarded.stream


class _Output:
    """Standard output (when it is not a terminal) whose write errors are the user's to hear: a full
    disk is an OutputError (one line, exit 2); a closed pipe stays a BrokenPipeError (a quiet end)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def _failed(self, exc: OSError) -> OutputError:
        _silence_stdout()
        return OutputError(f"cannot write the output: {exc.strerror or exc}")

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _silence_stdout() -> None:
    """Standard output to /dev/null, so that the interpreter's last flush has nowhere to fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (a test's capture)
        pass


if __name__ == "__main__":
    sys.exit(main())
