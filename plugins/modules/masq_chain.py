#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Over 500 lines on purpose: all but about 40 of them are the module's
# documentation (DOCUMENTATION, EXAMPLES, RETURN); its run is in
# module_utils/_masq_chain.py.

DOCUMENTATION = r'''
---
module: masq_chain
short_description: Own the ip-masq-agent SNAT policy (the nat chain and its jump, or an nftables table)
version_added: 1.0.0
description:
  - Manages the nat chain C(IP-MASQ-AGENT) and the jump to it from C(POSTROUTING) exactly
    as the Kubernetes ip-masq-agent does on cluster nodes, for IPv4 and IPv6.
  - The chain holds a C(RETURN) rule for the link-local range (unless O(masq_link_local)),
    one C(RETURN) rule per non-masquerade CIDR in the order given, and a final C(MASQUERADE)
    rule. Every rule carries the upstream comment and C(-m addrtype ! --dst-type LOCAL), so
    C(iptables -t nat -L IP-MASQ-AGENT) shows what the Kubernetes documentation shows.
  - Reads each family with one C(iptables-save -t nat). When the chain and exactly one jump
    are as desired, nothing is written. Otherwise one C(iptables-restore --noflush)
    transaction per family rewrites the chain and fixes the jump (adds a missing one,
    removes duplicates, replaces a wrong one, moves a misplaced one with O(jump_position=first)),
    so no packet ever meets a half-built chain. The xtables lock is taken (C(--wait)).
  - A run that wrote reads the table back once (a run that wrote nothing does not); a jump that another program
    added meanwhile (while C(iptables-restore --wait) waited for the xtables lock) is removed in the same run,
    and the result says so in RV(actions) and a warning.
  - The chain is owned by this module alone; a foreign rule inside it is removed. An existing chain of that
    name that was never ours is refused unless O(adopt_chain=true).
  - Every writer of this collection (this module, the role's node-side resync, the daemon modules'
    rule clean-up) holds the lock C(/run/ipmasq-agent.lock) from its read to the end of its write, so two
    runs at the same moment never plan from the same reading; a run that waited more than 60 seconds for
    it fails and names the process holding it. The lock holds when its file is removed meanwhile (a run also
    locks the file's directory); a FIFO, socket or device at its path is refused and nothing is changed.
  - A nat table that C(iptables-save) cannot show whole (native nftables objects in C(ip nat), reported by
    iptables-nft as C(incompatible)) or prints lines this module does not understand is an error, and
    nothing is written. Rules in
    any other chain (Docker's, kube-proxy's, the user's own C(POSTROUTING) rules) are never touched.
  - Works with both iptables backends (nf_tables and legacy), whichever the node's
    C(iptables-save) and C(iptables-restore) are; the result says which one was used.
  - With O(backend=nftables) the same policy is one table of its own, C(inet ip-masq-agent) (the chain
    name in lower case), holding interval sets of the non-masquerade prefixes per family, a base chain at the
    postrouting hook (priority C(srcnat + 1), or C(srcnat - 1) with O(jump_position=first)) that skips local
    destinations (C(fib daddr type local)), link-local unless masqueraded, and the sets, then masquerades. A new connection costs one set lookup however long
    the list is, and there is no jump to keep in place. It is read with one C(nft -j) run and, when it
    differs, replaced whole in one atomic C(nft -j -f -) transaction.
  - The policy lives in one backend only. A run that writes it in one backend removes ours from the other in
    the same run (write first, then remove; a failed step undoes the ones before it), so a switch never
    leaves a node with neither policy or with both. See O(backend).
  - Needs only Python's standard library on the node.
extends_documentation_fragment:
  - ipmasq.agent.attributes
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  check_mode:
    description: Reads the rules and reports what would change; runs no C(iptables-restore) and no nft transaction.
  diff_mode:
    description: Shows the chain and its jumps before and after, per family, in C(iptables-save) form, and the
      nftables table in C(nft list table) form (one set element per line).
  platform:
    description: Linux with iptables (nf_tables or legacy backend), or nft for O(backend=nftables).
options:
  nonmasquerade_cidrs:
    description:
      - Destination CIDRs that are B(not) masqueraded, each getting a C(RETURN) rule, in this order.
      - Replaces (does not extend) the default list, as upstream's C(nonMasqueradeCIDRs) does.
      - IPv6 entries go to ip6tables and need O(ipv6=true).
      - Each entry must be a CIDR aligned to its prefix (V(10.0.0.1/8) is an error that names
        V(10.0.0.0/8)); a bare address is an error (write V(/32) or V(/128)). An entry listed twice
        gets one rule and a warning (with O(rule_format=upstream), one rule per entry, as upstream).
      - When not given, the default list V(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']).
    type: list
    elements: str
  nomasq_all_reserved_ranges:
    description:
      - Also exempt the reserved IPv4 ranges that upstream's C(--nomasq-all-reserved-ranges) lists,
        appended after O(nonmasquerade_cidrs).
      - With O(rule_format=upstream), as upstream, they are added only when O(nonmasquerade_cidrs) is
        not given (the default list); a list of your own is used as it is.
      - The ranges are V(100.64.0.0/10), V(192.0.0.0/24), V(192.0.2.0/24), V(192.88.99.0/24),
        V(198.18.0.0/15), V(198.51.100.0/24), V(203.0.113.0/24) and V(240.0.0.0/4).
    type: bool
    default: false
  masq_link_local:
    description:
      - Masquerade traffic to V(169.254.0.0/16). When V(false), a C(RETURN) rule for it comes first.
    type: bool
    default: false
  masq_link_local_ipv6:
    description:
      - Masquerade traffic to V(fe80::/10). When V(false) and O(ipv6=true), a C(RETURN) rule for it comes first.
    type: bool
    default: false
  ipv6:
    description:
      - Manage the ip6tables side too. An IPv6 CIDR in O(nonmasquerade_cidrs) while this is V(false)
        is an error, as upstream.
      - When V(false) and O(state=present), a chain of this name and its jumps left in ip6tables by an
        earlier run are removed, so switching IPv6 off leaves no IPv6 SNAT of ours behind.
    type: bool
    default: false
  chain:
    description:
      - Name of the nat chain to own. At most 28 characters of letters, digits, C(_ . + -), not a
        built-in chain or target name.
      - Renaming leaves the old chain in place; remove it first with O(state=absent) and the old name.
      - With O(backend=nftables) the name in lower case names the table, C(inet ip-masq-agent) by default.
    type: str
    default: IP-MASQ-AGENT
  adopt_chain:
    description:
      - Take over an existing chain of this name that ipmasq.agent never wrote (none of its rules, nor any
        C(POSTROUTING) jump to it, carries an C(ip-masq-agent:) comment), flushing its rules.
      - By default such a chain is refused and nothing is changed, so that a typo such as O(chain=DOCKER)
        cannot flush another tool's chain; O(state=absent) refuses to delete it in the same way. An empty
        chain, or a chain of ours with a foreign rule added, needs no adoption.
      - The same holds for an nftables table of that name with O(backend=nftables).
    type: bool
    default: false
    version_added: 1.0.0
  random_fully:
    description:
      - Add C(--random-fully) to every C(MASQUERADE) rule (C(fully-random) with O(backend=nftables)).
        V(true) needs iptables 1.6.2 or later; an older one is a clear error.
      - When not given, the O(rule_format)'s default. With V(docs), off, so that the listing equals the
        documented one. With V(upstream), on where iptables supports it (1.6.2 or later) and off
        where it does not, as upstream's C(--random-fully) flag (default true).
    type: bool
  to_ports:
    description:
      - Source ports for masqueraded TCP, UDP and SCTP, as upstream's C(--to-ports), for example
        V(['1024-29999', '32768-65535']) or the same as one comma-separated string.
      - The ranges are kept in the order given (one rule each, in that order, as upstream); ranges that
        overlap are an error. V('') or V([]) means no port rules.
      - Each protocol gets one C(MASQUERADE --to-ports) rule per range; all but the last range are
        picked with C(-m statistic --mode random) with a probability weighted by range size, so every
        port is equally likely. The plain final C(MASQUERADE) then handles other protocols.
      - Where more than one rule rewrites (O(exception_cidrs), O(masquerade_cidrs)), these rules are written once,
        in the sub-chain C(<chain>-REWRITE), and the rewriting rules go there (see the notes).
    type: list
    elements: str
    default: []
  jump_position:
    description:
      - V(append) adds a missing jump at the end of C(POSTROUTING) and leaves an existing correct jump
        where it is, as upstream does.
      - V(first) keeps the jump at position 1 of C(POSTROUTING) (moving it there if needed), so earlier
        C(POSTROUTING) rules of other tools cannot act on the traffic first.
      - The nftables backend has no jump (its chain is a base chain of its own); there the same choice sets the
        chain's priority. V(append) puts it at C(srcnat + 1), after iptables' nat C(POSTROUTING) (legacy and
        iptables-nft, both at C(srcnat)) and every other chain at C(srcnat); V(first) at C(srcnat - 1), before
        them. Never at C(srcnat) itself, where the kernel runs whichever chain was made last first (no listing
        shows which). A table at another priority (C(srcnat), as written before 2.0.0, or the other position) is
        replaced in one transaction.
    type: str
    choices: [append, first]
    default: append
  rule_format:
    description:
      - The text of the chain's rules.
      - V(docs) writes them as the Kubernetes documentation (and the seed listings) show them, with
        the comments C(cluster-local traffic should not be subject to MASQUERADE) and C(outbound traffic
        should be subject to MASQUERADE ...), and C(-m addrtype ! --dst-type LOCAL) on every rule.
      - V(upstream) writes them byte for byte as the current upstream agent (v2.12) does for the same
        settings and flags, with the comments C(local traffic is not subject to MASQUERADE) and
        C(outbound traffic is subject to MASQUERADE ...), no per-rule C(addrtype) match (the jump has
        it), C(--random-fully) by default where supported (see O(random_fully)), a CIDR listed twice
        written twice, and O(nomasq_all_reserved_ranges) applied to the default list only. A chain the
        upstream DaemonSet wrote for the same settings reads as unchanged, so it is taken over without
        a write.
      - The C(POSTROUTING) jump is the same in both.
      - With O(backend=nftables) the format chooses the rules' comments and the default of O(random_fully)
        (V(upstream) masquerades C(fully-random) unless O(random_fully=false)).
    type: str
    choices: [docs, upstream]
    default: docs
    version_added: 1.0.0
  backend:
    description:
      - Where the policy lives.
      - V(iptables) the nat chain and its C(POSTROUTING) jump, written with the node's C(iptables-restore)
        (either iptables backend).
      - V(nftables) one nftables table of its own, written with C(nft).
      - V(auto) keeps a node where it is and picks for a new one. A node with our iptables chain stays on
        iptables; else a node with our nftables table stays on nftables; else (a new node) iptables where
        C(iptables-save) and C(iptables-restore) are installed, nftables where only C(nft) is. The result says
        which it picked and why (RV(selected_backend), RV(selected_backend_reason)).
      - Switching (V(iptables) on a node with our table, V(nftables) on a node with our chain) writes the
        policy in the new backend and removes ours from the old one in the same run. When a step fails, the
        ones already written are undone, so the node keeps the policy it had, in one backend.
      - Every run looks for ours in the other backend and removes it, also when its own backend needed no change
        (the kernel is asked over nfnetlink, without running a tool, whether our table or iptables-nft's chain
        exists; a legacy iptables chain is looked for only where the legacy nat table is loaded).
      - O(state=absent) removes ours from both backends, whatever this says.
    type: str
    choices: [auto, iptables, nftables]
    default: auto
    version_added: 1.1.0
  cidr_limit:
    description:
      - Most CIDRs allowed in O(nonmasquerade_cidrs) (link-local not counted, reserved ranges counted),
        as upstream's C(cidrLimit), to catch really bad mistakes.
    type: int
    default: 64
  exception_cidrs:
    description:
      - Destination CIDRs that are masqueraded although a CIDR of O(nonmasquerade_cidrs) (or link-local,
        when it is kept) covers them, for example a partner network inside V(10.0.0.0/8) that is reached
        through a NAT gateway.
      - Each must lie inside the kept destinations; one that does not would be masqueraded anyway and is an error.
      - iptables writes one rewriting rule per exception before the C(RETURN) rules; nftables checks one set
        (C(exceptions-ipv4), C(exceptions-ipv6)) before the kept ones. Cannot be combined with O(masquerade_cidrs).
      - Each exception adds one iptables rule. With O(to_ports), O(source_cidrs) or O(out_interfaces), where writing
        the rewrite at each exception for every source, interface and port range would take more rules, the rewrite
        and the gates are written once, in sub-chains of the chain (see the notes).
      - An extension of ipmasq.agent (the upstream agent has no such setting); needs O(rule_format=docs).
    type: list
    elements: str
    default: []
    version_added: 1.1.0
  masquerade_cidrs:
    description:
      - Masquerade-only mode. When given, only traffic to these destination CIDRs is masqueraded
        (or sent to O(snat_to)); every other destination keeps its source. Link-local keeps its
        source unless O(masq_link_local) (for IPv6, O(masq_link_local_ipv6)); a listed CIDR inside
        link-local is therefore an error unless that is set.
      - Cannot be combined with O(nonmasquerade_cidrs), O(nomasq_all_reserved_ranges) or O(exception_cidrs).
        Counted against O(cidr_limit).
      - An extension of ipmasq.agent; needs O(rule_format=docs). V([]) means off.
    type: list
    elements: str
    default: []
    version_added: 1.1.0
  snat_to:
    description:
      - SNAT to a fixed address instead of C(MASQUERADE) (which takes the address of the outgoing interface),
        an address such as V(203.0.113.7) or a range such as V(203.0.113.7-203.0.113.9), at most
        one per family (IPv6 needs O(ipv6=true)). A family without one keeps C(MASQUERADE).
      - O(random_fully) and O(to_ports) apply to the SNAT rules as they do to C(MASQUERADE).
      - Every address must be assigned to the node (checked on the node, before anything is written),
        unless O(snat_to_require_local=false).
      - An address that can never be a source is refused whatever O(snat_to_require_local) says, with the
        words of the P(ipmasq.agent.snat_to#filter) filter - the unspecified address (V(0.0.0.0), C(::)),
        loopback (C(127.0.0.0/8), C(::1)), multicast (C(224.0.0.0/4), C(ff00::/8)) and V(255.255.255.255).
      - An extension of ipmasq.agent; needs O(rule_format=docs).
    type: list
    elements: str
    default: []
    version_added: 1.1.0
  snat_to_require_local:
    description:
      - Whether every address of O(snat_to) must be assigned to an interface of the node. Set V(false) for an
        address the node answers for without holding it (a VIP that moves between nodes, proxy ARP).
    type: bool
    default: true
    version_added: 1.1.0
  source_cidrs:
    description:
      - Only traffic from these source CIDRs is rewritten (typically the pod CIDR, so that forwarded or
        inbound traffic that is not pod egress keeps its source). Every managed family needs at least one
        (with O(ipv6=true), an IPv4 and an IPv6 one).
      - iptables adds C(-s) to each rewriting rule, or, where that takes more rules (exceptions, several interfaces),
        checks each source once in the chain or in the sub-chain C(<chain>-SOURCES) and goes on to C(<chain>-POLICY)
        (see the notes); nftables returns early for other sources (sets C(sources-ipv4), C(sources-ipv6)).
      - An extension of ipmasq.agent; needs O(rule_format=docs). V([]) means every source.
    type: list
    elements: str
    default: []
    version_added: 1.1.0
  out_interfaces:
    description:
      - Only traffic leaving by these interfaces is rewritten; traffic leaving by any other interface keeps its
        source. Interface names (up to 15 letters, digits and C(_ . -)), no wildcards.
      - iptables adds C(-o) to each rewriting rule, or, where that takes more rules (exceptions, several sources),
        checks each interface once in the chain and goes on to the sub-chains (see the notes); nftables returns early
        for other interfaces (C(oifname)).
      - An extension of ipmasq.agent; needs O(rule_format=docs). V([]) means every interface.
    type: list
    elements: str
    default: []
    version_added: 1.1.0
  state:
    description:
      - V(absent) removes every jump to the chain from C(POSTROUTING) and the chain itself, in both
        families, and the nftables table of that name. A second V(absent) changes nothing.
    type: str
    choices: [present, absent]
    default: present
notes:
  - "How many iptables rules: written in the one chain, each rewriting rule (one per exception or per
    O(masquerade_cidrs) destination, and the final one) would be repeated for every source and interface pair and,
    with O(to_ports), per protocol and port range: a product. Where that takes more rules than the sub-chains
    C(<chain>-SOURCES), C(<chain>-POLICY) and C(<chain>-REWRITE) (the gates and the rewrite written once, reached with
    C(-g)), the policy is written in them, with the same decisions; each option then adds its own length: one rule
    per interface, per source, per exception, per listed destination, per non-masquerade CIDR, and three per port
    range once. A policy without extensions, or with one source or one interface and no exception, stays the one
    chain, exactly as before. The sub-chains are written in the same C(iptables-restore) transaction, removed with
    the chain (O(state=absent), a switch of O(backend)), and named after the chain (cut short, with a tag of four
    hex digits, where the name would exceed 28 characters)."
  - A policy whose iptables form takes more than 25,000 rules in a family is refused before anything is written,
    also in check mode; the error names the count and what each option adds. nftables keeps the lists in sets and
    has no such limit.
  - When IPv4 was written and the IPv6 write then fails, the task fails with C(changed=true), says what was
    already applied, and lists it in C(applied); running it again finishes the job.
  - A C(RETURN) here (a C(return) in the nftables table) does not stop another nat chain or nft table from
    masquerading the same traffic;
    Docker's C(--ip-masq) and flannel's C(--ip-masq) must be switched off for this chain to be the
    single source of SNAT (the P(ipmasq.agent.ip_masq#role) role does that).
seealso:
  - name: Kubernetes IP Masquerade Agent user guide
    description: The upstream agent whose rules this module writes.
    link: https://kubernetes.io/docs/tasks/administer-cluster/ip-masq-agent/
'''

EXAMPLES = r'''
- name: The upstream defaults (RFC 1918 ranges and link-local are not masqueraded)
  ipmasq.agent.masq_chain:

- name: Only the pod network and the VPC stay unmasqueraded; link-local is masqueraded
  ipmasq.agent.masq_chain:
    nonmasquerade_cidrs:
      - 172.16.0.0/16
      - 10.168.0.0/16
    masq_link_local: true

- name: Dual stack, jump first in POSTROUTING, random source ports
  ipmasq.agent.masq_chain:
    nonmasquerade_cidrs: [10.0.0.0/8, "fd00:10::/48"]
    ipv6: true
    jump_position: first
    random_fully: true

- name: Masquerade to two port ranges, as upstream's --to-ports
  ipmasq.agent.masq_chain:
    to_ports: 1024-29999,32768-65535

- name: The same policy as an nftables table of its own (inet ip-masq-agent)
  ipmasq.agent.masq_chain:
    nonmasquerade_cidrs: [10.0.0.0/8, "fd00::/8"]
    ipv6: true
    backend: nftables

- name: Remove the chain and its jumps (IPv4 and IPv6), and the nftables table
  ipmasq.agent.masq_chain:
    state: absent
'''

RETURN = r'''
msg:
  description: What changed, per family and table, in one line, or that nothing did; in check mode what the run would
    do (C(would write ...)). A run that changes something (or would) ends with the backend that holds the policy and
    why that one (RV(selected_backend), RV(selected_backend_reason)), so that the line alone says it, ad hoc too.
  returned: always
  type: str
  sample: 'IP-MASQ-AGENT: IPv4 5 rules written (was 0), IPv6 not managed; backend iptables, asked for (backend=iptables)'
  version_added: 2.0.0
selected_backend:
  description: Where the policy lives after the run, V(iptables) or V(nftables) (see O(backend)); null with
    O(state=absent).
  returned: always
  type: str
  sample: nftables
  version_added: 1.1.0
selected_backend_reason:
  description: "Why RV(selected_backend) is where the policy lives, for example C(asked for (backend=iptables)) or
    C(auto: the node has our iptables chain IP-MASQ-AGENT (IPv4)). It explains RV(selected_backend), not
    RV(iptables_flavour)."
  returned: always
  type: str
  sample: 'asked for (backend=nftables)'
  version_added: 2.0.0
backend_reason:
  description:
    - Deprecated, removed in 3.0.0. The same value as RV(selected_backend_reason) (the reason for
      RV(selected_backend)); use that name.
  returned: always
  type: str
  sample: 'asked for (backend=nftables)'
  version_added: 1.1.0
backend:
  description:
    - Deprecated, removed in 3.0.0. The same value as RV(iptables_flavour); use that name.
    - The iptables flavour the node's iptables tools use (V(nf_tables) or V(legacy)), whatever RV(selected_backend)
      is; not the O(backend) option (the choice), and not where the policy lives (RV(selected_backend)).
  returned: always
  type: str
  sample: nf_tables
iptables_flavour:
  description: The iptables flavour of the node's iptables tools (V(nf_tables) or V(legacy)), whatever
    RV(selected_backend) is (an iptables-nft node with the policy in nftables says V(nf_tables)); null when the run
    did not read iptables.
  returned: always
  type: str
  sample: nf_tables
  version_added: 1.1.0
iptables_version:
  description: Version of the node's iptables, from C(iptables-save); null when the run did not read iptables.
  returned: always
  type: str
  sample: 1.8.9
nft_version:
  description: Version of the node's nft, from its JSON listing; null when the run did not run nft.
  returned: always
  type: str
  sample: 1.0.6
  version_added: 1.1.0
other_iptables:
  description:
    - Ours found in the iptables flavour (legacy or iptables-nft) that the C(iptables) tools on C(PATH) do not write
      to, one entry per family read there with that flavour's own tools, and removed in the same run (its actions
      name the flavour, as in C(IPv4 (iptables-legacy))). Empty when it holds nothing of ours.
    - Each entry has C(tools) (C(iptables-legacy), C(ip6tables-nft), ...), C(family), C(chain_exists), C(rules)
      and C(jumps) (as that flavour's C(iptables-save) printed them before the run), C(changed), and C(note) when a
      chain of that name there is not ours and was left alone.
  returned: always
  type: list
  elements: dict
  version_added: 1.1.0
  sample: [{"tools": "iptables-legacy", "family": 4, "chain_exists": true, "changed": true, "rules": [],
            "jumps": ["-A POSTROUTING -j IP-MASQ-AGENT"]}]
nftables:
  description: The nftables side.
  returned: always
  type: dict
  version_added: 1.1.0
  contains:
    table:
      description: Our table.
      type: str
      sample: table inet ip-masq-agent
    managed:
      description: Whether the policy lives in this table (O(backend) chose nftables).
      type: bool
    read:
      description: Whether the run listed the table.
      type: bool
    exists_before:
      description: Whether the table existed before the run.
      type: bool
    changed:
      description: Whether the table was (or, in check mode, would be) written or deleted.
      type: bool
    before:
      description: The table before the run, as C(nft list table) shows it (one set element per line), or null.
      type: str
    after:
      description: The table the policy wants, in the same form, or null.
      type: str
    transaction:
      description: The C(nft -j -f -) transaction written (or that would be), libnftables JSON, or null.
      type: str
    drift:
      description:
        - When the run rewrites (or would rewrite) a table that was there, which rules and set elements it puts back
          or takes out; null otherwise.
        - C(rules) holds C(missing) (rules of our chain the policy wants and the table lacks), C(extra) (rules the
          table holds and the policy does not want), in nft syntax, and C(reordered) (the same rules in another
          order). C(sets) maps each set that differs to its C(missing) and C(extra) elements.
      type: dict
      version_added: 1.1.0
      sample: {"rules": {"missing": [], "extra": ["ip daddr 198.51.100.0/24 masquerade"], "reordered": false},
               "sets": {"nonmasq4": {"missing": ["10.30.0.0/16"], "extra": []}}}
chain:
  description: The chain managed.
  returned: always
  type: str
  sample: IP-MASQ-AGENT
state:
  description: The state asked for.
  returned: always
  type: str
  sample: present
actions:
  description: What was changed (or would be, in check mode), per family.
  returned: always
  type: list
  elements: str
  sample: ["IPv4: create chain IP-MASQ-AGENT", "IPv4: append the POSTROUTING jump to IP-MASQ-AGENT"]
drift_kinds:
  description:
    - What each entry of RV(actions) repairs, as one machine-readable word, in the same order.
    - V(chain_missing), V(chain_rules), V(jump_missing), V(jump_wrong), V(jump_duplicate), V(jump_position),
      V(chain_unwanted) (a family the policy does not manage, or O(state=absent)), V(table_missing),
      V(table_rewritten), V(table_unwanted) (O(state=absent)), V(other_backend) (ours removed from the backend
      the policy does not live in). The resync counts them in its metrics (the collection's metrics guide).
  returned: always
  type: list
  elements: str
  sample: ["chain_missing", "jump_missing"]
  version_added: 1.1.0
commands:
  description: The commands run, or that would run in check mode (the restore reads its input on stdin).
  returned: always
  type: list
  elements: str
  sample: ["/usr/sbin/iptables-save -t nat", "/usr/sbin/iptables-restore --wait=30 --noflush"]
ipv4:
  description: The IPv4 side in iptables.
  returned: always
  type: dict
  contains:
    managed:
      description: Whether the chain is kept in place for this family (false with the nftables backend, where the
        run only removes a chain of ours).
      type: bool
    changed:
      description: Whether this family changed.
      type: bool
    before:
      description: The chain's rules and the jumps to it before the run (C(chain_exists), C(rules), C(jumps)).
      type: dict
    rules:
      description: The chain's rules after the run, as C(iptables-save) prints them, then those of its sub-chains
        (C(-A IP-MASQ-AGENT-POLICY ...)) when the policy uses them.
      type: list
      elements: str
      sample:
        - '-A IP-MASQ-AGENT -d 169.254.0.0/16 -m comment --comment "ip-masq-agent: cluster-local traffic
          should not be subject to MASQUERADE" -m addrtype ! --dst-type LOCAL -j RETURN'
    jump:
      description: The C(POSTROUTING) jump after the run.
      type: str
    restore_input:
      description: The C(iptables-restore --noflush) transaction written (or that would be), or null.
      type: str
    drift:
      description:
        - When the run rewrites (or would rewrite) a chain that was there, which rules it puts back or takes out;
          null otherwise (a new chain, or a chain as wanted).
        - C(missing) lists the rules the policy wants and the chain lacks, C(extra) the rules the chain holds and
          the policy does not want, as C(iptables-save) prints them; C(reordered) is true when the chain holds the
          same rules in another order.
      type: dict
      version_added: 1.1.0
      sample: {"missing": ["-A IP-MASQ-AGENT -d 10.30.0.0/16 -m comment --comment \"ip-masq-agent: ...\" -j RETURN"],
               "extra": [], "reordered": false}
ipv6:
  description: The IPv6 side, as RV(ipv4); C(managed) is false unless O(ipv6=true).
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import module_spec
from ansible_collections.ipmasq.agent.plugins.module_utils._masq_chain import enforce
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module


def work(module, run, find):
    return enforce(module.params, module.check_mode, module._diff, run, find)


def main():
    module = AnsibleModule(
        argument_spec=module_spec(),
        supports_check_mode=True,
    )
    run_module(module, work)


if __name__ == '__main__':
    main()
