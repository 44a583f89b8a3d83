"""The shell itself: --version, switches without a type in help, one declaration of the connection options."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

from pdcensus.cli import click_group
from pdcensus.commands.remote import ConnectionOptions


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=60,
                          check=False, env={"COLUMNS": "200", "PATH": ""})


def test_version_prints_the_installed_distributions_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout == f"pdcensus {version('pdcensus')}\n"


def test_no_help_page_shows_a_type_beside_a_plain_switch() -> None:
    pages = {"": run_cli("--help").stdout}
    for name in click_group().commands:
        pages[name] = run_cli(name, "--help").stdout
    assert all(pages.values())
    assert [name for name, page in pages.items() if "<bool>" in page] == []
    assert "--json" in pages["census"] and "--json" in pages["lint"]


def test_the_three_remote_commands_take_the_same_connection_options_from_one_declaration() -> None:
    group = click_group()
    expected = {"--" + name.replace("_", "-") for name in ConnectionOptions.__dataclass_fields__}
    assert len(expected) == 9  # auth (5), TLS (2), --timeout, --deadline
    for name in ("census", "query", "fleet"):
        opts = {opt for param in group.commands[name].params for opt in getattr(param, "opts", ())}
        assert expected <= opts, (name, expected - opts)


def test_demo_takes_its_scenario_as_an_argument_like_sim_and_serve() -> None:
    group = click_group()
    for name in ("demo", "sim", "serve"):
        arguments = [p.name for p in group.commands[name].params if p.param_type_name == "argument"]
        assert arguments[0] == "scenario", (name, arguments)
    done = run_cli("demo", "no-such-scenario", "--out", "/nonexistent/never-written")
    assert done.returncode == 2 and "unknown scenario" in done.stderr
