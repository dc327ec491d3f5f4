# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What tells a program's nat rules apart: a small descriptor each daemon
file exports (``docker.AUDIT``, ``flannel.AUDIT``) beside the clean-up that
removes those rules, so the SNAT audit (``_audit/owners.py``, which holds
the owners that are not our daemons) and the clean-up read one fact.

Standard library only: this file runs on managed nodes.
"""


class Owner:
    """One writer of nat rules, as the SNAT audit tells it.

    ``name``: the owner name the audit reports and ``allow`` accepts.
    ``chains``: prefixes of its iptables chain names (upper case).
    ``tables``: fragments of its nftables table names (lower case).
    ``comments``: prefixes of its rule comments (lower case);
    ``comment_words``: words anywhere in them (lower case);
    ``comment_patterns``: regular expressions searched in them (tried last).
    ``ifaces``: regular expressions its interface names match (a trailing
    ``+`` wildcard removed first).  ``subnets``: its well-known default
    subnets (IPv4).  ``service``: its masquerade gated by a packet mark or
    DNAT state only rewrites service or port-forwarded connections.
    ``hint``: what to do about a rule of it that is not allowed
    (``%(chain)s``: the rule's chain)."""

    def __init__(self, name, hint, chains=(), tables=(), comments=(), comment_words=(), comment_patterns=(),
                 ifaces=(), subnets=(), service=False):
        self.name = name
        self.hint = hint
        self.chains = tuple(chains)
        self.tables = tuple(tables)
        self.comments = tuple(comments)
        self.comment_words = tuple(comment_words)
        self.comment_patterns = tuple(comment_patterns)
        self.ifaces = tuple(ifaces)
        self.subnets = tuple(subnets)
        self.service = service
