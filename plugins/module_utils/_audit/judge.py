# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The verdict: every SNAT source of what was read, allowed or not (ours, a
host-only or hairpin rule, service traffic of an owner that marks it, or
an ``allow`` entry), and the result of the whole audit.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._audit.allow import parse_allow
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.iptables import audit_iptables
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.nftables import NFT_FAMILIES, audit_nft_table, has_nat
from ansible_collections.ipmasq.agent.plugins.module_utils._audit import owners
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.report import make_result
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_save import parse_save
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import DEFAULT_CHAIN, validate_chain_name


def judge(sources, allow):
    """Set ``allowed``, ``allowed_by`` and ``hint`` on every source."""
    for src in sources:
        by = None
        if src['ours']:
            by = 'ours'
        elif src['scope'] == 'host':
            by = 'host: matches only packets with a local source address'
        elif src['scope'] == 'hairpin':
            by = 'hairpin: a connection back to its own source'
        elif src['scope'] == 'service' and src['owner'] in owners.SERVICE_OWNERS:
            by = '%s service or port-forward traffic (packet mark or DNAT state)' % src['owner']
        else:
            for entry in allow:
                if entry.matches(src):
                    by = entry.label()
                    break
        src['allowed'] = by is not None
        src['allowed_by'] = by
        if by is None:
            src['hint'] = owners.HINTS[src['owner']] % {'chain': src['chain']}
    return sources


def analyse(snapshots, nft_tables, chain=DEFAULT_CHAIN, ipv6=False, allow=None, notes=None):
    """Turn what was read into the module's result (pure; tested directly).
    ``snapshots``: ``(family, flavour, table)``, the nat table as
    ``iptables_save.parse_save`` read it (or its text); ``nft_tables``:
    ``nft_json.parse_nft`` tables, None when nft was not read."""
    chain = validate_chain_name(chain)
    allow_entries = parse_allow(allow)
    notes = list(notes or [])
    families = (4, 6) if ipv6 else (4,)
    sources = []
    compat = set()
    audited = []
    for family, backend, table in snapshots:
        if isinstance(table, str):
            table = parse_save(table)
        label = 'iptables-nft' if backend == 'nf_tables' else 'iptables-legacy'
        if backend == 'nf_tables':
            if table.incomplete:
                notes.append('IPv%d: iptables-nft cannot show every chain of its nat table (incompatible '
                             'nft chains): that table is read from nft instead.' % family)
            else:
                compat.add(('ip' if family == 4 else 'ip6', 'nat'))
        audited.append('IPv%d nat table (%s)' % (family, label))
        sources.extend(audit_iptables(table, family, label, chain))
    if nft_tables is not None:
        names = []
        for (fam, name), t in nft_tables.items():
            if fam not in NFT_FAMILIES:
                continue
            if fam == 'ip6' and 6 not in families:
                continue
            if (fam, name) in compat:
                continue   # the same rules iptables-nft-save showed
            found = audit_nft_table(t, chain)
            if found or has_nat(t):
                names.append('%s %s' % (fam, name))
            sources.extend(found)
        audited.append('nft ruleset (%s)' % (', '.join(names) if names else 'no other nat tables'))
    judge(sources, allow_entries)
    return make_result(sources, chain, families, audited, notes)
