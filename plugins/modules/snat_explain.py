#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r'''
---
module: snat_explain
short_description: Explain which rule decides the source address of one flow
version_added: 2.0.0
description:
  - Read-only. Given one flow (O(src), O(dst), optionally O(proto), O(dport), O(out_interface), O(mark)),
    follows it through every nat postrouting base chain on the node, in the kernel's order, and says which
    source it leaves with (RV(verdict)), which rule of which owner decides (RV(decided_by)), and the jumps and
    returns on the way (RV(path)).
  - The base chains are those of the iptables nat tables (iptables-legacy and iptables-nft, both at priority
    100) and every nft table's C(type nat hook postrouting) chain, run lowest priority first. The first base
    chain that translates the flow (C(MASQUERADE), C(SNAT), C(masquerade), C(snat)) decides; an C(accept) or
    C(RETURN) in one base chain does not stop the next.
  - Of base chains of equal priority the one the kernel registered last (made last) runs first, which no
    listing shows. When two of them would translate the flow differently, RV(verdict) is V(unknown) and
    RV(reason) names them.
  - Each backend evaluates its own rules. A match it cannot evaluate for the flow (a statistic match, a
    conntrack state, a set match it cannot read, an interface match when O(out_interface) is not given, ...)
    makes RV(verdict) V(unknown), and RV(reason) names the match and the rule; the module never guesses.
  - The owner of the deciding rule is told the way P(ipmasq.agent.snat_sources#module) tells it (nft table
    name, chain names, comments, interfaces, well-known subnets).
  - Runs nothing but the listings P(ipmasq.agent.snat_sources#module) runs (C(iptables-save -t nat), its
    variants, C(iptables --version), C(nft -j list ruleset)) and reads C(/proc/net/fib_trie) and
    C(/proc/net/if_inet6) for the node's own addresses (C(addrtype --dst-type LOCAL), C(fib daddr type local)).
  - Needs only Python's standard library on the node.
extends_documentation_fragment:
  - ipmasq.agent.attributes.read_only
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  platform:
    description: Linux with iptables (either backend) and/or nftables.
options:
  src:
    description:
      - The flow's source address as it reaches the postrouting hook (a pod's address, for pod traffic).
      - One IPv4 or IPv6 address, no prefix length.
    type: str
    required: true
  dst:
    description:
      - The flow's destination address, of the same family as O(src).
    type: str
    required: true
  proto:
    description:
      - The flow's protocol, by name (V(tcp), V(udp), V(sctp), V(icmp), ...) or number (0 to 255).
      - Not given, a rule that matches on a protocol makes the answer V(unknown).
    type: str
  dport:
    description:
      - The flow's destination port, 1 to 65535; needs O(proto) V(tcp), V(udp), V(sctp) or V(udplite).
    type: str
  out_interface:
    description:
      - The interface the flow leaves by (C(ip route get DST) tells it).
      - Not given, a rule that matches on the out interface makes the answer V(unknown).
    type: str
  mark:
    description:
      - The packet mark as the flow reaches the postrouting hook, decimal or C(0x) hex, 0 to 0xffffffff.
      - Not given, the packet carries no mark (0). Marks set in the nat postrouting chains themselves (C(MARK),
        C(meta mark set)) are followed.
    type: str
  chain:
    description:
      - The nat chain that is ours (the O(ipmasq.agent.masq_chain#module:chain) of the chain we manage); a rule
        in it, or in the nft table of that name in lower case, has the owner V(ip-masq-agent).
    type: str
    default: IP-MASQ-AGENT
  include_nft:
    description:
      - Read the nftables ruleset with C(nft -j list ruleset). V(auto) does when the C(nft) command exists,
        V(always) fails without it, V(never) reads iptables only.
    type: str
    choices: [auto, always, never]
    default: auto
  after:
    description:
      - I(After mode.) Answer as the node will be once this policy is applied and the role's daemon steps have
        run, without writing anything. Ours is replaced by what the policy writes (in the backend it is written
        with; ours elsewhere is removed, as a real run removes it), the daemons' rules are as the role's daemon
        steps leave them, everything else stays as it is now. RV(now) gives the answer now beside it.
      - The policy as the P(ipmasq.agent.ip_masq#role) role applies it, the C(chain) part of its node step.
        C(chain) holds the options of P(ipmasq.agent.masq_chain#module) (the role's action computes them from the
        host's C(ip_masq_*) variables; C(playbooks/explain.yml) with C(-e after=true) passes them), and
        C(allow_catch_all) the role's C(ip_masq_allow_catch_all). They are typed and checked as that module
        checks them; a bad one fails naming it, before anything runs.
      - C(daemons) holds the role's daemon steps, in its order, as its action makes them from the host's
        C(ip_masq_docker), C(ip_masq_flannel), C(ip_masq_cni), ... and their path variables, each a
        dict with C(name) (a daemon of the collection's registry), C(edit) and C(cleanup) (the options of its
        module, such as P(ipmasq.agent.docker_ip_masq#module), for the step's edit and for its clean-up after the
        restart, or null) and C(manage). Each is checked as that module checks its options; a bad one fails
        naming it, before anything runs. Not given, the daemons' rules stay as they are now.
      - The role's C(validate.yml) registers the whole of it, C(chain), C(allow_catch_all) and C(daemons), as
        C(__ip_masq_run.explain.after) (the daemons the role runs without C(--tags)); C(playbooks/explain.yml) with
        C(-e after=true) and the role's own C(ip_masq_explain_flows) in check mode pass it.
      - The policy is planned by the same code as a real run, in check mode (it only reads); its planned
        C(iptables-restore) input and C(nft) transaction are applied to what the explanation reads, in memory.
        Then each daemon step runs its module in check mode, as the role runs it (the edit, then, where the
        daemon is installed, the clean-up); the rules its clean-up removes (the same selection a real run
        removes, read after the policy's writes) are removed from what the explanation reads, in memory, and
        RV(notes) names them.
      - Where the role restarts the daemon between its edit and its clean-up (the edit changed a file the daemon
        reads when it starts, such as Docker's C(daemon.json) or flanneld's options, so the role's handler
        restarts it), the clean-up runs as after that restart. The daemon then runs with the settings the edit
        writes (Docker with C(ip-masq) off, flanneld without C(--ip-masq)), so the clean-up removes the rules it left
        behind, as the real clean-up after the restart does, and RV(notes) says what is assumed. What else the
        daemon makes at that restart (Docker's user-defined networks, re-created as they are set) is taken to be
        as it is now.
      - Where the role would not restart the daemon (its edit changes nothing, for instance a running Docker that
        still masquerades though its C(daemon.json) already switches C(ip-masq) off), its rules stay as the
        clean-up leaves them now. What a step changes only in a file for later stays as it is now, and
        RV(notes) says so. That is a file read at a restart this mode does not foresee (kubelet's), or by new
        containers (a CNI network's file; the rules of running containers are removed now, and show so).
      - With C(daemons), the daemon modules' check mode also reads their files and may run their read-only
        helpers (C(docker network inspect), C(docker network ls), C(kubelet --version)); nothing is written.
    type: dict
    version_added: 2.0.0
notes:
  - The flow is the first packet of a new connection; nat chains see no other packet. A flow that already has
    a NAT binding keeps it, whatever the rules say now.
  - Bad input (an address, protocol, port, interface name or mark that is not one) fails before anything runs,
    naming the option and the value.
seealso:
  - module: ipmasq.agent.snat_sources
  - module: ipmasq.agent.masq_chain
'''

EXAMPLES = r'''
- name: Which source does pod traffic to the internet leave with, and why?
  ipmasq.agent.snat_explain:
    src: 10.244.1.2
    dst: 203.0.113.10
    proto: tcp
    dport: 443
    out_interface: eth0
  register: why

- name: Say it
  ansible.builtin.debug:
    msg: "{{ why.msg }}"

- name: A kube-proxy service connection (its 0x4000 mark)
  ipmasq.agent.snat_explain:
    src: 10.244.1.2
    dst: 10.96.0.1
    out_interface: eth0
    mark: "0x4000"

- name: The same flow once this host's policy is applied (after mode)
  ipmasq.agent.snat_explain:
    src: 10.244.1.2
    dst: 203.0.113.10
    out_interface: eth0
    after:
      chain:
        backend: nftables
        nonmasquerade_cidrs: [10.0.0.0/8]
  register: later

- name: The same, with the daemons' rules as the role's daemon steps leave them (after validate.yml of the role)
  ipmasq.agent.snat_explain:
    src: 172.17.0.2
    dst: 203.0.113.10
    out_interface: eth0
    after: "{{ __ip_masq_run.explain.after }}"

- name: Say what changes
  ansible.builtin.debug:
    msg: "now: {{ later.now.msg }} after: {{ later.msg }}"
'''

RETURN = r'''
msg:
  description: The answer in one line.
  returned: always
  type: str
  sample: '10.244.1.2 → 203.0.113.10: MASQUERADE by ours (IP-MASQ-AGENT rule 4), after POSTROUTING rule 2 jumped there.'
verdict:
  description:
    - V(masquerade) (the source becomes the address of the out interface), V(snat) (the source becomes
      RV(to)), V(unchanged) (no rule translates the flow) or V(unknown) (RV(reason) says why).
  returned: always
  type: str
  sample: masquerade
to:
  description: The address (or range) an V(snat) verdict translates to; null otherwise.
  returned: always
  type: str
  sample: 203.0.113.7
reason:
  description:
    - Why the verdict is V(unknown) (the match that could not be evaluated, named, and where it is), or a remark
      on a known verdict (several base chains of equal priority translate the flow alike); null otherwise.
  returned: always
  type: str
  sample: 'cannot evaluate -m statistic --mode random --probability 0.50000000000, in iptables-nft nat chain POSTROUTING rule 1'
decided_by:
  description:
    - The rule that decides (or at which the answer became V(unknown)); null when no rule translates the flow, and
      when base chains of equal priority disagree (RV(candidates)).
  returned: always
  type: dict
  contains:
    owner:
      description: Who wrote it (V(ip-masq-agent), V(docker), V(flannel), V(kube-proxy), V(cni), V(netavark), V(libvirt),
        V(unknown)).
      type: str
      sample: ip-masq-agent
    backend:
      description: Where it lives (V(iptables-nft), V(iptables-legacy), V(nft)).
      type: str
      sample: iptables-nft
    table:
      description: Its table (V(nat) for iptables, C(<family> <name>) for nft).
      type: str
      sample: nat
    chain:
      description: Its chain.
      type: str
      sample: IP-MASQ-AGENT
    rule:
      description: The rule as its tool prints it.
      type: str
      sample: '-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE'
    position:
      description: Its position in its chain, from 1.
      type: int
      sample: 4
candidates:
  description:
    - When base chains of equal priority would translate the flow differently (RV(verdict) is V(unknown)), what
      each would do, as C(verdict), C(to) and C(decided_by); the packet takes one of them. Empty otherwise.
  returned: always
  type: list
  elements: dict
path:
  description: The way the flow took, base chain by base chain in the kernel's order.
  returned: always
  type: list
  elements: dict
  contains:
    backend:
      description: As in RV(decided_by).
      type: str
    table:
      description: As in RV(decided_by).
      type: str
    base_chain:
      description: The base chain this step is under.
      type: str
    priority:
      description: That base chain's hook priority.
      type: int
    action:
      description: V(jump), V(goto), V(return), V(accept), V(end) (the base chain ended with no NAT), V(decide) or
        V(unknown).
      type: str
    chain:
      description: The chain the step is in.
      type: str
    position:
      description: The rule's position (null for the end of a chain).
      type: int
    rule:
      description: The rule (null for the end of a chain).
      type: str
    why:
      description: Why, in words (which matches held).
      type: str
chains:
  description: Every nat postrouting base chain the flow passed, in order, with what it did (V(masquerade), V(snat),
    V(unknown), C(no NAT)).
  returned: always
  type: list
  elements: dict
flow:
  description: The flow as it was asked (protocol as a number, mark in hex).
  returned: always
  type: dict
  sample: {"src": "10.244.1.2", "dst": "203.0.113.10", "proto": 6, "dport": 443, "out_interface": "eth0", "mark": "0x0"}
notes:
  description: What could not be read, or was skipped and why.
  returned: always
  type: list
  elements: str
after:
  description: Whether this is the answer after the policy O(after) (after mode).
  returned: always
  type: bool
  version_added: 2.0.0
now:
  description: In after mode, the answer now (C(verdict), C(to), C(reason), C(decided_by), C(msg)); null otherwise.
  returned: always
  type: dict
  version_added: 2.0.0
policy:
  description: In after mode, what applying the policy would do (the words of P(ipmasq.agent.masq_chain#module)'s
    RV(ipmasq.agent.masq_chain#module:msg) in check mode); null otherwise.
  returned: always
  type: str
  version_added: 2.0.0
commands:
  description: The commands run (all of them read-only).
  returned: always
  type: list
  elements: str
'''

import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module
from ansible_collections.ipmasq.agent.plugins.module_utils._snat_explain import SPEC, explain


def work(module, run, find):
    return explain(module.params, run, find)


def main():
    module = AnsibleModule(
        argument_spec=copy.deepcopy(SPEC),
        supports_check_mode=True,
    )
    run_module(module, work)


if __name__ == '__main__':
    main()
