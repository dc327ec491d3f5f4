# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""iptables' spelling of a policy (``policy.Policy`` holds its meaning): the
pairs each rewriting rule is written for, the flat or split form and how
many rules it takes (:class:`IptablesLayout`), the rule limit, and the first
release with ``--random-fully``.  ``chain.py`` writes the rules.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import PolicyTooLargeError

# The first iptables release with MASQUERADE --random-fully.
RANDOM_FULLY_SINCE = (1, 6, 2)

# The most rules the iptables form of a policy may take per family
# (IptablesLayout.count; docs/docsite/rst/extensions.rst, "How many rules").
# The iptables backend checks it before it writes anything; nftables keeps
# the lists in sets and has no such limit.  iptables-nft's iptables-save
# slows down faster than the rule count grows (1.8.9: 0.3 s at 10,000 rules,
# 6.6 s at 60,000, over 90 s at 280,000).
IPTABLES_RULE_LIMIT = 25000


def gates(policy, family):
    """``(source, out interface)`` pairs a rewriting rule is written for
    (``None``: no such match): one pair without matches unless source_cidrs
    or out_interfaces are set."""
    sources = policy.sources[family] or [None]
    interfaces = policy.out_interfaces or [None]
    return [(source, interface) for source in sources for interface in interfaces]


def supports_random_fully(version):
    """Whether iptables ``version`` (a tuple, or None when unknown: assumed) has MASQUERADE --random-fully."""
    return version is None or tuple(version) >= RANDOM_FULLY_SINCE


def random_fully(policy, version):
    """Whether MASQUERADE carries --random-fully with iptables ``version``
    (a tuple, or None when unknown): as the policy asks, or its format's
    default where this iptables supports it (``Policy.random_fully_where``)."""
    return policy.random_fully_where(supports_random_fully(version))


class IptablesLayout:
    """How many rules iptables takes for one family of a policy, and in
    which form; ``iptables_rules.chains`` writes it (one decision, here).

    The flat form is the upstream agent's one chain, with each rewriting
    rule written for every source and interface pair and, with to_ports,
    per protocol and port range: its rewriting rules are a product,
    (exceptions + 1, or the listed destinations) x sources x interfaces x
    (3 x port ranges + 1).  The split form sends traffic on with ``-g``
    (goto: a RETURN, or the end of a chain, then leaves the policy) and
    grows by a sum instead:

    * the gates (source_cidrs, out_interfaces): in the chain, one rule per
      source and interface pair going to the policy sub-chain; with more
      than one of each, one rule per interface going to the sources
      sub-chain, which holds one rule per source going to the policy;
    * the policy (the chain itself when there is no gate): one rule per
      exception and listed destination, the RETURN rules, the final rule;
      each rewriting rule goes to the rewrite sub-chain, which holds the
      rewrite once (per protocol and port range, and the rest), when that
      takes fewer rules than writing it out at each rewriting rule.

    The flat form is kept whenever it takes no more rules than the split
    one: a policy without extensions, or with one source or one interface
    and no exception, is written exactly as before.
    """

    def __init__(self, policy, family):
        self.policy = policy
        self.family = family
        sources = len(policy.sources[family])
        interfaces = len(policy.out_interfaces)
        exceptions = len(policy.exceptions[family])
        listed = len(policy.listed[family])
        kept = len(policy.kept(family))
        ports = len(policy.port_ranges)
        points = exceptions + (listed if policy.masquerade_only else 1)     # rewriting rules, before the gates
        rewrite = 3 * ports + 1                                             # rules per rewrite
        pairs = max(sources, 1) * max(interfaces, 1)
        self.gated = bool(sources or interfaces)
        self.two_gates = sources > 1 and interfaces > 1
        self.rewrite_chain = points * rewrite > points + rewrite
        gate_rules = (sources + interfaces) if self.two_gates else pairs if self.gated else 0
        split = gate_rules + kept + ((points + rewrite) if self.rewrite_chain else points * rewrite)
        flat = points * pairs * rewrite + kept
        self.split = split < flat
        self.count = split if self.split else flat
        self.flat_count = flat

        names = {'sources': 'source_cidrs', 'interfaces': 'out_interfaces', 'exceptions': 'exception_cidrs',
                 'listed': 'masquerade_cidrs', 'final': 'the final rule',
                 'kept': 'link-local' if policy.masquerade_only else 'nonmasquerade_cidrs (with link-local)',
                 'ports': 'to_ports (3 rules per range, and 1)'}
        terms = []
        if not self.split:
            factors = [('%s %d' % (names['listed'], listed) if policy.masquerade_only
                        else '(%s %d + 1)' % (names['exceptions'], exceptions) if exceptions else '', points),
                       ('%s %d' % (names['sources'], sources), sources),
                       ('%s %d' % (names['interfaces'], interfaces), interfaces),
                       ('(%s: %d)' % (names['ports'], rewrite), rewrite)]
            shown = ' x '.join(text for text, n in factors if text and n > 1) or 'one'
            terms.append(('the rewriting rules, %s' % shown, points * pairs * rewrite))
        else:
            if self.two_gates:
                terms += [(names['interfaces'], interfaces), (names['sources'], sources)]
            elif self.gated:
                terms.append((' x '.join(names[k] for k, n in (('sources', sources), ('interfaces', interfaces)) if n),
                              pairs))
            if self.rewrite_chain or rewrite == 1:
                terms += [(names['exceptions'], exceptions), (names['listed'], listed if policy.masquerade_only else 0),
                          (names['final'], 0 if policy.masquerade_only else 1)]
                if self.rewrite_chain:
                    terms.append((names['ports'] + ', once', rewrite))
            else:
                terms.append((names['ports'], points * rewrite))
        terms.append((names['kept'], kept))
        self.terms = [(name, n) for name, n in terms if n]

    def check(self):
        """Refuse a policy whose iptables form is over :data:`IPTABLES_RULE_LIMIT`."""
        if self.count <= IPTABLES_RULE_LIMIT:
            return
        raise PolicyTooLargeError('this policy takes %d iptables rules for IPv%d, over the limit of %d per family (%s). '
                                  'iptables-save and iptables-restore slow down with every rule, and every run and resync '
                                  'cycle reads them all. Aggregate the CIDRs into fewer, wider ones, list fewer port ranges, '
                                  'interfaces or sources, or use backend nftables, whose sets hold any number of them. '
                                  'Nothing was changed.'
                                  % (self.count, self.family, IPTABLES_RULE_LIMIT,
                                     ' + '.join('%s: %d' % (name, n) for name, n in self.terms)))
