"""Views of a Report: text (doctor style), JSON, Markdown. They render; they never judge."""
