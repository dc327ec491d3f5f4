# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What a rule, and the jumps that lead to it, require of a packet: the
matches the audit looks at, whichever rule format they came from
(``_core/iptables_backend/audit.py``, ``_core/nftables_backend/audit.py``), and the scope they give a rule.

Standard library only: this file runs on managed nodes.
"""

import ipaddress


class Cond:
    """The matches of one rule that the audit looks at."""

    def __init__(self):
        self.comments = []
        self.ifaces = []
        self.sources = []        # (negated, text)
        self.dests = []          # (negated, text)
        self.mark = False        # needs a mark set
        self.dnat = False        # needs DNAT conntrack state
        self.local_src = False   # needs a local source address
        self.hairpin_set = False

    def scope(self):
        if self.local_src or any(not neg and is_loopback(s) for neg, s in self.sources):
            return 'host'
        if self.hairpin_set:
            return 'hairpin'
        pos_src = [s for neg, s in self.sources if not neg]
        pos_dst = [d for neg, d in self.dests if not neg]
        if any(single_host(s) and single_host(s) == single_host(d) for s in pos_src for d in pos_dst):
            return 'hairpin'
        if self.mark or self.dnat:
            return 'service'
        return 'egress'


def net(text):
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def single_host(text):
    network = net(text)
    if network is not None and network.num_addresses == 1:
        return network.network_address
    return None


def is_loopback(text):
    network = net(text)
    return network is not None and network.is_loopback


def combine(conds):
    """What a packet needs to pass every one of ``conds``."""
    out = Cond()
    for c in conds:
        out.comments.extend(c.comments)
        out.ifaces.extend(c.ifaces)
        out.sources.extend(c.sources)
        out.dests.extend(c.dests)
        out.mark = out.mark or c.mark
        out.dnat = out.dnat or c.dnat
        out.local_src = out.local_src or c.local_src
        out.hairpin_set = out.hairpin_set or c.hairpin_set
    return out
