#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r'''
---
module: snat_sources
short_description: List every SNAT rule on a node and who wrote it
version_added: 1.0.0
description:
  - Read-only audit of the sources of SNAT on a node. Lists every C(MASQUERADE) and C(SNAT) rule in the
    nat tables of iptables (nf_tables and legacy backends, both when both hold rules) and in nftables
    tables that have a C(type nat hook postrouting) chain, and says which of them can act on traffic.
  - A rule is I(reachable) when a chain of jumps and gotos leads to its chain from C(POSTROUTING) (or from
    an nft base chain at the postrouting hook). Conditions of the rules on the way are not evaluated. A
    C(RETURN) or C(accept) in one table does not stop another table at the same hook, so every table
    counts. Rules in chains that nothing reaches are listed with RV(sources[].reachable=false) and are
    never offenders. Cycles are harmless.
  - Each rule gets an I(owner), from nft table names, chain names (innermost first), rule comments,
    interface names and well-known default subnets, in that order. V(ip-masq-agent) (the chain O(chain),
    or a rule commented C(ip-masq-agent:) elsewhere), V(docker) (C(DOCKER*) chains, C(docker0),
    C(br-<id>), table C(docker-bridges), 172.17.0.0/16), V(flannel) (C(FLANNEL-POSTRTG), comment
    C(flanneld masq), tables C(flannel-ipv4)/C(flannel-ipv6)), V(kube-proxy) (C(KUBE-*) chains,
    C(kubernetes ...) comments, table C(kube-proxy)), V(cni) (C(CNI-*) chains, the comments the bridge
    plugin writes, C(cni*) tables and interfaces), V(netavark) (C(NETAVARK*) chains, table C(netavark),
    C(podman*) interfaces), V(libvirt) (C(LIBVIRT_*) chains, C(libvirt*) tables, C(virbr*), the
    192.168.122.0/24 default network) or V(unknown).
  - Each rule gets a I(scope). V(host) when it matches only packets with a local source address
    (C(--src-type LOCAL), C(fib saddr type local), a loopback source), V(hairpin) when it matches only a
    connection from an address back to itself (same single source and destination, kube-proxy's
    hairpin sets), V(service) when it matches only packets that carry a mark or a DNAT conntrack state
    (also when an earlier C(-m mark ! --mark X -j RETURN) or C(meta mark & X == 0 return) in the chain
    lets only marked packets through), else V(egress).
  - Allowed besides ours, without configuration, are the rules that cannot rewrite pod-originated
    egress traffic. These are the V(host) and V(hairpin) scopes of any owner, and the V(service) scope
    of kube-proxy (its mark-based service rule), of CNI portmap and of netavark (their hostport marks).
    Everything else needs an entry in O(allow).
  - I(Ours) is every rule in the chain O(chain) and in the nft table of that name in lower case (the
    P(ipmasq.agent.masq_chain#module) nftables backend's C(inet ip-masq-agent)). RV(only_ours) is true
    when ours is reachable in every audited family, no reachable rule is an offender, and ours is in one
    backend only (RV(ours_backends)) and one nat table only (RV(ours_in)).
  - Runs nothing but C(iptables --version), C(iptables-save -t nat) (and its ip6tables,
    C(-nft) and C(-legacy) variants) and C(nft -j list ruleset); any other command is refused. A legacy
    nat table the kernel has not instantiated (absent from C(/proc/net/ip_tables_names)) is not read,
    since reading it would create it. The nft tables that iptables-nft itself keeps (C(ip nat),
    C(ip6 nat)) are not reported twice.
  - A legacy nat table the kernel holds that no C(-legacy-save) tool can read (the iptables-legacy tools are not
    installed) is asked of the kernel for its chain names (a read-only C(getsockopt)); our chain there makes
    RV(only_ours) false, with a note saying what to do.
  - Needs only Python's standard library on the node.
extends_documentation_fragment:
  - ipmasq.agent.attributes.read_only
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  platform:
    description: Linux with iptables (either backend) and/or nftables.
options:
  chain:
    description:
      - The nat chain that is ours (the O(ipmasq.agent.masq_chain#module:chain) of the chain we manage).
    type: str
    default: IP-MASQ-AGENT
  ipv6:
    description:
      - Audit IPv6 too (ip6tables and C(ip6) nft tables). C(inet) nft tables are always audited.
      - When V(true), RV(ours_present) needs our chain in both families.
    type: bool
    default: false
  include_nft:
    description:
      - Read the nftables ruleset with C(nft -j list ruleset). V(auto) does when the C(nft) command exists,
        V(always) fails without it, V(never) reads iptables only.
    type: str
    choices: [auto, always, never]
    default: auto
  allow:
    description:
      - Further SNAT sources that are expected (for example libvirt's NAT network, or a Docker network whose
        containers should be masqueraded). A reachable rule that matches an entry is not an offender.
      - An entry is an owner name (V(docker), V(libvirt), ...), a chain name (the chain that holds the rule,
        or one that leads to it, except the hook's base chain), or a dict with any of C(owner), C(chain),
        C(table) (V(nat), V(docker-bridges), or V(ip docker-bridges)) and C(regex) (Python C(re.search) on
        the rule text as RV(sources[].rule) shows it); every key given must match. An optional C(reason)
        is carried into RV(sources[].allowed_by).
      - A bad entry (unknown key or owner, a regex that does not compile) is an error before anything runs.
    type: list
    elements: raw
    default: []
  on_offenders:
    description:
      - What to do when RV(only_ours) is false (an offender, or our chain not reached in an audited family).
      - V(report) only returns the result. V(warn) adds one warning per problem. V(fail) fails the task with
        a message that names every offender, its owner and what to do about it (the result is returned too).
    type: str
    choices: [report, warn, fail]
    default: report
  advice:
    description:
      - Who applies the policy, for the advice in the warnings and the failure message.
      - V(module) names the module to run (P(ipmasq.agent.masq_chain#module)). V(role) says what the
        P(ipmasq.agent.ip_masq#role) role does, and in check mode what its run would do (its policy step wrote
        nothing yet); the role passes it.
    type: str
    choices: [module, role]
    default: module
    version_added: 2.0.0
notes:
  - The audit cannot see which addresses are pods; every reachable C(egress) rule that is not ours or
    allowed is reported, because it could rewrite pod traffic before or after our chain does.
  - Rule text for nft tables is rendered from C(nft -j) output in nft syntax; it is close to, not always
    identical with, what C(nft list ruleset) prints.
seealso:
  - module: ipmasq.agent.masq_chain
'''

EXAMPLES = r'''
- name: List every SNAT source and fail unless ours is the only one
  ipmasq.agent.snat_sources:
    on_offenders: fail

- name: Dual stack; libvirt's NAT network and one Docker network are expected
  ipmasq.agent.snat_sources:
    ipv6: true
    allow:
      - libvirt
      - owner: docker
        regex: 'br-3f2a1b4c5d6e'
        reason: the CI runner network keeps its NAT
  register: snat

- name: Show what else masquerades
  ansible.builtin.debug:
    msg: "{{ snat.offenders | map(attribute='rule') | list }}"
  when: not snat.only_ours
'''

RETURN = r'''
msg:
  description: The audit's one-line summary (RV(summary)), prefixed C(SNAT audit:); the audit only reads, so the same in check
    mode.
  returned: always
  type: str
  sample: 'SNAT audit: IP-MASQ-AGENT is the only SNAT source for pod traffic.'
  version_added: 2.0.0
only_ours:
  description: True when our chain is reached in every audited family and no reachable rule is an offender.
  returned: always
  type: bool
  sample: false
ours_present:
  description: True when a C(MASQUERADE) (or C(SNAT)) rule of our chain is reachable in every audited family.
  returned: always
  type: bool
  sample: true
ours_by_family:
  description: RV(ours_present) per audited family.
  returned: always
  type: dict
  sample: {"ipv4": true}
ours_backends:
  description: Where ours is reachable, V(iptables) and/or V(nftables). Both at once is a problem (a switch of backend
    left half done, or a DaemonSet still writing its chain beside our table) and makes RV(only_ours) false.
  returned: always
  type: list
  elements: str
  sample: ["nftables"]
  version_added: 1.1.0
ours_in:
  description: Where ours is reachable, V(iptables-legacy), V(iptables-nft) and/or V(nftables). The legacy nat table
    and iptables-nft's are both traversed, so ours in both of them is two policies too, and makes RV(only_ours)
    false.
  returned: always
  type: list
  elements: str
  sample: ["iptables-nft"]
  version_added: 1.1.0
summary:
  description: One human sentence about the result.
  returned: always
  type: str
  sample: "1 other SNAT rule would act on pod traffic: docker (1); 1 other rule allowed: kube-proxy (1)."
chain:
  description: Our chain, as audited.
  returned: always
  type: str
  sample: IP-MASQ-AGENT
sources:
  description: Every C(MASQUERADE) and C(SNAT) rule found, reachable or not.
  returned: always
  type: list
  elements: dict
  contains:
    family:
      description: V(ipv4), V(ipv6), or V(inet) (an nft C(inet) table, both families).
      type: str
    backend:
      description: Where the rule lives. V(iptables-nft), V(iptables-legacy) or V(nft) (a table made with nft).
      type: str
    table:
      description: V(nat) for iptables; C(<family> <name>) for nft, for example V(ip docker-bridges).
      type: str
    chain:
      description: The chain holding the rule.
      type: str
    rule:
      description: The rule as C(iptables-save) prints it, or in nft syntax.
      type: str
    target:
      description: V(MASQUERADE) or V(SNAT) (V(NETMAP) when reached from C(POSTROUTING)).
      type: str
    owner:
      description: Who wrote it. One of V(ip-masq-agent), V(docker), V(flannel), V(kube-proxy), V(cni),
        V(netavark), V(libvirt), V(unknown).
      type: str
    path:
      description: The chains from the postrouting hook's base chain to the rule's chain (shortest path);
        only the rule's chain when unreachable.
      type: list
      elements: str
    reachable:
      description: Whether a jump or goto path leads from the postrouting hook to the rule.
      type: bool
    scope:
      description: V(egress), V(service), V(host) or V(hairpin) (see the description).
      type: str
    ours:
      description: Whether the rule is in our chain.
      type: bool
    allowed:
      description: Whether the rule is ours, allowed by default, or matches O(allow).
      type: bool
    allowed_by:
      description: Why it is allowed (V(ours), the default reason, or the O(allow) entry); null if not.
      type: str
    hint:
      description: What to do about a rule that is not allowed; null if allowed.
      type: str
    handle:
      description: The nft rule handle (nft rules only; null for iptables).
      type: int
  sample:
    - family: ipv4
      backend: iptables-nft
      table: nat
      chain: POSTROUTING
      rule: "-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE"
      target: MASQUERADE
      owner: docker
      path: [POSTROUTING]
      reachable: true
      scope: egress
      ours: false
      allowed: false
      allowed_by: null
      hint: 'Docker masquerades this bridge network: set "ip-masq": false in /etc/docker/daemon.json and restart Docker ...'
      handle: null
offenders:
  description: The reachable RV(sources) that are not allowed, same fields.
  returned: always
  type: list
  elements: dict
audited:
  description: What was read.
  returned: always
  type: list
  elements: str
  sample: ["IPv4 nat table (iptables-nft)", "nft ruleset (ip docker-bridges)"]
notes:
  description: What could not be read, or was skipped and why.
  returned: always
  type: list
  elements: str
commands:
  description: The commands run (all of them read-only).
  returned: always
  type: list
  elements: str
  sample: ["/usr/sbin/iptables --version", "/usr/sbin/iptables-save -t nat", "/usr/sbin/nft -j list ruleset"]
'''

import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module
from ansible_collections.ipmasq.agent.plugins.module_utils._snat_sources import SPEC, inspect


def work(module, run, find):
    return inspect(module.params, module.check_mode, module._diff, run, find)


def main():
    module = AnsibleModule(
        argument_spec=copy.deepcopy(SPEC),
        supports_check_mode=True,
    )
    run_module(module, work)


if __name__ == '__main__':
    main()
