"""Variable names as Poplar writes them: ``#tile`` suffixes and layer prefixes.

A tensor spread over tiles lends its name to a variable on each tile, with a suffix ``#n``
(004: "may have a suffix of the form #n"); grouping variables by tensor across tiles needs
that suffix removed.
"""
from __future__ import annotations


def base_name(name: str) -> str:
    """A variable's name without Poplar's ``#tile`` suffix (004: "may have a suffix of the
    form #n").

    >>> base_name("layer1/weights#12"), base_name("a#b")
    ('layer1/weights', 'a#b')
    """
    head, sep, tail = name.rpartition("#")
    return head if sep and tail.isdigit() else name
