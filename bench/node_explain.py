"""One SNAT explanation's cost on a node full of rules (node side of part ``explain``).

Runs INSIDE a network namespace made by bench/run.py (``explain_bench.py``),
with the node's Python and PYTHONPATH=build/collections; prints one JSON
document.  It writes the nat table and the nft ruleset of the namespace it
runs in, never anywhere else (nsguard.py).

    measure BACKEND OURS FOREIGN FLOWS [SEED]
        BACKEND ``iptables`` (our chain, in the iptables-nft nat table the
        PATH's tools give) or ``nftables`` (our table): our policy written
        by the core (Policy + sync) with OURS - 3 non-masquerade CIDRs
        (iptables: OURS rules of ours, the link-local RETURN, the CIDRs'
        RETURNs, the MASQUERADE and the jump; nftables: the same CIDRs as
        set elements); FOREIGN foreign rules in the nat table (Docker's
        user networks, CNI bridge containers' CNI-* chains, kube-proxy's
        KUBE-POSTROUTING and KUBE-SERVICES) and a foreign nft table at
        priority srcnat + 10.  Then FLOWS flows, each as the module answers
        it: read the tables (``_explain.node.read``: the listings and their
        parsing; CPU of this process and its children), then the
        explanation (``Reading.explain``: CPU of this process; it runs no
        command).
    profile BACKEND OURS FOREIGN FLOWS [SEED]
        the same node; a cProfile of the explanations alone (top by own time).
"""
import cProfile
import collections
import io
import json
import pstats
import random
import resource
import shutil
import statistics
import sys
import time

from corelayout import core_module  # bench/, this script's directory: either layout of the core
from nsguard import refuse_unless_own_namespace  # bench/, this script's directory

_backends, _policy, _runner, _sync = (core_module(name) for name in (
    '_core.registry.backends', '_core.model.policy', '_core.node.runner', '_core.engine.sync'))
from ansible_collections.ipmasq.agent.plugins.module_utils._explain import flow as _flow  # noqa: E402
from ansible_collections.ipmasq.agent.plugins.module_utils._explain import node as _node  # noqa: E402

RUN = _runner.make_run()
DOCKER_NETS = 20
KUBE_FIXED = 6          # PREROUTING/OUTPUT/POSTROUTING jumps, KUBE-POSTROUTING's 3 rules
CNI_SUBNET = '10.88.0.0/16'
FOREIGN_NFT = """table ip foreign-late {
    chain post {
        type nat hook postrouting priority srcnat + 10; policy accept;
        ip saddr 192.168.100.0/24 oifname "eth1" masquerade
        ip saddr 192.168.101.0/24 counter snat to 198.51.100.9
    }
}
"""


def cpu_now():
    """This process's CPU (CLOCK_PROCESS_CPUTIME_ID) and its waited-for children's."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def must(argv, data=None):
    rc, out, err = RUN(argv, data)
    if rc != 0:
        raise RuntimeError('%s: rc=%d %s' % (' '.join(argv), rc, err))
    return out


def ours_cidrs(count):
    """``count`` distinct /24s, every other one of 10.0.0.0/8 (as node_nft.spaced_cidrs)."""
    return ['10.%d.%d.0/24' % ((2 * i) // 256, (2 * i) % 256) for i in range(count)]


def foreign_save(count):
    """``count`` foreign nat rules as ``iptables-restore --noflush`` input, and
    the CNI containers' addresses: Docker's user networks (MASQUERADE per
    network), kube-proxy's KUBE-POSTROUTING (mark 0x4000) and KUBE-SERVICES
    (a service per rule, reached from PREROUTING and OUTPUT, not from
    POSTROUTING), and CNI bridge containers (a POSTROUTING jump to a chain
    of two rules each, as pkg/ip/ipmasq_linux.go writes them)."""
    containers = (count - DOCKER_NETS - KUBE_FIXED) * 2 // 3 // 3
    services = count - DOCKER_NETS - KUBE_FIXED - 3 * containers
    chains = ['KUBE-POSTROUTING', 'KUBE-SERVICES', 'KUBE-MARK-MASQ']
    rules = ['-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
             '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
             '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
             '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
             '-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0',
             '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" '
             '-j MASQUERADE --random-fully']
    for n in range(DOCKER_NETS):
        rules.append('-A POSTROUTING -s 172.%d.0.0/16 ! -o br-%012x -j MASQUERADE' % (18 + n, n))
    for n in range(services):
        rules.append('-A KUBE-SERVICES -d 10.96.%d.%d/32 -p tcp -m comment --comment "default/svc-%d:http '
                     'cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ' % (n // 250, 1 + n % 250, n))
    addresses = []
    for n in range(containers):
        chain = 'CNI-%020x' % (0xabc0000 + n)
        address = '10.88.%d.%d' % (n // 250, 2 + n % 250)
        comment = '"name: \\"containerd-net\\" id: \\"%064x\\""' % n
        chains.append(chain)
        addresses.append(address)
        rules.append('-A POSTROUTING -s %s/32 -m comment --comment %s -j %s' % (address, comment, chain))
        rules.append('-A %s -d %s -m comment --comment %s -j ACCEPT' % (chain, CNI_SUBNET, comment))
        rules.append('-A %s ! -d 224.0.0.0/4 -m comment --comment %s -j MASQUERADE' % (chain, comment))
    assert len(rules) == count, (len(rules), count)
    text = '*nat\n' + ''.join(':%s - [0:0]\n' % c for c in chains) + '\n'.join(rules) + '\nCOMMIT\n'
    return text, addresses


def build(choice, ours, foreign):
    """Ours (by the core) and the foreign rules, in this namespace; the CNI containers' addresses."""
    cidrs = ours_cidrs(ours - 3)
    text, addresses = foreign_save(foreign)
    must([_runner.find('iptables-restore'), '-w', '--noflush'], text)
    must([_runner.find('nft'), '-f', '-'], FOREIGN_NFT)
    pol = _policy.Policy(nonmasquerade_cidrs=cidrs, cidr_limit=None)
    result = _sync.sync(pol, _backends.Backends(RUN, _runner.find, choice=choice))
    if not result['changed']:
        raise RuntimeError('apply %s: the core reported no change on an empty namespace' % choice)
    save = must([_runner.find('iptables-save'), '-t', 'nat'])
    counted = {'ours': sum(1 for line in save.splitlines() if line.startswith('-A ') and 'IP-MASQ-AGENT' in line),
               'foreign': sum(1 for line in save.splitlines() if line.startswith('-A ') and 'IP-MASQ-AGENT' not in line)}
    if choice == 'nftables':
        counted['ours'] = len(cidrs) + 3      # the set's elements, link-local, the local return, masquerade
    return cidrs, addresses, counted


def draw_flows(rng, count, cidrs, addresses):
    """Flows a person asks about: pods (CNI containers, Docker's, others) to
    the internet, to a non-masquerade range of ours, to another pod, marked
    service traffic; every one with proto, dport and out interface, so no
    match lacks its value."""
    flows = []
    for _i in range(count):
        src = rng.choice((rng.choice(addresses), '172.%d.0.2' % rng.randrange(18, 18 + DOCKER_NETS),
                          '10.244.%d.%d' % (rng.randrange(256), rng.randrange(2, 250)), '192.168.101.7'))
        dst = rng.choice(('203.0.113.%d' % rng.randrange(1, 255), '198.51.100.%d' % rng.randrange(1, 255),
                          rng.choice(cidrs).replace('.0/24', '.9'), '10.88.1.9'))
        flows.append({'src': src, 'dst': dst, 'proto': rng.choice(('tcp', 'udp')),
                      'dport': rng.randrange(1, 65536), 'out_interface': rng.choice(('eth0', 'eth1', 'cni0')),
                      'mark': rng.choice(('0', '0', '0', '0x4000'))})
    return flows


def one(flow):
    """One explanation as the module gives it: ``(read CPU s, explain CPU s, answer)``."""
    asked = _flow.parse(flow['src'], flow['dst'], flow['proto'], flow['dport'], flow['out_interface'], flow['mark'])
    cpu0 = cpu_now()
    reading = _node.read(RUN, shutil.which, asked.family)
    cpu1 = cpu_now()
    answer = reading.explain(asked)
    cpu2 = cpu_now()
    return cpu1 - cpu0, cpu2 - cpu1, answer


def measure(choice, ours, foreign, count, seed):
    cidrs, addresses, counted = build(choice, ours, foreign)
    flows = draw_flows(random.Random(seed), count, cidrs, addresses)
    one(flows[0])       # warm: the first explanation loads the explanation's code
    reads, explains = [], []
    verdicts, owners = collections.Counter(), collections.Counter()
    for flow in flows:
        read_cpu, explain_cpu, answer = one(flow)
        reads.append(read_cpu * 1e3)
        explains.append(explain_cpu * 1e3)
        verdicts[answer['verdict']] += 1
        owners[(answer['decided_by'] or {}).get('owner') or '-'] += 1
    return {'backend': choice, 'ours': counted['ours'], 'foreign': counted['foreign'], 'flows': count, 'seed': seed,
            'read_ms': {'median': statistics.median(reads), 'max': max(reads)},
            'explain_ms': {'median': statistics.median(explains), 'max': max(explains)},
            'verdicts': dict(verdicts), 'owners': dict(owners)}


def profile(choice, ours, foreign, count, seed):
    cidrs, addresses, _counted = build(choice, ours, foreign)
    flows = draw_flows(random.Random(seed), count, cidrs, addresses)
    one(flows[0])
    prof = cProfile.Profile()
    for flow in flows:
        asked = _flow.parse(flow['src'], flow['dst'], flow['proto'], flow['dport'], flow['out_interface'],
                            flow['mark'])
        reading = _node.read(RUN, shutil.which, asked.family)
        prof.enable()
        reading.explain(asked)
        prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats('tottime').print_stats(15)
    return {'backend': choice, 'cprofile_top': text.getvalue()}


def main(argv):
    refuse_unless_own_namespace('node_explain.py')
    if len(argv) not in (5, 6) or argv[0] not in ('measure', 'profile') or argv[1] not in ('iptables', 'nftables'):
        sys.exit(__doc__)
    seed = int(argv[5]) if len(argv) == 6 else 35
    func = measure if argv[0] == 'measure' else profile
    print(json.dumps(func(argv[1], int(argv[2]), int(argv[3]), int(argv[4]), seed)))


if __name__ == '__main__':
    main(sys.argv[1:])
