# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The nftables backend: the policy as one table of our own, natively.

For the chain name ``IP-MASQ-AGENT`` (the name in lower case names the
table) and the default list, ``nft list table inet ip-masq-agent`` shows::

    table inet ip-masq-agent {
        set nonmasq-ipv4 {
            type ipv4_addr
            flags interval
            elements = { 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 }
        }

        chain postrouting {
            type nat hook postrouting priority srcnat; policy accept;
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
base chain at the postrouting hook, priority srcnat.

* read: one ``nft -j`` run (``nft_json.py`` reads it) lists the table;
* plan: compare the table with the policy: its sets as address intervals
  (what the kernel keeps after merging), its rules as nft prints them;
* apply: one atomic ``nft -j -f -`` transaction that declares the table,
  deletes it and adds it again, whole (a flush would keep a foreign chain,
  set or table flag); ``state=absent`` deletes it.

Both the transaction and the listings are libnftables JSON, so no name ever
goes through nft's command-line parser.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.intervals import (
    BITS,
    address_number as _number,
    cidr_interval,
    merge,
    number_address as _address,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nft_json import (
    NftTable,
    documents,
    parse_nft,
    render_rule,
    version as nft_version,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import (
    OUR_COMMENT_PREFIX,
    validate_chain_name,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.ranges import LINK_LOCAL

FAMILY = 'inet'
CHAIN = 'postrouting'
PRIORITY = 100          # srcnat
SETS = {4: 'nonmasq-ipv4', 6: 'nonmasq-ipv6'}
# The sets of the extensions, per family: masquerade_cidrs (instead of the
# non-masquerade list), exception_cidrs and source_cidrs.
SET_KINDS = ('nonmasq', 'masq', 'exceptions', 'sources')
SET_NAMES = frozenset('%s-ipv%d' % (kind, family) for kind in SET_KINDS for family in (4, 6))
ADDR_TYPES = {4: 'ipv4_addr', 6: 'ipv6_addr'}
PROTOCOLS = {4: 'ip', 6: 'ip6'}
NFPROTO = {4: 'ipv4', 6: 'ipv6'}
MASQ_PROTOCOLS = ('tcp', 'udp', 'sctp')
# What nft says when the table asked for does not exist.
_NO_TABLE = 'No such file or directory'


def table_name(chain):
    """The nftables table of the chain name ``chain``: the same name in lower case."""
    return validate_chain_name(chain).lower()


def table_label(name):
    return 'table %s %s' % (FAMILY, name)


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
        self._random_fully = policy.random_fully_for(None)
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
        out.append({'add': {'chain': dict(ident, name=CHAIN, type='nat', hook='postrouting', prio=PRIORITY,
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
    lines.append('\t\ttype nat hook postrouting priority srcnat; policy accept;')
    lines.extend('\t\t' + text for text in desired.rule_texts())
    lines.extend(['\t}', '}'])
    return '\n'.join(lines) + '\n'


def _flags(obj):
    flags = obj.get('flags') or []
    return [flags] if isinstance(flags, str) else list(flags)


def render_live(table):
    """A table as read (``nft_json.NftTable``), in the same form."""
    if table.unreadable is not None:
        return table.unreadable
    lines = ['table %s %s {' % (table.family, table.name)]
    if _flags(table.info):
        lines.append('\tflags %s' % ','.join(_flags(table.info)))
    for kind, name in table.others:
        lines.append('\t%s %s { ... }' % (kind, name))
    for name, obj in table.sets.items():
        lines.extend(_set_lines(name, obj.get('type'), _flags(obj), obj.get('elem') or []))
        lines.append('')
    for name, elems in table.maps.items():
        lines.append('\tmap %s { %d elements }' % (name, len(elems)))
    for name, chain in table.chains.items():
        lines.append('\tchain %s {' % name)
        if chain.get('hook'):
            lines.append('\t\ttype %s hook %s priority %s; policy %s;'
                         % (chain.get('type'), chain.get('hook'),
                            'srcnat' if chain.get('prio') == PRIORITY else chain.get('prio'), chain.get('policy')))
        lines.extend('\t\t' + render_rule(rule) for rule in table.rules.get(name, []))
        lines.append('\t}')
    lines.append('}')
    return '\n'.join(lines) + '\n'


# --------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------

def _same_elements(live, desired, name):
    """Whether the set holds exactly the addresses of the policy's CIDRs.
    First as text: the CIDRs the set lists are the list's CIDRs (as nft
    prints them and the policy keeps them, canonical); then, when the list
    has overlapping or adjacent entries (merged in the set) or nft lists a
    range, as address intervals."""
    family, cidrs = desired.set_cidrs[name]
    bits = '/%d' % BITS[family]
    texts = set()
    add = texts.add
    for elem in live:
        if elem.__class__ is str:
            add(elem + bits)
            continue
        prefix = elem.get('prefix') if elem.__class__ is dict else None
        if prefix is None:
            break
        add('%s/%s' % (prefix.get('addr'), prefix.get('len')))
    else:
        if texts == set(cidrs):
            return True
    intervals = []
    for elem in live:
        interval = element_interval(elem, family)
        if interval is None:
            return False
        intervals.append(interval)
    return merge(intervals) == desired.sets[name]


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


def same_rules(live, desired):
    """Whether the chain's rules as read (``nft -j`` rule objects) are the
    policy's (``Desired.rules``): the same rules in the same order, each
    anonymous set compared as a set.  As text first (a table in sync reads
    back as written), then with every set put in one order."""
    texts = [render_rule(r) for r in live]
    if texts == desired.rule_texts():
        return True
    if len(texts) != len(desired.rules):
        return False
    return ([canonical_text(r.get('expr', []), r.get('comment')) for r in live]
            == [canonical_text(expr, comment) for expr, comment in desired.rules])


def canonical_text(expr, comment):
    """A rule's text with each anonymous set in one order: the same text for
    the same rule however nft lists its sets (:func:`same_rules`, ``drift.py``)."""
    return render_rule({'expr': canonical_expr(expr), 'comment': comment})


def differences(table, desired):
    """What differs between the table read and the one wanted, in words
    (empty: in sync)."""
    if table.unreadable is not None:
        return ['nft cannot list it as JSON (a dormant table?)']
    diffs = []
    if _flags(table.info):
        diffs.append('table flags %s' % ','.join(_flags(table.info)))
    diffs.extend('foreign %s %s' % (kind, name) for kind, name in table.others)
    diffs.extend('foreign map %s' % name for name in table.maps)
    wanted_sets = dict((name, family) for name, (family, _cidrs) in desired.set_cidrs.items())
    for name, obj in table.sets.items():
        family = wanted_sets.get(name)
        if family is None:
            diffs.append('foreign set %s' % name)
        elif obj.get('type') != ADDR_TYPES[family] or set(_flags(obj)) != set(['interval']):
            diffs.append('set %s is not a %s interval set' % (name, ADDR_TYPES[family]))
        elif not _same_elements(obj.get('elem') or [], desired, name):
            diffs.append('set %s: %d element(s), %d wanted'
                         % (name, len(obj.get('elem') or []), len(desired.elements[name])))
    diffs.extend('set %s missing' % name for name in wanted_sets if name not in table.sets)
    for name, chain in table.chains.items():
        if name != CHAIN:
            diffs.append('foreign chain %s' % name)
        elif (chain.get('type'), chain.get('hook'), chain.get('prio'), chain.get('policy')) != \
                ('nat', 'postrouting', PRIORITY, 'accept'):
            diffs.append('chain %s is not a nat postrouting chain at priority srcnat' % CHAIN)
    if CHAIN not in table.chains:
        diffs.append('chain %s missing' % CHAIN)
    else:
        rules = table.rules.get(CHAIN, [])
        if not same_rules(rules, desired):
            diffs.append('chain %s: %d rule(s), %d wanted%s'
                         % (CHAIN, len(rules), len(desired.rules),
                            '' if len(rules) != len(desired.rules) else ', in another form'))
    return diffs


def is_ours(table):
    """A table with a rule of ours (our comment), or with nothing but objects
    of our names (empty, or ours with its rules flushed)."""
    if table is None:
        return False
    if table.unreadable is not None:
        return OUR_COMMENT_PREFIX in table.unreadable
    rules = [r for rs in table.rules.values() for r in rs]
    if any((r.get('comment') or '').startswith(OUR_COMMENT_PREFIX) for r in rules):
        return True
    return (not rules and not table.maps and not table.others and set(table.chains) <= set([CHAIN])
            and set(table.sets) <= SET_NAMES)


# --------------------------------------------------------------------------
# The node's nft
# --------------------------------------------------------------------------

def missing_nft():
    return 'nft was not found on the node; install the nftables package.'


class NftTools:
    """The node's ``nft``: listings and transactions in libnftables JSON on
    stdin (``nft -j -f -``).  ``commands`` lists what was (or, for a
    transaction in check mode, would be) run."""

    def __init__(self, run, find):
        self._run = run
        self.nft = find('nft')
        self.available = bool(self.nft)
        self.commands = []
        self.version = None

    def argv(self):
        return [self.nft, '-j', '-f', '-']

    def batch(self, commands):
        """The JSON text of a transaction (or listing)."""
        import json  # pylint: disable=import-outside-toplevel

        return json.dumps({'nftables': commands}, separators=(',', ':'))

    def _fail(self, argv, rc, out, err, what):
        raise MasqError('%s failed (rc=%d): %s' % (what, rc, (err or out).strip() or 'no message (nft crashed?)'),
                        cmd=' '.join(argv), rc=rc, stdout=out, stderr=err)

    def listing(self, name):
        """Our table (``nft_json.NftTable``), or None when it does not exist."""
        argv = self.argv()
        self.commands.append(' '.join(argv) + '  # list %s' % table_label(name))
        rc, out, err = self._run(argv, self.batch([{'list': {'table': {'family': FAMILY, 'name': name}}}]))
        if rc != 0:
            if _NO_TABLE not in (err or ''):
                self._fail(argv, rc, out, err, 'nft (listing %s)' % table_label(name))
            return None
        try:
            docs = documents(out, 'nft -j')
        except MasqError:
            return self._unreadable(name)
        if not docs:
            raise MasqError('nft printed nothing when listing %s.' % table_label(name))
        self.version = nft_version(docs[0]) or self.version
        return parse_nft(docs[0]).get((FAMILY, name))

    def _unreadable(self, name):
        """The table exists but nft's JSON of it is broken (nft 1.0.6 prints
        the flags of a dormant table as garbage): a table to replace, ours
        when its text listing carries our comment."""
        argv = [self.nft, 'list', 'table', FAMILY, name]
        self.commands.append(' '.join(argv))
        rc, out, err = self._run(argv)
        if rc != 0:
            self._fail(argv, rc, out, err, 'nft (listing %s)' % table_label(name))
        table = NftTable(FAMILY, name)
        table.unreadable = out
        return table

    def query(self, listings, what):
        """Run ``listings`` (libnftables JSON ``list`` commands) in one nft
        run; returns the JSON documents, one per command.  Raises MasqError
        when nft fails (a listed table that does not exist, too).  List one
        thing per run: nft 1.0 fills its cache for the first listing of a
        run only, and a second one then misses what is outside it."""
        argv = self.argv()
        self.commands.append(' '.join(argv) + '  # list %s' % what)
        rc, out, err = self._run(argv, self.batch(listings))
        if rc != 0:
            self._fail(argv, rc, out, err, 'nft (listing %s)' % what)
        docs = documents(out, 'nft -j')
        if docs:
            self.version = nft_version(docs[0]) or self.version
        return docs

    def ruleset(self):
        """The whole ruleset: ``nft_json.parse_nft`` tables by ``(family, name)``."""
        docs = self.query([{'list': {'ruleset': None}}], 'ruleset')
        return parse_nft(docs[0] if docs else {})

    def list_ruleset(self):
        """The whole ruleset, as ``nft -j list ruleset`` prints it: an argv
        and no input, what a caller that only reads may run (the SNAT audit's
        guard allows nothing else).  ``nft_json.parse_nft`` tables by
        ``(family, name)``; MasqError when nft fails (``rc`` in its details)."""
        argv = [self.nft, '-j', 'list', 'ruleset']
        what = ' '.join(argv)
        self.commands.append(what)
        rc, out, err = self._run(argv)
        if rc != 0:
            self._fail(argv, rc, out, err, what)
        return parse_nft(out or '{}', what='nft -j list ruleset')

    def load(self, commands):
        """One atomic transaction."""
        argv = self.argv()
        rc, out, err = self._run(argv, self.batch(commands))
        if rc != 0:
            self._fail(argv, rc, out, err, 'nft -j -f - (the transaction)')


def _ident(name):
    return {'table': {'family': FAMILY, 'name': name}}


def replace_commands(desired):
    """Declare, delete and add the table whole: one atomic transaction."""
    return ([{'add': _ident(desired.name)}, {'delete': _ident(desired.name)}, {'add': _ident(desired.name)}]
            + desired.commands())


def delete_commands(name):
    return [{'delete': _ident(name)}]


# --------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------

class TablePlan:
    """What our table holds and what changes in it."""

    def __init__(self, name, table, managed):
        self.name = name
        self.table = table
        self.managed = managed
        self.exists = table is not None
        self.commands = []          # the transaction, libnftables JSON commands
        self.actions = []
        self.desired = None         # nftables.Desired, for a table to write
        self.note = None

    @property
    def before(self):
        """The table as read, as ``nft list table`` shows it (None: no table)."""
        return render_live(self.table) if self.table is not None else None

    @property
    def after(self):
        """The table after the run (None: deleted, or not managed)."""
        if not self.managed:
            return None if self.changed else self.before
        return render_desired(self.desired) if self.changed else self.before

    @property
    def changed(self):
        return bool(self.commands)

    def refuse_foreign(self, adopt, what):
        if adopt or not self.exists or is_ours(self.table):
            return
        raise MasqError('%s already exists and is not ours: none of its rules carries an "ip-masq-agent:" comment. '
                        'ipmasq.agent will not %s a table it never wrote. Choose another chain name (the table is '
                        'named after it), or run ipmasq.agent.masq_chain once with adopt_chain=true to take it over. '
                        'Nothing was changed.' % (table_label(self.name), what))


def plan_present(table, policy, adopt=False):
    desired = Desired(policy)
    plan = TablePlan(desired.name, table, True)
    plan.kinds = []             # what each action repairs (metrics.DRIFT_KINDS), next to plan.actions
    plan.refuse_foreign(adopt, 'replace')
    plan.desired = desired
    if table is None:
        plan.actions.append('create %s (%s)' % (table_label(desired.name), ', '.join(
            '%s: %d element(s)' % (name, len(desired.elements[name])) for name in desired.set_cidrs)))
        plan.kinds.append('table_missing')
    else:
        diffs = differences(table, desired)
        if not diffs:
            return plan
        plan.actions.append('rewrite %s (%s)' % (table_label(desired.name), '; '.join(diffs)))
        plan.kinds.append('table_rewritten')
    plan.commands = replace_commands(desired)
    return plan


def plan_absent(table, name, adopt=False, strict=True):
    """Delete the table.  One that is not ours is an error (``strict``), or
    is left alone with a note."""
    plan = TablePlan(name, table, False)
    plan.kinds = []
    if table is None:
        return plan
    if not adopt and not is_ours(table):
        if not strict:
            plan.note = '%s exists but is not ours; left alone.' % table_label(name)
            return plan
        plan.refuse_foreign(adopt, 'delete')
    plan.actions.append('delete %s' % table_label(name))
    # Ours where the policy wants none (state=absent); backends.py calls it
    # other_backend when the policy lives in iptables.
    plan.kinds.append('table_unwanted')
    plan.commands = delete_commands(name)
    return plan
