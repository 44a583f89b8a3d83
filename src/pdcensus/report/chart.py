"""The chart spec the report's plots are drawn from: axes, layers and the chart itself.

Plain frozen values with no drawing in them, so that a figure (``pdcensus.report.figures``)
says *what* to draw and :func:`pdcensus.report.plots.render_svg` decides *how*.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ScaleKind(str, Enum):
    """How an axis maps values to pixels."""

    LINEAR = "linear"
    LOG = "log"


class TickFormat(str, Enum):
    """How tick labels are written."""

    NUMBER = "number"
    CLOCK = "clock"  # Unix seconds -> HH:MM (UTC)
    MINUTES = "minutes"  # seconds -> minutes


class Side(str, Enum):
    """Which y axis a layer is drawn against."""

    LEFT = "left"
    RIGHT = "right"


# Okabe-Ito: distinguishable with the common colour-vision deficiencies, and in grey print.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")


@dataclass(frozen=True)
class Axis:
    """One axis: its label, scale and fixed bounds (None = from the data)."""

    label: str
    scale: ScaleKind = ScaleKind.LINEAR
    tick_format: TickFormat = TickFormat.NUMBER
    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True)
class Line:
    """A polyline; a NaN breaks it (no line is drawn across missing data)."""

    name: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: str = PALETTE[0]
    side: Side = Side.LEFT
    dashed: bool = False
    markers: bool = False


@dataclass(frozen=True)
class Bars:
    """Vertical bars from the axis floor; ``xs`` are bar centres, ``width`` in x units."""

    name: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: str = PALETTE[0]
    side: Side = Side.LEFT
    width: float = 0.6


@dataclass(frozen=True)
class ErrorBars:
    """Points with a vertical interval (``lo`` .. ``hi``) each."""

    name: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    color: str = PALETTE[0]
    side: Side = Side.LEFT


@dataclass(frozen=True)
class Band:
    """A shaded vertical band from ``x_lo`` to ``x_hi`` with a label at its top."""

    label: str
    x_lo: float
    x_hi: float
    color: str = "#999999"


@dataclass(frozen=True)
class Events:
    """Vertical marker lines at ``xs``, each with a short label."""

    name: str
    xs: tuple[float, ...]
    labels: tuple[str, ...]
    color: str = PALETTE[1]


Layer = Line | Bars | ErrorBars | Band | Events


@dataclass(frozen=True)
class Chart:
    """One figure. ``categories`` makes x categorical (layer xs are then 0, 1, 2, ...)."""

    title: str
    description: str
    x: Axis
    y: Axis
    layers: tuple[Layer, ...]
    y2: Axis | None = None
    categories: tuple[str, ...] = ()
    width_px: int = 720
    height_px: int = 300
    note: str = ""  # shown instead of the plot area when there is nothing to draw
