"""Drain3 (the template miner log explainers use) over a whole log, as the peer `bench/analyze_real.py` times.

Drain3 0.9.11 (`pip install -r bench/requirements.txt`; a bench-only dependency), its default configuration
(no config file: depth 4, similarity 0.4, no masking), one `TemplateMiner.add_log_message` per line, the line
decoded as UTF-8 with errors replaced and its line end dropped, as a log explainer feeds it. Prints the lines
read and the templates (clusters) found.

    python -m bench.drain3_run FILE
"""

from __future__ import annotations

import logging
import sys


def main() -> int:
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    logging.disable(logging.WARNING)  # its notices about the missing config file, not its work
    config = TemplateMinerConfig()
    config.profiling_enabled = False
    miner = TemplateMiner(config=config)
    lines = 0
    with open(sys.argv[1], encoding="utf-8", errors="replace", newline="\n") as log:
        for line in log:
            miner.add_log_message(line.rstrip("\r\n"))
            lines += 1
    print(f"{lines} lines, {len(miner.drain.clusters)} templates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
