"""Part ``cni`` of bench/run: the CNI networks' editor's no-change run
(``cni_sync``, state=present, every network file already switched off), in
one Python process inside a namespace the benchmark made (node_cni.py); with
``--baseline REV`` the same measurement of that revision right after, in the
same namespace.  CPU is the process's own and its children's (the rule
removal's iptables-save, ip6tables-save and nft), median of the repetitions."""
import statistics

from ipmasq_lab import netlab

import benchlib
from benchlib import log

FILES = (1, 10, 50)
QUICK_FILES = (1, 10)


def _merge(rounds):
    """One row per file count from several rounds: the median of the rounds' medians, the best of their bests."""
    rows = []
    for same in zip(*rounds):
        row = {'count': same[0]['count']}
        for label in ('rules', 'files'):
            row[label] = {'cpu_ms': statistics.median(r[label]['cpu_ms'] for r in same),
                          'best_ms': min(r[label]['best_ms'] for r in same),
                          'wall_ms': statistics.median(r[label]['wall_ms'] for r in same),
                          'reps': sum(r[label]['reps'] for r in same)}
        rows.append(row)
    return rows


def part_cni(quick=False, baseline=None, backend=None):
    """Rounds of this tree and (with ``baseline``) the baseline's, alternating, in one namespace."""
    counts = QUICK_FILES if quick else FILES
    args = ['measure', ','.join(str(c) for c in counts), '9' if quick else '15']
    after, before = [], []
    with netlab.Netns('cni') as ns:
        for n in range(2 if quick else 3):
            log('cni (no Ansible) files=%s, round %d' % (','.join(str(c) for c in counts), n + 1))
            after.append(benchlib.node_script(ns, 'node_cni.py', args, backend))
            if baseline:
                before.append(benchlib.node_script(ns, 'node_cni.py', args, backend,
                                                   env_extra={'PYTHONPATH': baseline[0]}))
    rows = _merge(after)
    if baseline:
        for row, old in zip(rows, _merge(before)):
            row['before'] = dict(old, commit=baseline[1])
    return rows


def report(rows):
    if not rows:
        return []
    commit = (rows[0].get('before') or {}).get('commit')
    out = ['## CNI networks: the editor\'s no-change run (cni_sync, no Ansible)', '',
           'N network files already switched off (containerd\'s conflist, a CRI-O bridge .conf, kube-flannel\'s '
           'conflist, in turn); *rules*: with the rule removal\'s reads (iptables-save, ip6tables-save, nft), '
           '*files*: without. CPU ms of the process and its children: the median of the rounds\' medians, and '
           'the best run.%s' % (
               ' *before* is %s, measured in the same namespace, rounds alternating with ours.' % commit
               if commit else ''), '',
           '| files | reads | after CPU ms | after best ms |%s' % (
               ' before CPU ms | before best ms | after / before (median, best) |' if commit else ''),
           '|---:|---|---:|---:|%s' % ('---:|---:|---|' if commit else '')]
    for row in rows:
        for label in ('rules', 'files'):
            now = row[label]
            line = '| %d | %s | %.2f | %.2f |' % (row['count'], label, now['cpu_ms'], now['best_ms'])
            if commit:
                old = row['before'][label]
                ratios = now['cpu_ms'] / old['cpu_ms'], now['best_ms'] / old['best_ms']
                line += ' %.2f | %.2f | %.2fx, %.2fx |' % ((old['cpu_ms'], old['best_ms']) + ratios)
            out.append(line)
    out.append('')
    return out
