# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The audit's interpreter of iptables rules: the nat table as the core's
one reader parsed it (``iptables_save.parse_save``, the table the sync
reads), its rules' matches as the audit looks at them, and the SNAT sources
the walk from POSTROUTING finds in it.

The iptables backends' ``audit_read`` (on PATH and each flavour's own
tools) read through :func:`read_nat`, which hands the audit a
``backend.AuditFinding`` per nat table read; what they share in one audit
(the flavours read per family) is :class:`NatReads`.

Standard library only: this file runs on managed nodes.
"""

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.conds import Cond, combine
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.walk import (
    FAMILY_NAMES,
    SNAT_TARGETS,
    UNAUDITED,
    bfs,
    gated_before,
    source,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import AuditFinding, AuditTable
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.tools import FLAVOUR_TOOLS, ON_PATH, PROC_TABLES, legacy_nat_exists
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import sub_chain_names
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.xtables_kernel import chains as kernel_chains

# What removes ours from the flavour whose tools are not on PATH, by who
# applies the policy (``report.offender_lines``' advice).
SPLIT_FIX = {
    'module': 'run ipmasq.agent.masq_chain, which removes ours from the iptables flavour not on PATH',
    'role': "the role's policy step (tag ip_masq_chain) removes ours from the iptables flavour not on PATH",
    'check': "this run's policy step would remove ours from the iptables flavour not on PATH "
             "(check mode: nothing was written yet)",
}
REACHABLE_ONLY_TARGETS = ('NETMAP',)   # NETMAP rewrites the source only when reached from POSTROUTING
GOTO_FLAGS = ('-g', '--goto')
_HAIRPIN_SET = re.compile(r'LOOP-?BACK|HAIRPIN', re.I)


class IptRule:
    """One rule of the one reader (``iptables_save.Rule``), with what the audit looks at."""

    def __init__(self, rule):
        self.chain = rule.chain
        self.index = rule.index
        self.line = rule.line
        self.target = None
        self.goto = False
        self.cond = Cond()
        self.gate_return = False   # "-m mark ! --mark X -j RETURN" and nothing else
        self._parse(rule.matches)

    def _parse(self, read):
        """``read``: the rule's ``(matches, target)`` (``save.rule_matches``)."""
        matches, target = read
        if target:
            self.target = target[1] if len(target) > 1 else None
            self.goto = target[0] in GOTO_FLAGS
        cond = self.cond
        other = 0
        neg_mark_only = False
        for neg, _module, tok, values in matches:
            value = values[0] if values else ''
            if tok == '--comment':
                cond.comments.append(value)
            elif tok in ('-s', '--source'):
                cond.sources.append((neg, value))
                other += 1
            elif tok in ('-d', '--destination'):
                cond.dests.append((neg, value))
                other += 1
            elif tok in ('-i', '--in-interface', '-o', '--out-interface'):
                cond.ifaces.append(value)
                other += 1
            elif tok == '--mark':
                if neg:
                    neg_mark_only = True
                else:
                    cond.mark = True
            elif tok == '--ctstate' and not neg and 'DNAT' in value.split(','):
                cond.dnat = True
                other += 1
            elif tok == '--src-type' and not neg and 'LOCAL' in value.split(','):
                cond.local_src = True
                other += 1
            elif tok == '--match-set' and not neg and _HAIRPIN_SET.search(value):
                cond.hairpin_set = True
                other += 1
            else:
                other += 1
        self.gate_return = self.target == 'RETURN' and neg_mark_only and other == 0 and not cond.mark


class IptTable:
    """A nat table (``iptables_save.NatTable``), as the audit walks it."""

    def __init__(self, table):
        self.version = table.version
        self.backend = table.backend
        self.incompatible = bool(table.incomplete)
        self.builtin = set(name for name in table.chains if table.builtin(name))
        self.chains = dict((name, [IptRule(rule) for rule in rules]) for name, rules in table.chains.items())


def audit_iptables(nat, family, backend, chain):
    """The SNAT sources in one nat table (``iptables_save.NatTable``)."""
    table = IptTable(nat)

    def edges(name):
        for rule in table.chains.get(name, []):
            if rule.target in table.chains and rule.target not in table.builtin:
                yield rule, rule.target

    paths = bfs(['POSTROUTING'] if 'POSTROUTING' in table.chains else [], edges)
    # Our chain, and the sub-chains it goes to (the split form of iptables_rules.chains).
    ours = set([chain]) | set(name for name in sub_chain_names(chain).values()
                              if chain in [hop for hop, _via in paths.get(name, ())])
    sources = []
    for name, rules in table.chains.items():
        path = paths.get(name)
        for rule in rules:
            if rule.target not in SNAT_TARGETS and not (path and rule.target in REACHABLE_ONLY_TARGETS):
                continue
            hops = path or [(name, None)]
            via = [r for _n, r in hops if r is not None]
            cond = combine([r.cond for r in via] + [rule.cond])
            gate = any(gated_before(table.chains[r.chain], r.index, lambda x: x.gate_return)
                       for r in via + [rule])
            src = source(family=FAMILY_NAMES[family], backend=backend, table='nat', chain=name,
                         rule=rule.line, target=rule.target, path=[n for n, _r in hops],
                         reachable=path is not None, cond=cond, gated=gate)
            src['ours'] = name in ours
            sources.append(src)
    return sources


def nat_finding(backend, family, flavour, table):
    """A nat table read (``iptables_save.NatTable``) as the audit's finding.
    iptables-nft's nat table is nft's table ``ip nat`` (``ip6 nat``): it
    stands for that one, unless it cannot show every chain of it."""
    place = FLAVOUR_TOOLS['nf_tables' if flavour == 'nf_tables' else 'legacy']
    shows, notes = (), ()
    if flavour == 'nf_tables':
        if table.incomplete:
            notes = ('IPv%d: iptables-nft cannot show every chain of its nat table (incompatible '
                     'nft chains): that table is read from nft instead.' % family,)
        else:
            shows = (('ip' if family == 4 else 'ip6', 'nat'),)
    # A table iptables-nft cannot show whole is explained from nft's listing of it alone.
    explained = None if table.incomplete else (lambda chain: _programs(table, family, place))
    nat = AuditTable('nat', (family,), lambda chain: audit_iptables(table, family, place, chain),
                     programs=explained)
    return AuditFinding(backend, family, place, ON_PATH, 'IPv%d nat table (%s)' % (family, place),
                        tables=[nat], shows=shows, notes=notes)


def _programs(table, family, place):
    """The SNAT explanation's program of one nat table (``explain.programs``);
    an audit never asks, so only an explanation loads that file."""
    # the explanation's code: loaded by an explanation only, never by an audit
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.explain import programs
    return programs(table, family, place, lambda rule: IptRule(rule).cond)


class NatReads:
    """What the iptables backends' reads share in one audit (``View.kept``):
    the flavours read (or skipped) per family, and the families whose
    iptables cannot be read at all."""

    def __init__(self, view):
        self.flavours = dict((family, set()) for family in view.families)
        self.closed = set()

    def done(self, view, family):
        """After every backend read ``family``: what none of them could read."""
        if family == 4 and not self.flavours[4]:
            view.notes.append('IPv4: iptables-save not found; only nft tables were audited.')
        return _unread_legacy(view, family, self.flavours[family])


def read_nat(view, backend, tools, family, flavour):
    """The findings of the nat table of ``family`` as ``tools``
    (``iptables_tools.Tools``) show it; ``flavour``: theirs, or None (the
    tools on PATH: asked).  A flavour already read for the family is not
    read twice."""
    reads = view.kept(NatReads)
    if family not in reads.flavours or family in reads.closed or not tools.save_bin:
        return []
    if flavour is not None and flavour in reads.flavours[family]:
        return []
    view.tools_found = True
    try:
        flavour, table = _nat(view, tools, family, flavour)
    except MasqError as e:
        if family == 4 and flavour is None:
            raise
        view.notes.append('IPv%d: %s; skipped.' % (family, e.msg))
        if flavour is None:
            reads.closed.add(family)    # no usable ip6tables (no IPv6 in this kernel?)
        return []
    reads.flavours[family].add(flavour)
    return [] if table is None else [nat_finding(backend, family, flavour, table)]


def _nat(view, tools, family, flavour):
    """``(flavour, table)``; ``table`` is None when it was not read."""
    if flavour is None and tools.iptables:
        flavour = tools.version(strict=False)[1]
    if flavour == 'legacy' and not legacy_nat_exists(view.proc_read, family):
        view.notes.append('IPv%d: the legacy nat table is not loaded in the kernel (%s does not list it): '
                          'it holds no rules, and reading it would create it; skipped.'
                          % (family, PROC_TABLES[family]))
        return flavour, None
    table = tools.read(record=False, ask=False)
    return table.backend or flavour or 'legacy', table


def _unread_legacy(view, family, read):
    """Ours in a legacy nat table no tool read (no iptables-legacy-save): the
    kernel lists the table's chains (``view.legacy_chains``, a read);
    packets pass that table too, so ours there is not only ours."""
    if 'legacy' in read or not legacy_nat_exists(view.proc_read, family):
        return []       # read, or not made: it holds nothing
    names = (view.legacy_chains or kernel_chains)(family)
    if not names or view.chain not in names:
        return []
    tool = 'iptables-legacy' if family == 4 else 'ip6tables-legacy'
    note = ('%s: our chain %s is in the legacy nat table, which packets pass too, and %s-save is not '
            'installed, %s: run ipmasq.agent.masq_chain, which fails naming the commands that remove it, or '
            'install the iptables-legacy tools and audit again.'
            % (FAMILY_NAMES[family].replace('ip', 'IP'), view.chain, tool, UNAUDITED))
    clause = 'our chain is also in the IPv%d legacy nat table, which was not audited' % family
    return [AuditFinding(FLAVOUR_TOOLS['legacy'], family, FLAVOUR_TOOLS['legacy'], ON_PATH, None,
                         unread=(note, clause))]


def words(chain, advice):
    """The audit's words for ours in iptables (``backend.Backend.audit_words``):
    the legacy nat table and iptables-nft's are both traversed, so ours in
    each is two policies (a chain left behind when the node's iptables moved)."""
    return {
        'ours': 'iptables (chain %s)' % chain,
        'split': 'our chain is in both the iptables-legacy and the iptables-nft nat table',
        'split_line': ('our chain %s is in both the iptables-legacy and the iptables-nft nat table, and packets pass '
                       'both: %s (or remove it yourself: iptables-legacy -t nat -D POSTROUTING -j %s; iptables-legacy '
                       '-t nat -F %s; iptables-legacy -t nat -X %s).' % (chain, SPLIT_FIX[advice], chain, chain, chain)),
    }
