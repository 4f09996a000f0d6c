"""The host ran out of memory and the engine was killed for it: the kernel's OOM killer, systemd's and a
container runtime's report of it, and a death by SIGKILL (the killer's signal) or a Windows memory status.

People paste the last lines before a server vanished: `Out of memory: Killed process 4123 (llama-server)
total-vm:..., anon-rss:15623412kB, ...` from dmesg, systemd's `A process of this unit has been killed by
the OOM killer.`, a shell's bare `Killed`, docker's `exited with code 137`. No engine printed them, so no
engine parser reads them. This parser makes one `host_oom_kill` event per input (the first such line,
the others as its support), with the phase it fell in: `runtime` when the log shows the engine had
finished loading or served before it (a served line, or a run fact from an earlier line), else
`weights`: the memory a load needs is the common way to exceed RAM. A kill right after llama-server
saved a prompt state to its host cache says so (`after: prompt_save`). A bare SIGKILL is only evidence
where no other out-of-memory event explains the end.

Formats: Linux mm/oom_kill.c (`%s: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, ...` with
"Out of memory" or "Memory cgroup out of memory"; before 4.x `Out of memory: Kill process %d (%s) score
%u or sacrifice child` then `Killed process %d (%s) total-vm:...`; `oom-kill:constraint=...,task=%s,pid=%d`;
`%s invoked oom-killer: gfp_mask=...`), systemd src/core (`A process of this unit has been killed by the
OOM killer.`, `Failed with result 'oom-kill'.`, `Main process exited, code=killed, status=9/KILL`),
docker inspect / kubectl describe (`"OOMKilled": true`, `Reason: OOMKilled`), the endings of
doctor/sources/logs/endings.py (SIGKILL, 137, -9, STATUS_NO_MEMORY / STATUS_COMMITMENT_LIMIT). The served
lines: llama-server (`main: server is listening on`, `main: model loaded`, `prompt_save:`), Ollama (`llama
runner started in`), vLLM (`Application startup complete`), SGLang (`The server is fired up and ready to
roll`). Casts no engine vote.

Pure: text in, events out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.core.facts import Event, Facts, Scalar
from doctor.sources.logs import endings
from doctor.sources.logs.base import LineKind, LineKinds, LogParser, reads
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated

KERNEL_KILL = gated(r"(?:Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?): "
                    r"Kill(?:ed)? process (\d+) \(([^)]*)\)(?:.*?anon-rss:(\d+)kB)?")
KILLED_PROCESS = gated(r"\bKilled process (\d+) \(([^)]*)\)(?:.*?anon-rss:(\d+)kB)?")
OOM_KILL = gated(r"\boom-kill:.*?\btask=([^,\s]*),pid=(\d+)")
INVOKED = gated(r"(\S+) invoked oom-killer: ")
SYSTEMD = gated(r"(?:A process of this unit has been|[Tt]he process has been) killed by the OOM killer"
                r"|Failed with result 'oom-kill'|code=killed, status=9/KILL")
CONTAINER = gated(r"\bOOMKilled\b(?:\W+true\b|\s*$)?|Reason:\s+OOMKilled")
SERVED = gated(r"server is listening on|main: model loaded|\bprompt_save: |llama runner started in"
               r"|llama-server started in|Application startup complete|fired up and ready to roll")
# a process that is no engine (the journal holds every program's OOM kills): its kill is not this run's
ENGINE_PROCESS = re.compile(r"llama|python|ollama|ggml|vllm|text-gen|kobold|lms|lm.?studio|sglang|pt_main_thread"
                            r"|tgi|uvicorn|ray::|server", re.IGNORECASE)
# the facts a run sets once it has loaded and serves (from a line before the kill: it had got that far)
SERVING_FACTS = ("run.prompt_tokens", "run.prefill_ms", "run.prefill_tps", "run.decode_tps", "run.decode_tokens",
                 "run.requests", "run.tokens_used", "run.generated_tokens", "run.load_ms",
                 "server.ollama.runner_start_s")
# other out-of-memory events: a SIGKILL after them is their ending, not evidence of its own
OTHER_OOMS = ("oom", "alloc_failed")
KEPT = 8

KERNEL_KIND = LineKind("kernel", (KERNEL_KILL, KILLED_PROCESS, OOM_KILL, INVOKED),
                       (r"[Oo]ut of memory: Kill|Killed process \d+ \(", r"oom-kill:", r"invoked oom-killer"))
SYSTEMD_KIND = LineKind("systemd", (SYSTEMD,), (r"killed by the OOM killer|'oom-kill'|code=killed, status=9/",))
CONTAINER_KIND = LineKind("container", (CONTAINER,), (r"OOMKilled",))
SERVED_KIND = LineKind("served", (SERVED,), (r"server is listening on|main: model loaded|prompt_save: "
                                             r"|llama runner started in|llama-server started in"
                                             r"|Application startup complete|fired up and ready to roll",))
ENDING_KIND = LineKind("ending", (endings.ENDING,), endings.FRAGMENTS)
KINDS = LineKinds(KERNEL_KIND, SYSTEMD_KIND, CONTAINER_KIND, SERVED_KIND, ENDING_KIND)


@dataclass(slots=True)
class _Kill:
    line: LogLine
    reporter: str  # kernel | systemd | container | signal | windows
    process: str = ""
    pid: int | None = None
    rss_kib: int | None = None


@dataclass(slots=True)
class _State:
    kills: list[_Kill] = field(default_factory=list)
    served: LogLine | None = None  # the latest served line
    prompt_save: LogLine | None = None  # the latest prompt_save line


class HostOomParser(LogParser):
    alone = True  # its lines go to it alone unless another parser's triggers select them too (logs/router.py)
    name = "host_oom"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()

    def _keep(self, kill: _Kill) -> None:
        if len(self.s.kills) < KEPT:
            self.s.kills.append(kill)

    @reads(KERNEL_KIND)
    def _kernel(self, line: LogLine) -> bool:
        t = line.text
        m = KERNEL_KILL.search(t) or KILLED_PROCESS.search(t)
        if m:
            if ENGINE_PROCESS.search(m.group(2)):
                self._keep(_Kill(line, "kernel", m.group(2), int(m.group(1)),
                                 int(m.group(3)) if m.group(3) else None))
            return True
        m = OOM_KILL.search(t)
        if m:
            if ENGINE_PROCESS.search(m.group(1)):
                self._keep(_Kill(line, "kernel", m.group(1), int(m.group(2))))
            return True
        return INVOKED.search(t) is not None  # the victim is named on the lines after it

    @reads(SYSTEMD_KIND)
    def _systemd(self, line: LogLine) -> bool:
        if SYSTEMD.search(line.text):
            self._keep(_Kill(line, "systemd"))
            return True
        return False

    @reads(CONTAINER_KIND)
    def _container(self, line: LogLine) -> bool:
        t = line.text
        if CONTAINER.search(t) and "false" not in t.lower():
            self._keep(_Kill(line, "container"))
            return True
        return False

    @reads(SERVED_KIND)
    def _served(self, line: LogLine) -> bool:
        if not SERVED.search(line.text):
            return False
        self.s.served = line
        if "prompt_save" in line.text:
            self.s.prompt_save = line
        return True

    @reads(ENDING_KIND)
    def _ending(self, line: LogLine) -> bool:
        found = endings.read(line.text)
        if found is None or not found[0].memory:
            return False
        self._keep(_Kill(line, "signal" if found[0] is endings.KILL else "windows"))
        return True

    def summarize(self, facts: Facts) -> None:
        kills = self.s.kills
        if not kills:
            return
        strong = [k for k in kills if k.reporter in ("kernel", "systemd", "container", "windows")]
        if not strong and any(facts.events(kind) for kind in OTHER_OOMS):
            return  # the signal ended an out-of-memory another rule explains
        first = (strong or kills)[0]
        n = first.line.number
        served = self._served_before(facts, n)
        before = self._read_before(facts, n)
        phase = "runtime" if served is not None else "weights"
        if first.reporter != "signal":
            confidence = "high" if served is not None or before else "medium"
        else:
            confidence = "medium" if served is not None or before else "low"
        data: dict[str, Scalar] = {"reporter": first.reporter, "confidence": confidence}
        if first.process:
            data["process"] = first.process
        rss = next((k.rss_kib for k in kills if k.rss_kib), None)
        if rss:
            data["rss_bytes"] = rss * 1024
        if served is not None:
            data["served_line"] = served
        save = self.s.prompt_save
        if save is not None and save.number < n:
            data["after"] = "prompt_save"
        facts.add_event(Event(kind="host_oom_kill", line=n, text=first.line.raw[:400], source=self.name,
                              phase=phase, data=data))
        for kill in kills:  # the other lines that report the same kill
            if kill is not first:
                facts.add_event(Event(kind="host_oom_evidence", line=kill.line.number, text=kill.line.raw[:400],
                                      source=self.name, phase=phase, data={"reporter": kill.reporter}))

    def _served_before(self, facts: Facts, line: int) -> int | None:
        """The line that shows the engine serving before `line` (a served line, or a run fact read earlier)."""
        served = self.s.served
        if served is not None and served.number < line:
            return served.number
        found = [f.source.line for name in SERVING_FACTS if (f := facts.get(name)) is not None
                 and f.source.kind == "log" and f.source.line is not None and f.source.line < line]
        return min(found) if found else None

    @staticmethod
    def _read_before(facts: Facts, line: int) -> bool:
        """Whether some engine line before the kill was read (the load had begun)."""
        return any(f.source.kind == "log" and f.source.line is not None and f.source.line < line
                   and f.source.name not in ("host_oom", "scanner", "detect") for f in facts)
