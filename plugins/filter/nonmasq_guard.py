# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.nonmasq_guard filter: validate a non-masquerade list, refuse the catch-all."""

from __future__ import annotations

DOCUMENTATION = r"""
name: nonmasq_guard
short_description: Validate a non-masquerade CIDR list and refuse one that covers everything
version_added: 1.0.0
description:
  - The check to run on the non-masquerade list (the CIDRs that get a RETURN rule in the
    C(IP-MASQ-AGENT) chain) before any node is touched.
  - It does everything P(ipmasq.agent.cidr_list#filter) does, with the same options and messages,
    and also fails when the list covers all of IPv4 (C(0.0.0.0/0), or pieces that add up to it such
    as C(0.0.0.0/1) and C(128.0.0.0/1)) or all of IPv6 (C(::/0) or pieces). Such a list means that
    nothing is ever masqueraded, so pods lose access to everything outside that does not route the
    pod addresses back. It is a classic mistake made to keep pods off the internet.
  - All problems, bad entries and the catch-all alike, are reported in one error. The message says
    what the list would do and how to get what was probably wanted - list only the pod and node
    networks, or use C(state=absent) to have no SNAT at all.
  - Returns the list normalised, in the order given, so it can be used in place of the input.
positional: _input
options:
  _input:
    description: The non-masquerade list of CIDR strings.
    type: list
    elements: raw
    required: true
  allow_catch_all:
    description:
      - Accept a list that covers all of IPv4 or all of IPv6, that is, never masquerade anything.
    type: bool
    default: false
  bare_address:
    description: As in P(ipmasq.agent.cidr_list#filter).
    type: str
    choices: [refuse, host]
    default: refuse
  host_bits:
    description: As in P(ipmasq.agent.cidr_list#filter).
    type: str
    choices: [error, align]
    default: error
  duplicates:
    description: As in P(ipmasq.agent.cidr_list#filter).
    type: str
    choices: [error, drop, keep]
    default: error
  label:
    description: Name of the list in error messages, for example the variable name; without it
      messages say C(the list).
    type: str
  option_hints:
    description:
      - Name this filter's options O(bare_address) and O(duplicates) in error messages as a way to
        accept a bare address or a duplicate.
      - Set it to V(false) where the list comes from somewhere that cannot pass them, such as the
        P(ipmasq.agent.ip_masq#role) role's C(ip_masq_nonmasquerade_cidrs); the messages then only say
        what to write instead.
    type: bool
    default: true
    version_added: 1.0.0
requirements:
  - netaddr (Python library, on the controller only)
seealso:
  - plugin: ipmasq.agent.cidr_list
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Check the non-masquerade list before touching any node
  ansible.builtin.set_fact:
    nonmasq: "{{ ip_masq_nonmasquerade_cidrs | ipmasq.agent.nonmasq_guard(label='ip_masq_nonmasquerade_cidrs') }}"

# ip_masq_nonmasquerade_cidrs: ['0.0.0.0/0'] fails with:
# ipmasq.agent.nonmasq_guard: 1 problem in ip_masq_nonmasquerade_cidrs (1 entry):
# [0] '0.0.0.0/0' covers all of IPv4. A non-masquerade list that covers all of IPv4 means every
# destination matches a RETURN rule before the final MASQUERADE: nothing is ever masqueraded, and
# pods lose all access to networks that do not route the pod addresses back (the internet, cloud
# services). To keep outside access, list only the pod and node networks (for example
# 10.244.0.0/16 and 192.168.1.0/24); to have no SNAT at all, use state: absent instead
# (ip_masq_state: absent with the ip_masq role); if every destination really must be exempt, pass
# allow_catch_all=true (ip_masq_allow_catch_all: true with the role)

- name: Deliberately never masquerade IPv6 (for example, global pod addresses)
  ansible.builtin.set_fact:
    nonmasq: "{{ ['10.0.0.0/8', '::/0'] | ipmasq.agent.nonmasq_guard(allow_catch_all=true) }}"
"""

RETURN = r"""
_value:
  description: The CIDRs in canonical text form, in the order given.
  type: list
  elements: str
"""

from ansible_collections.ipmasq.agent.plugins.plugin_utils._nonmasq_guard import nonmasq_guard


class FilterModule:
    """ipmasq.agent.nonmasq_guard"""

    def filters(self):
        return {'nonmasq_guard': nonmasq_guard}
