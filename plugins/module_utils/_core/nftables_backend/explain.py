# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The SNAT explanation's view of an nft table: each ``type nat hook
postrouting`` base chain as a ``trace.Program``, each rule's statements
(libnftables JSON, as ``nft_json.parse_nft`` read them) evaluated here for
one flow.  An expression this file does not know is ``trace.Unknown``
naming it (in nft syntax), never a guess.

Standard library only: this file runs on managed nodes.
"""

import ipaddress

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import trace
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.walk import Clues
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import render_expr, render_rule, render_stmt

# Named priorities nft may print in JSON (libnftables writes numbers; kept for older ones).
PRIORITIES = {'srcnat': 100, 'dstnat': -100, 'filter': 0, 'mangle': -150, 'raw': -300, 'security': 50}
_CONTINUE = ('counter', 'log', 'limit', 'notrack')
_ADDRESS_PROTOCOLS = {'ip': 4, 'ip6': 6}
_PORT_PROTOCOLS = ('th', 'tcp', 'udp', 'sctp', 'udplite', 'dccp')


def _value(left, flow, table):
    """What expression ``left`` is for ``flow``: an address, a number, a name."""
    if isinstance(left, dict) and len(left) == 1:
        key, val = next(iter(left.items()))
        if key == 'payload' and isinstance(val, dict):
            proto, field = val.get('protocol'), val.get('field')
            if proto in _ADDRESS_PROTOCOLS and field in ('saddr', 'daddr'):
                if flow.family != _ADDRESS_PROTOCOLS[proto]:
                    return _WRONG_FAMILY
                return flow.src if field == 'saddr' else flow.dst
            if proto in _ADDRESS_PROTOCOLS and field in ('protocol', 'nexthdr'):
                if flow.family != _ADDRESS_PROTOCOLS[proto]:
                    return _WRONG_FAMILY
                return _need(flow.proto, 'proto')
            if proto in _PORT_PROTOCOLS and field == 'dport':
                if flow.proto is None:
                    raise _NoValue('proto')
                if proto != 'th' and trace.proto_number(proto) != flow.proto:
                    return _WRONG_FAMILY     # tcp dport on a udp packet: the match fails
                return _need(flow.dport, 'dport')
        if key == 'meta' and isinstance(val, dict):
            meta = val.get('key')
            if meta == 'oifname':
                return _need(flow.oif, 'out_interface')
            if meta == 'mark':
                return flow.mark
            if meta == 'l4proto':
                return _need(flow.proto, 'proto')
            if meta == 'nfproto':
                return 'ipv%d' % flow.family
        if key in ('&', '|', '^') and isinstance(val, list) and len(val) == 2 and isinstance(val[1], int):
            base = _value(val[0], flow, table)
            if not isinstance(base, int) or isinstance(base, bool):
                raise _NoValue(None)
            return base & val[1] if key == '&' else base | val[1] if key == '|' else base ^ val[1]
        if key == 'fib' and isinstance(val, dict) and val.get('result') == 'type':
            flags = val.get('flags') or []
            flags = [flags] if isinstance(flags, str) else flags
            if flags in (['daddr'], ['saddr']):
                address = flow.dst if flags == ['daddr'] else flow.src
                return 'local' if flow.is_local(address, 'fib %s type' % flags[0]) else _NOT_LOCAL
    raise _NoValue(None)


class _NoValue(Exception):
    """An expression without a value for this flow: ``what`` the flow lacks (None: not known here)."""

    def __init__(self, what):
        Exception.__init__(self, what)
        self.what = what


def _need(value, what):
    if value is None:
        raise _NoValue(what)
    return value


_WRONG_FAMILY = object()    # ip saddr of an IPv6 packet: no match at all
_NOT_LOCAL = object()       # fib type of a non-local address: not "local", other type unknown


def _elements(right, table):
    """The elements a right-hand side stands for: a set, a named set, or one value."""
    if isinstance(right, str) and right.startswith('@'):
        named = table.sets.get(right[1:])
        if named is None:
            raise _NoValue(None)
        items = named.get('elem', [])
    elif isinstance(right, dict) and 'set' in right:
        items = right['set']
    else:
        return [right]
    items = items if isinstance(items, list) else [items]
    return [i['elem'].get('val') if isinstance(i, dict) and isinstance(i.get('elem'), dict) else i for i in items]


def _equal(value, element):
    """Whether ``value`` is ``element`` (an address in a prefix or range, a name, a number)."""
    if isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        if isinstance(element, dict) and 'prefix' in element:
            p = element['prefix']
            return value in ipaddress.ip_network('%s/%s' % (p.get('addr'), p.get('len')), strict=False)
        if isinstance(element, dict) and 'range' in element:
            low, high = (ipaddress.ip_address(x) for x in element['range'])
            return low.version == value.version and low <= value <= high
        if isinstance(element, str):
            element = ipaddress.ip_address(element)
            return element.version == value.version and element == value
        raise _NoValue(None)
    if isinstance(value, str):
        if not isinstance(element, str):
            raise _NoValue(None)
        return value.startswith(element[:-1]) if element.endswith('*') else value == element
    if isinstance(element, dict) and 'range' in element:
        low, high = element['range']
        return low <= value <= high
    if isinstance(element, str):
        number = trace.proto_number(element)
        if number is None:
            raise _NoValue(None)
        element = number
    if not isinstance(element, int):
        raise _NoValue(None)
    return value == element


def _match(m, flow, table):
    left, right, op = m.get('left'), m.get('right'), m.get('op', '==')
    value = _value(left, flow, table)
    if value is _WRONG_FAMILY:
        return False
    if value is _NOT_LOCAL:
        if right != 'local' or op not in ('==', '!=', 'in'):
            raise _NoValue(None)
        return op == '!='
    if op in ('==', 'in', '!='):
        hit = any(_equal(value, e) for e in _elements(right, table))
        return hit != (op == '!=')
    if op in ('<', '>', '<=', '>=') and isinstance(value, int) and isinstance(right, int):
        return {'<': value < right, '>': value > right, '<=': value <= right, '>=': value >= right}[op]
    raise _NoValue(None)


def _verdict(v):
    """A verdict statement (or a vmap's data) as a trace action, or None."""
    if not isinstance(v, dict) or len(v) != 1:
        return None
    key, val = next(iter(v.items()))
    if key in ('jump', 'goto') and isinstance(val, dict):
        return (key, val.get('target'))
    if key in ('return', 'accept', 'drop'):
        return (key,)
    if key == 'continue':
        return ('continue',)
    return None


def _snat_to(val):
    """``snat``'s address, as nft prints it."""
    addr = val.get('addr') if isinstance(val, dict) else None
    if addr is None:
        return None
    return render_expr(addr)


def _statement(s, flow, table):
    """``(held, action)``: a match's verdict (action None) or what the statement does."""
    if not isinstance(s, dict) or len(s) != 1:
        raise _NoValue(None)
    key, val = next(iter(s.items()))
    if key == 'match' and isinstance(val, dict):
        return _match(val, flow, table), None
    if key in _CONTINUE:
        return True, None
    if key == 'masquerade':
        return True, ('masquerade',)
    if key == 'snat' and isinstance(val, dict) and _snat_to(val):
        return True, ('snat', _snat_to(val))
    if key == 'mangle' and isinstance(val, dict) and val.get('key') == {'meta': {'key': 'mark'}}:
        value = val.get('value')
        value = value if isinstance(value, int) else _value(value, flow, table)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _NoValue(None)
        return True, ('mark', value & 0xffffffff, 0xffffffff)
    if key == 'vmap' and isinstance(val, dict):
        value = _value(val.get('key'), flow, table)
        data = val.get('data')
        if isinstance(data, str) and data.startswith('@'):
            items = table.maps.get(data[1:])
            if items is None:
                raise _NoValue(None)
        elif isinstance(data, dict) and 'set' in data:
            items = data['set']
        else:
            raise _NoValue(None)
        for item in items if isinstance(items, list) else [items]:
            if isinstance(item, list) and len(item) == 2 and value is not _WRONG_FAMILY and _equal(value, item[0]):
                action = _verdict(item[1])
                if action is None:
                    raise _NoValue(None)
                return True, action
        return True, ('continue',)
    action = _verdict(s)
    if action is not None:
        return True, action
    raise _NoValue(None)


class _NftRule:
    """One rule: its statements, tried in order for a flow."""

    def __init__(self, rule, table):
        self.rule = rule
        self.table = table
        self.done = None

    def test(self, flow):
        """Whether every match holds; the action the rule then takes is ``self.done``
        (the explanation's ``trace.Rule.action`` reads it through :func:`_Action`)."""
        self.done = ('continue',)
        for s in self.rule.get('expr', []):
            try:
                held, action = _statement(s, flow, self.table)
            except _NoValue as e:
                shown = render_stmt(s)
                raise trace.Unknown('%s (no %s given)' % (shown, e.what) if e.what else shown)
            except ValueError:
                raise trace.Unknown(render_stmt(s))
            if not held:
                return False
            if action is None or action == ('continue',):
                continue
            if action[0] == 'mark':
                flow.mark = action[1]
                continue
            self.done = action
            return True
        return True


class _Action:
    """A rule's action, read after its test (an nft rule's verdict may come from a map)."""

    def __init__(self, rule):
        self.rule = rule

    def __getitem__(self, index):
        return self.rule.done[index]


def base_priority(chain, where='this base chain'):
    """A base chain's priority as a number: libnftables writes one; a name
    (``srcnat``) or a name and an offset (``srcnat + 1``, as nft lists our
    chain) from an older one is read too.  Anything else cannot be put in
    the kernel's order: an error naming ``where`` and the priority, never a
    guess (nor a comparison of a name with a number)."""
    prio = chain.get('prio')
    if isinstance(prio, int) and not isinstance(prio, bool):
        return prio
    words = prio.split() if isinstance(prio, str) else []
    if len(words) == 3 and words[0] in PRIORITIES and words[1] in ('+', '-') and words[2].isdigit():
        return PRIORITIES[words[0]] + int(words[2]) * (1 if words[1] == '+' else -1)
    if len(words) == 1 and words[0] in PRIORITIES:
        return PRIORITIES[words[0]]
    raise MasqError('cannot explain: nft lists %s with priority %r, which is neither a number nor one of %s '
                    '(with an offset); the order of the nat postrouting hook is unknown. Nothing was changed.'
                    % (where, prio, ', '.join(sorted(PRIORITIES))))


def programs(t, our_chain, families, cond_of):
    """The ``type nat hook postrouting`` base chains of nft table ``t``
    (``nft_json.NftTable``) as ``trace.Program`` objects; ``our_chain``:
    the table of that name in lower case is ours; ``families``: the IP
    families its rules act on; ``cond_of(expr, comment)``: the audit's
    ``conds.Cond`` of a rule (its owner's clues)."""
    starts = [n for n, c in t.chains.items() if c.get('type') == 'nat' and c.get('hook') == 'postrouting']
    if not starts:
        return []
    chains = {}
    for name, rules in t.rules.items():
        out = []
        for index, rule in enumerate(rules):
            nft_rule = _NftRule(rule, t)
            clues = Clues(cond_of(rule.get('expr', []), rule.get('comment')), t.name)
            out.append(trace.Rule(render_rule(rule), index + 1, nft_rule.test, _Action(nft_rule), clues))
        chains[name] = out
    ours = t.name.lower() == our_chain.lower()
    return [trace.Program('nft', '%s %s' % (t.family, t.name), start,
                          base_priority(t.chains[start], 'base chain %s of table %s %s' % (start, t.family, t.name)),
                          chains, families, ours=ours, nft_table=t.name)
            for start in starts]
