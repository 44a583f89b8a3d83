"""The SVG plot layer: valid standalone SVG, titled, escaped, honest about gaps."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from pdcensus.report.plots import (
    Axis, Band, Bars, Chart, ErrorBars, Events, Line, ScaleKind, Side, TickFormat, format_number, nice_ticks,
    render_svg,
)

SVG = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def _chart(*layers: Line | Bars | ErrorBars | Band | Events, **kw: object) -> Chart:
    return Chart("A title", "A description", Axis("x"), Axis("y"), tuple(layers), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("lo", "hi"), [(0, 1), (0, 2400), (0.013, 0.9), (-5, 5), (3, 3), (1e6, 3e6)])
def test_nice_ticks_are_evenly_spaced_round_numbers_inside_the_range(lo: float, hi: float) -> None:
    ticks = nice_ticks(lo, hi)
    assert len(ticks) >= 2
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1, 2, 2.5, 5)
    assert ticks[0] >= lo - 1e-9 and ticks[-1] <= max(hi, lo + abs(lo or 1)) + 1e-9


@pytest.mark.parametrize(("value", "text"), [(0, "0"), (0.015, "0.015"), (12000, "12k"), (2.5e6, "2.5M")])
def test_format_number_writes_short_labels(value: float, text: str) -> None:
    assert format_number(value) == text


def test_render_svg_is_standalone_xml_with_title_and_desc_first() -> None:
    root = _parse(render_svg(_chart(Line("l", (0.0, 1.0, 2.0), (1.0, 3.0, 2.0))), svg_id="fig-1"))
    assert root.tag == SVG + "svg"
    assert root.get("viewBox", "").startswith("0 0 ")
    assert root[0].tag == SVG + "title" and root[0].text == "A title"
    assert root[1].tag == SVG + "desc" and root[1].text == "A description"
    assert root.get("aria-labelledby") == "fig-1-title fig-1-desc"


def test_every_string_from_the_data_is_escaped() -> None:
    evil = "<script>alert(1)</script>"
    chart = Chart(evil, evil, Axis(evil), Axis(evil), (Line(evil, (0.0, 1.0), (1.0, 2.0)),
                  Events(evil, (0.5,), (evil,)), Band(evil, 0.2, 0.4)), categories=())
    svg = render_svg(chart, svg_id='x" onload="alert(1)')
    assert "<script" not in svg
    assert 'onload="' not in svg
    root = _parse(svg)
    assert root[0].text == evil  # the parser sees the text, not markup


def test_a_nan_breaks_a_line_instead_of_bridging_the_gap() -> None:
    nan = math.nan
    root = _parse(render_svg(_chart(Line("l", (0.0, 1.0, 2.0, 3.0, 4.0), (1.0, 2.0, nan, 3.0, 4.0)))))
    polylines = root.findall(f".//{SVG}polyline")
    assert len(polylines) == 2
    assert all(len(p.get("points", "").split()) == 2 for p in polylines)


def test_a_chart_without_data_says_so_instead_of_drawing_axes() -> None:
    svg = render_svg(_chart(Line("l", (), ())))
    assert "no data to plot" in svg
    assert "<polyline" not in svg
    note = render_svg(_chart(Line("l", (0.0, 1.0), (1.0, 2.0)), note="no lag test: too few samples"))
    assert "no lag test: too few samples" in note


def test_categorical_bars_put_one_labelled_bar_per_category() -> None:
    chart = _chart(Bars("rate", (0.0, 1.0, 2.0), (40.0, 20.0, 5.0)), categories=("idle", "2k-4k", "8k+"))
    root = _parse(render_svg(chart))
    bars = root.findall(f".//{SVG}g[@class='bars']/{SVG}rect")
    assert len(bars) == 3
    heights = [float(b.get("height", "0")) for b in bars]
    assert heights[0] > heights[1] > heights[2] > 0
    texts = {t.text for t in root.iter(SVG + "text")}
    assert {"idle", "2k-4k", "8k+"} <= texts


def test_a_log_axis_ticks_on_powers_of_ten() -> None:
    chart = Chart("t", "d", Axis("x"), Axis("s", scale=ScaleKind.LOG),
                  (Line("l", (0.0, 1.0), (0.015, 0.9)),))
    texts = {t.text for t in _parse(render_svg(chart)).iter(SVG + "text")}
    assert {"0.01", "0.1", "1"} <= texts


def test_a_right_axis_layer_scales_against_its_own_axis() -> None:
    chart = Chart("t", "d", Axis("x"), Axis("left"),
                  (Line("a", (0.0, 1.0), (1000.0, 2000.0)),
                   Line("b", (0.0, 1.0), (0.1, 0.2), side=Side.RIGHT)), y2=Axis("right"))
    root = _parse(render_svg(chart))
    lines = root.findall(f".//{SVG}polyline")
    ys = [[float(pt.split(",")[1]) for pt in p.get("points", "").split()] for p in lines]
    # both series rise across the full plot height on their own axis
    assert ys[0][0] - ys[0][1] > 50 and ys[1][0] - ys[1][1] > 50


def test_clock_ticks_are_wall_clock_labels() -> None:
    t0 = 1_700_000_000.0
    chart = Chart("t", "d", Axis("time", tick_format=TickFormat.CLOCK), Axis("y"),
                  (Line("l", (t0, t0 + 7200), (1.0, 2.0)),))
    texts = [t.text or "" for t in _parse(render_svg(chart)).iter(SVG + "text")]
    assert any(len(x) == 5 and x[2] == ":" for x in texts)


def test_long_legends_wrap_and_grow_the_canvas_instead_of_running_off_it() -> None:
    layers = tuple(Line(f"a rather long series name number {i}", (0.0, 1.0), (1.0, 2.0)) for i in range(6))
    root = _parse(render_svg(_chart(*layers)))
    assert float(root.get("height", "0")) > 300
    for rect in root.findall(f".//{SVG}g[@class='legend']/{SVG}rect"):
        assert float(rect.get("x", "0")) < 720


def test_a_day_of_scrapes_draws_the_same_extent_with_far_fewer_points() -> None:
    n = 5760  # a day at 15 s
    ys = tuple(1.0 + (i % 7) + (50.0 if i == 3001 else 0.0) for i in range(n))
    root = _parse(render_svg(_chart(Line("l", tuple(float(i) for i in range(n)), ys))))
    (poly,) = root.findall(f".//{SVG}polyline")
    pts = [tuple(map(float, p.split(","))) for p in poly.get("points", "").split()]
    assert len(pts) < n / 2
    top = min(y for _x, y in pts)
    spike = [x for x, y in pts if y == top]
    assert len(spike) == 1 and spike[0] == pytest.approx(64 + 3001 / (n - 1) * (700 - 64), abs=0.2)  # kept
    assert [x for x, _y in pts] == sorted(x for x, _y in pts)


def test_zero_bars_draw_nothing() -> None:
    root = _parse(render_svg(_chart(Bars("b", (0.0, 1.0, 2.0, 3.0), (0.0, 2.0, 0.0, 1.0)))))
    assert len(root.findall(f".//{SVG}g[@class='bars']/{SVG}rect")) == 2
