# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
#
# One file over 500 lines on purpose: the Policy class and the validation of
# each option it is built from (chain names, ports, snat_to, interfaces, CIDR
# lists); one meaning, used by every backend, the module, the role and the resync.
"""The SNAT policy: what a node should do, validated, and nothing about how.

A :class:`Policy` is data only: the meaning (what is kept, rewritten, to
what, for whom).  Each backend holds its spelling: ``_core/iptables_backend/rules.py`` and
``_core/iptables_backend/layout.py`` (its rule forms, counts, limit and version quirks),
``_core/nftables_backend/rules.py``.  The module, the role and the node-side resync all build
one here.  The rule comments stay here: both backends write them.

Standard library only: this file runs on managed nodes.
"""

import zlib

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.cidrs import (
    DEFAULT_CIDR_LIMIT,
    is_default_list,
    parse_cidrs,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.intervals import (
    address_number,
    cidr_interval,
    covered,
    merge,
    number_address,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options as option_table
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import DEFAULT_CHAIN
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.ranges import LINK_LOCAL

FAMILIES = (4, 6)
JUMP_POSITIONS = ('append', 'first')
# docs: the rules as the Kubernetes docs (and the seed listings) show them;
# upstream: as the current upstream agent (v2.12) writes them (_core/iptables_backend/rules.py).
RULE_FORMATS = ('docs', 'upstream')

CHAIN_NAME_MAX = 28  # XT_EXTENSION_MAXNAMELEN - 1
_CHAIN_FIRST = frozenset('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_')
_CHAIN_REST = _CHAIN_FIRST | frozenset('.+-')
BUILTIN_CHAINS = frozenset(('PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'))
_DIGITS = frozenset('0123456789')
IFNAME_MAX = 15  # IFNAMSIZ - 1
_IFNAME_CHARS = frozenset('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-')
# The options that go beyond the upstream agent (rule_format docs only), in
# the order the docs list them.
EXTENSIONS = ('exception_cidrs', 'masquerade_cidrs', 'snat_to', 'source_cidrs', 'out_interfaces')

# The words every rule of ours carries, in each rule format; a rule or table
# with a comment starting OUR_COMMENT_PREFIX is ours.
#   docs: as the Kubernetes docs (and our users' eyes) know them;
#   upstream: what kubernetes-sigs/ip-masq-agent v2.12 writes
#   (cmd/ip-masq-agent/ip-masq-agent.go: nonMasqRuleComment, masqRuleComment).
# 'local' is the nftables backend's rule for local destinations, which
# iptables expresses as the addrtype match of the jump and of each rule.
OUR_COMMENT_PREFIX = 'ip-masq-agent:'
COMMENTS = {
    'docs': {
        'return': 'ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE',
        'masquerade': ('ip-masq-agent: outbound traffic should be subject to MASQUERADE '
                       '(this match must come after cluster-local CIDR matches)'),
        'local': 'ip-masq-agent: local destinations are never subject to MASQUERADE',
        # The extensions (rule_format docs only): SNAT to an address,
        # exceptions, masquerade-only, the source and interface gates.
        'snat': ('ip-masq-agent: outbound traffic should be subject to SNAT '
                 '(this match must come after cluster-local CIDR matches)'),
        'exception': 'ip-masq-agent: an exception inside the cluster-local CIDRs is subject to %s',
        'listed': 'ip-masq-agent: a listed destination is subject to %s',
        'unlisted': 'ip-masq-agent: destinations not listed keep their source address',
        'sources': 'ip-masq-agent: traffic from other sources keeps its source address',
        'interfaces': 'ip-masq-agent: traffic leaving by other interfaces keeps its source address',
        # iptables' sub-chains (IptablesLayout): the gates, and the one
        # rewrite that every rewriting rule goes to.
        'to_sources': 'ip-masq-agent: traffic leaving by a listed interface goes on to the source check',
        'gate_sources': 'ip-masq-agent: traffic from a listed source is subject to the policy',
        'gate_interfaces': 'ip-masq-agent: traffic leaving by a listed interface is subject to the policy',
        'gate_both': 'ip-masq-agent: traffic from a listed source leaving by a listed interface is subject to the policy',
        'rewrite': 'ip-masq-agent: traffic sent to this chain is subject to %s',
    },
    'upstream': {
        'return': 'ip-masq-agent: local traffic is not subject to MASQUERADE',
        'masquerade': 'ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)',
        'local': 'ip-masq-agent: local destinations are never subject to MASQUERADE',
    },
}


# The chain name's rule, which both backends and the role share: names
# iptables refuses for a chain ("chain name may not clash with target name")
# or that crash iptables-legacy-restore ('standard'): the verdicts, the
# standard and error targets, and every target extension of iptables 1.8.
RESERVED_TARGETS = frozenset((
    'ACCEPT', 'DROP', 'QUEUE', 'RETURN', 'STANDARD', 'ERROR', 'CONTINUE', 'JUMP', 'GOTO',
    'AUDIT', 'CHECKSUM', 'CLASSIFY', 'CLUSTERIP', 'CONNMARK', 'CONNSECMARK', 'CT', 'DNAT',
    'DNPT', 'DSCP', 'ECN', 'HL', 'HMARK', 'IDLETIMER', 'LED', 'LOG', 'MARK', 'MASQUERADE',
    'NAT', 'NETMAP', 'NFLOG', 'NFQUEUE', 'NOTRACK', 'RATEEST', 'REDIRECT', 'REJECT', 'SECMARK',
    'SET', 'SNAT', 'SNPT', 'SYNPROXY', 'TCPMSS', 'TCPOPTSTRIP', 'TEE', 'TOS', 'TPROXY', 'TRACE',
    'TTL', 'ULOG',
))

# iptables' sub-chains of a policy: kind, suffix to the chain's name.
SUB_CHAINS = (('sources', '-SOURCES'), ('policy', '-POLICY'), ('rewrite', '-REWRITE'))


def validate_chain_name(name):
    """Return ``name`` if it is a chain name iptables accepts and we may own."""
    if not isinstance(name, str) or not name:
        raise MasqError('chain: the chain name must be a non-empty string, got %r.' % (name,))
    if len(name) > CHAIN_NAME_MAX:
        raise MasqError('chain: %r is %d characters long; iptables allows at most %d.'
                        % (name, len(name), CHAIN_NAME_MAX))
    if name[0] not in _CHAIN_FIRST or not _CHAIN_REST.issuperset(name):
        raise MasqError('chain: %r is not a valid chain name: use letters, digits and _ . + - '
                        'only (no whitespace, newline, quotes or a leading "-", "." or "+").' % (name,))
    if name.upper() in BUILTIN_CHAINS:
        raise MasqError('chain: %r is a built-in chain; the module needs a chain of its own.' % (name,))
    if name.upper() in RESERVED_TARGETS:
        raise MasqError('chain: %r is the name of an iptables target; iptables refuses a chain of that '
                        'name. Choose another name.' % (name,))
    return name


def sub_chain_names(chain):
    """kind -> name of the sub-chains a policy in ``chain`` may use
    (:data:`SUB_CHAINS`): the chain's name and the suffix, or, where that
    is longer than iptables allows, the name cut short, a tag of four hex
    digits (CRC-32 of the whole name) and the suffix."""
    chain = validate_chain_name(chain)
    out = {}
    for kind, suffix in SUB_CHAINS:
        if len(chain) + len(suffix) <= CHAIN_NAME_MAX:
            name = chain + suffix
        else:
            tag = '-%04X' % (zlib.crc32(chain.encode('utf-8')) & 0xFFFF)
            name = chain[:CHAIN_NAME_MAX - len(tag) - len(suffix)] + tag + suffix
        out[kind] = validate_chain_name(name)
    if chain in out.values():
        raise MasqError('chain: %r is the name of one of its own sub-chains (%s); choose another name.'
                        % (chain, ', '.join(sorted(out.values()))))
    return out


def _port(text):
    text = text.strip(' \t')
    if not text or len(text) > 5 or not _DIGITS.issuperset(text):
        return None
    return int(text)


def parse_to_ports(to_ports):
    """Parse upstream's --to-ports value: ``['1024-29999', '32768-65535']``
    (or the same as one comma-separated string).  Returns a list of
    ``(low, high)`` tuples in the order given (upstream writes one rule per
    range, in that order); overlapping ranges are refused.  ``''`` (upstream's
    default, also as Ansible's ``['']``) means no port rules."""
    if to_ports is None or to_ports == '' or to_ports == [] or to_ports == ['']:
        return []
    items = to_ports.split(',') if isinstance(to_ports, str) else list(to_ports)
    ranges = []
    for item in items:
        low = high = None
        if isinstance(item, str):
            first, dash, second = item.partition('-')
            low = _port(first)
            high = _port(second) if dash else low
        if low is None or high is None:
            raise MasqError('to_ports: %r is not a port or a port range like 1024-29999.' % (item,))
        if not 1 <= low <= high <= 65535:
            raise MasqError('to_ports: %r is not a range inside 1-65535 with low <= high.' % (item,))
        ranges.append((low, high))
    ordered = sorted(ranges)
    for (l1, h1), (l2, h2) in zip(ordered, ordered[1:]):
        if l2 <= h1:
            raise MasqError('to_ports: ranges %s and %s overlap.' % (port_text(l1, h1), port_text(l2, h2)))
    return ranges


def port_text(low, high):
    return str(low) if low == high else '%d-%d' % (low, high)


def _items(value, name):
    """A list option given as a list, or as one comma-separated string."""
    if value is None or value == '':
        return []
    if isinstance(value, str):
        return [item.strip() for item in value.split(',')]
    if not isinstance(value, (list, tuple)):
        raise MasqError('%s: %r is not a list. Nothing was changed.' % (name, value))
    return list(value)


def _address_family(text):
    """4 or 6 for an address text inet_pton reads, else None."""
    for family in (4, 6):
        try:
            address_number(text, family)
            return family
        except (OSError, ValueError):
            pass
    return None


# The reason an address can never be the source of outbound traffic, as the
# controller's snat_to filter words it: '<address>' is <what>, which ...
NEVER_A_SOURCE = '%s is %s, which can never be a source address'
# A range written with a dash too few or too many, as the filter words it.
RANGE_NEEDS_TWO_ENDS = 'a range needs an address on both sides of the dash (first-last)'
RANGE_ONE_DASH = 'not an address or a range: a range is two addresses joined by one dash (first-last)'


def never_a_source(family, number):
    """What an address is that can never be the source of outbound traffic
    (``'a loopback address'``), or None: the unspecified address, loopback,
    multicast and the IPv4 broadcast address.  The one rule: the controller's
    ``snat_to`` filter calls it too, so node and controller refuse the same
    addresses in the same words (:data:`NEVER_A_SOURCE`)."""
    if number == 0:
        return 'the unspecified address'
    if family == 4:
        if number >> 24 == 127:
            return 'a loopback address'
        if number >> 28 == 0xE:
            return 'a multicast address'
        if number == 0xFFFFFFFF:
            return 'the broadcast address'
    else:
        if number == 1:
            return 'the loopback address'
        if number >> 120 == 0xFF:
            return 'a multicast address'
    return None


# The blocks never_a_source() names, as (first, last) address numbers per family.
_NEVER_BLOCKS = {
    4: ((0, 0), (127 << 24, (128 << 24) - 1), (0xE << 28, (0xF << 28) - 1), (0xFFFFFFFF, 0xFFFFFFFF)),
    6: ((0, 1), (0xFF << 120, (1 << 128) - 1)),
}


def first_never_a_source(family, first, last):
    """The lowest address number of the range ``first``..``last`` that can
    never be a source (:func:`never_a_source`), or None: a range whose ends
    are fine may still span loopback or multicast."""
    for low, high in _NEVER_BLOCKS[family]:
        if first <= high and last >= low:
            return max(first, low)
    return None


def parse_snat_to(snat_to, ipv6):
    """``snat_to``: addresses (``203.0.113.7``) or ranges
    (``203.0.113.7-203.0.113.9``), at most one per family.  Returns family ->
    ``(first, last)`` address texts.  An address that can never be a source
    (:func:`never_a_source`) is refused, at either end of a range."""
    out = {}
    for item in _items(snat_to, 'snat_to'):
        text = item.strip() if isinstance(item, str) else None
        first, dash, last = (text or '').partition('-')
        if dash and (not first or not last or '-' in last):
            raise MasqError('snat_to: %r: %s. Nothing was changed.'
                            % (item, RANGE_ONE_DASH if '-' in last else RANGE_NEEDS_TWO_ENDS))
        last = last or first
        family = _address_family(first) if text else None
        if family is None or _address_family(last) != family:
            raise MasqError('snat_to: %r is not an address or an address range like 203.0.113.7-203.0.113.9 '
                            '(one family, no prefix length). Nothing was changed.' % (item,))
        for end in (first, last) if first != last else (first,):
            never = never_a_source(family, address_number(end, family))
            if never:
                where = '' if end == text else '%r: ' % (item,)
                raise MasqError('snat_to: %s%s. Nothing was changed.' % (where, NEVER_A_SOURCE % (repr(end), never)))
        if address_number(first, family) > address_number(last, family):
            raise MasqError('snat_to: %r is a range whose first address comes after its last. Nothing was changed.'
                            % (item,))
        inside = first_never_a_source(family, address_number(first, family), address_number(last, family))
        if inside is not None:
            raise MasqError('snat_to: %r: %s. Nothing was changed.'
                            % (item, NEVER_A_SOURCE % (repr(number_address(inside, family)), never_a_source(family, inside))))
        if family == 6 and not ipv6:
            raise MasqError('snat_to: %r is IPv6 but ipv6 is not enabled: set ipv6 (role: ip_masq_enable_ipv6) to '
                            'true, or remove it from snat_to. Nothing was changed.' % (item,))
        if family in out:
            raise MasqError('snat_to: %r and %r are both IPv%d: give at most one address or range per family. '
                            'Nothing was changed.' % (snat_text(*out[family]), item, family))
        out[family] = (first, last)
    return out


def snat_text(first, last):
    return first if first == last else '%s-%s' % (first, last)


def is_interface_name(name):
    """Whether ``name`` is an interface name as the kernel takes it (1 to
    IFNAMSIZ - 1 characters, not ``.`` or ``..``) and as iptables and nft
    match it literally: letters, digits and ``_ . -``, not starting with
    ``-``, no wildcard (``eth+``, ``eth*``).  The one rule: the policy's
    out_interfaces, the role's ip_masq_out_interfaces (checked on the
    controller) and Docker's bridge name all use it."""
    return (isinstance(name, str) and 0 < len(name) <= IFNAME_MAX and _IFNAME_CHARS.issuperset(name)
            and name not in ('.', '..') and name[0] != '-')


def parse_interfaces(names):
    """``out_interfaces``: interface names, duplicates dropped."""
    out = []
    for name in _items(names, 'out_interfaces'):
        if not is_interface_name(name):
            raise MasqError('out_interfaces: %r is not an interface name: 1 to %d letters, digits and _ . - '
                            '(not starting with "-"; no wildcards). Nothing was changed.' % (name, IFNAME_MAX))
        if name not in out:
            out.append(name)
    return out


def extensions_given(options):
    """The names of :data:`EXTENSIONS` that ``options`` (name -> value) sets,
    in that order: a value other than None, '' or an empty list."""
    return [name for name in EXTENSIONS if options.get(name) not in (None, '', [], ())]


def masquerade_conflicts(default_list, reserved, exceptions):
    """The options set next to masquerade_cidrs that make no sense with it
    (it names the destinations to masquerade: everything else keeps its
    source), in this order: a non-masquerade list other than the default
    (``default_list`` false), ``nomasq_all_reserved_ranges``,
    ``exception_cidrs``.  The one rule: the policy refuses the first, the
    role (controller side) names them all."""
    return ([] if default_list else ['nonmasquerade_cidrs']) + (['nomasq_all_reserved_ranges'] if reserved else []) \
        + (['exception_cidrs'] if exceptions else [])


_MASQUERADE_CONFLICT = {
    'nonmasquerade_cidrs': 'nonmasquerade_cidrs (everything not listed in masquerade_cidrs already keeps its source)',
    'nomasq_all_reserved_ranges': ('nomasq_all_reserved_ranges (everything not listed in masquerade_cidrs already '
                                   'keeps its source)'),
    'exception_cidrs': 'exception_cidrs (list the exceptions in masquerade_cidrs instead)',
}


def _refuse_with_masquerade_cidrs(nonmasquerade_cidrs, reserved, given):
    """Options that make no sense with masquerade_cidrs (:func:`masquerade_conflicts`)."""
    conflicts = masquerade_conflicts(is_default_list(nonmasquerade_cidrs), reserved, 'exception_cidrs' in given)
    if conflicts:
        raise MasqError('masquerade_cidrs cannot be combined with %s. Nothing was changed.'
                        % _MASQUERADE_CONFLICT[conflicts[0]])


def shadowed_by_link_local(cidr, family, masq_link_local):
    """Whether the listed destination ``cidr`` (canonical, of ``family``)
    lies wholly inside link-local while link-local keeps its source
    (``masq_link_local``: family -> bool): the link-local RETURN comes
    first, so it would never be masqueraded."""
    return not masq_link_local[family] and covered(cidr_interval(cidr, family),
                                                   [cidr_interval(LINK_LOCAL[family], family)])


def outside_kept(cidrs, kept):
    """Of ``cidrs`` (canonical CIDR texts of either family, in order), those
    not wholly inside the union of ``kept`` (the same): an exception must
    name a part of a range that keeps its source."""
    merged = dict((family, merge(cidr_interval(c, family) for c in kept if cidr_family(c) == family))
                  for family in FAMILIES)
    return [c for c in cidrs if not covered(cidr_interval(c, cidr_family(c)), merged[cidr_family(c)])]


def missing_source_families(sources, families):
    """The families of ``families`` that ``sources`` (family -> CIDRs) lists
    no source for: their traffic would never be rewritten."""
    return [family for family in families if not sources[family]]


def cidr_family(cidr):
    """4 or 6: the family of a canonical CIDR text."""
    return 6 if ':' in cidr else 4


def _extra(given):
    """``Policy.extra`` of the options ``given`` (name -> value) beyond
    the Policy's keywords: each one an extra option of the table, checked by
    its row's ``check``; the other extra options at their default."""
    for name in given:
        option = option_table.BY_NAME.get(name)
        if option is None or not option.extra:
            raise MasqError('%s is not an option of the policy (%s). Nothing was changed.'
                            % (name, 'no row of the options table names it' if option is None
                               else 'the module takes it, the policy does not'))
    out = {}
    for option in option_table.EXTRA_OPTIONS:
        value = given.get(option.name, option.default)
        if value != option.default and option.check is not None:
            value = option.check(value)
        out[option.name] = value
    return out


class Policy:
    """The desired state, validated.

    ``cidrs``: family -> canonical CIDRs in the order given; ``kept(family)``
    adds link-local in front unless it is masqueraded.

    The extensions (docs/docsite/rst/extensions.rst): ``listed`` family ->
    the destinations to masquerade (``masquerade_only``: masquerade_cidrs
    was given; ``cidrs`` is then empty), ``exceptions`` family -> CIDRs
    inside the kept ones that are masqueraded all the same, ``snat_to``
    family -> ``(first, last)`` to SNAT to instead of masquerading,
    ``sources`` family -> the only sources rewritten, ``out_interfaces`` the
    only interfaces traffic is rewritten on.  A backend checks, in this
    order: interface and source (else keep), local destination (keep),
    exceptions (rewrite), link-local and the kept CIDRs (keep) or, with
    masquerade_cidrs, link-local (keep) and the listed CIDRs (rewrite),
    then everything else (rewrite; with masquerade_cidrs, keep).

    ``rule_format``: ``docs`` (default) drops exact duplicate CIDRs (with a
    warning) and appends the reserved ranges to any list; ``upstream`` does
    what the upstream agent does with the same input: one rule per entry,
    duplicates included, and the reserved ranges only added to the default
    list (``nonmasquerade_cidrs`` None, or the config file without
    nonMasqueradeCIDRs).  ``random_fully`` None means the format's default:
    off for docs, on for upstream where iptables supports it
    (:meth:`random_fully_where`).

    ``extra``: option name -> value of every extra option of the options
    table (``options.EXTRA_OPTIONS``; no keyword here names it), checked by
    its row's ``check``, the default where not given; each backend writes
    them by its own rules (:meth:`extra_rules`).
    """

    def __init__(self, nonmasquerade_cidrs=None, nomasq_all_reserved_ranges=False,
                 masq_link_local=False, masq_link_local_ipv6=False, ipv6=False,
                 chain=DEFAULT_CHAIN, random_fully=None, to_ports=None,
                 jump_position='append', cidr_limit=DEFAULT_CIDR_LIMIT, rule_format='docs',
                 exception_cidrs=None, masquerade_cidrs=None, snat_to=None, snat_to_require_local=True,
                 source_cidrs=None, out_interfaces=None, **extra):
        self.chain = validate_chain_name(chain)
        if jump_position not in JUMP_POSITIONS:
            raise MasqError("jump_position: %r is not one of 'append', 'first'." % (jump_position,))
        if rule_format not in RULE_FORMATS:
            raise MasqError("rule_format: %r is not one of 'docs', 'upstream'." % (rule_format,))
        self.rule_format = rule_format
        upstream = rule_format == 'upstream'
        if cidr_limit is not None and (not isinstance(cidr_limit, int) or isinstance(cidr_limit, bool)
                                       or cidr_limit < 0):
            raise MasqError('cidr_limit: %r is not a non-negative integer.' % (cidr_limit,))
        self.jump_position = jump_position
        self.ipv6 = bool(ipv6)
        self.random_fully = None if random_fully is None else bool(random_fully)
        self.masq_link_local = {4: bool(masq_link_local), 6: bool(masq_link_local_ipv6)}
        self.port_ranges = parse_to_ports(to_ports)
        reserved = bool(nomasq_all_reserved_ranges)
        if upstream and not is_default_list(nonmasquerade_cidrs):
            reserved = False    # upstream: the flag only changes the default list
        given = extensions_given({'exception_cidrs': exception_cidrs, 'masquerade_cidrs': masquerade_cidrs,
                                  'snat_to': snat_to, 'source_cidrs': source_cidrs, 'out_interfaces': out_interfaces})
        if upstream and given:
            raise MasqError('rule_format: upstream writes exactly what the upstream agent writes, which has no %s; '
                            'use rule_format docs with %s. Nothing was changed.'
                            % (' and no '.join(sorted(given)), ', '.join(sorted(given))))
        self.masquerade_only = 'masquerade_cidrs' in given
        if self.masquerade_only:
            _refuse_with_masquerade_cidrs(nonmasquerade_cidrs, nomasq_all_reserved_ranges, given)
            self.listed, self.warnings = parse_cidrs(masquerade_cidrs, ipv6=self.ipv6, cidr_limit=cidr_limit,
                                                     name='masquerade_cidrs')
            self.cidrs = {4: [], 6: []}
            self._check_listed()
        else:
            self.listed = {4: [], 6: []}
            self.cidrs, self.warnings = parse_cidrs(nonmasquerade_cidrs, ipv6=self.ipv6,
                                                    cidr_limit=cidr_limit, reserved=reserved,
                                                    keep_duplicates=upstream)
        self.exceptions = {4: [], 6: []}
        if 'exception_cidrs' in given:
            self.exceptions, warnings = parse_cidrs(exception_cidrs, ipv6=self.ipv6, cidr_limit=None,
                                                    name='exception_cidrs')
            self.warnings.extend(warnings)
            self._check_exceptions()
        self.sources = {4: [], 6: []}
        if 'source_cidrs' in given:
            self.sources, warnings = parse_cidrs(source_cidrs, ipv6=self.ipv6, cidr_limit=None, name='source_cidrs')
            self.warnings.extend(warnings)
            missing = missing_source_families(self.sources, self.families())
            if missing:
                raise MasqError('source_cidrs lists no IPv%d source while ipv6 is %s: every managed family needs '
                                'its sources (the IPv%d pod CIDR), or IPv%d traffic would never be masqueraded. '
                                'Add one, or set ipv6 (role: ip_masq_enable_ipv6) to false. Nothing was changed.'
                                % (missing[0], 'enabled' if self.ipv6 else 'disabled', missing[0], missing[0]))
        self.snat_to = parse_snat_to(snat_to, self.ipv6)
        self.snat_to_require_local = bool(snat_to_require_local)
        self.out_interfaces = parse_interfaces(out_interfaces)
        self.sub_chains = sub_chain_names(self.chain)
        self.extra = _extra(extra)

    def families(self):
        return FAMILIES if self.ipv6 else (4,)

    def extra_rules(self, backend, rules):
        """``[(rule, value)]`` for each option of :attr:`extra` set to
        other than its default, in the table's order: its rule in ``rules``,
        the backend ``backend``'s (option name -> function); an option that
        backend has no rule for is refused."""
        out = []
        for option in option_table.EXTRA_OPTIONS:
            value = self.extra.get(option.name, option.default)
            if value == option.default:
                continue
            if option.name not in rules:
                raise MasqError('%s: the %s backend has no rule for it; leave it out, or choose another backend. '
                                'Nothing was changed.' % (option.name, backend))
            out.append((rules[option.name], value))
        return out

    def _check_exceptions(self):
        """Every exception lies inside the destinations that keep their
        source: elsewhere it would be masqueraded anyway."""
        for family in self.families():
            outside = outside_kept(self.exceptions[family], self.kept(family))
            if outside:
                raise MasqError('exception_cidrs: %s %s not inside nonmasquerade_cidrs (nor link-local, when it is '
                                'kept): such traffic is masqueraded anyway. An exception names a part of a kept '
                                'range to masquerade; remove %s or add the range it belongs to to '
                                'nonmasquerade_cidrs. Nothing was changed.'
                                % (', '.join(outside), 'is' if len(outside) == 1 else 'are',
                                   'it' if len(outside) == 1 else 'them'))

    def _check_listed(self):
        """A listed destination inside link-local that is kept would never
        be masqueraded: the link-local RETURN comes first."""
        for family in self.families():
            shadowed = [c for c in self.listed[family] if shadowed_by_link_local(c, family, self.masq_link_local)]
            if shadowed:
                raise MasqError('masquerade_cidrs: %s %s inside link-local %s, which keeps its source while %s is '
                                'false, so %s would never be masqueraded. Set %s to true (link-local is then '
                                'masqueraded only where listed), or remove %s. Nothing was changed.'
                                % (', '.join(shadowed), 'is' if len(shadowed) == 1 else 'are', LINK_LOCAL[family],
                                   'masq_link_local' if family == 4 else 'masq_link_local_ipv6',
                                   'it' if len(shadowed) == 1 else 'they',
                                   'masq_link_local' if family == 4 else 'masq_link_local_ipv6',
                                   'it' if len(shadowed) == 1 else 'them'))

    @property
    def extended(self):
        """Whether any option beyond the upstream agent's is set."""
        return bool(self.masquerade_only or any(self.exceptions.values()) or self.snat_to
                    or any(self.sources.values()) or self.out_interfaces)

    def target(self, family):
        """``('MASQUERADE', None)``, or ``('SNAT', (first, last))`` for a family with snat_to."""
        if family in self.snat_to:
            return 'SNAT', self.snat_to[family]
        return 'MASQUERADE', None

    def action_comment(self, family, kind='masquerade'):
        """The comment of a rule that rewrites the source: ``masquerade``
        (the final rule), ``exception`` or ``listed``."""
        comments = self.comments()
        verb = self.target(family)[0]
        if kind == 'masquerade':
            return comments['snat'] if verb == 'SNAT' else comments['masquerade']
        return comments[kind] % verb

    def kept(self, family):
        """The destinations that keep their source, in order: link-local
        first (unless it is masqueraded), then the list."""
        cidrs = list(self.cidrs[family])
        if not self.masq_link_local[family]:
            link_local = LINK_LOCAL[family]
            if self.rule_format == 'upstream':
                return [link_local] + cidrs     # upstream: a listed link-local is written again
            cidrs = [link_local] + [c for c in cidrs if c != link_local]
        return cidrs

    def comments(self):
        """The rule comments of this policy's rule format (:data:`COMMENTS`)."""
        return COMMENTS[self.rule_format]

    def random_fully_where(self, supported):
        """Whether the rewrite uses fully random source ports, where the
        backend's tools support it (``supported``, the backend's answer:
        ``iptables_layout.random_fully`` for iptables' version): as asked, or
        the format's default (upstream: on where supported)."""
        if self.random_fully is not None:
            return self.random_fully
        return self.rule_format == 'upstream' and bool(supported)
