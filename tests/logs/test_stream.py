"""The streaming scanner: right line numbers across chunks, bounded lines, any line ending."""

from __future__ import annotations

import re

from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.stream import LineScanner, looks_binary

TRIGGER = re.compile(rb"HIT")


def scan(data: bytes, chunk: int, max_line: int = 1 << 14) -> list[tuple[int, bytes]]:
    sc = LineScanner(TRIGGER, max_line=max_line)
    out = []
    for i in range(0, len(data), chunk):
        out += [(r.number, r.text) for r in sc.feed(data[i:i + chunk]) if r.text is not None]
    out += [(r.number, r.text) for r in sc.finish() if r.text is not None]
    return out


def test_line_numbers_do_not_depend_on_chunk_size() -> None:
    lines = [f"line {i} " + ("HIT" if i % 7 == 3 else "miss") for i in range(1, 500)]
    data = ("\n".join(lines) + "\n").encode()
    expected = [(i, lines[i - 1].encode()) for i in range(1, 500) if i % 7 == 3]
    for chunk in (1, 3, 17, 64, 4096, len(data)):
        assert scan(data, chunk) == expected, chunk


def test_crlf_and_cr_only_files() -> None:
    assert scan(b"a\r\nb HIT\r\nc\r\n", 5) == [(2, b"b HIT")]
    assert scan(b"a\rb HIT\rc HIT\r", 4) == [(2, b"b HIT"), (3, b"c HIT")]


def test_last_line_without_newline() -> None:
    assert scan(b"x\nlast HIT", 3) == [(2, b"last HIT")]


def test_a_huge_line_costs_its_head_only_and_numbering_goes_on() -> None:
    data = b"first\n" + b"HIT" + b"x" * 5_000_000 + b"\nafter HIT\n"
    out = scan(data, 65536, max_line=1024)
    assert out[0][0] == 2 and len(out[0][1]) == 1024
    assert out[1] == (3, b"after HIT")


def test_binary_sniffing() -> None:
    assert looks_binary(b"GGUF\x03\x00") is not None
    assert looks_binary(b"\x00" * 1000) is not None
    assert looks_binary(b"plain text log\nwith \x1b[31mcolour\x1b[0m\n") is None


def test_prefixes_colour_and_journald_are_tolerated() -> None:
    lines = [
        "\x1b[32mllama_perf_context_print: prompt eval time =     47.48 ms /    12 tokens\x1b[0m",
        "Jan 16 04:29:50 gpu-box ollama[1234]: llama_new_context_with_model: n_ctx      = 8192",
        "2024-05-01T12:00:00.123456789Z llama_kv_cache_init:      CUDA0 KV buffer size =  1024.00 MiB",
        '{"log":"load_tensors: offloaded 33/33 layers to GPU\\n","stream":"stderr","time":"2024-05-01T12:00:01Z"}',
        "   > INFO [           print_timings] generation eval time =    2130.11 ms /   128 runs   "
        "(   16.64 ms per token,    60.09 tokens per second) | tid=\"1\" id_slot=0",
        "main: context full, swapping: n_past = 4090, n_left = 4088, n_ctx = 4096, n_keep = 0, n_discard = 2044",
        "slot 0: context shift - n_keep = 0, n_left = 2046, n_discard = 1023",
    ]
    a = LogAnalyzer("t")
    a.feed(("\n".join(lines) + "\n").encode())
    facts = a.finish()
    assert facts.value("run.prompt_tokens") == 12
    assert facts.value("config.n_ctx") == 8192
    assert facts.value("run.kv_gpu_bytes") == 1024 * 2**20
    assert facts.value("run.offloaded_layers") == 33
    assert facts.value("run.decode_tokens") == 128
    shifts = facts.events("context_shift")
    assert [e.line for e in shifts] == [6, 7] and shifts[0].data["n_ctx"] == 4096
    assert all("\x1b" not in f.source.text for f in facts if f.source.text)


def test_fit_pass_buffers_keep_the_last_value() -> None:
    text = (
        "llama_context: n_ctx = 4096\n"
        "load_tensors: loading model tensors, this can take a while... (load_mode = mmap)\n"
        "load_tensors:        CUDA0 model buffer size =     0.00 MiB\n"
        "load_tensors: loading model tensors, this can take a while... (load_mode = mmap)\n"
        "load_tensors:        CUDA0 model buffer size =  8171.01 MiB\n"
    )
    a = LogAnalyzer("t")
    a.feed(text.encode())
    assert a.finish().value("run.weights_gpu_bytes") == int(8171.01 * 2**20)


def test_growing_log_snapshots_as_it_goes() -> None:
    a = LogAnalyzer("t")
    a.feed(b"llama_context: n_ctx = 256\n")
    assert not a.snapshot().events("ctx_full")
    a.feed(b"decode: failed to find a memory slot for batch of size 1\n")
    assert [e.line for e in a.snapshot().events("ctx_full")] == [2]
    a.feed(b"llama_perf_context_print: prompt eval time = 10.00 ms / 9 tokens\n")
    assert a.snapshot().value("run.prompt_tokens") == 9


def test_a_line_wrapped_by_the_terminal_is_read_whole_once() -> None:
    text = ("llama_perf_context_print: prompt eval time =     80.76 ms /    11 tok\n"
            "ens (    7.34 ms per token,   136.21 tokens per second)\n"
            "slot launch_slot_: id  1 | task 236 | processing task\n"
            "slot update_slots: id  1 | task 236 | new prompt, n_ctx_slot = 2048, n_keep = 0, n_prompt_tokens = 3174\n")
    a = LogAnalyzer("t")
    a.feed(text.encode())
    facts = a.finish()
    assert facts.value("run.prompt_tokens") == 3174  # the server line, read on its own line
    assert facts.get("run.prompt_tokens_max").source.line == 4
    assert facts.value("run.prefill_ms") == 80.76
