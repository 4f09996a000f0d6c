"""The fleet screen: instances worst first, Enter drills down into one instance's report, `b` back."""

from __future__ import annotations

from doctor.commands.fleet import build_view
from doctor.core.facts import Facts, Source
from doctor.core.report import Report
from doctor.sources.live.metrics.prometheus import Fleet, Instance
from doctor.views.tui.app import DoctorApp
from doctor.views.tui.fleet_screen import FleetScreen
from doctor.views.tui.report_screen import ReportScreen
from tests.tui.conftest import run_async, screen_text, settle


def _instance(name: str, values: dict[str, object]) -> Instance:
    facts = Facts()
    for key, value in values.items():
        facts.set(key, value, Source("probe", "prometheus", text=f"{key} query = {value}"))
    return Instance(name, "llama-server", "llama.cpp", facts, health="up")


def test_drill_down_from_the_fleet_to_an_instance(rulebase) -> None:
    fleet = Fleet("http://127.0.0.1:9090", "300s", "", [
        _instance("10.0.0.1:8080", {"server.target_up": True, "server.waiting_max": 0}),
        _instance("10.0.0.2:8080", {"server.target_up": True, "server.waiting_max": 3, "server.running_max": 1,
                                    "config.n_parallel": 1}),
    ], [])
    view = build_view(fleet, rulebase)

    async def body() -> None:
        app = DoctorApp(lambda: FleetScreen(view))
        async with app.run_test(size=(140, 30)) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert text.index("10.0.0.2:8080") < text.index("10.0.0.1:8080")  # worst first
            assert "LD752 requests-wait-for-slots" in text
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, ReportScreen))
            shown: Report = app.screen.report
            assert [f.id for f in shown.findings] == ["LD752"]
            await pilot.press("b")
            await settle(pilot, lambda: isinstance(app.screen, FleetScreen))

    run_async(body())
