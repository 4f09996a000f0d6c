"""Views: a Report as text (doctor style), JSON, Markdown; a live run as text lines (ticker.py).

They render; they never judge.
"""
