# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.cidr_list filter: validate and normalise a list of CIDRs."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cidr_list
short_description: Validate a list of CIDRs and return it in canonical form
version_added: 1.0.0
description:
  - Checks every entry of a list of CIDRs on the controller and returns the list in canonical
    text form (IPv4 dotted quad, IPv6 compressed lowercase as C(ip6tables-save) prints it),
    in the order given.
  - Leading and trailing whitespace is removed; C(2001:DB8:0::/32) becomes C(2001:db8::/32).
  - >-
    On any problem it fails with one error that lists B(every) bad entry with its index and the
    reason, for example C([1] '10.0.0.1/8': host bits set: the aligned network is 10.0.0.0/8).
  - "Reasons: not a string (a number, a mapping, null from an empty YAML item); empty; not an IP
    address or CIDR (including ambiguous leading zeros such as C(010.0.0.0/8), zone indexes,
    netmasks instead of prefix lengths, prefix lengths out of range); host bits set (naming the
    aligned network that was probably meant); a bare address without a prefix length (refused
    unless O(bare_address=host)); a duplicate of an earlier entry (after normalisation)."
  - For the non-masquerade list itself use P(ipmasq.agent.nonmasq_guard#filter), which does the same
    checks and also refuses a list that covers all of IPv4 or IPv6.
positional: _input
options:
  _input:
    description: The list of CIDR strings. A single string is refused (write a one-item list).
    type: list
    elements: raw
    required: true
  bare_address:
    description:
      - What to do with an entry that is an address without a prefix length, such as C(10.1.2.3).
      - V(refuse) reports it as a problem, as the Kubernetes ip-masq-agent does.
      - V(host) takes it as the single host, C(/32) for IPv4 and C(/128) for IPv6.
    type: str
    choices: [refuse, host]
    default: refuse
  host_bits:
    description:
      - What to do with an entry whose address has bits set beyond the prefix length, such as
        C(10.0.0.1/8).
      - V(error) reports it and names the aligned network (C(10.0.0.0/8)), as the Kubernetes
        ip-masq-agent refuses it.
      - V(align) silently replaces it with the aligned network; useful when the list is built from
        interface addresses such as C(192.168.1.10/24).
    type: str
    choices: [error, align]
    default: error
  duplicates:
    description:
      - What to do with an entry equal to an earlier one after normalisation
        (C(2001:DB8::/32) and C(2001:db8::/32) are the same network).
      - V(error) reports it; V(drop) keeps the first occurrence only; V(keep) keeps every
        occurrence, as the upstream agent writes one rule per entry.
    type: str
    choices: [error, drop, keep]
    default: error
  label:
    description: Name of the list in error messages, for example the variable name; without it
      messages say C(the list).
    type: str
requirements:
  - netaddr (Python library, on the controller only)
seealso:
  - plugin: ipmasq.agent.nonmasq_guard
    plugin_type: filter
  - plugin: ipmasq.agent.cidr
    plugin_type: test
"""

EXAMPLES = r"""
- name: Validate and normalise the pod networks
  ansible.builtin.set_fact:
    pod_cidrs: "{{ raw_pod_cidrs | ipmasq.agent.cidr_list(label='raw_pod_cidrs') }}"
  vars:
    raw_pod_cidrs: ['10.244.0.0/16', ' 2001:DB8:0::/48 ']
  # pod_cidrs == ['10.244.0.0/16', '2001:db8::/48']

- name: Take bare addresses as single hosts and drop repeats
  ansible.builtin.debug:
    msg: "{{ ['192.0.2.7', '192.0.2.7/32', 'fd00::1'] | ipmasq.agent.cidr_list(bare_address='host', duplicates='drop') }}"
  # ['192.0.2.7/32', 'fd00::1/128']

# ['10.0.0.1/8', 'banana', 10] fails with:
# ipmasq.agent.cidr_list: 3 problems in the list (3 entries):
# [0] '10.0.0.1/8': host bits set: the aligned network is 10.0.0.0/8 (for the single host write 10.0.0.1/32);
# [1] 'banana': not an IP address or CIDR; [2] 10: not a string but a number
"""

RETURN = r"""
_value:
  description: The CIDRs in canonical text form, in the order given (without later duplicates if
    O(duplicates=drop)).
  type: list
  elements: str
"""

from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import (
    BARE_ADDRESS_CHOICES, DUPLICATES_CHOICES, HOST_BITS_CHOICES, check_choice, fqcn, parse_list,
)

NAME = fqcn('cidr_list')


def cidr_list(value, *, bare_address='refuse', host_bits='error', duplicates='error', label=None):
    """Validate a list of CIDRs; return it normalised, or fail naming every bad entry."""
    bare_address = check_choice(NAME, 'bare_address', bare_address, BARE_ADDRESS_CHOICES)
    host_bits = check_choice(NAME, 'host_bits', host_bits, HOST_BITS_CHOICES)
    duplicates = check_choice(NAME, 'duplicates', duplicates, DUPLICATES_CHOICES)
    cidrs = parse_list(NAME, value, label, bare_address=bare_address, host_bits=host_bits,
                       duplicates=duplicates)
    return [cidr.text for cidr in cidrs]


class FilterModule:
    """ipmasq.agent.cidr_list"""

    def filters(self):
        return {'cidr_list': cidr_list}
