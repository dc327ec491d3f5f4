# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.snat_flow filter: check a flow on the controller, before any host is asked about it."""

from __future__ import annotations

DOCUMENTATION = r"""
name: snat_flow
short_description: Check one flow for ipmasq.agent.snat_explain on the controller
version_added: 2.0.0
description:
  - Checks, on the controller, the flow that C(playbooks/explain.yml) asks every host about, as
    P(ipmasq.agent.snat_explain#module) checks it, and returns the module's arguments for it.
  - Keys left out or empty are left out. A bad value fails with one error that names the key and the value.
positional: _input
options:
  _input:
    description: A dict with C(src) and C(dst) (one address each, of one family) and optionally C(proto),
      C(dport), C(out_interface) and C(mark), as the module's options of these names take them.
    type: dict
    required: true
seealso:
  - module: ipmasq.agent.snat_explain
  - plugin: ipmasq.agent.snat_explain_summary
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Check the flow before any host is touched
  ansible.builtin.set_fact:
    flow: "{{ {'src': '10.244.1.2', 'dst': '203.0.113.10', 'proto': 'tcp', 'dport': 443} | ipmasq.agent.snat_flow }}"
  # flow == {'src': '10.244.1.2', 'dst': '203.0.113.10', 'proto': 'tcp', 'dport': '443'}
  # {'src': '10.244.1.2/24', 'dst': '203.0.113.10'} fails with:
  # ipmasq.agent.snat_flow: src: '10.244.1.2/24' is not an IPv4 or IPv6 address (one address, no prefix length).
"""

RETURN = r"""
_value:
  description: The flow as the module's arguments (strings), empty keys left out.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.plugin_utils._explain_summary import FlowError, checked_flow


def snat_flow(_input):
    try:
        return checked_flow(_input)
    except FlowError as e:
        raise AnsibleFilterError('ipmasq.agent.snat_flow: %s' % e) from None


class FilterModule:
    """ipmasq.agent.snat_flow"""

    def filters(self):
        return {'snat_flow': snat_flow}
