"""The parsers `analyze` runs. Add an engine by adding its parser class here."""

from __future__ import annotations

from doctor.logs.base import LogParser


def parser_classes() -> list[type[LogParser]]:
    from doctor.logs.crashes import CrashParser
    from doctor.logs.llamacpp import LlamaCppParser

    classes: list[type[LogParser]] = [LlamaCppParser, CrashParser]
    try:  # the serving engines (issue: analyze for Ollama, vLLM and TGI)
        from doctor.logs.ollama import OllamaParser
        from doctor.logs.tgi import TgiParser
        from doctor.logs.vllm import VllmParser
    except ImportError:
        pass
    else:
        classes += [OllamaParser, VllmParser, TgiParser]
    from doctor.logs.pasted import PastedParser

    classes.append(PastedParser)  # settings and output pasted beside a log; casts no engine vote
    return classes
