# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The policy in iptables' own words: the rules of our chain (and of its
sub-chains) and the POSTROUTING jump, exactly as the Kubernetes
ip-masq-agent writes them and as ``iptables-save`` prints them (the form
the Kubernetes docs show, so ``iptables -t nat -L`` matches them); the
restore lines that delete rules and chains; rule comparison whatever the
quoting; the diff-mode text.  Pure functions of the policy: nothing here
runs a tool (``tools.py``) or plans a change (``chain.py``).

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.layout import (
    IptablesLayout,
    gates as policy_gates,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.save import rule_key
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.tools import ON_PATH, TOOLS
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import (
    FAMILIES,
    port_text,
    snat_text,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.ranges import CATCH_ALL

MASQ_PROTOCOLS = ('tcp', 'udp', 'sctp')

# The jump's comment (the same in both rule formats) and the match every
# docs-format rule carries; the chain rules' comments are the policy's
# (policy.COMMENTS).  rule_format upstream's chain rules carry no addrtype
# match: the jump already has it.
COMMENT_JUMP = ('ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination '
                'traffic to our custom %s chain')
NOT_LOCAL = '-m addrtype ! --dst-type LOCAL'
# The rules of the options table's extra options (``options.Option.extra``):
# option name -> ``rule(value, policy, family, chains) -> chains``, ``chains``
# as :func:`chains` returns them (the policy's chain first, ``-A`` lines as
# iptables-save prints them); called in the table's order for a value other
# than the option's default, after the policy's own rules are laid out.
OPTION_RULES = {}


def removal_lines(rules, chains=()):
    """Restore lines (under ``--noflush``) that delete the given rules
    (``iptables_save.Rule``) and then flush and delete the given chains."""
    lines = [rule.deletion() for rule in rules]
    for chain in chains:
        lines.extend((':%s - [0:0]' % chain, '-X %s' % chain))
    return lines


def probability_text(probability):
    """A probability as iptables-save prints it after the kernel's
    fixed-point rounding (u32 = lround(p * 2^31), printed with 11 decimals)."""
    fixed = int(probability * 0x80000000 + 0.5)
    return '%.11f' % (fixed / 0x80000000)


def jump_spec(chain):
    """The POSTROUTING jump, without the leading ``-A POSTROUTING``."""
    return '-m comment --comment "%s" %s -j %s' % (COMMENT_JUMP % chain, NOT_LOCAL, chain)


def _matched(policy, comment):
    """A rule's comment match, and (rule_format docs) the addrtype match."""
    tail = '' if policy.rule_format == 'upstream' else ' ' + NOT_LOCAL
    return '-m comment --comment "%s"%s' % (comment, tail)


def _address_match(option, cidr, family):
    """``-s``/``-d`` as iptables-save prints it: nothing for everything."""
    return '' if cidr is None or cidr == CATCH_ALL[family] else '%s %s ' % (option, cidr)


def _target(policy, family, ports, random_fully):
    """``-j MASQUERADE ...`` or, with snat_to, ``-j SNAT --to-source ...``."""
    verb, addresses = policy.target(family)
    if verb == 'MASQUERADE':
        text = '-j MASQUERADE' + (' --to-ports %s' % port_text(*ports) if ports else '')
    else:
        where = snat_text(*addresses)
        if ports:
            where = '%s:%s' % ('[%s]' % where if family == 6 else where, port_text(*ports))
        text = '-j SNAT --to-source ' + where
    return text + (' --random-fully' if random_fully else '')


def _rewrite_specs(policy, family, random_fully, comment, destination=None, gates=None):
    """The rules that rewrite the source, for each source / out-interface
    pair (``gates``, by default the policy's: one without matches unless
    they are set): with to_ports one rule per protocol and range, a range
    picked with the probability of its share of the ports still left to
    pick from; then the rule for the rest."""
    match = _matched(policy, comment)
    specs = []
    for source, interface in policy_gates(policy, family) if gates is None else gates:
        head = (_address_match('-s', source, family) + _address_match('-d', destination, family)
                + ('-o %s ' % interface if interface else ''))
        sizes = [high - low + 1 for low, high in policy.port_ranges]
        for proto in MASQ_PROTOCOLS if policy.port_ranges else ():
            remaining = sum(sizes)
            for ports, size in zip(policy.port_ranges, sizes):
                stat = ''
                if size != remaining:
                    stat = ' -m statistic --mode random --probability %s' % probability_text(size / remaining)
                specs.append('%s-p %s %s%s %s' % (head, proto, match, stat,
                                                  _target(policy, family, ports, random_fully)))
                remaining -= size
        specs.append('%s%s %s' % (head, match, _target(policy, family, None, random_fully)))
    return specs


def chain_rules(policy, family, random_fully=None):
    """The rules for one family, as iptables-save prints them (which
    writes no ``-d`` for 0.0.0.0/0 or ::/0): the chain's, then those of its
    sub-chains (:func:`chains`).  ``random_fully`` None: the policy's own
    choice, or off when it leaves it to the iptables version (``plan``
    passes ``iptables_layout.random_fully(policy, version)``)."""
    return [line for rules in chains(policy, family, random_fully).values() for line in rules]


def chains(policy, family, random_fully=None):
    """Our chains for one family and their rules (name -> rules, the
    policy's chain first), in the form ``iptables_layout.IptablesLayout``
    chose: the one chain (flat), or the chain and the sub-chains it goes to
    (split)."""
    if random_fully is None:
        random_fully = bool(policy.random_fully)
    layout = IptablesLayout(policy, family)
    if not layout.split:
        out = {policy.chain: _flat_rules(policy, family, random_fully)}
    else:
        out = _split_chains(policy, family, random_fully, layout)
    for rule, value in policy.extra_rules(ON_PATH, OPTION_RULES):
        out = rule(value, policy, family, out)
    return out


def _flat_rules(policy, family, random_fully):
    """The one chain, as the upstream agent writes it.  In order: the
    exceptions (rewritten), the kept destinations (RETURN), then the rewrite
    of everything else or, with masquerade_cidrs, of the listed
    destinations only (the rest falls off the chain's end).  Each rewriting
    rule is written for every source and interface pair."""
    ret = _matched(policy, policy.comments()['return']) + ' -j RETURN'
    specs = []
    for cidr in policy.exceptions[family]:
        specs.extend(_rewrite_specs(policy, family, random_fully, policy.action_comment(family, 'exception'), cidr))
    specs.extend(_address_match('-d', cidr, family) + ret for cidr in policy.kept(family))
    if policy.masquerade_only:
        for cidr in policy.listed[family]:
            specs.extend(_rewrite_specs(policy, family, random_fully, policy.action_comment(family, 'listed'), cidr))
    else:
        specs.extend(_rewrite_specs(policy, family, random_fully, policy.action_comment(family)))
    prefix = '-A %s ' % policy.chain
    return [prefix + spec for spec in specs]


def _split_chains(policy, family, random_fully, layout):
    """The split form (``iptables_layout.IptablesLayout``): the gates go (``-g``) to
    the policy sub-chain, whose rewriting rules go to the rewrite sub-chain.
    A goto's RETURN, or the end of the chain it went to, leaves the policy
    as the chain's own RETURN or end does, so the decisions are the flat
    form's: a packet from another source or interface passes no gate and
    keeps its source."""
    comments = policy.comments()
    names = policy.sub_chains
    main = policy.chain
    out = {main: []}     # dicts keep their order (no collections: its import costs a resync cycle)
    body = main
    if layout.gated:
        body = names['policy']
        if layout.two_gates:
            gate = _matched(policy, comments['gate_both'])
            to_sources = _matched(policy, comments['to_sources'])
            out[main] = ['-o %s %s -g %s' % (interface, to_sources, names['sources'])
                         for interface in policy.out_interfaces]
            out[names['sources']] = ['%s%s -g %s' % (_address_match('-s', source, family), gate, body)
                                     for source in policy.sources[family]]
        else:
            kind = ('gate_both' if policy.sources[family] and policy.out_interfaces
                    else 'gate_sources' if policy.sources[family] else 'gate_interfaces')
            gate = _matched(policy, comments[kind])
            out[main] = ['%s%s%s -g %s' % (_address_match('-s', source, family),
                                           '-o %s ' % interface if interface else '', gate, body)
                         for source, interface in policy_gates(policy, family)]
        out[body] = []

    if layout.rewrite_chain:
        def rewrite(comment, destination=None):
            return ['%s%s -g %s' % (_address_match('-d', destination, family), _matched(policy, comment),
                                    names['rewrite'])]
    else:
        def rewrite(comment, destination=None):
            return _rewrite_specs(policy, family, random_fully, comment, destination, gates=[(None, None)])

    specs = out[body]
    for cidr in policy.exceptions[family]:
        specs.extend(rewrite(policy.action_comment(family, 'exception'), cidr))
    ret = _matched(policy, comments['return']) + ' -j RETURN'
    specs.extend(_address_match('-d', cidr, family) + ret for cidr in policy.kept(family))
    if policy.masquerade_only:
        for cidr in policy.listed[family]:
            specs.extend(rewrite(policy.action_comment(family, 'listed'), cidr))
    else:
        specs.extend(rewrite(policy.action_comment(family)))
    if layout.rewrite_chain:
        out[names['rewrite']] = _rewrite_specs(policy, family, random_fully, policy.action_comment(family, 'rewrite'),
                                               gates=[(None, None)])
    return dict((name, ['-A %s %s' % (name, spec) for spec in rules]) for name, rules in out.items())


def same_rule(current, desired):
    return current == desired or rule_key(current) == rule_key(desired)


def same_rules(current, desired):
    if len(current) != len(desired):
        return False
    return all(same_rule(c, d) for c, d in zip(current, desired))


def drop_lines(chains):
    """Restore lines that flush and then delete ``chains`` (all flushed
    first: a chain can be deleted only once no rule goes to it)."""
    return [':%s - [0:0]' % name for name in chains] + ['-X %s' % name for name in chains]


def sub_declarations(lines, chain):
    """``:NAME - [0:0]`` for each chain other than ``chain`` that ``lines`` (``-A`` lines) fill."""
    names = []
    for line in lines:
        name = line.split(' ', 2)[1] if line.startswith('-A ') else None
        if name and name != chain and name not in names:
            names.append(name)
    return [':%s - [0:0]' % name for name in names]


def others_text(others):
    """Diff lines of the chains of ours under another name that a run
    removes (a result's ``others``): there before, gone after."""
    out = []
    for other in others or []:
        out.extend(other['jumps'])
        if other['chain_exists']:
            out.append(':%s - [0:0]' % other['chain'])
        out.extend(sub_declarations(other['rules'], other['chain']))
        out.extend(other['rules'])
    return out


def _diff_lines(result, fam, which):
    """Our lines of one family's nat table, before or after the run."""
    out = []
    if which == 'before':
        out.extend(fam['before']['jumps'])
        if fam['before']['chain_exists']:
            out.append(':%s - [0:0]' % result['chain'])
        out.extend(sub_declarations(fam['before']['rules'], result['chain']))
        out.extend(fam['before']['rules'])
        out.extend(others_text(fam.get('others')))
    elif fam['managed']:
        out.append(fam['jump'])
        out.append(':%s - [0:0]' % result['chain'])
        out.extend(sub_declarations(fam['rules'], result['chain']))
        out.extend(fam['rules'])
    return out


def diff_text(result, which):
    """Text for diff mode: the chain and its jumps per family, before or after;
    a family with nothing of ours on either side (IPv6 not managed) is left out."""
    out = []
    for family in FAMILIES:
        fam = result.get('ipv%d' % family)
        if not fam or 'before' not in fam:
            continue
        if not (_diff_lines(result, fam, 'before') or _diff_lines(result, fam, 'after')):
            continue
        out.append('# %s nat (IPv%d)' % (TOOLS[family][0], family))
        out.extend(_diff_lines(result, fam, which))
    return '\n'.join(out) + '\n' if out else ''


def chain_drift(live, wanted):
    """:func:`drift.compare` of our iptables chain's rules as read and as wanted
    (``iptables-save`` lines); None when they are the same."""
    # Start-up cost: the drift's comparison is loaded only by a run that rewrites the chain.
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.drift import compare  # pylint: disable=import-outside-toplevel

    drift = compare(live, wanted, rule_key)
    return drift if drift['missing'] or drift['extra'] or drift['reordered'] else None
