# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The audit's result and its words: the keys the module returns, the
one-line summary, and one line per problem for warnings and failures.

Standard library only: this file runs on managed nodes.
"""

import collections

from ansible_collections.ipmasq.agent.plugins.module_utils._audit import owners
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.walk import FAMILY_NAMES, UNAUDITED
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends


def make_result(sources, chain, families, audited, notes, ours=()):
    """``ours``: ``(families, home, place)`` of each reachable rule of ours:
    the IP families it acts on, the backend that writes the policy there
    and the backend whose table holds it (``backend.AuditFinding``)."""
    offenders = [s for s in sources if s['reachable'] and not s['allowed']]
    ours_by_family = {}
    for family in families:
        ours_by_family[FAMILY_NAMES[family]] = any(family in served for served, _home, _place in ours)
    ours_present = all(ours_by_family.values())
    # Our policy lives in one backend: ours in two (an iptables chain and an
    # nft table) at the same time is a switch left half done (or a DaemonSet
    # still writing its chain beside our table).
    ours_backends = sorted(set(home for _served, home, _place in ours))
    # Tables of one backend that are all traversed (the legacy nat table and
    # iptables-nft's): ours in each is two policies too (a chain left behind
    # when the node's iptables moved).
    ours_in = sorted(set(place for _served, _home, place in ours))
    only_ours = ours_present and not offenders and len(ours_backends) < 2 and len(ours_in) < 2
    return {
        'changed': False,
        'chain': chain,
        'sources': sources,
        'offenders': offenders,
        'ours_present': ours_present,
        'ours_by_family': ours_by_family,
        'ours_backends': ours_backends,
        'ours_in': ours_in,
        'only_ours': only_ours,
        'summary': summary(sources, offenders, ours_by_family, chain, ours_backends, ours_in),
        'audited': audited,
        'notes': notes,
    }


def _counts(sources):
    counts = collections.Counter(s['owner'] for s in sources)
    return ', '.join('%s (%d)' % (o, n) for o, n in sorted(counts.items()))


def summary(sources, offenders, ours_by_family, chain, ours_backends=(), ours_in=()):
    parts = []
    missing = [f for f, present in sorted(ours_by_family.items()) if not present]
    if missing:
        parts.append('%s masquerades nothing in %s (chain missing, empty, or not reached from POSTROUTING)'
                     % (chain, ' and '.join(m.replace('ip', 'IP') for m in missing)))
    if len(ours_backends) > 1:
        parts.append('our policy is in both %s' % ' and '.join(ours_backends))
    elif len(ours_in) > 1:
        parts.append(_split(ours_backends, chain, 'module', ours_in)[0])
    if offenders:
        parts.append('%d other SNAT rule%s would act on pod traffic: %s'
                     % (len(offenders), '' if len(offenders) == 1 else 's', _counts(offenders)))
    allowed = [s for s in sources if s['reachable'] and s['allowed'] and not s['ours']]
    if not parts:
        parts.append('%s is the only SNAT source for pod traffic' % chain)
    if allowed:
        parts.append('%d other rule%s allowed: %s' % (len(allowed), '' if len(allowed) == 1 else 's', _counts(allowed)))
    unreachable = [s for s in sources if not s['reachable']]
    if unreachable:
        parts.append('%d not reached from the postrouting hook' % len(unreachable))
    return '; '.join(parts) + '.'


def _words(name, chain, advice):
    """The audit's words of the registered backend ``name`` (``Backend.audit_words``)."""
    for cls in backends.REGISTRY:
        if cls.name == name:
            return cls.audit_words(chain, advice)
    return {'ours': name}


def _split(homes, chain, advice, places):
    """Ours in several tables of one backend (``places``), all traversed:
    the summary's clause and the problem, in that backend's words."""
    words = _words(homes[0], chain, advice) if homes else {}
    clause = words.get('split') or 'our chain is in both %s' % ' and '.join(places)
    return clause, words.get('split_line') or '%s, and packets pass both.' % clause


# Who applies the policy, in the advice of offender_lines: the module a
# playbook runs, the ip_masq role, or the role in check mode (whose policy
# step wrote nothing: the audit reads the node as it was).
FIXES = {
    'module': {
        'missing': 'run ipmasq.agent.masq_chain.',
        'both': 'run ipmasq.agent.masq_chain with the backend it belongs in (backend=%(writers)s); '
                'it removes ours from the other one.',
    },
    'role': {
        'missing': "the role's policy step (tag ip_masq_chain) applies it; see the audit's sources for a rule "
                   "that ends POSTROUTING before its jump.",
        'both': "set ip_masq_backend to the one it belongs in (%(writers)s): the role's policy step "
                "removes ours from the other one.",
    },
    'check': {
        'missing': 'this run would apply it (check mode: nothing was written yet).',
        'both': "this run's policy step would remove ours from the backend ip_masq_backend does not pick "
                "(check mode: nothing was written yet).",
    },
}


def offender_lines(result, advice='module', check_mode=False):
    """One line per problem, for warnings and the failure message. The
    advice names what applies the policy: ``module`` (a playbook runs
    masq_chain) or ``role`` (the ip_masq role; in check mode, what its run
    would do)."""
    key = 'check' if advice == 'role' and check_mode else advice
    fix = FIXES[key]
    lines = []
    for family, present in sorted(result['ours_by_family'].items()):
        if not present:
            lines.append('%s: no MASQUERADE of %s is reached from POSTROUTING; %s'
                         % (family.replace('ip', 'IP'), result['chain'], fix['missing']))
    homes = result.get('ours_backends') or ()
    if len(homes) > 1:
        writers = ' or '.join(cls.name for cls in backends.REGISTRY if cls.writes)
        lines.append('our policy is in both %s: %s'
                     % (' and '.join(_words(home, result['chain'], 'module')['ours'] for home in homes),
                        fix['both'] % {'writers': writers}))
    elif len(result.get('ours_in') or ()) > 1:
        lines.append(_split(homes, result['chain'], key, result['ours_in'])[1])
    lines.extend(n for n in result.get('notes') or [] if UNAUDITED in n)
    for s in result['offenders']:
        # The role's advice names its allow list (ip_masq_audit_allow), the module's its option.
        hint = s['hint'] if advice == 'module' else owners.hint(s['owner'], s['chain'], advice)
        lines.append('[%s %s %s: %s] %s: %s -- %s'
                     % (s['family'].replace('ip', 'IP'), s['backend'], s['table'], ' > '.join(s['path']),
                        s['owner'], s['rule'], hint))
    return lines
