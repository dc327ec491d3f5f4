#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file only documents the action plugin plugins/action/ip_masq.py, which does the work.

DOCUMENTATION = r'''
---
module: ip_masq
short_description: Internal task of the ip_masq role; see ansible-doc -t role ipmasq.agent.ip_masq
version_added: 2.0.0
description:
  - "B(The ip_masq role's internal task, not the role.) For the role, run C(ansible-doc -t role ipmasq.agent.ip_masq)
    (R(the role's documentation,ansible_collections.ipmasq.agent.ip_masq_role))."
  - It takes no options of its own but reads the role's variables (C(ip_masq_*)), so it is only useful inside that
    role; in playbooks use the role, or P(ipmasq.agent.masq_chain#module) and the other modules.
  - "On the controller: checks the role's variables with the collection's core (the rules and messages the modules
    use), naming the host and the variable, before any node is touched; renders the agent config file and the
    resync's systemd units from the role's templates."
  - "Then one run of P(ipmasq.agent.ip_masq_node#module) on the node (one SSH command with pipelining): it writes the
    files, installs the resync's code, reloads systemd where the resync's service unit changed, applies the policy,
    looks at what the role's later steps need and audits (C(ip_masq_audit): V(fail) fails the task, V(warn) warns,
    V(skip) audits nothing; in check mode a finding only warns)."
  - RV(steps) names the role's later task files that this node still needs (packages, the resync units' start,
    the resync's removal, the daemons, the audit after them, and last, where C(ip_masq_explain_flows) gives flows,
    their explanation); C(tasks/main.yml) runs only those.
  - "C(--tags) and C(--skip-tags) pick the parts of the node run: C(ip_masq_config) the files, C(ip_masq_resync)
    the files and the resync's code, C(ip_masq_chain) the policy, C(ip_masq_audit) the audit. The task itself is
    tagged C(always): the validation always runs."
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  async:
    support: none
    description: The role runs it in the foreground.
  check_mode:
    support: full
    description: Validates, renders and reads; nothing is written on the node.
  diff_mode:
    support: full
    description: One diff per file that changes and one per table (iptables nat per family, our nftables table).
  platform:
    support: full
    platforms: posix
    description: Any POSIX node with Python; the controller needs what the role's filters need.
options:
  validate_only:
    description: Only validate on the controller (no node is contacted) and set the normalised lists as facts
      (C(__ip_masq_cidrs), C(__ip_masq_exceptions), C(__ip_masq_masquerade), C(__ip_masq_sources),
      C(__ip_masq_snat_to)); the role's C(tasks_from=validate.yml) does this.
    type: bool
    default: false
'''

EXAMPLES = r'''
# tasks/main.yml of the ipmasq.agent.ip_masq role:
- name: Validate, write the agent's files, apply the policy and audit, in one node run
  ipmasq.agent.ip_masq:
  register: __ip_masq_run
  tags: [always]

# Only the validation (no node is contacted):
- name: Validate the settings on the controller
  ansible.builtin.include_role:
    name: ipmasq.agent.ip_masq
    tasks_from: validate.yml
'''

RETURN = r'''
msg:
  description: What the node run changed (or would, in check mode), part by part as RV(ipmasq.agent.ip_masq_node#module:msg) says it, then the
    role's later steps this node still needs (RV(steps)), or C(no change); with O(validate_only), that it only validated.
  returned: always
  type: str
  sample: >-
    1 file written (/etc/ip-masq-agent/config); IP-MASQ-AGENT: IPv4 6 rules written (was 5), IPv6 not managed;
    backend iptables, auto: the node has our iptables chain IP-MASQ-AGENT (IPv4)
  version_added: 2.0.0
steps:
  description: The role's later task files (without C(.yml)) this node still needs, in the order C(tasks/main.yml)
    runs them.
  returned: success
  type: list
  elements: str
  sample: [resync, other_snat, audit, explain]
daemon_steps:
  description:
    - The daemons the role's daemon step (C(other_snat.yml)) runs if it is in RV(steps), in the order of the
      collection's daemon registry; with V(validate_only) too.
    - Each with its C(name), whether it is managed (C(manage)), and the options of its module's C(edit) and, after its
      restart, of its C(cleanup) (null when none).
  returned: success
  type: list
  elements: dict
  version_added: 2.0.0
explain:
  description:
    - What the role's C(explain) step runs P(ipmasq.agent.snat_explain#module) with, when RV(steps) lists it (where
      C(ip_masq_explain_flows) gives flows) and with O(validate_only) (C(flows) then maybe empty).
    - C(flows), the flows of C(ip_masq_explain_flows) checked as the module checks them (its arguments, strings);
      C(after), the module's O(ipmasq.agent.snat_explain#module:after) for this host (its policy, C(chain) and
      C(allow_catch_all), and C(daemons), the daemon steps a run of the role without C(--tags) runs).
  returned: when RV(steps) lists C(explain), and with O(validate_only)
  type: dict
  version_added: 2.0.0
files:
  description: What the node run's files part did (P(ipmasq.agent.node_files#module)'s result); null when not run.
  returned: success
  type: dict
chain:
  description: What the node run's policy part did (P(ipmasq.agent.masq_chain#module)'s result); null when not run.
  returned: success
  type: dict
audit:
  description: What the node run's audit found (P(ipmasq.agent.snat_sources#module)'s result); null when not run.
  returned: success
  type: dict
resync_code:
  description: What the node run's resync code part did (P(ipmasq.agent.resync_code#module)'s result); null when
    not run.
  returned: success
  type: dict
changed_parts:
  description: The parts of the node run that changed (or would, in check mode), of C(files), C(resync_code),
    C(chain), C(audit).
  returned: success
  type: list
  elements: str
  sample: [files, resync_code]
changed_paths:
  description: The files the node run's files part changed (or would), as P(ipmasq.agent.node_files#module)
    returns them.
  returned: success
  type: list
  elements: str
masq_chain:
  description: The P(ipmasq.agent.masq_chain#module) options the role's variables give (the normalised lists).
  returned: always
  type: dict
facts:
  description: The normalised lists of the role's variables (C(__ip_masq_cidrs) and so on).
  returned: always
  type: dict
resync_files:
  description: The resync's files on the node that the role's later steps act on; C(units), the paths of the
    units of either C(ip_masq_resync_mode); C(remove), what switching the resync off removes (the units, the
    C(tmpfiles.d) entry, the last good config and the metrics file; its code goes with
    P(ipmasq.agent.resync_code#module)); C(start), the units of this mode the role enables and starts; C(switch),
    what goes first, of the units found on the node, on a switch between the modes or the removal (C(stop), a list of
    C(name) and whether to C(disable) it; C(remove), the other mode's unit paths).
  returned: success, without O(validate_only)
  type: dict
resync_start:
  description: With O(validate_only), the resync units of C(ip_masq_resync_mode) the role enables and starts, the
    one that keeps the resync going first (C(ip-masq-agent.timer) with V(timer), C(ip-masq-agent.service) with
    V(watch) and V(auto)); the fleet audit asks systemd whether it is active.
  returned: with O(validate_only)
  type: list
  elements: str
  version_added: 2.0.0
units:
  description: With O(validate_only), the resync's systemd units the role writes, rendered on the controller
    (each name to its text; C(ip-masq-agent.service), C(ip-masq-agent.timer) and C(ip-masq-agent.path) with
    C(ip_masq_resync_mode=timer), C(ip-masq-agent.service), C(ip-masq-agent.path) and
    C(ip-masq-agent-reload.service) with V(watch) or V(auto)).
  returned: with O(validate_only), for ip_masq_state=present
  type: dict
parts:
  description: The parts of the node run that ran (C(files), C(resync_code), C(chain), C(units), C(audit), ...).
  returned: success
  type: list
  elements: str
'''
