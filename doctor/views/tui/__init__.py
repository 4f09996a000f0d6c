"""The interactive view: one Textual app for `analyze`, `scan` and `watch` (see `doctor.views.tui.app`).

Textual is imported only inside this package, and only when a TUI is shown, so the command line,
`--help` and the JSON/Markdown views start without it. The pure parts (what to show: `view`,
`watch_state`, `charts`; where from: `log_source`, `replay`) import no Textual and
are tested on their own.
"""
