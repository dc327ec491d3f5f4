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

from ansible_collections.ipmasq.agent.plugins.plugin_utils._snat_to import snat_to


class FilterModule:
    """ipmasq.agent.snat_to"""

    def filters(self):
        return {'snat_to': snat_to}
