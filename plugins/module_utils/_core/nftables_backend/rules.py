# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The policy in nftables' own words: one table of our own, natively.

For the chain name ``IP-MASQ-AGENT`` (the name in lower case names the
table) and the default list, ``nft list table inet ip-masq-agent`` shows::

    table inet ip-masq-agent {
        set nonmasq-ipv4 {
            type ipv4_addr
            flags interval
            elements = { 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 }
        }

        chain postrouting {
            type nat hook postrouting priority srcnat + 1; policy accept;
            fib daddr type local return comment "..."
            ip daddr 169.254.0.0/16 return comment "..."     (unless masq_link_local)
            ip daddr @nonmasq-ipv4 return comment "..."
            meta nfproto ipv4 masquerade comment "..."
        }
    }

With IPv6 a set ``nonmasq-ipv6`` and its two rules (``fe80::/10``, the set)
follow the IPv4 ones and the final ``masquerade`` is for both families; with
``to_ports`` one ``meta l4proto { tcp, udp, sctp } masquerade to :LOW-HIGH``
rule per range comes before it, all but the last picked at random with the
weight of its size (``numgen random mod REMAINING < SIZE``, the same odds
as iptables' ``-m statistic``); ``random_fully`` adds ``fully-random``.

The CIDRs are merged here (overlapping and adjacent ones joined), so the load
never fails on them; the set is declared ``auto-merge`` for what is added to
it later by hand, which nft 1.1 keeps and nft 1.0 (Debian 12) drops from a
JSON transaction.

A set lookup is one step whatever the list's length, where iptables walks
one RETURN rule per CIDR.  There is no jump to keep in place: the chain is a
base chain at the postrouting hook, and ``jump_position`` places it
(:func:`chain_priority`): ``append`` (the default) at ``srcnat + 1``, after
iptables' nat POSTROUTING (legacy and iptables-nft, both at srcnat) as an
appended jump runs after the rules before it, ``first`` at ``srcnat - 1``,
before it.  Never at srcnat itself: of base chains of equal priority the
kernel runs the one made last first, which no listing shows.  The kernel
cannot move a base chain to another priority; the table is replaced whole
(``replace_commands``), in one transaction, like any other change.

Here: the table the policy wants (``Desired``: its sets, its rules and the
commands that add them), how nft lists a table (``render_desired``,
``render_live``), a rule's text whatever order its sets come in, and the
transaction that replaces or deletes the table.  Pure functions of the
policy: ``tools.py`` runs nft, ``table.py`` compares and plans.

Both the transaction and the listings are libnftables JSON, so no name ever
goes through nft's command-line parser.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.intervals import (
    BITS,
    address_number as _number,
    cidr_interval,
    merge,
    number_address as _address,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.names import CHAIN, FAMILY, NAME, table_name
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import render_rule
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.ranges import LINK_LOCAL

SRCNAT = 100            # nft's srcnat: the priority of iptables' nat POSTROUTING, legacy and iptables-nft
# jump_position -> our chain's priority: after every base chain at srcnat (append) or before them (first).
CHAIN_PRIORITIES = {'append': SRCNAT + 1, 'first': SRCNAT - 1}
SETS = {4: 'nonmasq-ipv4', 6: 'nonmasq-ipv6'}
# The sets of the extensions, per family: masquerade_cidrs (instead of the
# non-masquerade list), exception_cidrs and source_cidrs.
SET_KINDS = ('nonmasq', 'masq', 'exceptions', 'sources')
SET_NAMES = frozenset('%s-ipv%d' % (kind, family) for kind in SET_KINDS for family in (4, 6))
ADDR_TYPES = {4: 'ipv4_addr', 6: 'ipv6_addr'}
PROTOCOLS = {4: 'ip', 6: 'ip6'}
NFPROTO = {4: 'ipv4', 6: 'ipv6'}
MASQ_PROTOCOLS = ('tcp', 'udp', 'sctp')
# The rules of the options table's extra options (``options.Option.extra``):
# option name -> ``rule(value, policy, rules) -> rules``, ``rules`` the
# chain's as ``(expr, comment, family served or None)``, libnftables JSON;
# called in the table's order for a value other than the option's default,
# after the policy's own rules are laid out (``Desired``).
OPTION_RULES = {}


def chain_priority(policy):
    """Our base chain's priority for ``policy`` (its ``jump_position``)."""
    return CHAIN_PRIORITIES[policy.jump_position]


def priority_text(prio):
    """A nat postrouting chain's priority as ``nft list`` prints it: ``srcnat``,
    ``srcnat + 1``, ``srcnat - 1`` (an offset up to 10 by name), else the number."""
    if not isinstance(prio, int) or isinstance(prio, bool):
        return str(prio)
    offset = prio - SRCNAT
    if offset == 0:
        return 'srcnat'
    if abs(offset) <= 10:
        return 'srcnat %s %d' % ('+' if offset > 0 else '-', abs(offset))
    return str(prio)


# --------------------------------------------------------------------------
# Address intervals: what an interval set holds, whatever form it was given in
# --------------------------------------------------------------------------

def interval_element(first, last, family):
    """An interval as nft writes a set element: an address, a prefix where it is one, else a range."""
    size = last - first + 1
    if size == 1:
        return _address(first, family)
    if size & (size - 1) == 0 and first % size == 0:
        return {'prefix': {'addr': _address(first, family), 'len': BITS[family] - size.bit_length() + 1}}
    return {'range': [_address(first, family), _address(last, family)]}


def _host_prefix(prefix):
    """A /32 (IPv4) or /128 (IPv6) prefix: one address, which nft lists bare."""
    return prefix.get('len') == (128 if ':' in str(prefix.get('addr')) else 32)


def element_text(elem):
    if isinstance(elem, dict) and 'prefix' in elem:
        prefix = elem['prefix']
        if _host_prefix(prefix):
            return str(prefix.get('addr'))
        return '%s/%s' % (prefix.get('addr'), prefix.get('len'))
    if isinstance(elem, dict) and 'range' in elem:
        return '%s-%s' % tuple(elem['range'])
    if isinstance(elem, dict) and 'elem' in elem:
        return element_text((elem['elem'] or {}).get('val'))
    return str(elem)


def element_texts(elements):
    """:func:`element_text` of each element (inlined for the common forms:
    tens of thousands per run)."""
    out = []
    append = out.append
    for elem in elements:
        if elem.__class__ is str:
            append(elem)
            continue
        prefix = elem.get('prefix') if elem.__class__ is dict else None
        if prefix is None:
            append(element_text(elem))
            continue
        addr, plen = prefix.get('addr'), prefix.get('len')
        append(addr if plen == (128 if ':' in addr else 32) else '%s/%s' % (addr, plen))
    return out


def element_interval(elem, family):
    """``(first, last)`` of a set element as ``nft -j`` lists it; None if it is not an address."""
    try:
        if isinstance(elem, str):
            number = _number(elem, family)
            return number, number
        if isinstance(elem, dict) and 'prefix' in elem:
            return cidr_interval('%s/%d' % (elem['prefix']['addr'], int(elem['prefix']['len'])), family)
        if isinstance(elem, dict) and 'range' in elem:
            first, last = elem['range']
            return _number(first, family), _number(last, family)
        if isinstance(elem, dict) and 'elem' in elem:
            return element_interval((elem['elem'] or {}).get('val'), family)
    except (KeyError, TypeError, ValueError, OSError):
        pass
    return None


# --------------------------------------------------------------------------
# The table the policy wants
# --------------------------------------------------------------------------

def _match(left, right, op='=='):
    return {'match': {'op': op, 'left': left, 'right': right}}


def _addr(family, field):
    return {'payload': {'protocol': PROTOCOLS[family], 'field': field}}


def _daddr(family):
    return _addr(family, 'daddr')


def _prefix(cidr):
    addr, _slash, plen = cidr.partition('/')
    return {'prefix': {'addr': addr, 'len': int(plen)}}


def set_name(kind, family):
    return '%s-ipv%d' % (kind, family)


def _masquerade(ports, random_fully):
    spec = {}
    if ports is not None:
        low, high = ports
        spec['port'] = low if low == high else {'range': [low, high]}
    if random_fully:
        spec['flags'] = ['fully-random']
    return {'masquerade': spec or None}


def _action(policy, family, ports, random_fully):
    """``masquerade``, or ``snat ip to ...`` for a family with snat_to
    (``family`` None: masquerade, for every family at once)."""
    verb, addresses = policy.target(family) if family else ('MASQUERADE', None)
    if verb == 'MASQUERADE':
        return _masquerade(ports, random_fully)
    first, last = addresses
    spec = {'family': PROTOCOLS[family], 'addr': first if first == last else {'range': [first, last]}}
    if ports is not None:
        low, high = ports
        spec['port'] = low if low == high else {'range': [low, high]}
    if random_fully:
        spec['flags'] = ['fully-random']
    return {'snat': spec}


RETURN = {'return': None}


class Desired:
    """The table for a policy: ``set_cidrs`` set name -> ``(family,
    CIDRs)``, ``sets`` set name -> their merged intervals and ``elements``
    set name -> those intervals as set elements (both worked out only when
    asked for: a table in sync is recognised from the CIDRs alone),
    ``rules`` the chain's rules as ``(expr, comment)``, in the order
    ``Policy`` describes, and ``rule_families`` the family each serves
    (None: every managed one)."""

    def __init__(self, policy):
        self.name = table_name(policy.chain)
        self.priority = chain_priority(policy)
        self.families = policy.families()
        self.set_cidrs = {}
        for family in self.families:
            main = 'masq' if policy.masquerade_only else 'nonmasq'
            self.set_cidrs[set_name(main, family)] = (family, policy.listed[family] if policy.masquerade_only
                                                      else policy.cidrs[family])
            for kind, lists in (('exceptions', policy.exceptions), ('sources', policy.sources)):
                if lists[family]:
                    self.set_cidrs[set_name(kind, family)] = (family, lists[family])
        self._sets = None
        self._elements = None
        self._policy = policy
        self._random_fully = policy.random_fully_where(True)     # nftables: no tool version to ask, as before
        comments = policy.comments()
        rules = []          # (expr, comment, the family it serves: None for every one)
        if policy.out_interfaces:
            names = policy.out_interfaces
            rules.append(([_match({'meta': {'key': 'oifname'}}, names[0] if len(names) == 1 else {'set': list(names)},
                                  '!='), RETURN], comments['interfaces'], None))
        for family in self.families:
            if policy.sources[family]:
                rules.append(([_match(_addr(family, 'saddr'), '@' + set_name('sources', family), '!='), RETURN],
                              comments['sources'], family))
        rules.append(([_match({'fib': {'result': 'type', 'flags': ['daddr']}}, 'local'), RETURN], comments['local'],
                      None))
        for family in self.families:
            if policy.exceptions[family]:
                rules.extend(self._rewrites([_match(_daddr(family), '@' + set_name('exceptions', family))], family,
                                            policy.action_comment(family, 'exception')))
        for family in self.families:
            if not policy.masq_link_local[family]:
                rules.append(([_match(_daddr(family), _prefix(LINK_LOCAL[family])), RETURN], comments['return'],
                              family))
            if policy.masquerade_only:
                rules.append(([_match(_daddr(family), '@' + set_name('masq', family), '!='), RETURN],
                              comments['unlisted'], family))
            else:
                rules.append(([_match(_daddr(family), '@' + SETS[family]), RETURN], comments['return'], family))
        kind = 'listed' if policy.masquerade_only else 'masquerade'
        if policy.snat_to:
            for family in self.families:
                rules.extend(self._rewrites([_match({'meta': {'key': 'nfproto'}}, NFPROTO[family])], family,
                                            policy.action_comment(family, kind)))
        elif 6 in self.families:
            rules.extend(self._rewrites([], None, policy.action_comment(4, kind)))
        else:
            rules.extend(self._rewrites([_match({'meta': {'key': 'nfproto'}}, NFPROTO[4])], None,
                                        policy.action_comment(4, kind), serves=4))
        for rule, value in policy.extra_rules(NAME, OPTION_RULES):
            rules = rule(value, policy, rules)
        self.rules = [(expr, comment) for expr, comment, _family in rules]
        self.rule_families = [family for _expr, _comment, family in rules]

    def _rewrites(self, head, family, comment, serves=None):
        """The rules that rewrite the source after the matches ``head``:
        with to_ports one ``meta l4proto`` rule per range, all but the last
        picked at random with the weight of its size, then the rule for the
        rest.  ``family`` None: masquerade, for the family ``serves`` (None:
        every one)."""
        policy = self._policy
        out = []
        sizes = [high - low + 1 for low, high in policy.port_ranges]
        remaining = sum(sizes)
        for ports, size in zip(policy.port_ranges, sizes):
            expr = head + [_match({'meta': {'key': 'l4proto'}}, {'set': list(MASQ_PROTOCOLS)})]
            if size != remaining:
                expr.append(_match({'numgen': {'mode': 'random', 'mod': remaining, 'offset': 0}}, size, '<'))
            expr.append(_action(policy, family, ports, self._random_fully))
            out.append((expr, comment, family or serves))
            remaining -= size
        out.append((head + [_action(policy, family, None, self._random_fully)], comment, family or serves))
        return out

    @property
    def sets(self):
        if self._sets is None:
            self._sets = dict((name, merge(cidr_interval(c, family) for c in cidrs))
                              for name, (family, cidrs) in self.set_cidrs.items())
        return self._sets

    @property
    def elements(self):
        if self._elements is None:
            self._elements = dict((name, [interval_element(a, b, self.set_cidrs[name][0]) for a, b in intervals])
                                  for name, intervals in self.sets.items())
        return self._elements

    def rule_texts(self):
        return [render_rule({'expr': expr, 'comment': comment}) for expr, comment in self.rules]

    def commands(self):
        """The objects of the table, as libnftables JSON ``add`` commands."""
        ident = {'family': FAMILY, 'table': self.name}
        out = []
        for name, (family, _cidrs) in self.set_cidrs.items():
            spec = dict(ident, name=name, type=ADDR_TYPES[family], flags=['interval'])
            spec['auto-merge'] = True
            if self.elements[name]:
                spec['elem'] = self.elements[name]
            out.append({'add': {'set': spec}})
        out.append({'add': {'chain': dict(ident, name=CHAIN, type='nat', hook='postrouting', prio=self.priority,
                                          policy='accept')}})
        for expr, comment in self.rules:
            out.append({'add': {'rule': dict(ident, chain=CHAIN, expr=expr, comment=comment)}})
        return out


# --------------------------------------------------------------------------
# Showing a table as ``nft list table`` does (one set element per line)
# --------------------------------------------------------------------------

def _set_lines(name, type_, flags, elements):
    lines = ['\tset %s {' % name, '\t\ttype %s' % type_]
    if flags:
        lines.append('\t\tflags %s' % ','.join(flags))
    if elements:
        lines.append('\t\telements = { %s }' % (',\n\t\t\t     ').join(element_texts(elements)))
    lines.append('\t}')
    return lines


def render_desired(desired):
    lines = ['table %s %s {' % (FAMILY, desired.name)]
    for name, (family, _cidrs) in desired.set_cidrs.items():
        lines.extend(_set_lines(name, ADDR_TYPES[family], ['interval'], desired.elements[name]))
        lines.append('')
    lines.append('\tchain %s {' % CHAIN)
    lines.append('\t\ttype nat hook postrouting priority %s; policy accept;' % priority_text(desired.priority))
    lines.extend('\t\t' + text for text in desired.rule_texts())
    lines.extend(['\t}', '}'])
    return '\n'.join(lines) + '\n'


def flags_of(obj):
    flags = obj.get('flags') or []
    return [flags] if isinstance(flags, str) else list(flags)


def render_live(table):
    """A table as read (``nft_json.NftTable``), in the same form."""
    if table.unreadable is not None:
        return table.unreadable
    lines = ['table %s %s {' % (table.family, table.name)]
    if flags_of(table.info):
        lines.append('\tflags %s' % ','.join(flags_of(table.info)))
    for kind, name in table.others:
        lines.append('\t%s %s { ... }' % (kind, name))
    for name, obj in table.sets.items():
        lines.extend(_set_lines(name, obj.get('type'), flags_of(obj), obj.get('elem') or []))
        lines.append('')
    for name, elems in table.maps.items():
        lines.append('\tmap %s { %d elements }' % (name, len(elems)))
    for name, chain in table.chains.items():
        lines.append('\tchain %s {' % name)
        if chain.get('hook'):
            lines.append('\t\ttype %s hook %s priority %s; policy %s;'
                         % (chain.get('type'), chain.get('hook'),
                            priority_text(chain.get('prio')), chain.get('policy')))
        lines.extend('\t\t' + render_rule(rule) for rule in table.rules.get(name, []))
        lines.append('\t}')
    lines.append('}')
    return '\n'.join(lines) + '\n'


# --------------------------------------------------------------------------
# A rule as text, whatever order nft lists its anonymous sets in
# --------------------------------------------------------------------------

def _element_key(elem):
    """A sort key for an anonymous set's element, whatever its form."""
    import json  # pylint: disable=import-outside-toplevel

    return json.dumps(elem, sort_keys=True)


def canonical_expr(obj):
    """A rule's JSON with the elements of every anonymous set (``{"set":
    [...]}``) in one order, duplicates dropped: nft lists a set in its own
    order (``oifname { "eth0", "b0" }`` comes back ``{ "b0", "eth0" }``), and
    a set is the same set in any order."""
    if isinstance(obj, list):
        return [canonical_expr(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = dict((key, canonical_expr(val)) for key, val in obj.items())
    items = out.get('set')
    if len(out) == 1 and isinstance(items, list):
        keyed = dict((_element_key(item), item) for item in items)
        out['set'] = [keyed[key] for key in sorted(keyed)]
    return out


def canonical_text(expr, comment):
    """A rule's text with each anonymous set in one order: the same text for
    the same rule however nft lists its sets (:func:`same_rules`, ``_core/engine/drift.py``)."""
    return render_rule({'expr': canonical_expr(expr), 'comment': comment})


# --------------------------------------------------------------------------
# The transaction: the table replaced whole, or deleted
# --------------------------------------------------------------------------

def _ident(name):
    return {'table': {'family': FAMILY, 'name': name}}


def replace_commands(desired):
    """Declare, delete and add the table whole: one atomic transaction."""
    return ([{'add': _ident(desired.name)}, {'delete': _ident(desired.name)}, {'add': _ident(desired.name)}]
            + desired.commands())


def delete_commands(name):
    return [{'delete': _ident(name)}]
