"""Reading logs, whatever the engine: the analyzer (analyze.py) over a streaming scanner (stream.py),
the parser interface and line kinds (base.py), the literal gates (matcher.py), engine detection
(detect.py), session starts (sessions.py) and the parsers the analyzer runs (registry.py), all read
from the engine table; settings pasted beside a log (pasted.py). Each engine's own patterns and
parser are in its folder, doctor/sources/engines/<engine>/."""
