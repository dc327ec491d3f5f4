# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.snat_to filter: validate and normalise a snat_to list."""

from __future__ import annotations

DOCUMENTATION = r"""
name: snat_to
short_description: Validate the addresses to SNAT to and return them in canonical form
version_added: 1.1.0
description:
  - Checks, on the controller, the list given as O(ipmasq.agent.masq_chain#module:snat_to) (the
    P(ipmasq.agent.ip_masq#role) role's C(ip_masq_snat_to)) - the source addresses that traffic is
    rewritten to with C(SNAT) instead of C(MASQUERADE) - and returns it normalised, in the order given.
  - Each entry is one address, such as V(203.0.113.7), or a range of addresses written
    C(first-last), such as V(203.0.113.7-203.0.113.9), within one family, without a prefix length.
  - At most one entry per family (one for IPv4, one for IPv6); an IPv6 entry only with O(ipv6=true).
  - Addresses that can never be a source are refused - the unspecified address (V(0.0.0.0), C(::)),
    loopback, multicast and V(255.255.255.255).
  - Normalisation - whitespace around an entry or a dash is removed, IPv6 is written compressed in
    lower case as C(ip6tables-save) prints it, and a range whose two ends are the same address becomes
    that address.
  - On any problem it fails with one error that lists B(every) bad entry with its index and the
    reason, as P(ipmasq.agent.cidr_list#filter) does.
  - Whether the addresses are assigned to the node is checked on the node, by the module, before
    anything is written.
positional: _input
options:
  _input:
    description: The list of addresses or ranges. A single string is refused (write a one-item list).
    type: list
    elements: raw
    required: true
  ipv6:
    description:
      - Whether IPv6 is managed (the module's O(ipmasq.agent.masq_chain#module:ipv6), the role's
        C(ip_masq_enable_ipv6)). With V(false), an IPv6 entry is refused.
    type: bool
    default: false
  label:
    description: Name of the list in error messages, for example the variable name; without it
      messages say C(the list).
    type: str
requirements:
  - netaddr (Python library, on the controller only)
seealso:
  - module: ipmasq.agent.masq_chain
  - plugin: ipmasq.agent.cidr_list
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Validate the SNAT addresses before any node is touched
  ansible.builtin.set_fact:
    snat_to: "{{ raw_snat_to | ipmasq.agent.snat_to(ipv6=true, label='raw_snat_to') }}"
  vars:
    raw_snat_to: [' 203.0.113.7 - 203.0.113.9 ', '2001:DB8:0::7']
  # snat_to == ['203.0.113.7-203.0.113.9', '2001:db8::7']

# ['203.0.113.7', '203.0.113.8', '2001:db8::7', '192.0.2.0/24'] | ipmasq.agent.snat_to fails with:
# ipmasq.agent.snat_to: 3 problems in the list (4 entries):
# [1] '203.0.113.8': a second IPv4 entry after [0] '203.0.113.7': give at most one address or range per family;
# [2] '2001:db8::7': IPv6, but IPv6 is not enabled (ipv6=false; with the ip_masq role, ip_masq_enable_ipv6: false);
# [3] '192.0.2.0/24': a prefix length has no place here: write one address or a range such as
# 192.0.2.1-192.0.2.254
"""

RETURN = r"""
_value:
  description: The entries in canonical text form (C(203.0.113.7), C(203.0.113.7-203.0.113.9),
    C(2001:db8::7)), in the order given.
  type: list
  elements: str
"""

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


class FilterModule:
    """ipmasq.agent.snat_to"""

    def filters(self):
        return {'snat_to': snat_to}
