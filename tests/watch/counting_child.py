"""The real engine child, which first notes each start in a file: how the tests count engine runs.

    python -m tests.watch.counting_child COUNT_FILE --msg-fd N --t0 T

(put under scan and watch through LLM_DOCTOR_ENGINE_CHILD). Each start appends one line.
"""

from __future__ import annotations

import sys

from doctor.sources.live.embedded.child import main

if __name__ == "__main__":
    with open(sys.argv[1], "a", encoding="utf-8") as handle:
        handle.write("start\n")
    sys.exit(main(sys.argv[2:]))
