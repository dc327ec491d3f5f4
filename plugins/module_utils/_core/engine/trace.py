# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""One flow through one nat postrouting base chain: what the SNAT
explanation (``_explain/``) asks each backend, in no technology's terms.

A backend hands over a :class:`Program` per base chain: its chains of
rules, each rule with ``test(flow)`` (True/False, or :class:`Unknown`
naming a match the backend cannot evaluate) and ``action`` (what it does
when it matches).  :func:`follow` runs the flow through it the way the
kernel does (jumps, gotos, returns, the chain's end) and returns a
:class:`Trace`: the NAT the chain decides on (``masquerade``, ``snat``), or
none, or ``unknown``, with the path taken and the rule that decided.

Standard library only: this file runs on managed nodes.
"""

import ipaddress

# A chain's nesting the kernel allows is far below this; a ruleset that
# loops (only a goto can) is cut here, never followed forever.
MAX_STEPS = 100000
MAX_DEPTH = 64

PROTOCOLS = {'icmp': 1, 'tcp': 6, 'udp': 17, 'gre': 47, 'esp': 50, 'ah': 51, 'ipv6-icmp': 58, 'icmpv6': 58,
             'sctp': 132, 'udplite': 136}


class Unknown(Exception):
    """A match (or action) a backend cannot evaluate for a flow: ``what`` names it."""

    def __init__(self, what):
        Exception.__init__(self, what)
        self.what = what


def proto_number(value):
    """6 for ``tcp``, ``6`` or 6; None for what is not a protocol."""
    if isinstance(value, int):
        return value
    text = str(value).lower()
    if text.isdigit():
        return int(text)
    return PROTOCOLS.get(text)


class Flow:
    """The first packet of a connection as it reaches the postrouting hook:
    ``src``, ``dst`` (``ipaddress`` objects of one family), ``proto`` (a
    number or None: not given), ``dport`` (int or None), ``oif`` (the out
    interface's name or None), ``mark`` (the packet mark, an int; it
    changes as MARK rules act on it), ``local`` (the node's own addresses,
    a set, or None: not read)."""

    def __init__(self, src, dst, proto=None, dport=None, oif=None, mark=0, local=None):
        self.src = ipaddress.ip_address(src)
        self.dst = ipaddress.ip_address(dst)
        self.proto = proto_number(proto) if proto is not None else None
        self.dport = dport
        self.oif = oif
        self.mark = mark
        self.local = local

    @property
    def family(self):
        return self.src.version

    def copy(self):
        return Flow(self.src, self.dst, self.proto, self.dport, self.oif, self.mark, self.local)

    def is_local(self, address, what):
        """Whether ``address`` is the node's own (Unknown when the node's addresses were not read)."""
        if self.local is None:
            raise Unknown('%s (the node\'s own addresses were not read)' % what)
        return address in self.local


def iface_match(pattern, name, what):
    """An interface match (``eth+`` in iptables, ``eth*`` in nft: a prefix)."""
    if name is None:
        raise Unknown('%s (no out_interface given)' % what)
    if pattern.endswith(('+', '*')):
        return name.startswith(pattern[:-1])
    return name == pattern


class Rule:
    """One rule as :func:`follow` sees it: ``text`` (as its tool prints it),
    ``position`` (1-based in its chain), ``test(flow)``, and ``action``: a
    tuple, ``('jump', chain)``, ``('goto', chain)``, ``('return',)``,
    ``('accept',)``, ``('drop',)``, ``('masquerade',)``, ``('snat', to)``,
    ``('mark', value, mask)`` (mark = (mark & ~mask) ^ value, then go on),
    ``('continue',)`` (counters, logs, comments: go on) or
    ``('unknown', what)``.  ``clues``: who wrote it, for the owners
    (``walk.Clues`` of the rule alone; the path's are added)."""

    def __init__(self, text, position, test, action, clues=None):
        self.text = text
        self.position = position
        self.test = test
        self.action = action
        self.clues = clues


class Program:
    """One base chain at the nat postrouting hook and what it reaches:
    ``backend`` (the audit's name of where it lives: ``iptables-nft``,
    ``iptables-legacy``, ``nft``), ``table`` (``nat``, ``inet
    ip-masq-agent``), ``start`` (the base chain), ``priority`` (the hook
    priority), ``chains`` (name -> [:class:`Rule`]), ``families`` (the IP
    families its rules act on), ``ours`` (the table is ours: a whole nft
    table) and ``nft_table`` (the nft table's name, for the owners)."""

    def __init__(self, backend, table, start, priority, chains, families, ours=False, nft_table=None):
        self.backend = backend
        self.table = table
        self.start = start
        self.priority = priority
        self.chains = chains
        self.families = tuple(families)
        self.ours = ours
        self.nft_table = nft_table


class Trace:
    """What one base chain does to a flow: ``verdict`` (``masquerade``,
    ``snat``, ``unknown`` or None: no NAT here, the next chain is asked),
    ``to`` (snat's address), ``reason`` (unknown's), ``rule`` (the rule
    that decided, or the one unknown stopped at), ``chain`` (its chain),
    ``via`` (the chain names from the base chain to it, for the owners),
    ``clues`` (its Rule's), ``path`` (steps: dicts with ``action``
    (jump, goto, return, end, decide, unknown), ``chain``, ``position``,
    ``rule`` and ``why``), and ``mark`` (the packet mark after it)."""

    def __init__(self):
        self.verdict = None
        self.to = None
        self.reason = None
        self.rule = None
        self.chain = None
        self.via = []
        self.clues = None
        self.path = []
        self.mark = None


def _step(action, chain, rule, why):
    return {'action': action, 'chain': chain, 'position': rule.position if rule else None,
            'rule': rule.text if rule else None, 'why': why}


def follow(program, flow):
    """Run ``flow`` (changed: its mark, by MARK rules) through ``program``; a :class:`Trace`."""
    trace = Trace()
    stack = []                       # (chain, next index) to return to
    chain, index = program.start, 0
    steps = 0
    while True:
        rules = program.chains.get(chain, [])
        if index >= len(rules):
            if not stack:
                trace.path.append(_step('end', chain, None, 'end of the base chain %s: no NAT here' % chain))
                break
            back, index = stack.pop()
            trace.path.append(_step('return', chain, None, 'end of %s: back to %s' % (chain, back)))
            chain = back
            continue
        rule = rules[index]
        index += 1
        steps += 1
        if steps > MAX_STEPS:
            return _unknown(trace, chain, rule, stack, 'more than %d rules on one path (a loop?)' % MAX_STEPS)
        try:
            held = rule.test(flow)
        except Unknown as e:
            return _unknown(trace, chain, rule, stack, 'cannot evaluate %s' % e.what)
        if not held:
            continue
        kind = rule.action[0]
        if kind == 'continue':
            continue
        if kind == 'mark':
            flow.mark = (flow.mark & ~rule.action[2] & 0xffffffff) ^ rule.action[1]
            continue
        if kind in ('jump', 'goto'):
            target = rule.action[1]
            if len(stack) >= MAX_DEPTH:
                return _unknown(trace, chain, rule, stack, 'jumps nested deeper than %d' % MAX_DEPTH)
            trace.path.append(_step(kind, chain, rule, 'every match held: %s to %s' % (kind, target)))
            if kind == 'jump':
                stack.append((chain, index))
            chain, index = target, 0
            continue
        if kind == 'return':
            if not stack:
                trace.path.append(_step('return', chain, rule, 'return in the base chain: no NAT here'))
                break
            back, index = stack.pop()
            trace.path.append(_step('return', chain, rule, 'every match held: back to %s' % back))
            chain = back
            continue
        if kind in ('accept', 'drop'):
            trace.path.append(_step(kind, chain, rule, '%s: this base chain ends here with no NAT' % kind))
            if kind == 'drop':
                return _unknown(trace, chain, rule, stack, 'the flow is dropped here, not translated')
            break
        if kind in ('masquerade', 'snat'):
            trace.verdict = kind
            trace.to = rule.action[1] if kind == 'snat' else None
            trace.path.append(_step('decide', chain, rule, 'every match held: %s' % kind))
            _decided(trace, chain, rule, stack)
            break
        return _unknown(trace, chain, rule, stack, 'cannot evaluate %s' % rule.action[1])
    trace.mark = flow.mark
    return trace


def _decided(trace, chain, rule, stack):
    trace.rule = rule
    trace.chain = chain
    trace.via = [c for c, _i in stack] + [chain]
    trace.clues = rule.clues


def _unknown(trace, chain, rule, stack, reason):
    trace.verdict = 'unknown'
    trace.reason = reason
    trace.path.append(_step('unknown', chain, rule, reason))
    _decided(trace, chain, rule, stack)
    return trace
