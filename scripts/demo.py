"""The demo behind scripts/demo.sh (run that; it bootstraps first).

Builds a small cluster in network namespaces, sends real TCP connections
from the pod before and after ipmasq.agent.masq_chain runs in the node (with
the iptables backend, then moved to the nftables backend), and prints which
source address every receiver saw.  Exits 1 if any check
fails.  Only namespaces this process creates are touched, and they are
removed on every exit path (also Ctrl-C and SIGTERM).
"""
import os
import sys
import time

from ipmasq_lab import netlab, topology   # tests/lab, on the venv's path (scripts/bootstrap.sh)
from ipmasq_lab.topology import NO_REPLY, POD4

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PLAYBOOK = os.path.join(ROOT, 'scripts', 'demo-playbook.yml')
CHAIN = 'IP-MASQ-AGENT'

# receiver -> (expected before, expected after, why after)
EXPECTED = {
    'external': (NO_REPLY, topology.NODE_EXT4,
                 'outside every non-masquerade CIDR: masqueraded to the node'),
    'cluster-local': (POD4, POD4, 'in 10.0.0.0/8: keeps the pod address'),
    'link-local': (POD4, POD4, 'in 169.254.0.0/16 (masq_link_local false): keeps the pod address'),
}


def heading(text):
    print('\n== %s' % text, flush=True)


def table(topo, seen, column):
    """Print one table; return the number of failed checks."""
    fmt = '  %-14s %-15s %-14s %-14s %-5s %s'
    print(fmt % ('receiver', 'address', 'saw source', 'expected', 'check', ''))
    print(fmt % ('-' * 14, '-' * 15, '-' * 14, '-' * 14, '-' * 5, ''))
    failed = 0
    for rec in topo.receivers:
        want = EXPECTED[rec.name][column]
        got = seen.get(rec.name, NO_REPLY)
        ok = got == want
        failed += not ok
        why = EXPECTED[rec.name][2] if column == 1 else (
            'no route back to the pod network' if want == NO_REPLY else 'route back via the node')
        print(fmt % (rec.name, rec.address, got, want, 'OK' if ok else 'FAIL', why))
    return failed


def run(topo):
    failed = 0
    heading('Topology (network namespaces made for this demo; the host is not touched)')
    for line in topo.describe():
        print('  ' + line)

    heading('Before: no rules in the node; TCP connections from the pod (%s)' % POD4)
    failed += table(topo, topo.probe(), 0)

    if not playbook(topo, 'iptables'):
        return failed + 1
    heading('iptables -t nat -L %s   (in the node namespace)' % CHAIN)
    print(topo.iptables(['-t', 'nat', '-L', CHAIN]).stdout.rstrip())
    heading('iptables -t nat -S POSTROUTING   (in the node namespace)')
    print(topo.iptables(['-t', 'nat', '-S', 'POSTROUTING']).stdout.rstrip())

    heading('After: the same TCP connections from the pod (%s)' % POD4)
    failed += table(topo, topo.probe(), 1)

    # The same policy, natively in nftables: one run moves it (the chain goes).
    if not playbook(topo, 'nftables'):
        return failed + 1
    heading('nft list table inet ip-masq-agent   (in the node namespace)')
    print(topo.node.exec(['nft', 'list', 'table', 'inet', 'ip-masq-agent']).stdout.rstrip())
    left = [line for line in topo.nat_save().splitlines() if CHAIN in line]
    print('\n  iptables: %s' % ('no IP-MASQ-AGENT chain or jump left' if not left else 'LEFT: %s' % left))
    failed += bool(left)

    heading('With nftables: the same TCP connections from the pod (%s), the same sources' % POD4)
    failed += table(topo, topo.probe(), 1)
    return failed


def playbook(topo, backend):
    """Run the demo playbook in the node with ``backend``; print its result."""
    heading('ansible-playbook scripts/demo-playbook.yml -e demo_backend=%s, inside the node namespace' % backend)
    rc, tasks = topo.playbook(PLAYBOOK, {'demo_backend': backend})
    for name, result in tasks:
        status = 'FAILED' if result.get('failed') else ('changed' if result.get('changed') else 'ok')
        print('  task "%s": %s (backend: %s)' % (name, status, result.get('selected_backend')))
        for action in result.get('actions', []):
            print('    - %s' % action)
        if result.get('failed'):
            print('    %s' % result.get('msg'))
    if rc != 0 or not tasks:
        print('demo: ansible-playbook failed (rc=%d)' % rc)
        return False
    return True


def main():
    if os.geteuid() != 0:
        print('demo: must be run as root (it creates network namespaces)', file=sys.stderr)
        return 2
    topology.install_signal_handlers()
    start = time.monotonic()
    failed = 0
    try:
        with topology.Topology(ipv6=False) as topo:
            failed = run(topo)
    except KeyboardInterrupt:
        print('\ndemo: interrupted; its namespaces were removed', file=sys.stderr)
        return 130
    finally:
        netlab.cleanup_all()
    print('\n%s: %d check(s) failed; namespaces removed; %.1f s'
          % ('FAIL' if failed else 'OK', failed, time.monotonic() - start))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
