"""The views floor: a Report (or a live run's events) rendered as text, JSON, Markdown or a Textual TUI.

Views render what they are given: no source of their own, no rule run, no command.
"""
