"""The engines' log messages as data (messages/<engine>.yaml), read and checked by loader.py, matched
in one RE2 set per engine by matcher.py and read from a log by parser.py. Sources floor."""
