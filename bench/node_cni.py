"""The CNI networks' editor's no-change run, without Ansible (node side).

Runs INSIDE a network namespace made by bench/run.py (part ``cni``), with the
node's Python and PYTHONPATH pointing at this tree or at a ``--baseline``
revision; prints one JSON document.  Its files go to a temporary root it
removes; the nat tables it reads are the namespace's (empty but for what
the benchmark put there); nothing is written anywhere else.

    measure FILES REPS   for each N of FILES (comma-separated): N network
                         files already switched off (containerd's conflist,
                         a CRI-O-like bridge .conf, kube-flannel's conflist
                         with ``"ipMasq": false`` in its delegate, in turn),
                         then ``cni_sync`` state=present, no change, REPS
                         times, with the rule removal's reads (iptables-save,
                         ip6tables-save, nft) and without them (files only)
"""
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

from nsguard import refuse_unless_own_namespace  # bench/, this script's directory

from corelayout import core_module  # bench/, this script's directory: either layout of the core

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import cni

make_run = core_module('_core.node.runner').make_run

CONF_DIR = '/etc/cni/net.d'
CONTAINERD = {'cniVersion': '1.0.0', 'name': 'containerd-net%d', 'plugins': [
    {'type': 'bridge', 'bridge': 'cni%d', 'isGateway': True, 'ipMasq': False, 'promiscMode': True,
     'ipam': {'type': 'host-local', 'ranges': [[{'subnet': '10.88.%d.0/24'}]], 'routes': [{'dst': '0.0.0.0/0'}]}},
    {'type': 'portmap', 'capabilities': {'portMappings': True}}]}
CRIO = {'cniVersion': '0.3.1', 'name': 'crio%d', 'type': 'bridge', 'bridge': 'cni%d', 'isGateway': True,
        'ipMasq': False, 'hairpinMode': True,
        'ipam': {'type': 'host-local', 'routes': [{'dst': '0.0.0.0/0'}], 'ranges': [[{'subnet': '10.85.%d.0/24'}]]}}
FLANNEL = {'name': 'cbr%d', 'cniVersion': '0.3.1', 'plugins': [
    {'type': 'flannel', 'delegate': {'hairpinMode': True, 'isDefaultGateway': True, 'ipMasq': False}},
    {'type': 'portmap', 'capabilities': {'portMappings': True}}]}


def _fill(data, n):
    return json.loads(json.dumps(data).replace('%d', str(n)))


def make_root(count):
    root = tempfile.mkdtemp(prefix='imq-bench-cni-')
    conf = os.path.join(root, CONF_DIR.lstrip('/'))
    os.makedirs(conf)
    os.makedirs(os.path.join(root, 'run', 'flannel'))
    with open(os.path.join(root, 'run', 'flannel', 'subnet.env'), 'w') as handle:
        handle.write('FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_IPMASQ=false\n')
    for n in range(count):
        kind, data, ext = [('containerd', CONTAINERD, 'conflist'), ('crio', CRIO, 'conf'),
                           ('flannel', FLANNEL, 'conflist')][n % 3]
        with open(os.path.join(conf, '%02d-%s.%s' % (n, kind, ext)), 'w') as handle:
            json.dump(_fill(data, n), handle, indent=2)
            handle.write('\n')
    return root


def cpu_now():
    """This process's CPU (CLOCK_PROCESS_CPUTIME_ID: precise, not tick-sampled) and its waited-for children's."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def measure(count, reps):
    root = make_root(count)
    run, find = make_run(), shutil.which
    out = {'count': count}
    try:
        for label, remove in (('rules', True), ('files', False)):
            params = dict(state='present', conf_dirs=[CONF_DIR], remove_stale_rules=remove, root=root,
                          backup_dir='/var/backups/ipmasq', backup=True, ipv6=False)
            walls, cpus = [], []
            for i in range(reps + 1):
                wall, cpu = time.perf_counter(), cpu_now()
                res = cni.cni_sync(params, run, find, None, check_mode=False)
                cpu, wall = cpu_now() - cpu, time.perf_counter() - wall
                if res['changed'] or res['edited'] or len(res['networks']) != count:
                    raise SystemExit('not a no-change run of %d files: %r' % (count, res.data))
                if i:           # the first run warms the caches
                    walls.append(wall)
                    cpus.append(cpu)
            out[label] = {'cpu_ms': statistics.median(cpus) * 1e3, 'best_ms': min(cpus) * 1e3,
                          'wall_ms': statistics.median(walls) * 1e3, 'reps': reps}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv):
    refuse_unless_own_namespace('node_cni.py')
    if len(argv) != 3 or argv[0] != 'measure':
        sys.exit(__doc__)
    counts = [int(x) for x in argv[1].split(',')]
    reps = int(argv[2])
    print(json.dumps([measure(count, reps) for count in counts]))


if __name__ == '__main__':
    main(sys.argv[1:])
