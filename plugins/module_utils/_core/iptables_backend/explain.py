# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The SNAT explanation's view of an iptables nat table: its POSTROUTING
chain as a ``trace.Program``, each rule's matches evaluated here, for one
flow.  A match this file does not know is ``trace.Unknown`` naming it,
never a guess.

Standard library only: this file runs on managed nodes.
"""

import ipaddress

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import trace
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.walk import Clues
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError

# The priority of iptables' nat POSTROUTING (NF_IP_PRI_NAT_SRC), legacy and iptables-nft alike.
PRIORITY = 100
# Matches that say nothing about a packet.
_NO_TEST = ('--comment',)
_PROTO_MODULES = ('tcp', 'udp', 'sctp', 'udplite', 'dccp')
# Targets that do not end the chain and do not change what the explanation looks at.
_CONTINUE = ('LOG', 'NFLOG', 'TRACE', 'AUDIT', 'CONNMARK_SAVE')


def _network(text):
    return ipaddress.ip_network(text, strict=False)


def _mark(text):
    value, _sep, mask = text.partition('/')
    return int(value, 0), int(mask, 0) if mask else 0xffffffff


def _ports(text):
    """``80`` / ``1000:2000`` -> (low, high)."""
    low, _sep, high = text.partition(':')
    return int(low or 0), int(high or 65535) if _sep else int(low)


def _test_one(module, option, values, flow, shown):
    """One match; True/False, or trace.Unknown naming it (``shown``)."""
    value = values[0] if values else ''
    if option in ('-s', '--source', '-d', '--destination'):
        address = flow.src if option in ('-s', '--source') else flow.dst
        network = _network(value)
        return network.version == address.version and address in network
    if option in ('-o', '--out-interface'):
        return trace.iface_match(value, flow.oif, shown)
    if option in ('-p', '--protocol'):
        if value in ('all', '0'):
            return True
        if flow.proto is None:
            raise trace.Unknown('%s (no proto given)' % shown)
        return flow.proto == trace.proto_number(value)
    if option in ('--dport', '--destination-port') and module in _PROTO_MODULES:
        if flow.dport is None:
            raise trace.Unknown('%s (no dport given)' % shown)
        low, high = _ports(value)
        return low <= flow.dport <= high
    if option in ('--dports', '--destination-ports') and module == 'multiport':
        if flow.dport is None:
            raise trace.Unknown('%s (no dport given)' % shown)
        return any(low <= flow.dport <= high for low, high in (_ports(p) for p in value.split(',')))
    if option == '--mark' and module == 'mark':
        mark, mask = _mark(value)
        return flow.mark & mask == mark
    if option == '--dst-type' and module == 'addrtype' and value == 'LOCAL':
        return flow.is_local(flow.dst, shown)
    if option == '--src-type' and module == 'addrtype' and value == 'LOCAL':
        return flow.is_local(flow.src, shown)
    raise trace.Unknown(shown)


def _tester(matches):
    tests = [(neg, module, option, values,
              ' '.join((['-m', module] if module else []) + (['!'] if neg else []) + [option] + values))
             for neg, module, option, values in matches if option not in _NO_TEST]

    def test(flow):
        for neg, module, option, values, shown in tests:
            try:
                held = _test_one(module, option, values, flow, shown)
            except ValueError:
                raise trace.Unknown(shown)
            if held == neg:
                return False
        return True
    return test


def _option(words, *flags):
    for i in range(len(words) - 1):
        if words[i] in flags:
            return words[i + 1]
    return None


def _action(target_words, chains):
    """The rule's action (``trace.Rule``)."""
    if not target_words:
        return ('continue',)
    goto = target_words[0] in ('-g', '--goto')
    target = target_words[1] if len(target_words) > 1 else ''
    rest = target_words[2:]
    if target in chains:
        return ('goto' if goto else 'jump', target)
    if target == 'MASQUERADE':
        return ('masquerade',)
    if target == 'SNAT':
        to = _option(rest, '--to-source', '--to')
        return ('snat', to) if to else ('unknown', ' '.join(target_words))
    if target in ('RETURN', 'ACCEPT', 'DROP'):
        return (target.lower(),)
    if target == 'MARK':
        for flag in ('--set-xmark', '--set-mark', '--or-mark', '--and-mark', '--xor-mark'):
            text = _option(rest, flag)
            if text is None:
                continue
            try:
                value, mask = _mark(text)
            except ValueError:
                break
            if flag == '--set-xmark':
                return ('mark', value, mask)
            if flag == '--set-mark':
                return ('mark', value, value | mask)
            if flag == '--or-mark':
                return ('mark', value, value)
            if flag == '--and-mark':
                return ('mark', 0, ~value & 0xffffffff)
            return ('mark', value, 0)
    if target in _CONTINUE:
        return ('continue',)
    return ('unknown', ' '.join(target_words))


class _Rule(trace.Rule):
    """One rule of the nat table as ``trace.follow`` sees it, read into
    matches and an action only when a flow reaches it, and its owner's
    clues only when it decides: one flow reaches few of a node's rules
    (another container's CNI chain, kube-proxy's service chains), so a node
    with thousands pays for the ones on the flow's path (bench/, part
    ``explain``)."""

    def __init__(self, rule, chains, cond_of):  # pylint: disable=super-init-not-called
        self.text = rule.line
        self.position = rule.index + 1
        self._rule = rule
        self._chains = chains
        self._cond_of = cond_of
        self._read = None

    def _compiled(self):
        if self._read is None:
            try:
                matches, target_words = self._rule.matches
                self._read = (_tester(matches), _action(target_words, self._chains), True)
            except MasqError:       # an unterminated quote
                self._read = (_unreadable(self._rule.line), ('continue',), False)
        return self._read

    def test(self, flow):
        return self._compiled()[0](flow)

    @property
    def action(self):
        return self._compiled()[1]

    @property
    def clues(self):
        """The owner's clues (of a rule that decides), or None: the rule cannot be read."""
        return Clues(self._cond_of(self._rule)) if self._compiled()[2] else None


def programs(nat, family, backend, cond_of):
    """The nat table ``nat`` (``iptables_save.NatTable``) of ``family`` read
    with ``backend`` (``iptables-nft``, ``iptables-legacy``): its
    POSTROUTING as one ``trace.Program`` (none when it has no POSTROUTING);
    ``cond_of(rule)``: the audit's ``conds.Cond`` of a rule (its owner's clues)."""
    if 'POSTROUTING' not in nat.chains:
        return []
    chains = dict((name, [_Rule(rule, nat.chains, cond_of) for rule in rules]) for name, rules in nat.chains.items())
    return [trace.Program(backend, 'nat', 'POSTROUTING', PRIORITY, chains, (family,))]


def _unreadable(line):
    def test(_flow):
        raise trace.Unknown('the rule %s (cannot be read)' % line)
    return test
