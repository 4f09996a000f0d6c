"""`python -m doctor` = `llm-doctor`."""

import sys

from doctor.cli import main

sys.exit(main())
