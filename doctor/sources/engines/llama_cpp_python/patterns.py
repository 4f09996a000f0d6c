"""llama-cpp-python's own log lines: its signature (the Python binding's messages and exception
texts, llama_cpp/llama.py and _internals.py) and the completion dicts it prints (the text the model
wrote, why it stopped). Its kinds sit in the llama.cpp family's table of line kinds
(../llamacpp/patterns.py), since one parser reads both engines' lines; their handlers are here,
parser.py.

Pure.
"""

from __future__ import annotations

from doctor.sources.logs.base import LineKind
from doctor.sources.logs.matcher import gated

SIGNATURE = gated(r"Model metadata: \{|Available chat formats from metadata|Using gguf chat template|"
                  r"Using chat eos_token"
                  r"|Llama\.generate: |llama_cpp[/.]|Requested tokens (?:\(|exceed context window)"
                  r"|Failed to create llama_context"
                  r"|Failed to load model from file|llama_decode returned|Llama\._create_completion"
                  r"|\bLlama\(model_path=")
TEXT = gated(r"""['"]text['"]\s*:\s*(['"])(.*?)(?<!\\)\1""")
FINISH = gated(r"""['"]finish_reason['"]\s*:\s*['"](\w+)['"]""")

# the binding's signature lines (a vote; never takes the line)
SIGNATURE_KIND = LineKind("lcp_signature", (SIGNATURE,),
                          (r"Model metadata|chat format|chat template|eos_token|Llama\.|llama_cpp",
                           r"Llama\(model_path="),
                          phase="vote")
# its completion dicts, on a line no other kind took
OUTPUT_KIND = LineKind("lcp_output", (TEXT, FINISH), (r"'text': |\"text\": |finish_reason",),
                       phase="rest")
