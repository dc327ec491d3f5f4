# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.snat_explain_summary filter: one flow's SNAT across the fleet (playbooks/explain.yml)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: snat_explain_summary
short_description: Sum up one flow's SNAT answer of every host, per host and per group
version_added: 2.0.0
description:
  - Takes, per host, the result of P(ipmasq.agent.snat_explain#module) for one flow (C(playbooks/explain.yml)
    registers it) and returns which hosts translate the flow (V(masquerade) or V(snat)), which leave its
    source unchanged, which answer V(unknown), which gave no answer, whose rule decides on each, and the groups
    whose hosts disagree (their hosts' verdicts, or SNAT addresses, differ).
  - Runs on the controller; reads nothing itself.
positional: _input
options:
  _input:
    description: A dict of host name to its registered result (a failed or unreachable one counts as no answer).
    type: dict
    required: true
  host_groups:
    description: A dict of host name to the inventory groups it is in (C(hostvars[host].group_names)). Without
      it no group is summed up.
    type: dict
  skip_groups:
    description: Groups not summed up (every host of the play is in them).
    type: list
    elements: str
    default: [all, ungrouped, ip_masq_nodes]
seealso:
  - module: ipmasq.agent.snat_explain
  - plugin: ipmasq.agent.snat_flow
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Sum up every host's answer
  ansible.builtin.debug:
    msg: >-
      {{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars)
                                            | map(attribute='why', default={})))
         | ipmasq.agent.snat_explain_summary(host_groups=host_groups) }}
"""

RETURN = r"""
_value:
  description: The fleet's answer.
  type: dict
  contains:
    hosts:
      description: Per host its C(verdict) (or V(failed), V(unreachable), V(no answer)), C(to), C(decided_by) (the owner
        and where its rule is, in words), the deciding C(rule), C(msg), and in after mode C(now) (the answer before the
        role).
      type: dict
    translated_hosts:
      description: The hosts that masquerade or SNAT the flow.
      type: list
      elements: str
    unchanged_hosts:
      description: The hosts where the flow keeps its source.
      type: list
      elements: str
    unknown_hosts:
      description: The hosts whose answer is V(unknown) (each host's C(msg) names the match).
      type: list
      elements: str
    failed_hosts:
      description: The hosts that gave no answer.
      type: list
      elements: str
    deciders:
      description: Who decides (the owner and the rule's place) to the hosts where it does.
      type: dict
    groups:
      description: Per group, each effect (V(masquerade), C(snat to ADDRESS), V(unchanged), ...) to its hosts.
      type: dict
    disagreeing_groups:
      description: The groups whose hosts have more than one effect, each with its effects and their hosts.
      type: dict
    lines:
      description: The summary in words, one line each.
      type: list
      elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.plugin_utils._explain_summary import summary


def snat_explain_summary(_input, host_groups=None, skip_groups=('all', 'ungrouped', 'ip_masq_nodes')):
    if not isinstance(_input, dict):
        raise AnsibleFilterError('ipmasq.agent.snat_explain_summary: give a dict of host name to its snat_explain '
                                 'result, got %r.' % (_input,))
    if host_groups is not None and not isinstance(host_groups, dict):
        raise AnsibleFilterError('ipmasq.agent.snat_explain_summary: host_groups must be a dict of host name to its '
                                 'groups, got %r.' % (host_groups,))
    return summary(_input, host_groups, tuple(skip_groups))


class FilterModule:
    """ipmasq.agent.snat_explain_summary"""

    def filters(self):
        return {'snat_explain_summary': snat_explain_summary}
