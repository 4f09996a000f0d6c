"""Turn a source that calls back (`on_event=queue.put`) into the iterable the watch screen reads.

The embedded runner and the log follower push LiveEvents to a callback from their own thread;
`run_watch_app` pulls from an iterable. `EventQueue` sits between them:

    queue = EventQueue()
    stop = threading.Event()
    def produce():
        try:
            run_embedded(settings, on_event=queue.put, stop=stop, judge=judge)
        finally:
            queue.close()
    threading.Thread(target=produce, daemon=True).start()
    outcome = run_watch_app(queue, on_stop=stop.set)

Iteration ends after an EndEvent or when the producer closes the queue. Only threading.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator

from doctor.core.events import EndEvent, LiveEvent

_CLOSED = object()


class EventQueue:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.closed = False

    def put(self, event: LiveEvent) -> None:
        """Callback for the producer; safe from any thread."""
        self._queue.put(event)

    def close(self) -> None:
        """The producer is done (also after a failure): iteration ends once the queue is drained."""
        if not self.closed:
            self.closed = True
            self._queue.put(_CLOSED)

    def __iter__(self) -> Iterator[LiveEvent]:
        while True:
            item = self._queue.get()
            if item is _CLOSED:
                return
            assert isinstance(item, LiveEvent)
            yield item
            if isinstance(item, EndEvent):
                return
