"""simulate_fleet: each member's ground truth names that member's own instance and port."""

from __future__ import annotations

from typing import Any

from pdcensus.sim.fleet_recording import member_truth, simulate_fleet


def test_each_members_truth_carries_its_own_instance_and_the_recording_agrees() -> None:
    recording, members = simulate_fleet(["idle", "idle", "idle"], duration_seconds=60)
    assert [m.truth["instance"] for m in members] == ["sim-0:7770", "sim-1:7770", "sim-2:7770"]
    assert [m.truth["instance"] for m in members] == [e.instance for e in recording.endpoints]
    assert all(m.truth["seed"] == m.seed for m in members)


def test_a_custom_instance_name_sets_the_port_in_the_truths_flags_and_every_segment() -> None:
    _, members = simulate_fleet(["idle", "idle"], duration_seconds=60, name=lambda i: f"10.0.0.{i + 1}:{8000 + i}")
    for i, member in enumerate(members):
        assert member.truth["instance"] == f"10.0.0.{i + 1}:{8000 + i}"
        assert member.truth["flags"]["--port"] == str(8000 + i)
        assert {seg["flags"]["--port"] for seg in member.truth["segments"]} == {str(8000 + i)}


def test_member_truth_rewrites_a_port_given_in_argv_and_leaves_the_original_alone() -> None:
    original: dict[str, Any] = {"instance": "sim-0:7770", "flags": {"--port": "7770"},
                "segments": [{"flags": {"--port": "7770"}, "argv": ["radiance", "serve", "--port", "7770"]}]}
    out = member_truth(original, "node-b:9100")
    assert out["segments"][0]["argv"] == ["radiance", "serve", "--port", "9100"]
    assert out["flags"]["--port"] == "9100"
    assert original["instance"] == "sim-0:7770" and original["flags"]["--port"] == "7770"
    assert original["segments"][0]["argv"][-1] == "7770"


def test_an_instance_without_a_port_keeps_the_simulated_port() -> None:
    out = member_truth({"instance": "sim-0:7770", "flags": {"--port": "7770"}, "segments": []}, "unix-socket-a")
    assert out["instance"] == "unix-socket-a" and out["flags"]["--port"] == "7770"
