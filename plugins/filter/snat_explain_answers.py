# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.snat_explain_answers filter: one host's answers to its flows (the role's ip_masq_explain)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: snat_explain_answers
short_description: Keep one host's answers to a loop of flows, one per flow
version_added: 2.0.0
description:
  - Takes the registered results of a loop of P(ipmasq.agent.snat_explain#module) over flows (with
    C(failed_when) set to V(false)) and returns one answer per flow, in order. The role C(ipmasq.agent.ip_masq)
    keeps it as the fact C(ip_masq_explain) for the flows of C(ip_masq_explain_flows).
  - A flow the host could not answer is kept with the verdict V(failed) and a message that says so; an V(unknown)
    verdict is an answer like the others.
  - Runs on the controller; reads nothing itself.
positional: _input, after
options:
  _input:
    description: The loop's registered C(results). Each carries its flow (a dict with C(src) and C(dst)) as the
      loop item (C(item), or the loop's C(loop_var)).
    type: list
    elements: dict
    required: true
  after:
    description: Whether the flows were asked in after mode (the role passes C(ansible_check_mode)); the
      C(after) of a flow the host could not answer.
    type: bool
    default: false
seealso:
  - module: ipmasq.agent.snat_explain
  - plugin: ipmasq.agent.snat_explain_summary
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Explain some flows
  ipmasq.agent.snat_explain:
    src: "{{ item.src }}"
    dst: "{{ item.dst }}"
  loop:
    - {src: 10.244.1.2, dst: 203.0.113.10}
    - {src: 10.244.1.2, dst: 10.10.0.10}
  register: explained
  failed_when: false

- name: Keep the answers
  ansible.builtin.set_fact:
    answers: "{{ explained.results | ipmasq.agent.snat_explain_answers(ansible_check_mode) }}"
  # answers.flows[0] == {'flow': {'src': '10.244.1.2', 'dst': '203.0.113.10'}, 'verdict': 'masquerade',
  #                      'to': None, 'decided_by': {'owner': 'ip-masq-agent', ...}, 'after': False, 'now': None,
  #                      'msg': '10.244.1.2 → 203.0.113.10: MASQUERADE by ours (IP-MASQ-AGENT rule 4), ...'}
  # a flow the host could not answer: {'verdict': 'failed', ...,
  #                                    'msg': '10.244.1.2 -> 10.10.0.10: could not explain: MESSAGE'}
"""

RETURN = r"""
_value:
  description: The answers.
  type: dict
  contains:
    flows:
      description: One answer per flow, in the loop's order, each with the C(flow) (the loop item), and the module's
        C(verdict) (or V(failed) where the host gave no answer), C(to), C(decided_by), C(after), C(now) (in after
        mode the answer now) and C(msg) (the answer in one line).
      type: list
      elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.plugin_utils._explain_summary import flow_answers


def snat_explain_answers(_input, after=False):
    if not isinstance(after, bool):
        raise AnsibleFilterError('ipmasq.agent.snat_explain_answers: after must be true or false, got %r.' % (after,))
    try:
        return flow_answers(_input, after)
    except TypeError as e:
        raise AnsibleFilterError('ipmasq.agent.snat_explain_answers: %s' % e) from None


class FilterModule:
    """ipmasq.agent.snat_explain_answers"""

    def filters(self):
        return {'snat_explain_answers': snat_explain_answers}
