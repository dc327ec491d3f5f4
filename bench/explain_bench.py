"""Part ``explain`` of bench/run: one SNAT explanation's cost (issue 35's goal:
on a node with 1,000 rules of ours and 1,000 foreign rules, under 100 ms of
CPU beyond reading the tables).  Per policy backend a namespace of its own,
built and measured by node_explain.py inside it: ours written by the core,
the foreign rules (Docker's user networks, CNI bridge containers, kube-proxy)
in the iptables-nft nat table and a foreign nft table; then FLOWS flows, each
as the module answers it: the read of the tables, then the explanation, CPU
timed apart.  The goal is held by the largest explanation, not the median."""

from ipmasq_lab import netlab

import benchlib
from benchlib import log

BACKENDS = ('iptables', 'nftables')
OURS = 1000
FOREIGN = 1000
FLOWS = 50
QUICK_FLOWS = 20
GOAL_MS = 100.0


def part_explain(quick=False, backend=None, flows=None):
    """One row per policy backend (node_explain.py measure)."""
    count = flows or (QUICK_FLOWS if quick else FLOWS)
    rows = []
    for choice in BACKENDS:
        log('explain: %s, %d rules of ours, %d foreign, %d flows' % (choice, OURS, FOREIGN, count))
        with netlab.Netns('explain') as ns:
            rows.append(benchlib.node_script(ns, 'node_explain.py',
                                             ['measure', choice, str(OURS), str(FOREIGN), str(count)], backend))
    return rows


def targets(rows):
    """``(name, measured, met)`` for the report's targets table."""
    return [('one explanation beyond reading the tables, %s, %d ours + %d foreign rules: < %d ms CPU (max of %d '
             'flows)' % (row['backend'], row['ours'], row['foreign'], GOAL_MS, row['flows']),
             '%.1f ms' % row['explain_ms']['max'], row['explain_ms']['max'] < GOAL_MS) for row in rows or ()]


def report(rows):
    if not rows:
        return []
    out = ['## SNAT explanation: one flow on a node with 1,000 rules of ours and 1,000 foreign rules', '',
           'Per policy backend a namespace: ours written by the core (iptables: 997 non-masquerade CIDRs, the '
           'link-local RETURN, the MASQUERADE and the jump, in the iptables-nft nat table; nftables: the same '
           'CIDRs as set elements of our table), and 1,000 foreign nat rules (20 Docker user networks, kube-proxy\'s '
           'KUBE-POSTROUTING and a KUBE-SERVICES rule per service, CNI bridge containers: a POSTROUTING jump and '
           'a CNI-* chain of two rules each, with their comments) plus a foreign nft table at srcnat + 10. Each '
           'flow as the module answers it: *read* is `_explain.node.read` (the listings: iptables-save, '
           'ip6tables-save when asked, nft -j list ruleset, and their parsing; CPU of the process and its '
           'children), *explain* is `Reading.explain` (CPU of the process; it runs no command). Flows drawn '
           'with seed %d: pods (CNI containers, Docker\'s, others) to the internet, to a non-masquerade range, '
           'to another pod, a quarter marked 0x4000; every flow with proto, dport and out interface. The first '
           'flow is asked once before the timed ones (it loads the explanation\'s code).' % rows[0]['seed'], '',
           '| backend | ours | foreign | flows | read CPU ms median / max | explain CPU ms median / max | goal '
           '(explain) | status | verdicts | deciding owners |',
           '|---|---:|---:|---:|---:|---:|---:|---|---|---|']
    for row in rows:
        ok = row['explain_ms']['max'] < GOAL_MS
        out.append('| %s | %d | %d | %d | %.1f / %.1f | %.1f / %.1f | < %d ms | %s | %s | %s |' % (
            row['backend'], row['ours'], row['foreign'], row['flows'], row['read_ms']['median'],
            row['read_ms']['max'], row['explain_ms']['median'], row['explain_ms']['max'], GOAL_MS,
            'PASS' if ok else '**FAIL**',
            ', '.join('%s %d' % kv for kv in sorted(row['verdicts'].items())),
            ', '.join('%s %d' % kv for kv in sorted(row['owners'].items()))))
    out.append('')
    return out
