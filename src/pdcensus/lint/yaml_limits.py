"""Limits on a composed YAML graph, so that an alias bomb is a finding, not a hang.

Why this exists: YAML anchors make a graph, not a tree. ``a: &a [x, x, x, x, x, x, x, x, x]``,
``b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]`` ... nine levels deep is a 1.6 KB file that
composes in a millisecond (each alias is one shared node object) but is ~9^9 = 387 M nodes as a
tree. The lint readers walk each document as a tree (``_walk`` in :mod:`pdcensus.lint.deploy`),
three times, so such a file ran for minutes with no output: a pre-commit hook or CI job hung.
An anchor that holds itself (``&a [*a]``) makes a cycle, and the walk never ends at all.

So after composing and before walking, :func:`check_graph` visits every distinct node once
(iteratively: no recursion limit on deep nesting) and computes, with memoisation on node
identity, how many nodes the tree would have. It refuses a document when

* it holds more than :data:`MAX_ALIASES` alias references (an edge to a node that already has
  a parent),
* its expansion adds more than :data:`MAX_EXPANDED_NODES` nodes beyond the distinct ones
  (a large alias-free manifest, ``kubectl get -o yaml`` of a cluster, is never refused: only
  what aliases add is counted), or
* an anchor refers to itself (a cycle).

The file-level time budget (:data:`TIME_BUDGET_SECONDS`) covers what a limit cannot foresee:
the walk checks a deadline every few thousand nodes. Each refusal is one ``yaml-limit`` error
finding naming the file and the limit; lint goes on with the other files and exits 1, the
documented code for an error finding.

Measured on this machine (``alias_bomb`` in tests/reliability/test_hostile_yaml.py, 9 wide):
before these limits ``pdcensus lint`` took 2.5 s at depth 6 and 19.7 s at depth 7 (x8 a level,
so depth 9, a 569-byte file, is about 20 min); with them the whole run at depth 9 takes 0.57 s
(the Python start-up; the check itself is under 5 ms) and prints the ``yaml-limit`` error.
"""

from __future__ import annotations

import time

from yaml.nodes import MappingNode, Node, SequenceNode

MAX_ALIASES = 10_000
MAX_EXPANDED_NODES = 200_000
TIME_BUDGET_SECONDS = 20.0


class YamlLimit(Exception):
    """A document over one of the limits; the message names the limit and its value."""


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def check_graph(root: Node) -> int:
    """The number of nodes ``root`` expands to as a tree; :class:`YamlLimit` over a limit.

    Each distinct node is visited once (an explicit stack); a node's tree size is
    1 + its children's, memoised by identity, so a bomb costs its file size, not its expansion."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    parented: set[int] = set()
    aliases = 0
    distinct = 0
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        key = id(node)
        if closing:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in _children(node))
            continue
        if key in size:
            continue
        distinct += 1
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            ckey = id(child)
            if ckey in on_path:
                line = child.start_mark.line + 1 if child.start_mark is not None else 0
                raise YamlLimit(f"an anchor refers to itself (line {line}): the document never ends as a tree")
            if ckey in parented:
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise YamlLimit(f"more than {MAX_ALIASES} alias references (limit MAX_ALIASES={MAX_ALIASES})")
            else:
                parented.add(ckey)
            if ckey not in size:
                stack.append((child, False))
    total = size[id(root)]
    if total - distinct > MAX_EXPANDED_NODES:
        raise YamlLimit(f"aliases expand {distinct} nodes to {total} (more than {MAX_EXPANDED_NODES} added; "
                        f"limit MAX_EXPANDED_NODES={MAX_EXPANDED_NODES}): an alias bomb")
    return total


class Deadline:
    """The file's time budget, checked every few thousand steps of a walk."""

    def __init__(self, seconds: float = TIME_BUDGET_SECONDS) -> None:
        self.seconds = seconds
        self.until = time.monotonic() + seconds
        self._ticks = 0

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks % 4096 == 0 and time.monotonic() > self.until:
            raise YamlLimit(f"reading took more than the per-file time budget of {self.seconds:g} s "
                            f"(limit TIME_BUDGET_SECONDS={self.seconds:g})")
