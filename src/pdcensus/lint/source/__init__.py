"""The pinned C++ source reader lint checks deployments against: flags, bounds, enum members, refusals.

A package of its own under lint because lint is its only reader: it tokenizes the engine's
``config.cpp`` (``cpp_text``), reads its flag tables, declarations and validator rules
(``cpp_tables``, ``cpp_decls``, ``cpp_rules``, ``cpp_expr``) into the flag schema (``flags``), and
pins that schema to a source tree (``pinned``). Nothing in the census or the advice imports it.
"""
