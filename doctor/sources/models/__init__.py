"""Where models are: the default model shipped for the embedded engine (default.py)."""
