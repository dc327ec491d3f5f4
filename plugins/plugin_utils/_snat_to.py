# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""The snat_to list check: the ``ipmasq.agent.snat_to`` filter and the role's
controller checks (``_role_args``) both call :func:`snat_to`."""

from __future__ import annotations

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import (
    NEVER_A_SOURCE, RANGE_NEEDS_TWO_ENDS, RANGE_ONE_DASH, first_never_a_source, never_a_source,
)
from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import (
    CidrError, address_text, as_list, check_bool, check_label, fqcn, parse_address, parse_entry, plural,
    require_netaddr, show, type_phrase,
)

NAME = fqcn('snat_to')
_FAMILY = {4: 'IPv4', 6: 'IPv6'}


def _prefix_reason(text: str) -> str:
    """The reason for an entry with a prefix length, with what to write instead."""
    cidr, _reason = parse_entry(text, host_bits='align')
    if cidr is None:
        return 'a prefix length has no place here: write one address or a range such as 203.0.113.7-203.0.113.9'
    first, last = cidr.first, cidr.last
    if cidr.last - cidr.first >= 2 and cidr.version == 4:
        first, last = first + 1, last - 1   # the network and broadcast addresses
    if first == last:
        return f'a prefix length has no place here: write the address alone, {address_text(cidr.version, first)}'
    instead = f'{address_text(cidr.version, first)}-{address_text(cidr.version, last)}'
    return f'a prefix length has no place here: write one address or a range such as {instead}'


def _parse_entry(item: object) -> tuple[tuple[int, int, int] | None, str | None]:
    """(version, first, last) of one entry, or (None, reason)."""
    if not isinstance(item, str):
        return None, f'not a string but {type_phrase(item)}'
    text = item.strip()
    if not text:
        return None, 'empty' if not item else 'empty (only whitespace)'
    if '/' in text:
        return None, _prefix_reason(text)
    ends = [end.strip() for end in text.split('-')]
    if len(ends) > 2:
        return None, RANGE_ONE_DASH
    parsed = []
    for end in ends:
        if not end:
            return None, RANGE_NEEDS_TWO_ENDS
        version, number, reason = parse_address(end)
        if version is None:
            return None, reason
        never = never_a_source(version, number)   # the node's rule (the module and the resync refuse the same)
        if never:
            return None, NEVER_A_SOURCE % (show(end), never)
        parsed.append((version, number))
    (version, first), (last_version, last) = parsed[0], parsed[-1]
    if version != last_version:
        return None, 'a range from an IPv4 to an IPv6 address: both ends must be of one family'
    if first > last:
        return None, (f'the range runs backwards: {address_text(version, first)} comes after '
                      f'{address_text(version, last)} (write {address_text(version, last)}-'
                      f'{address_text(version, first)})')
    inside = first_never_a_source(version, first, last)   # the node's rule for what a range spans
    if inside is not None:
        return None, NEVER_A_SOURCE % (show(address_text(version, inside)), never_a_source(version, inside))
    return (version, first, last), None


def snat_to(value, *, ipv6=False, label=None):
    """Validate a snat_to list; return it normalised, or fail naming every bad entry."""
    require_netaddr(NAME)
    ipv6 = check_bool(NAME, 'ipv6', ipv6)
    label = check_label(NAME, label)
    items = as_list(NAME, value, label, what='address')
    problems = []
    result = []
    seen = {}
    for index, item in enumerate(items):
        parsed, reason = _parse_entry(item)
        if parsed is None:
            problems.append(f'[{index}] {show(item)}: {reason}')
            continue
        version, first, last = parsed
        if version == 6 and not ipv6:
            problems.append(f'[{index}] {show(item)}: IPv6, but IPv6 is not enabled '
                            '(ipv6=false; with the ip_masq role, ip_masq_enable_ipv6: false)')
            continue
        if version in seen:
            earlier = seen[version]
            problems.append(f'[{index}] {show(item)}: a second {_FAMILY[version]} entry after '
                            f'[{earlier}] {show(items[earlier])}: give at most one address or range per family')
            continue
        seen[version] = index
        text = address_text(version, first)
        result.append(text if first == last else f'{text}-{address_text(version, last)}')
    if problems:
        raise CidrError(NAME, f'{plural(len(problems), "problem")} in {label} '
                              f'({plural(len(items), "entry", "entries")}): ' + '; '.join(problems))
    return result
