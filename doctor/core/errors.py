"""The one exception family. The CLI edge turns each into a one-line message and an exit code."""

from __future__ import annotations


class DoctorError(Exception):
    """Base of every error llm-doctor reports to the user. `exit_code` is what the CLI returns."""

    exit_code = 2

    def one_line(self) -> str:
        """The message on one line, made inert: it may quote a file name, a rule field or a log line."""
        from doctor.core.sanitize import inert

        text = inert(" ".join(str(self).split()), limit=2000)
        return text or self.__class__.__name__


class UsageError(DoctorError):
    """Bad command-line arguments or a combination that cannot work."""


class InputError(DoctorError):
    """A log, recording, saved scan or model file that cannot be read as what it claims to be."""


class RuleError(DoctorError):
    """A rule file that does not load or validate. Names file, line and field."""

    def __init__(self, path: str, line: int | None, field: str | None, message: str) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        where = path + (f":{line}" if line else "")
        what = f" [{field}]" if field else ""
        super().__init__(f"{where}{what}: {message}")


class EngineError(DoctorError):
    """The embedded engine could not run (missing package, model not found, child crashed early)."""


class OutputError(DoctorError):
    """The output could not be written (a full disk, a file closed under us). A reader that went
    away (a closed pipe) is not one: that ends quietly."""


class InternalError(DoctorError):
    """A bug in llm-doctor itself."""

    exit_code = 3


class FactNameError(InternalError):
    """A fact name the fact catalogue does not know, or a unit that is not the catalogue's. Raised only
    under the strict switch (doctor.core.facts.STRICT: the test suite); a user's run keeps such a fact."""
