# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Who wrote a nat rule, by the clues that tell owners apart: the rules of
the attribution, over a list of owners given to it.

The owners themselves are the audit's (``_audit/owners.py``: ours, the
registered daemons' from the daemon registry, kube-proxy, the CNI plugins,
netavark, libvirt), which builds an :class:`Attribution` of them; the
resync's watcher, which runs with the core alone, builds one of the same
owners as ``scripts/gen_daemons.py`` wrote them into
``_core/agent/owner_table.py`` (tests/unit/test_daemons_derived.py holds
that file to the audit's).  Each owner is a row of :data:`FIELDS`.

Standard library only: this file runs on managed nodes.
"""

import ipaddress
import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.conds import net

# An owner's row: its name, then its clues (``_daemons/owner.py``'s Owner
# says what each is).
FIELDS = ('name', 'chains', 'tables', 'comments', 'comment_words', 'comment_patterns', 'ifaces', 'subnets')
UNKNOWN = 'unknown'


def rows(owners):
    """The rows (:data:`FIELDS`) of owner objects that have those attributes."""
    return tuple(tuple(getattr(o, field) if field == 'name' else tuple(getattr(o, field)) for field in FIELDS)
                 for o in owners)


class Attribution:
    """The attribution over ``owners`` (rows of :data:`FIELDS`, in the order
    a table name or a chain prefix is tried); ``ours``: the name a rule of
    our chain gets."""

    def __init__(self, owners, ours):
        self.owners = tuple(dict(zip(FIELDS, row)) for row in owners)
        self.ours = ours
        self.ifaces = tuple((re.compile(p), o['name']) for o in self.owners for p in o['ifaces'])
        self.comment_patterns = tuple((re.compile(p), o['name']) for o in self.owners for p in o['comment_patterns'])
        self.subnets = tuple((ipaddress.ip_network(s), o['name']) for o in self.owners for s in o['subnets'])

    def _from_chain(self, name, our_chain):
        if name == our_chain:
            return self.ours
        upper = name.upper()
        for owner in self.owners:
            if upper.startswith(owner['chains']):
                return owner['name']
        return None

    def _from_comment(self, comment):
        """Prefixes first, then words, then patterns."""
        c = comment.strip()
        low = c.lower()
        for owner in self.owners:
            if owner['comments'] and low.startswith(owner['comments']):
                return owner['name']
        for owner in self.owners:
            if any(word in low for word in owner['comment_words']):
                return owner['name']
        for pattern, name in self.comment_patterns:
            if pattern.search(c):
                return name
        return None

    def _from_iface(self, iface):
        name = iface.rstrip('+')
        for pattern, owner in self.ifaces:
            if pattern.match(name):
                return owner
        return None

    def attribute(self, path, cond, our_chain, nft_table=None):
        """Who wrote a rule: by nft table name, then chain names (innermost
        first), comments, interfaces, and well-known default subnets;
        :data:`UNKNOWN` when no clue tells."""
        if nft_table is not None:
            low = nft_table.lower()
            for owner in self.owners:
                if any(fragment in low for fragment in owner['tables']):
                    return owner['name']
        for name in reversed(path):
            owner = self._from_chain(name, our_chain)
            if owner:
                return owner
        for comment in reversed(cond.comments):
            owner = self._from_comment(comment)
            if owner:
                return owner
        for iface in cond.ifaces:
            owner = self._from_iface(iface)
            if owner:
                return owner
        for neg, text in cond.sources:
            network = net(text)
            for subnet, owner in self.subnets:
                if not neg and network is not None and network.version == 4 and network.subnet_of(subnet):
                    return owner
        return UNKNOWN
