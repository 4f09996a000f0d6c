"""Redaction: take personal details out of a report or recording so it can go into a public issue.

What goes: home directories (/home/NAME, /Users/NAME, C:\\Users\\NAME → ~), the user and host names
the caller passes in (the CLI passes this machine's) and those the input shows (journald / syslog,
docker compose and kubectl prefixes, shell prompts, URLs, home folders: doctor/core/redact_patterns.py),
removed wherever else they appear too, IPv4 / IPv6 addresses and MAC addresses, e-mail addresses,
API keys and tokens, GPU and machine UUIDs, and the prompt and generated text (replaced by a note
saying how long they were; text a finding quotes from them, such as a loop's span, and a request
log's quoted prompt or reply go too). In a
watch recording each generated token becomes a stable pseudonym instead (`event`): the same token
always gets the same one, so a replay still finds a loop, but they cannot be turned back into text.
What stays: everything needed for the diagnosis — numbers, settings, model names, the engine's own
messages.

Pure: the caller supplies the names to hide.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import ipaddress
import os
import re
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from doctor.core import redact_patterns as patterns
from doctor.core.catalog import is_label
from doctor.core.facts import Event, Fact, Facts, Session, Value
from doctor.core.format import format_value
from doctor.core.report import Evidence, Report, SessionFindings

# a home folder where a path starts (not /srv/backup/home/NAME: there only NAME goes)
_PATH_START = r"(?<![\w.~/\\-])"
_HOME = re.compile(_PATH_START
                   + r"(?P<pre>/home/|/Users/|/var/home/|[A-Za-z]:\\\\?Users\\\\?)(?P<name>[^/\\\s'\"]+)")
_HOME_INSIDE = re.compile(r"(?<=[\w.-])(?P<pre>/home/|/Users/)(?P<name>[^/\\\s'\"<>]+)")
_IPV4 = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])")
_IPV6_CANDIDATE = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%\w+)?(?![\w:])")
_MAC = re.compile(r"(?<![\w:])(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}(?![\w:])")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.-]+")  # the look-behind keeps it linear on long words
_UUID = re.compile(r"\b(?:GPU-|MIG-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
# facts and event kinds whose text is the user's prompt or the model's output
TEXT_FACTS = ("run.output_text", "run.repeat_span", "config.prompt_text")
# keys of recorded JSON (watch recordings) that hold prompt or generated text
GENERATED_KEYS = ("prompt", "token", "output_text", "text_generated")
TOKEN_KEY = "token"  # a generated token in a watch event: pseudonymised by `event`
MIN_QUOTED = 3  # prompt / output text shorter than this is not looked for inside other text
MIN_LINE = 12  # a line of the output this long is looked for on its own too


def _ipv6(m: re.Match[str]) -> str:
    """Replace a candidate only if it really is an IPv6 address (timestamps like 12:34:56 are not)."""
    text = m.group(0)
    try:
        ipaddress.IPv6Address(text.split("%", 1)[0])
    except ValueError:
        return text
    return "<ip>"


@dataclass
class Redactor:
    users: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    prompts: bool = True  # replace prompts and generated text
    homes: list[str] = field(default_factory=list)  # this user's home folders ($HOME), wherever they are

    def __post_init__(self) -> None:
        self._given = {n for n in {*self.users, *self.hosts} if n and len(n) >= 2 and n not in ("root",)}
        self._learned: set[str] = set()  # host and user names the input showed (see `learn_text`)
        self._containers: set[str] = set()  # docker compose services the input's prefixes named
        self._names_re: re.Pattern[str] | None = None
        self._names_dirty = True
        homes = [h.rstrip("/\\") for h in self.homes if h and len(h.rstrip("/\\")) > 1]
        self._homes = re.compile(_PATH_START + "(?:" + "|".join(
            re.escape(h) for h in sorted(homes, key=len, reverse=True)) + r")(?=[/\\]|$|[\s'\"),;:])") \
            if homes else None
        self._quoted: set[str] = set()  # prompt / generated text learned from facts (see `learn`)
        self._quoted_re: re.Pattern[str] | None = None
        self._key = os.urandom(16)  # pseudonym key: random, never written anywhere

    @property
    def _names(self) -> re.Pattern[str] | None:
        if self._names_dirty:
            names = [re.escape(n) for n in self._given | self._learned]
            self._names_re = re.compile(r"(?<![\w-])(?:" + "|".join(sorted(names, key=len, reverse=True))
                                        + r")(?![\w-])") if names else None
            self._names_dirty = False
        return self._names_re

    def _learn_name(self, kind: str, name: str) -> None:
        if kind == "container":
            self._containers.add(name)
            return
        if name not in self._learned and name not in self._given:
            self._learned.add(name)
            self._names_dirty = True

    def learn_text(self, value: str) -> None:
        """Remember the host and user names this text shows (a journald prefix, a URL, a home folder),
        so that they go wherever else they appear, before any text is redacted."""
        if not value:
            return
        patterns.sub_prefixes(value, self._learn_name)
        patterns.sub_hosts(value, self._learn_name)
        for m in _HOME.finditer(value):
            if patterns.is_personal(m.group("name")):
                self._learn_name("user", m.group("name"))

    def learn(self, facts: Facts) -> None:
        """Remember the prompt and generated text these facts hold, so that any other text quoting
        them (a loop's span in a finding's message or evidence) is redacted as well."""
        for name in TEXT_FACTS:
            value = facts.value(name)
            if isinstance(value, str) and len(value.strip()) >= MIN_QUOTED:
                # the whole text, and each of its longer lines (a log quotes the output line by line)
                for part in {value, *(line.strip() for line in value.splitlines() if len(line.strip()) >= MIN_LINE)}:
                    if part not in self._quoted:
                        self._quoted.add(part)
                        self._quoted_re = None
        for fact in facts:
            self.learn_text(fact.source.text or "")
            if isinstance(fact.value, str) and fact.name not in TEXT_FACTS and not is_label(fact.name):
                self.learn_text(fact.value)
        for event in facts.events():
            self.learn_text(event.text)
        for text in facts.inputs:
            self.learn_text(text)
        for session in facts.sessions:  # earlier engine sessions quote their own prompts and output
            if session.facts is not None:
                self.learn(session.facts)

    def _unquote(self, value: str) -> str:
        if self._quoted_re is None:
            parts = []
            for secret in sorted(self._quoted, key=len, reverse=True):
                body = re.escape(secret)
                parts.append((r"(?<!\w)" if secret[0].isalnum() else "") + body
                             + (r"(?!\w)" if secret[-1].isalnum() else ""))
            self._quoted_re = re.compile("|".join(parts))
        return self._quoted_re.sub(lambda m: self.generated(m.group(0)), value)

    def text(self, value: str) -> str:
        if not value:
            return value
        if self._quoted and self.prompts:
            value = self._unquote(value)
        if self.prompts:
            value = patterns.sub_quoted_text(value, self.generated)
        value = patterns.sub_prefixes(value, self._learn_name)
        value = patterns.sub_containers(value, self._containers)
        value = patterns.sub_hosts(value, self._learn_name)
        value = patterns.sub_secrets(value)
        out = self._homes.sub("~", value) if self._homes is not None else value
        out = _HOME.sub(lambda m: "~" if "\\" not in m.group("pre") else "%USERPROFILE%", out)
        out = _HOME_INSIDE.sub(lambda m: m.group("pre") + "<user>", out)
        out = _EMAIL.sub("<email>", out)
        out = _UUID.sub("<uuid>", out)
        out = _MAC.sub("<mac>", out)
        out = _IPV4.sub("<ip>", out)
        out = _IPV6_CANDIDATE.sub(_ipv6, out)
        names = self._names
        if names is not None:
            out = names.sub("<redacted>", out)
        return out

    def generated(self, value: str) -> str:
        return f"<{len(value)} characters of prompt or output removed>" if self.prompts else self.text(value)

    # -- whole objects -------------------------------------------------------------------------
    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value

    def facts(self, facts: Facts) -> Facts:
        out = Facts()
        for fact in facts:
            src = fact.source
            src = type(src)(src.kind, src.name, src.line, self.text(src.text) if src.text else src.text)
            value: Value
            if fact.name in TEXT_FACTS and isinstance(fact.value, str):
                value = self.generated(fact.value)
            elif is_label(fact.name):
                value = fact.value  # "vm", "nvme", "q8_0": a label is kept even if a host is named so
            else:
                value = self.value(fact.value)
            out.add(Fact(fact.name, value, fact.unit, src, fact.unknown))
        for event in facts.events():
            out.add_event(Event(event.kind, event.line, self.text(event.text), event.source, event.phase,
                                {k: self.value(v) for k, v in event.data.items()},
                                tuple((n, self.text(t)) for n, t in event.placed_by)))
        for kind, count in facts.event_counts.items():
            kept = len(facts.events(kind))
            if count > kept:
                out._event_counts[kind] = count  # keep the totals beyond the kept events
        out.events_observed = facts.events_observed
        out.inputs = [self.text(i) for i in facts.inputs]
        out.sessions = [self.session(s) for s in facts.sessions]
        return out

    def session(self, s: Session) -> Session:
        """An engine session: its input name, its start line and (an earlier session's) own facts."""
        return Session(s.number, self.text(s.input), s.first_line, s.last_line, s.started_by,
                       self.text(s.text) if s.text else s.text, s.engine,
                       self.facts(s.facts) if s.facts is not None else None)

    def report(self, report: Report) -> Report:
        self.learn(report.facts)
        for finding in report.all_findings():
            for ev in finding.evidence:
                self.learn_text(ev.text)
        redacted = copy.copy(report)
        redacted.facts = self.facts(report.facts)
        redacted.findings = [self._walk(copy.deepcopy(f)) for f in report.findings]
        redacted.assessment = self._walk(copy.deepcopy(report.assessment)) if report.assessment else None
        redacted.sessions = [
            SessionFindings(self.session(s.session), redacted.findings if i == len(report.sessions) - 1
                            else [self._walk(copy.deepcopy(f)) for f in s.findings])
            for i, s in enumerate(report.sessions)]
        redacted.errors = [self.text(e) for e in report.errors]
        redacted.notes = [self.text(n) for n in report.notes]
        redacted.verification = self._walk(copy.deepcopy(report.verification)) if report.verification else None
        return redacted

    def json(self, doc: Any) -> Any:
        """Redact a JSON-shaped object (a recording line, a report document)."""
        if isinstance(doc, dict):
            return {k: (self.generated(v) if k in GENERATED_KEYS and isinstance(v, str) else self.json(v))
                    for k, v in doc.items()}
        if isinstance(doc, list):
            return [self.json(v) for v in doc]
        if isinstance(doc, str):
            return self.text(doc)
        return doc

    def event(self, doc: Any) -> Any:
        """Redact one watch event as JSON (a recording line, an ndjson line, the recording's header).

        Like `json`, except that generated tokens become pseudonyms (see the module docstring)."""
        if isinstance(doc, dict):
            return {k: (self.pseudonym(v) if k == TOKEN_KEY and isinstance(v, str) and self.prompts
                        else self.generated(v) if k in GENERATED_KEYS and isinstance(v, str)
                        else self.event(v)) for k, v in doc.items()}
        if isinstance(doc, list):
            return [self.event(v) for v in doc]
        if isinstance(doc, str):
            return self.text(doc)
        return doc

    def pseudonym(self, token: str) -> str:
        """The same word for the same token text (whitespace around it kept); not reversible."""
        core = token.strip()
        if not core:
            return token
        lead = token[: len(token) - len(token.lstrip())]
        trail = token[len(token.rstrip()):]
        digest = hashlib.blake2b(core.encode("utf-8", "surrogatepass"), key=self._key, digest_size=4).hexdigest()
        return f"{lead}t{digest}{trail}"

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, Evidence) and obj.fact is not None and is_label(obj.fact):
            # the fact's value is a label: keep "name = value", redact what follows (the source)
            head = f"{obj.fact} = {format_value(obj.value, obj.unit)}"
            if obj.text.startswith(head):
                obj.text = head + self.text(obj.text[len(head):])
                obj.source = self.text(obj.source) if obj.source else obj.source
                return obj
        if is_dataclass(obj) and not isinstance(obj, type):
            for f in fields(obj):
                setattr(obj, f.name, self._walk(getattr(obj, f.name)))
            return obj
        if isinstance(obj, list):
            return [self._walk(v) for v in obj]
        if isinstance(obj, dict):
            return {k: self._walk(v) for k, v in obj.items()}
        if isinstance(obj, str):
            return self.text(obj)
        return obj


def for_this_machine(prompts: bool = True) -> Redactor:
    """A redactor for the current user and host (reads the user and host names; no other I/O)."""
    import getpass
    import socket

    users: list[str] = []
    hosts: list[str] = []
    with contextlib.suppress(KeyError, OSError):
        users.append(getpass.getuser())
    with contextlib.suppress(OSError):
        host = socket.gethostname()
        hosts += [host, host.split(".")[0]]
    homes: list[str] = []
    for home in (os.environ.get("HOME"), os.path.expanduser("~")):
        if home and home not in homes:
            homes.append(home)
    return Redactor(users=users, hosts=hosts, prompts=prompts, homes=homes)
