"""The sources floor: everything that observes and turns what it saw into facts.

logs/ (a saved or pasted log), probes/ (this machine, the GGUF), live/ (the embedded engine, a
followed log or wrapped command, a server's metrics), inputs.py (which of them a file is). Sources
never run the rules (a judge is handed in), never render and never decide exit codes.
"""
