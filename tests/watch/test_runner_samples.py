"""The embedded runner's resource samples: taken while the job runs, not while the engine tears down
(issue 37: the watch screen showed `RSS 1.18 MiB`, a sample of the exiting child, where the report
said the run's peak, ~205 MiB)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doctor.core.events import SampleEvent
from doctor.sources.live.embedded.runner import RunSettings, _Parent


class Session:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def now_ms(self) -> float:
        return 1.0

    def emit(self, event: Any) -> None:
        self.events.append(event)


class Sampler:
    def __init__(self, rss: int) -> None:
        self.rss = rss

    def sample(self, t_ms: float) -> SampleEvent:
        return SampleEvent(t_ms=t_ms, rss_bytes=self.rss)


def test_no_sample_after_the_job_ended(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    session = Session()
    parent = _Parent(RunSettings(model_path=str(model)), session, None, None, None, 0.5, [])  # type: ignore[arg-type]
    parent._sample(Sampler(215 << 20))  # type: ignore[arg-type]
    parent._message({"m": "end", "finish_reason": "length", "generated": 24})
    parent._sample(Sampler(1_237_000))  # type: ignore[arg-type]
    samples = [e for e in session.events if isinstance(e, SampleEvent)]
    assert [s.rss_bytes for s in samples] == [215 << 20]
    assert parent.last_rss == 215 << 20
