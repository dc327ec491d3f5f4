# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The non-masquerade CIDR list, validated on the node.

A canonical IPv4 CIDR (the form nearly every list is written in) is checked
without ``ipaddress``; anything else goes through ``ipaddress``, imported only
then, so that its messages are the ones users see and a resync cycle whose
list is plain IPv4 never pays for the import.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.intervals import BITS, merge
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.ranges import (
    DEFAULT_NONMASQ_CIDRS,
    RESERVED_RANGES,
)

DEFAULT_CIDR_LIMIT = 64

# Every canonical IPv4 octet text ('0' .. '255') and prefix length text
# ('0' .. '32'), for the fast path below.
_OCTETS = dict((str(i), i) for i in range(256))
_PREFIXES4 = dict((str(i), i) for i in range(33))


def canonical_ipv4_cidr(text):
    """Return ``text`` if it is an aligned IPv4 CIDR already written the way
    ipaddress prints it ('10.0.0.0/8'), else None.

    Anything that is not in canonical form (leading zeros, signs, spaces,
    non-ASCII digits, host bits set, IPv6, errors) is not in the tables and
    returns None; the caller then asks ipaddress, so results and error
    messages stay exactly ipaddress's.
    """
    addr, _slash, prefix = text.partition('/')
    plen = _PREFIXES4.get(prefix)
    octets = addr.split('.')
    if plen is None or len(octets) != 4:
        return None
    value = 0
    for octet in octets:
        number = _OCTETS.get(octet)
        if number is None:
            return None
        value = (value << 8) | number
    if value & ((1 << (32 - plen)) - 1):
        return None
    return text


def parse_network(raw, text, ipv6, errors):
    """One entry through ipaddress: the network, or None after appending the
    sentence that says what is wrong with it."""
    import ipaddress  # pylint: disable=import-outside-toplevel

    if '%' in text:
        # ipaddress (3.9+) reads a zone index and the network would drop it.
        errors.append('%r: an IPv6 zone index (%%...) has no place in a CIDR' % (raw,))
        return None
    if '/' not in text:
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            errors.append('%r is not a CIDR' % (raw,))
        else:
            errors.append('%r is an address, not a CIDR (write %s/%d for this host alone)'
                          % (raw, addr, addr.max_prefixlen))
        return None
    try:
        net = ipaddress.ip_network(text, strict=True)
    except ValueError:
        try:
            loose = ipaddress.ip_network(text, strict=False)
        except ValueError:
            errors.append('%r is not a CIDR' % (raw,))
        else:
            errors.append('%r is not aligned to a CIDR block: it has host bits set '
                          '(did you mean %s?)' % (raw, loose))
        return None
    if net.version == 6 and not ipv6:
        errors.append('%r is an IPv6 CIDR but ipv6 is not enabled (set ipv6: true)' % (raw,))
        return None
    return net


def canonical_text(net):
    """A network as iptables-save prints it.  For IPv6 that is the C
    library's inet_ntop form, which writes IPv4-mapped and -compatible
    addresses with a dotted quad (``::ffff:0.0.0.0/96``) where Python's
    ipaddress does not (``::ffff:0:0/96``); a different text would read as
    drift on every run."""
    if net.version == 6:
        import socket  # pylint: disable=import-outside-toplevel

        return '%s/%d' % (socket.inet_ntop(socket.AF_INET6, net.network_address.packed), net.prefixlen)
    return str(net)


class DefaultCidrs(list):
    """The default list, as a config file without nonMasqueradeCIDRs gives
    it: equal to the plain list, but known to be the default (upstream adds
    the reserved ranges to the default list only)."""


class CanonicalCidrs(list):
    """A list of canonical IPv4 CIDRs (:func:`canonical_ipv4_cidr`), each once:
    what the config reader hands the policy when a file's list is in that
    form, so that :func:`parse_cidrs` does not check every entry again."""


def default_cidrs():
    return DefaultCidrs(DEFAULT_NONMASQ_CIDRS)


def is_default_list(cidrs):
    """Whether ``cidrs`` is the default list rather than one the user gave."""
    return cidrs is None or isinstance(cidrs, DefaultCidrs)


def parse_cidrs(cidrs, ipv6=False, cidr_limit=DEFAULT_CIDR_LIMIT, reserved=False, keep_duplicates=False,
                name='nonmasquerade_cidrs'):
    """Validate a CIDR list (the non-masquerade list unless ``name`` says
    which option it is: errors and warnings name it).

    Returns ``(by_family, warnings)`` where ``by_family`` maps 4 and 6 to the
    list of canonical CIDR strings, order kept, exact duplicates dropped (with
    a warning) unless ``keep_duplicates`` (upstream writes one rule per
    entry).  Raises MasqError naming every bad entry at once.
    """
    if cidrs is None:
        cidrs = list(DEFAULT_NONMASQ_CIDRS)
    if isinstance(cidrs, CanonicalCidrs) and not reserved:
        # Checked already, entry by entry (_core/upstream_config/config.py); what the loop below would return.
        _check_limit(name, len(cidrs), cidr_limit)
        return {4: list(cidrs), 6: []}, []
    if not isinstance(cidrs, (list, tuple)):
        raise MasqError('%s must be a list of CIDR strings, got %r.' % (name, cidrs))
    entries = list(cidrs)
    if reserved:
        entries.extend(RESERVED_RANGES)
    errors = []
    warnings = []
    by_family = {4: [], 6: []}
    seen = set()
    for raw in entries:
        if not isinstance(raw, str):
            errors.append('%r is not a string' % (raw,))
            continue
        text = raw.strip()
        if not text:
            errors.append('an empty entry')
            continue
        canon, version = canonical_ipv4_cidr(text), 4
        if canon is None:
            net = parse_network(raw, text, ipv6, errors)
            if net is None:
                continue
            canon, version = canonical_text(net), net.version
        if canon in seen and not keep_duplicates:
            if not (reserved and canon in RESERVED_RANGES):
                warnings.append('%s lists %s more than once; one rule is written.' % (name, canon))
            continue
        seen.add(canon)
        by_family[version].append(canon)
    if errors:
        raise MasqError('%s: %d bad entr%s: %s. Nothing was changed.'
                        % (name, len(errors), 'y' if len(errors) == 1 else 'ies', '; '.join(errors)))
    _check_limit(name, len(by_family[4]) + len(by_family[6]), cidr_limit)
    return by_family, warnings


def over_limit(count, cidr_limit):
    """Whether ``count`` CIDRs (link-local not counted) is over ``cidr_limit``
    (None: no limit).  The one rule: the policy, the config file reader and
    the role (controller side) all ask it."""
    return cidr_limit is not None and count > cidr_limit


def _check_limit(name, count, cidr_limit):
    if over_limit(count, cidr_limit):
        raise MasqError('%s: %d CIDRs (excluding link-local) is over cidr_limit %d; '
                        'aggregate the list or raise cidr_limit. Nothing was changed.'
                        % (name, count, cidr_limit))


def normal_text(text):
    """A valid CIDR as ipaddress writes it (the form the config file is
    rendered in)."""
    if canonical_ipv4_cidr(text) is not None:
        return text
    import ipaddress  # pylint: disable=import-outside-toplevel

    return str(ipaddress.ip_network(text))


# --------------------------------------------------------------------------
# The controller's check of a non-masquerade list, on the node
# --------------------------------------------------------------------------

_FAMILY_TEXT = {4: 'IPv4', 6: 'IPv6'}
_ASCII_DIGITS = frozenset('0123456789')


def _guard_entry(raw):
    """One entry as the controller's ``nonmasq_guard`` filter reads it
    (``plugin_utils/_cidr.parse_entry``, bare addresses and host bits
    refused): ``(family, first, prefixlen, None)``, or ``(None, None, None,
    reason)``.  Addresses go through inet_pton, as netaddr's INET_PTON does."""
    import _socket  # pylint: disable=import-outside-toplevel

    if not isinstance(raw, str):
        return None, None, None, 'not a string'
    text = raw.strip()
    if not text:
        return None, None, None, 'empty'
    if not text.isascii() or any(ch.isspace() for ch in text):
        return None, None, None, 'not an IP address or CIDR (it contains spaces or non-ASCII characters)'
    addr, slash, plen = text.partition('/')
    family = 6 if ':' in addr else 4
    bits = BITS[family]
    if '%' in addr:
        return None, None, None, 'an IPv6 zone index (%...) has no place in a CIDR'
    if family == 4 and any(len(octet) > 1 and octet.startswith('0') for octet in addr.split('.')):
        return None, None, None, 'a leading zero in an octet is ambiguous (octal or decimal?)'
    try:
        first = int.from_bytes(_socket.inet_pton(_socket.AF_INET if family == 4 else _socket.AF_INET6, addr), 'big')
    except (OSError, ValueError):
        return None, None, None, 'not an IP address or CIDR'
    if not slash:
        return None, None, None, 'an address, not a CIDR (write %s/%d for this host alone)' % (addr, bits)
    if not plen or len(plen) > 3 or not _ASCII_DIGITS.issuperset(plen) or int(plen) > bits:
        return None, None, None, 'the prefix length must be a number 0-%d' % bits
    prefixlen = int(plen)
    if first & ((1 << (bits - prefixlen)) - 1):
        return None, None, None, 'it has host bits set'
    return family, first, prefixlen, None


def guard_nonmasq_cidrs(cidrs, allow_catch_all=False, keep_duplicates=False, name='nonmasquerade_cidrs'):
    """Refuse what the controller's ``nonmasq_guard`` filter refuses
    (``plugins/filter/nonmasq_guard.py``, with its default options): an
    entry that is not a CIDR in the form it reads (a zone index ``%``
    included), a duplicate unless ``keep_duplicates`` (``rule_format:
    upstream`` writes one rule per entry), and a list that covers all of
    IPv4 or all of IPv6 (its CIDRs merged) unless ``allow_catch_all``.

    Returns None; raises MasqError naming every bad entry (by its position)
    at once, ending ``Nothing was changed.``."""
    if not isinstance(cidrs, (list, tuple)):
        raise MasqError('%s must be a list of CIDR strings, got %r. Nothing was changed.' % (name, cidrs))
    problems = []
    seen = {}
    intervals = {4: [], 6: []}
    where = {4: [], 6: []}
    for index, raw in enumerate(cidrs):
        family, first, prefixlen, reason = _guard_entry(raw)
        if reason is not None:
            problems.append('[%d] %r: %s' % (index, raw, reason))
            continue
        key = (family, first, prefixlen)
        if key in seen:
            if not keep_duplicates:
                problems.append('[%d] %r: a duplicate of [%d] %r' % (index, raw, seen[key], cidrs[seen[key]]))
            continue
        seen[key] = index
        intervals[family].append((first, first | ((1 << (BITS[family] - prefixlen)) - 1)))
        where[family].append(index)
    if not allow_catch_all:
        for family in (4, 6):
            if merge(intervals[family]) == [(0, (1 << BITS[family]) - 1)]:
                # The entries that are not inside another one: those that make up the catch-all.
                outer, reach = [], -1
                spans = sorted(((f, l, i) for (f, l), i in zip(intervals[family], where[family])),
                               key=lambda e: (e[0], -e[1]))
                for _first, last, i in spans:
                    if last > reach:
                        outer.append(i)
                        reach = last
                pieces = ['[%d] %r' % (i, cidrs[i]) for i in sorted(outer)]
                shown = ', '.join(pieces[:8]) + (' and %d more' % (len(pieces) - 8) if len(pieces) > 8 else '')
                problems.append('%s %s all of %s: nothing would ever be masqueraded (allow_catch_all accepts it)'
                                % (shown, 'covers' if len(pieces) == 1 else 'together cover', _FAMILY_TEXT[family]))
    if problems:
        raise MasqError('%s: %d problem%s: %s. Nothing was changed.'
                        % (name, len(problems), '' if len(problems) == 1 else 's', '; '.join(problems)))
