"""A rich console that never lets a label value write into the terminal.

Why this exists: label values come from other people's servers and files (``instance``,
``job``, ``model_name``, an error a store sends back). Printed raw, a value such as
``"\\x1b[2J\\x1b]8;;http://evil\\x07x\\u202e"`` clears the screen, opens an OSC 8 link, sets
colours, or reverses the rest of the line with a bidi override, in the census report and in
the fleet table. The HTML and Markdown reports escape already; this is the terminal's one
place.

:class:`SafeConsole` escapes every *text* segment it renders, after rich has laid it out and
before rich adds its own styling: so rich's colour codes still work, and no byte of a value
is a control (:meth:`SafeConsole.render_str` escapes a string before rich's ``Text`` drops
BEL, BS, VT, FF and CR on its own, so those stay visible too). Escaped, each character is shown visibly (``\\x1b``, ``\\u202e``) so an SRE sees
it was there:

* C0 controls except newline and tab (which are layout), DEL, C1 controls (U+0080-U+009F);
* bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) and marks
  (U+200E, U+200F, U+061C), line/paragraph separators (U+2028, U+2029).

Rich *markup* in a value (``[red]x[/red]``, ``[link=...]``) is a different injection: it is
parsed before any segment exists, so the callers escape values with :func:`rich.markup.escape`
or pass :class:`rich.text.Text` (see :func:`literal`); tests/reliability/test_terminal_escapes.py
checks both through the real CLI.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every terminal control and bidi character written out as ``\\xNN``/``\\uNNNN``."""
    return _UNSAFE.sub(_visible, text)


def literal(text: str, style: str | Style = "") -> Text:
    """A value as a rich :class:`Text`: no markup is parsed in it, controls escaped."""
    return Text(escape_controls(text), style=style)


class SafeConsole(Console):
    """:class:`rich.console.Console` whose rendered text cannot carry a control or bidi character."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)  # label values like ":smile:" stay text
        super().__init__(**kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """Escaped before rich builds the :class:`Text`, which would silently drop BEL, BS, VT, FF, CR."""
        return super().render_str(escape_controls(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _UNSAFE.search(segment.text):
                yield Segment(escape_controls(segment.text), segment.style, None)
            else:
                yield segment
