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

from ansible_collections.ipmasq.agent.plugins.module_utils._audit.owners import attribute

# What a source's ``target`` and ``family`` say.
SNAT_TARGETS = ('MASQUERADE', 'SNAT')
FAMILY_NAMES = {4: 'ipv4', 6: 'ipv6'}


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


def source(family, backend, table, chain, rule, target, path, reachable, cond, gated, our_chain,
           nft_table=None):
    """The record of one SNAT rule: where it is, how it is reached, its scope and owner."""
    scope = cond.scope()
    if scope == 'egress' and gated:
        scope = 'service'
    owner = attribute(path, cond, our_chain, nft_table)
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
