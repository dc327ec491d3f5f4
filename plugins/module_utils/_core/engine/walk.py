# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Reachability: which chains a packet can reach from the postrouting hook
(following jumps and gotos, safe against cycles), whether a gate before a
rule lets only marked packets through, and the record of each SNAT rule the
walk finds (its path, scope and owner), whichever rule format it came from.

Standard library only: this file runs on managed nodes.
"""

import collections

# What a source's ``target`` and ``family`` say.
SNAT_TARGETS = ('MASQUERADE', 'SNAT')
FAMILY_NAMES = {4: 'ipv4', 6: 'ipv6'}
# A note that says ours is where the audit could not read it: a problem
# (``report.offender_lines``), in the words of the backend that could not read it.
UNAUDITED = 'so its rules were not audited'


def bfs(starts, edges):
    """Breadth-first walk.  ``edges(node)`` yields ``(via, next_node)``.
    Returns {node: [(node0, via0), ..., (node, None)]}, shortest path first
    found; safe against cycles."""
    paths = {}
    queue = collections.deque()
    for start in starts:
        if start not in paths:
            paths[start] = [(start, None)]
            queue.append(start)
    while queue:
        node = queue.popleft()
        for via, nxt in edges(node):
            if nxt in paths:
                continue
            paths[nxt] = paths[node][:-1] + [(node, via), (nxt, None)]
            queue.append(nxt)
    return paths


def gated_before(rules, index, is_gate):
    """Whether a gate (``is_gate``) comes before rule ``index`` of ``rules``."""
    return any(is_gate(r) for r in rules[:index])


class Clues:
    """What tells who wrote a rule, as its reader saw it: the rule's ``cond``
    (``conds.Cond``: comments, interfaces, sources), the nft table it is in
    (None for iptables), and ``ours``: the reader knows it is ours (our nft
    table).  The judge turns it into the owner's name (``owners.decide``)."""

    def __init__(self, cond, nft_table=None, ours=False):
        self.cond = cond
        self.nft_table = nft_table
        self.ours = ours


def source(family, backend, table, chain, rule, target, path, reachable, cond, gated, nft_table=None):
    """The record of one SNAT rule: where it is, how it is reached, its
    scope, and the clues to its owner (:class:`Clues`, decided by the judge)."""
    scope = cond.scope()
    if scope == 'egress' and gated:
        scope = 'service'
    owner = Clues(cond, nft_table)
    return {
        'family': family,
        'backend': backend,
        'table': table,
        'chain': chain,
        'rule': rule,
        'target': target,
        'owner': owner,
        'path': path,
        'reachable': reachable,
        'scope': scope,
        'ours': False,
        'allowed': False,
        'allowed_by': None,
        'hint': None,
        'handle': None,
    }
