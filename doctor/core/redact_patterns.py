"""What personal details look like inside log lines: the patterns `--redact` (doctor/core/redact.py) uses.

Core floor, pure. The shapes come from the tools that write them: journald's `short` and
`short-iso` outputs and BSD syslog (RFC 3164: `Mon DD HH:MM:SS HOST TAG[PID]:`), RFC 5424 syslog
(`<PRI>1 TIME HOST APP ...`), `docker compose logs` (`NAME  | line`), `kubectl logs --prefix`
(`[pod/NAME/CONTAINER] line`), shell prompts pasted with a log (`USER@HOST:~/dir$`), URLs
(`scheme://user:password@host:port`), the token formats the big hosts publish (Hugging Face `hf_`,
OpenAI `sk-`, GitHub `ghp_`/`github_pat_`, GitLab `glpat-`, Slack `xox?-`, AWS `AKIA`, Google `AIza`,
NVIDIA `nvapi-`, JWTs), `key=value` / `--flag value` secrets, and the request logs that quote a
prompt or a reply (vLLM's `Received request ID: prompt: '...', ..., prompt_token_ids: [...]`,
Ollama's debug `prompt="..."`, llama-server's verbose request and response bodies).

Each `sub_*` function returns the text with the detail replaced, and hands the host and user names
it saw to `learn` so the caller can remove them wherever else they appear.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_LEVELS = {"info", "warn", "warning", "error", "err", "debug", "trace", "critical", "fatal", "notice", "crit"}
# journald short / BSD syslog: TIME HOST TAG[PID]: (the PID is optional: `kernel:`); journald short-iso:
# ISO-TIME HOST TAG[PID]: (the PID required there, so `2024-01-01 12:00:00 INFO name: msg` is not one)
_SYSLOG = re.compile(
    rf"^(?P<pre>(?:<\d{{1,3}}>)?{_MONTH} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? )(?P<host>[^\s\[\]:<>]+)"
    rf"(?= [^\s\[:]+(?:\[\d+\])?: )"
    rf"|^(?P<pre2>(?:<\d{{1,3}}>)?{_ISO} )(?P<host2>[^\s\[\]:<>]+)(?= [^\s\[:]+\[\d+\]: )", re.M)
_SYSLOG5424 = re.compile(rf"^(?P<pre><\d{{1,3}}>\d (?:{_ISO}|-) )(?P<host>[^\s<>]+)(?= )", re.M)
_COMPOSE = re.compile(r"^(?P<name>[A-Za-z0-9][\w.-]*)(?P<pad> +\| )", re.M)
_KUBECTL = re.compile(r"\[pod/[^/\]\s]+(?:/[^\]\s]+)?\]|(?<![\w/])pod/[a-z0-9][a-z0-9.-]*")
_SHELL = re.compile(r"^(?P<pre>\s*(?:\([\w.-]+\)\s*)?)(?P<user>[a-z_][\w.-]*)@(?P<host>[\w.-]+)"
                    r"(?P<post>:\s?[~/][^\s$#]*\s?[$#] )", re.M)
_URL = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]{1,15}://)(?:(?P<auth>[^@/\s?#'\"<>]+)@)?"
                  r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s/:?#'\"<>\[\]{}]+)")
# a host name given as a setting: vLLM's `args: Namespace(host='NAME', ...)`, logfmt `host=NAME`
_HOST_KEY = re.compile(r"(?P<key>(?<![\w-])(?:host|hostname|server_name|node_name)[\"']?\s*[:=]\s*[\"']?)"
                       r"(?P<host>[A-Za-z0-9][\w.-]*[A-Za-z][\w.-]*)")
# hosts whose names are public knowledge (model hubs, code hosts, vendors' docs) and placeholders
PUBLIC_DOMAINS = ("huggingface.co", "hf.co", "github.com", "githubusercontent.com", "github.io", "gitlab.com",
                  "pypi.org", "pythonhosted.org", "python.org", "pytorch.org", "nvidia.com", "amd.com", "intel.com",
                  "apple.com", "microsoft.com", "ollama.com", "ollama.ai", "vllm.ai", "sglang.ai", "lmstudio.ai",
                  "readthedocs.io", "docker.io", "docker.com", "ghcr.io", "nvcr.io", "modelscope.cn", "openai.com",
                  "anthropic.com", "arxiv.org", "kernel.org", "example.com", "example.org", "example.net")
# names too common to mean one machine or one person: the prefix goes, the word elsewhere stays
GENERIC_NAMES = {"localhost", "host", "hostname", "server", "ubuntu", "debian", "fedora", "centos", "root",
                 "user", "admin", "docker", "container", "default", "local", "desktop", "runner", "worker", "app",
                 "api", "model", "models", "llm", "gpu", "node", "master", "main", "home", "shared", "guest"}

_TOKENS = re.compile(
    r"(?<![\w-])(?:hf_[A-Za-z0-9]{30,}|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_\w{30,}|glpat-[\w-]{20,}|xox[abprs]-[\w-]{10,}|AKIA[0-9A-Z]{16}|AIza[\w-]{35}"
    r"|nvapi-[\w-]{20,}|eyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,})")
_BEARER = re.compile(r"(?i)(?P<key>\b(?:Bearer|Basic))\s+[A-Za-z0-9._~+/=-]{8,}")
_SECRET_KEY = (r"[\w-]*?(?:api[_-]?key|apikey|access[_-]?key|secret(?:[_-]?key)?|password|passwd"
               r"|(?:auth|access|hf|hub|api|bearer|refresh|session)[_-]?token|(?<![\w-])token)")
_KEY_VALUE = re.compile(rf"(?i)(?P<key>(?<![\w-]){_SECRET_KEY})(?P<sep>[\"']?\s*[:=]\s*[\"']?)"
                        r"(?P<value>[^\s\"',;}\]<]{6,})")
_FLAG_VALUE = re.compile(r"(?i)(?P<key>--(?:api-key|hf-token|token|api-token|password|secret))(?P<sep>[= ]+)"
                         r"(?P<value>[^\s\"'<]+)")
# request logs that quote the prompt or the reply: the quoted text goes, its length stays
_TEXT_FIELD = re.compile(
    r"(?P<key>(?<![\w-])[\"']?(?:prompt|inputs?|content|text|output|response|completion|generated_text)[\"']?"
    r"\s*[:=]\s*)(?P<q>['\"])(?P<body>(?:\\.|(?!(?P=q))[^\\\n])*)(?P<end>(?P=q)|$)", re.M)
_TOKEN_IDS = re.compile(r"(?P<key>(?<![\w-])[\"']?(?:prompt_token_ids|token_ids|output_token_ids)[\"']?\s*[:=]\s*)"
                        r"\[[\d,\s]*\]?")

_REMOVED = re.compile(r"<\d+ characters of prompt or output removed>")
Learn = Callable[[str, str], None]  # (kind "host" | "user" | "container", name)


def is_personal(name: str) -> bool:
    """A name worth removing wherever it appears: not a placeholder, a level word or a common word."""
    bare = name.strip("[]").lower()
    return (len(bare) >= 3 and bare not in GENERIC_NAMES and bare not in _LEVELS and not name.isupper()
            and not name.startswith("<") and not re.fullmatch(r"[\d.:]+", name))


def public_host(host: str) -> bool:
    h = host.lower().rstrip(".")
    return (h in GENERIC_NAMES or host.isupper() or not re.search(r"[a-z]", h) or host.startswith(("<", "{", "$"))
            or any(h == d or h.endswith("." + d) for d in PUBLIC_DOMAINS))


def sub_prefixes(text: str, learn: Learn) -> str:
    """Host names in syslog / journald prefixes, compose service and kubectl pod prefixes, shell prompts."""
    def syslog(m: re.Match[str]) -> str:
        pre, host = (m.group("pre"), m.group("host")) if m.group("pre") is not None else (m.group("pre2"),
                                                                                           m.group("host2"))
        if host.lower() in _LEVELS:
            return m.group(0)
        if is_personal(host):
            learn("host", host)
        return pre + "<host>"

    def compose(m: re.Match[str]) -> str:
        if m.group("name").lower() in _LEVELS:
            return m.group(0)
        learn("container", m.group("name"))
        return "<container>" + m.group("pad")

    def shell(m: re.Match[str]) -> str:
        for kind in ("user", "host"):
            if is_personal(m.group(kind)):
                learn(kind, m.group(kind))
        return f"{m.group('pre')}<user>@<host>{m.group('post')}"

    if "|" in text:
        text = _COMPOSE.sub(compose, text)
    if "pod/" in text:
        text = _KUBECTL.sub(lambda m: "[pod/<pod>]" if m.group(0).startswith("[") else "pod/<pod>", text)
    if "@" in text:
        text = _SHELL.sub(shell, text)
    text = _SYSLOG.sub(syslog, text)
    if text.startswith("<"):
        text = _SYSLOG5424.sub(syslog, text)
    return text


def sub_containers(text: str, names: set[str]) -> str:
    """A compose service prefix seen at a line's start, where lines were joined (a folded traceback)."""
    if not names or "|" not in text:
        return text
    pattern = r"(?<![\w.-])(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?= +\| )"
    return re.sub(pattern, "<container>", text)


def sub_hosts(text: str, learn: Learn) -> str:
    """A URL's user and password, and its host unless the host is public (huggingface.co) or a placeholder;
    a host name given as a setting (`host='NAME'`)."""
    def keyed(m: re.Match[str]) -> str:
        host = m.group("host")
        if public_host(host) or host.lower() in ("none", "null", "true", "false"):
            return m.group(0)
        if is_personal(host):
            learn("host", host)
        return m.group("key") + "<host>"

    if "host" in text or "name" in text:
        text = _HOST_KEY.sub(keyed, text)
    if "://" not in text:
        return text

    def url(m: re.Match[str]) -> str:
        host = m.group("host")
        auth = "<credentials>@" if m.group("auth") else ""
        if public_host(host):
            return m.group("scheme") + auth + host
        if is_personal(host):
            learn("host", host)
        return m.group("scheme") + auth + "<host>"

    return _URL.sub(url, text)


def sub_secrets(text: str) -> str:
    """API keys and tokens: the known formats anywhere, and the value of any key or flag named like a secret."""
    text = _TOKENS.sub("<secret>", text)
    text = _BEARER.sub(lambda m: m.group("key") + " <secret>", text)

    def keyed(m: re.Match[str]) -> str:
        value = m.group("value")
        if not re.search(r"[A-Za-z]", value) and len(value) < 16:
            return m.group(0)  # `token: 1234`: a count or a token id, not a secret
        return m.group("key") + m.group("sep") + "<secret>"

    text = _FLAG_VALUE.sub(keyed, text)
    return _KEY_VALUE.sub(keyed, text)


def sub_quoted_text(text: str, removed: Callable[[str], str]) -> str:
    """The prompt or reply a request log quotes (and the token ids that spell it) -> `removed(body)`."""
    text = _TEXT_FIELD.sub(lambda m: m.group(0) if not m.group("body") or _REMOVED.fullmatch(m.group("body")) else
                           m.group("key") + m.group("q") + removed(m.group("body")) + m.group("end"), text)
    return _TOKEN_IDS.sub(lambda m: m.group("key") + "[<token ids removed>]", text)
