# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The audit's interpreter of nftables rules: a table as the core's one
reader parsed it (``nft_json.parse_nft``), its rules' matches as the audit
looks at them, and the SNAT sources the walk from its nat postrouting base
chains finds in it (through jumps, gotos and verdict maps).

The nftables backend's ``audit_read`` reads the whole ruleset through
:func:`read_ruleset`, which hands the audit one ``backend.AuditFinding``
with every ip, ip6 and inet table of it.

Standard library only: this file runs on managed nodes.
"""

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.conds import Cond, combine
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.walk import SNAT_TARGETS, bfs, gated_before, source
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import AuditFinding, AuditTable
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import involves, render_expr, render_rule

NFT_FAMILIES = {'ip': 'ipv4', 'ip6': 'ipv6', 'inet': 'inet'}
# The IP families the rules of a table of each nft family can act on.
SERVES = {'ip': (4,), 'ip6': (6,), 'inet': (4, 6)}
_HAIRPIN_SET = re.compile(r'hairpin|loop-?back', re.I)


def _targets(rule_expr, maps):
    """Chains a rule jumps or goes to, also through anonymous and named verdict maps."""
    found = []

    def walk(e, in_vmap_data=False):
        if isinstance(e, dict):
            for k, v in e.items():
                if k in ('jump', 'goto') and isinstance(v, dict) and 'target' in v:
                    found.append(v['target'])
                elif k == 'vmap' and isinstance(v, dict):
                    walk(v.get('data'), True)
                else:
                    walk(v, in_vmap_data)
        elif isinstance(e, list):
            for x in e:
                walk(x, in_vmap_data)
        elif isinstance(e, str) and in_vmap_data and e.startswith('@'):
            walk(maps.get(e[1:], []))
    walk(rule_expr)
    return found


def _snat_kind(rule_expr):
    for s in rule_expr:
        if not isinstance(s, dict):
            continue
        if 'masquerade' in s:
            return 'MASQUERADE'
        if 'snat' in s:
            return 'SNAT'
        xt = s.get('xt')
        if isinstance(xt, dict) and xt.get('type') == 'target' and xt.get('name') in SNAT_TARGETS:
            return xt['name']
    return None


def _cond(rule_expr, comment):
    cond = Cond()
    if comment:
        cond.comments.append(comment)
    for s in rule_expr:
        if not isinstance(s, dict):
            continue
        m = s.get('match')
        if isinstance(m, dict):
            left, right, op = m.get('left'), m.get('right'), m.get('op', '==')
            neg = op == '!='
            if involves(left, 'meta', 'iifname') or involves(left, 'meta', 'oifname'):
                if isinstance(right, str):
                    cond.ifaces.append(right)
            elif isinstance(left, dict) and 'payload' in left and isinstance(left['payload'], dict):
                field = left['payload'].get('field')
                if isinstance(right, (str, dict)) and not (isinstance(right, str) and right.startswith('@')):
                    text = render_expr(right)
                    if field == 'saddr':
                        cond.sources.append((neg, text))
                    elif field == 'daddr':
                        cond.dests.append((neg, text))
            elif involves(left, 'meta', 'mark'):
                if (op == '==' and right != 0) or (op == '!=' and right == 0):
                    cond.mark = True
            elif involves(left, 'ct', 'status'):
                if op in ('==', 'in') and 'dnat' in (right if isinstance(right, list) else [right]):
                    cond.dnat = True
            elif involves(left, 'fib') and op == '==' and right == 'local':
                fib = left.get('fib', {}) if isinstance(left, dict) else {}
                if 'saddr' in (fib.get('flags') or []):
                    cond.local_src = True
            if isinstance(right, str) and right.startswith('@') and _HAIRPIN_SET.search(right) and not neg:
                cond.hairpin_set = True
        v = s.get('vmap')
        if isinstance(v, dict) and (involves(v.get('key'), 'meta', 'iifname') or
                                    involves(v.get('key'), 'meta', 'oifname')):
            data = v.get('data')
            if isinstance(data, dict) and isinstance(data.get('set'), list):
                cond.ifaces.extend(i[0] for i in data['set'] if isinstance(i, list) and isinstance(i[0], str))
    return cond


def _gate_return(rule):
    """``meta mark & X == 0 return`` (and nothing but counters): what follows sees only marked packets."""
    expr = [s for s in rule.get('expr', []) if not (isinstance(s, dict) and 'counter' in s)]
    if len(expr) != 2 or not isinstance(expr[1], dict) or 'return' not in expr[1]:
        return False
    m = expr[0].get('match') if isinstance(expr[0], dict) else None
    return isinstance(m, dict) and involves(m.get('left'), 'meta', 'mark') and m.get('op') == '==' \
        and m.get('right') == 0


def has_nat(t):
    """Whether the table has a nat chain at all."""
    return any(c.get('type') == 'nat' for c in t.chains.values())


def audit_nft_table(t, chain):
    """The SNAT sources of one nft table (``nft_json.NftTable``)."""
    starts = [n for n, c in t.chains.items() if c.get('type') == 'nat' and c.get('hook') == 'postrouting']

    def edges(name):
        for index, rule in enumerate(t.rules.get(name, [])):
            for target in _targets(rule.get('expr', []), t.maps):
                if target in t.rules:
                    yield (name, index), target

    paths = bfs(starts, edges)
    family = NFT_FAMILIES.get(t.family, t.family)
    table_name = '%s %s' % (t.family, t.name)
    ours_table = t.name.lower() == chain.lower()
    sources = []
    for name, rules in t.rules.items():
        path = paths.get(name)
        for index, rule in enumerate(rules):
            expr = rule.get('expr', [])
            target = _snat_kind(expr)
            if target is None:
                continue
            hops = path or [(name, None)]
            via = [(n, v) for n, v in hops if v is not None]
            conds = [_cond(t.rules[n][v[1]].get('expr', []), t.rules[n][v[1]].get('comment'))
                     for n, v in via]
            cond = combine(conds + [_cond(expr, rule.get('comment'))])
            gate = any(gated_before(t.rules[c], i, _gate_return)
                       for c, i in [v for _n, v in via] + [(name, index)])
            src = source(family=family, backend='nft', table=table_name, chain=name,
                         rule=render_rule(rule), target=target, path=[n for n, _v in hops],
                         reachable=path is not None, cond=cond, gated=gate, nft_table=t.name)
            src['handle'] = rule.get('handle')
            src['ours'] = ours_table
            src['owner'].ours = ours_table
            sources.append(src)
    return sources


def ruleset_finding(backend, tables):
    """The nft ruleset read (``nft_json.parse_nft`` tables) as the audit's finding."""
    found = []
    for (fam, name), t in tables.items():
        if fam not in NFT_FAMILIES:
            continue
        found.append(AuditTable('%s %s' % (fam, name), SERVES[fam], _table_sources(t), listed=has_nat(t),
                                key=(fam, name), programs=_table_programs(t)))
    return AuditFinding(backend, None, backend, backend, 'nft ruleset', tables=found,
                        names='no other nat tables')


def _table_sources(t):
    return lambda chain: audit_nft_table(t, chain)


def _table_programs(t):
    """The SNAT explanation's base chains of one table (``explain.programs``);
    an audit never asks, so only an explanation loads that file."""
    def programs_of(chain):
        # the explanation's code: loaded by an explanation only, never by an audit
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.explain import programs
        return programs(t, chain, SERVES[t.family], _cond)
    return programs_of


def read_ruleset(view, backend, nft):
    """The findings of the whole nft ruleset, with ``nft`` (``nft_tools.NftTools``)."""
    if not nft.available:
        if view.include_nft == 'always':
            raise MasqError('include_nft=always but the nft command was not found on the node; '
                            'install the nftables package or set include_nft=auto.')
        view.notes.append('nft not found: tables created with nft directly were not audited.')
        return []
    view.tools_found = True
    try:
        tables = nft.list_ruleset()
    except MasqError as e:
        if view.include_nft == 'always' or 'rc' not in e.details:
            raise
        view.notes.append(e.msg + '; nft tables were not audited.')
        return []
    return [ruleset_finding(backend, tables)]
