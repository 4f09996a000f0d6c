"""The way into the log readers (the sources floor): a whole input - a file, standard input, a gunzipped file, a
pasted post - read to its facts.

`analyze_stream` reads the input in fixed-size reads, so memory stays flat on logs of any size: a paste is
normalised first (doctor/core/paste.py), a big input is read with worker processes where cores are free
(doctor/sources/logs/parallel.py: the same facts, byte for byte; `LLM_DOCTOR_WORKERS=0` reads it here alone),
any other input by one `LogAnalyzer` (doctor/sources/logs/analyze.py, `read_to_end`: the serial path, the
reference); a small one (a pasted post, at most MAX_PROSE bytes) is read for its prose too. Kept apart from the
analyzer so that the parallel path, which drives the analyzer too, sits between them (no module imports another
that imports it back).

Pure apart from reading the given stream.
"""

from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO

from doctor.core.facts import Facts
from doctor.core.paste import PASTE_MAX, looks_pasted, normalise_paste
from doctor.sources.logs.analyze import LogAnalyzer, read_to_end
from doctor.sources.logs.line import decode
from doctor.sources.logs.memory import map_big_buffers
from doctor.sources.logs.stream import CHUNK, open_input, peek_head, read_upto, rewindable

PARALLEL_MIN = 32 << 20  # a regular file this big is read with worker processes (doctor/sources/logs/parallel.py)
PIPE_READS = 12  # a stream that is not a file (standard input) with this many reads or more: with workers too


def analyze_stream(stream: BinaryIO, name: str = "input", chunk: int | None = None) -> Facts:
    """The whole input's facts, read in reads of `chunk` bytes (CHUNK); a big one with workers
    (doctor/sources/logs/parallel.py: the same facts); a small one (a pasted post, at most MAX_PROSE bytes) is
    read for its prose too (doctor/sources/logs/prose.py), after the engines' parsers and only for what they did
    not set."""
    from doctor.sources.logs.prose import MAX_PROSE, read_prose

    chunk = chunk or CHUNK
    map_big_buffers()  # each read's buffers given back when freed (doctor/sources/logs/memory.py)
    stream = open_input(rewindable(stream))
    first = b""
    head = peek_head(stream)
    if looks_pasted(head):  # framing, escapes or a wrap in its head: maybe a paste
        first = read_upto(stream, PASTE_MAX + 1)
        pasted = normalise_paste(first) if len(first) <= PASTE_MAX else None
        if pasted is not None:
            analyzer = LogAnalyzer(name, fold=False)
            analyzer.pasted = pasted
            analyzer.scanner.hold_last = True
            analyzer.feed(pasted.data)
            facts = analyzer.finish()
            if len(first) <= MAX_PROSE:  # the prose as the paste holds it, each line cited at the user's line
                read_prose(facts, decode(pasted.data), pasted.physical)
            return facts
    # a log too large to be a paste, whose head shows escaped quotes (a JSON log quoting messages)
    escaped = b'\\"' in head or b"\\'" in head
    reads = [first] if first else []  # what was read so far, in the reads it was read in
    if _file(stream):
        if _big_file(stream):
            from doctor.sources.logs import parallel

            read = parallel.analyze_file(stream, name, chunk, first=len(first), escaped=escaped)
            if read is not None:
                return read
    elif _workers_possible():  # standard input, a gunzipped file: read with workers where it is big
        while len(reads) < PIPE_READS:
            data = stream.read(chunk)
            if not data:
                break
            reads.append(data)
        if len(reads) >= PIPE_READS:
            from doctor.sources.logs import parallel

            read = parallel.analyze_pipe(stream, name, chunk, reads, len(first), escaped)
            if read is not None:
                return read
    analyzer = LogAnalyzer(name, escaped=escaped)
    analyzer.scanner.hold_last = True  # the whole input is read: a wrapped last line is joined to the one before
    return read_to_end(analyzer, stream, chunk, reads)


def analyze_bytes(data: bytes, name: str = "input") -> Facts:
    return analyze_stream(io.BytesIO(data), name)


def _workers_possible() -> bool:
    """Whether a big input would be read with workers here (cores to spare, LLM_DOCTOR_WORKERS not 0)."""
    from doctor.sources.logs.parallel import workers_wanted

    return workers_wanted(PARALLEL_MIN) > 0


def _file(stream: BinaryIO) -> bool:
    """Whether `stream` reads a regular file as it is (not a pipe, not gunzipped, not bytes in memory)."""
    raw = getattr(stream, "raw", None)
    return isinstance(raw, io.FileIO) and _big_file(stream, 0)


def _big_file(stream: BinaryIO, size: int | None = None) -> bool:
    """Whether `stream` reads a regular file of PARALLEL_MIN bytes or more (the workers' module is imported
    only then)."""
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size >= (PARALLEL_MIN if size is None else size)
