"""The iptables rule count of the extensions, and what applying it costs
(issue 18 item 9): the shape of the issue's 15 KB config, 20 source_cidrs x
20 out_interfaces x 699 exception_cidrs, which the one-chain form wrote as
280,002 rules.

    sudo .venv/bin/python bench/rule_count.py                  # this tree
    sudo .venv/bin/python bench/rule_count.py --baseline DIR   # also DIR (a tree with build/collections)

Prints one table: per tree, the rules written, the first apply and a
no-change run (Policy + sync in process, the module's core), in seconds.
The node side runs in a network namespace made here (netlab, iptables-nft)
and removed after; it refuses to run anywhere else (nsguard).  A benchmark,
not a test: nothing is asserted.
"""
import argparse
import json
import os
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
SHAPE = dict(sources=20, interfaces=20, exceptions=699)


def node(args):
    """Inside the namespace: apply the shape, then run again; print JSON."""
    sys.path.insert(0, BENCH)
    from nsguard import refuse_unless_own_namespace  # pylint: disable=import-outside-toplevel
    refuse_unless_own_namespace('rule_count.py')
    from corelayout import core_module  # pylint: disable=import-outside-toplevel
    iptables, policy, sync, runner = (core_module(name) for name in (
        '_core.iptables_backend.chain',
        '_core.model.policy',
        '_core.engine.sync',
        '_core.node.runner',
    ))
    find, make_run = runner.find, runner.make_run

    pol = policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8'],
                        exception_cidrs=['10.30.%d.%d/30' % (i // 64, (i % 64) * 4) for i in range(args.exceptions)],
                        source_cidrs=['10.%d.0.0/16' % (100 + i) for i in range(args.sources)],
                        out_interfaces=['uplink%d' % i for i in range(args.interfaces)])
    out = {}
    for label in ('apply', 'no-change'):
        started = time.monotonic()
        result = sync.sync(pol, iptables.IptablesBackend(make_run(timeout=args.timeout), find),
                           lock=sync._NoLock())  # pylint: disable=protected-access
        out[label] = time.monotonic() - started
        out[label + ' changed'] = result['changed']
    save = subprocess.run([find('iptables-save'), '-t', 'nat'], capture_output=True, text=True, check=True).stdout
    out['rules'] = sum(1 for line in save.splitlines() if line.startswith('-A ') and 'IP-MASQ-AGENT' in line.split()[1])
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--node', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--baseline', help='another tree (its build/collections) to time the same way')
    parser.add_argument('--timeout', type=int, default=900, help='per command, seconds (default 900)')
    for key, value in SHAPE.items():
        parser.add_argument('--' + key, type=int, default=value)
    args = parser.parse_args()
    if args.node:
        return node(args)

    from ipmasq_lab import netlab  # pylint: disable=import-outside-toplevel
    trees = [('this tree', ROOT)] + ([('baseline', os.path.abspath(args.baseline))] if args.baseline else [])
    rows = []
    backend = netlab.Backend('nft')
    try:
        for label, tree in trees:
            with netlab.Netns('rules') as ns:
                env = backend.env()
                env.update(PYTHONPATH=os.path.join(tree, 'build', 'collections'), LC_ALL='C')
                argv = ['/usr/bin/python3', os.path.abspath(__file__), '--node', '--timeout', str(args.timeout)]
                argv += ['--%s=%d' % (key, getattr(args, key)) for key in SHAPE]
                proc = ns.exec(argv, check=False, timeout=3 * args.timeout + 60, env=env)
                if proc.returncode != 0:
                    rows.append((label, 'failed: %s' % (proc.stderr.strip().splitlines() or ['?'])[-1], '', ''))
                    continue
                got = json.loads(proc.stdout)
                rows.append((label, '{:,}'.format(got['rules']), '%.2f' % got['apply'], '%.2f' % got['no-change']))
    finally:
        backend.remove()
    print('%d source_cidrs x %d out_interfaces x %d exception_cidrs (iptables-nft)\n'
          % (args.sources, args.interfaces, args.exceptions))
    print('| tree | rules | apply s | no-change s |\n|---|---:|---:|---:|')
    for row in rows:
        print('| %s |' % ' | '.join(row))
    return 0


if __name__ == '__main__':
    sys.exit(main())
