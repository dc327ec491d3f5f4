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
from ansible_collections.ipmasq.agent.plugins.module_utils._audit import owners
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.report import make_result
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import DEFAULT_CHAIN, validate_chain_name
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.audit_view import View


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
            src['hint'] = owners.hint(src['owner'], src['chain'])
    return sources


def analyse(findings, chain=DEFAULT_CHAIN, ipv6=False, allow=None, notes=None):
    """Turn what the backends found (``backend.AuditFinding``, in the
    audit's order) into the module's result (pure; tested directly).  A
    table that another finding shows too (its ``shows``) is left out, and
    so is one whose families the audit does not cover (``View.tables``)."""
    chain = validate_chain_name(chain)
    allow_entries = parse_allow(allow)
    notes = list(notes or [])
    families = (4, 6) if ipv6 else (4,)
    sources = []
    audited = []
    ours = []       # (families, home, place) of each reachable rule of ours
    for finding, tables in View.tables(findings, families):
        notes.extend(finding.notes)
        names = []
        for table in tables:
            found = table.sources(chain)
            if found or table.listed:
                names.append(table.name)
            sources.extend(found)
            ours.extend((table.families, finding.home, finding.place)
                        for src in found if src['ours'] and src['reachable'])
        if finding.audited is not None:
            audited.append(finding.line(names))
    owners.decide(sources, chain)
    judge(sources, allow_entries)
    result = make_result(sources, chain, families, audited, notes, ours)
    for finding in findings:
        if finding.unread is not None:
            note, clause = finding.unread
            result['only_ours'] = False
            result['notes'].append(note)
            result['summary'] = '%s; %s.' % (result['summary'].rstrip('.'), clause)
    return result
