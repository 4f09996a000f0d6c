# ruff: noqa: E501, E402 - YAML templates, one rule text per line
"""Write rules/LD*-catalogue.yaml: the generic rules on catalogued messages, one per class and level.

    PYTHONPATH=$PWD python scripts/catalogue_rules.py   (then: llm-doctor rules test)
"""
from pathlib import Path

CLASSES = [  # (id, class, title)
    ("LD190", "io.slow_load", "An engine message says the model loads slowly"),
    ("LD290", "context.overflow", "An engine message says a request did not fit the context"),
    ("LD291", "context.oversized", "An engine message says the context is larger than it can use"),
    ("LD390", "oom.weights", "An engine message says the model weights did not fit in memory"),
    ("LD391", "oom.kv_cache", "An engine message says the KV cache did not fit in memory"),
    ("LD392", "oom.compute", "An engine message says the compute buffers did not fit in memory"),
    ("LD393", "oom.runtime", "An engine message says memory ran out while serving"),
    ("LD394", "oom.paging", "An engine message says memory could not be locked or paged"),
    ("LD395", "oom.prompt_cache", "An engine message says the prompt cache ran out of room"),
    ("LD396", "oom.concurrency", "An engine message says too many sequences for the memory"),
    ("LD490", "sampling.repetition", "An engine message says the output repeats"),
    ("LD590", "offload.none", "An engine message says no GPU is used"),
    ("LD591", "offload.partial", "An engine message says only part of the model is on the GPU"),
    ("LD790", "kv.preemption", "An engine message says requests were preempted for KV cache room"),
    ("LD791", "kv.dtype", "An engine message says the KV cache type was changed or refused"),
    ("LD792", "serving.saturation", "An engine message says the server is saturated"),
    ("LD890", "decode.jitter", "An engine message says decoding was delayed"),
    ("LD990", "model.corrupt", "An engine message says the model was refused"),
    ("LD991", "engine.crash", "An engine message says the engine failed"),
]
OOM = ["oom", "alloc_failed"]
FAILED = ["crash", "crash_cause", "oom", "alloc_failed", "load_failed", "gpu_init_failed", "context_failed",
          "decode_failed", "kv_capacity", "no_gpu", "prompt_too_long", "ctx_full"]
# per class: the event kinds whose rules already judge that kind of trouble (a message of the class on another
# line of the same incident is then theirs to report)
COVERED = {
    "context.overflow": ["ctx_full", "context_shift", "truncation", "prompt_too_long"],
    "context.oversized": ["ctx_over_train"],
    "offload.none": ["no_gpu", "gpu_init_failed"], "offload.partial": ["no_gpu", "gpu_init_failed"],
    "kv.preemption": ["preempted", "kv_capacity"], "model.corrupt": ["load_failed"],
    "sampling.repetition": ["repetition"], "engine.crash": FAILED, "oom.kv_cache": [*OOM, "kv_capacity"],
}
FILES = {"1": "LD1-catalogue.yaml", "2": "LD2-catalogue.yaml", "3": "LD3-catalogue.yaml", "4": "LD4-catalogue.yaml",
         "5": "LD5-catalogue.yaml", "7": "LD7-catalogue.yaml", "8": "LD8-catalogue.yaml", "9": "LD9-catalogue.yaml"}
HEAD = """# {key}xx - catalogued engine messages of this family's classes that no other rule reads.
# One rule per class: a warning or error line of the message catalogue (doctor/sources/catalogue/messages)
# whose class is this rule's, on a line no engine parser read already (event data known: false), is evidence
# for the class, unless an event another rule judges covers that kind of trouble (the same incident seen on
# another line: an OOM that ends in a crash); its fix is the catalogue entry's, in the engine's words.
# Healthy and informational messages never become such events. (The family and its classes: rules/families.yaml.)
"""
RULE = """
- id: {id}
  slug: catalogued-{slug}-{level}
  class: {cls}
  severity: {severity}
  modes: [watch, analyze]
  title: {title}
  when:
    all:
      - events: {{kind: message, data: {{class: {cls}, level: {level}, known: false}}}}
{guard}
  confidence: {conf}
  message: >
    The engine printed {article} {level} catalogued as {cls}: {{event.text}}
  explain: >
    The message catalogue lists each engine's log and exception messages from its sources, with the
    class each one is evidence for. No other rule read this line, so it is reported as the engine
    said it, with the fix the catalogue gives for it (entry {{event.id}}).
  fix:
    text: "The fix the message catalogue gives for this line[[: {{event.fix}}]]."
    llama.cpp: "{{event.fix}}"
    llama-cpp-python: "{{event.fix}}"
    ollama: "{{event.fix}}"
    vllm: "{{event.fix}}"
    tgi: "{{event.fix}}"
  tests:
    - name: a catalogued {level} of the class
      events: [{{kind: message, line: 7, text: "{text}", data: {{id: {eid}, class: {cls}, level: {level}, engine: {engine}, known: false, fix: "see the engine's documentation"}}}}]
      expect: fired
      confidence: {conf}
    - name: the same message at the other level
      events: [{{kind: message, line: 7, text: "{text}", data: {{id: {eid}, class: {cls}, level: {otherlevel}, engine: {engine}, known: false, fix: "see the engine's documentation"}}}}]
      expect: ok
    - name: an engine parser read the line already
      events: [{{kind: message, line: 7, text: "{text}", data: {{id: {eid}, class: {cls}, level: {level}, engine: {engine}, known: true, fix: "see the engine's documentation"}}}}]
      expect: ok
{guard_test}    - name: a message of another class
      events: [{{kind: message, line: 7, text: "x", data: {{id: other.entry, class: {other}, level: error, engine: vllm, known: false, fix: "x"}}}}]
      expect: ok
"""

import sys

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from doctor.sources.catalogue import store

entries = store.entries()
out: dict[str, str] = {}
next_id: dict[str, int] = {}
for _rid, cls, title in CLASSES:
    key = _rid[2]
    for level, severity, conf in (("error", "warning", "medium"), ("warning", "info", "low")):
        found = [e for e in entries if e.meaning == cls and e.diagnostic and e.level == level]
        if not found:
            continue
        sample = found[0]
        n = next_id.setdefault(key, int(key) * 100 + 80)
        next_id[key] = n + 1
        other = "oom.weights" if cls != "oom.weights" else "engine.crash"
        text = sample.sample.replace("\\", "\\\\").replace('"', '\\"')
        out.setdefault(key, HEAD.format(key=f"LD{key}"))
        kinds = COVERED.get(cls, OOM if cls.startswith("oom.") else [])
        guard = "".join(f"      - not: {{events: {{kind: {k}}}}}\n" for k in kinds)
        guard_test = "" if not kinds else (
            f"    - name: another rule's event ({kinds[0]}) covers the incident\n"
            f"      events: [{{kind: message, line: 7, text: \"{text}\", data: {{id: {sample.id}, class: {cls}, "
            f"level: {level}, engine: {sample.engine}, known: false, fix: x}}}}, {{kind: {kinds[0]}, line: 9, text: y}}]\n"
            f"      expect: ok\n")
        out[key] += RULE.format(guard_test=guard_test, guard=guard.rstrip("\n"), id=f"LD{n}", slug=cls.replace(".", "-").replace("_", "-"), cls=cls,
                                title=title if level == "error" else title.replace("says", "warns"),
                                level=level, severity=severity, eid=sample.id, engine=sample.engine, text=text,
                                other=other, conf=conf, article="an" if level == "error" else "a",
                                otherlevel="warning" if level == "error" else "error")
for key, text in out.items():
    Path(ROOT, "rules", FILES[key]).write_text(text)
