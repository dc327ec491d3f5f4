"""ipmasq.agent.snat_explain against real packets.

In namespaces this test makes (topology.py's pod, node, external,
cluster-local and link-local hosts, plus a few addresses below), random
policies of ours (masq_chain, both policy backends, with exceptions,
masquerade-only, SNAT-to, source and interface selectors) run next to
foreign rules: a Docker-like rule, a kube-proxy-like KUBE-POSTROUTING with
its mark (set in nat PREROUTING for a port range, as kube-proxy marks
service traffic), a CNI bridge network's rules made by the real bridge
plugin (Debian's containernetworking-plugins, lab: ipmasq_lab/cni.py: a
container namespace on the node's bridge cni-imqx, its CNI-<hash> chain and
POSTROUTING rule), and two foreign nft tables at other priorities (50, before
iptables' 100, and 150, after; one rule of the first asks the conntrack
state, which the explanation does not evaluate, for a few ports).  For each
policy the test draws flows, asks the explanation, sends the real packets
(UDP datagrams and TCP SYNs) from the pod or the CNI container, reads the
source address each receiver saw (a raw socket in the receiver) and the
node's conntrack entry of each flow (``conntrack -L``: the reply tuple's
destination is the source the flow left with).  Wherever the explanation is
not ``unknown`` it must agree with both; ``unknown`` (base chains of equal
priority that disagree included) stays under 5% of the flows and names its
match.  Base chains of equal priority are proven apart, on packets: the
kernel runs the one registered last first, which no listing shows.

Cost: ``IMQ_EXPLAIN_CASES`` flows (default 200, over 4 policies: 2 per policy
backend; about 10 s), ``IMQ_EXPLAIN_SEED`` the random seed (default: a new
one, printed on failure).  A longer run: ``IMQ_EXPLAIN_CASES=1000`` (20
policies) took 59 s on 2 busy cores, 0.4% of its flows unknown (SNAT-to drawn
for both backends, jump_position first for 30% of the policies);
``IMQ_EXPLAIN_CASES=3000`` (60 policies) 341 s beside other test runs, 0.5%
unknown; every unknown a conntrack-state match, no tie of equal priority.

Needs root and the CNI plugins of the README's install step
(scripts/bootstrap.sh), like test_cni*.py; nothing happens in the root
network namespace (the session fixture of test_packets.py checks that).
"""
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from ipmasq_lab import cni, netlab, topology
from ipmasq_lab.explained import Sorted
# autouse: the root namespace stays as it was.
from test_packets import root_namespace_untouched  # noqa: F401 pylint: disable=unused-import
from ipmasq_lab.topology import NODE_CL4, NODE_EXT4, NODE_LL4, POD4, Topology

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)'),
    pytest.mark.skipif(not cni.installed(), reason='needs Debian\'s %s (scripts/bootstrap.sh): the packet test '
                       'runs a real CNI bridge network' % cni.PACKAGE),
]

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, 'flow_probe.py')
BATCH = os.path.join(HERE, 'explain_batch.py')
MODULES = os.path.join(netlab.ROOT, 'plugins', 'modules')
CASES = int(os.environ.get('IMQ_EXPLAIN_CASES', '200'))
FLOWS_PER_POLICY = 50
SEED = int(os.environ.get('IMQ_EXPLAIN_SEED') or random.randrange(1 << 30))

POD_B = '10.244.1.130'      # outside source_cidrs 10.244.1.0/25
POD_DOCKER = '172.17.0.2'   # a Docker-like container address
SNAT_ADDR = '203.0.113.7'   # second address of the node on to-ext
DOC_EXT = '192.0.2.10'      # second address of the external host
CL_B = '172.20.0.10'        # second address of the cluster-local host
CNI_SUBNET = '10.244.7.0/24'   # the CNI bridge network's (host-local gives its container .2)
CNI_POD = '10.244.7.2'
# The sources a flow is drawn from: our pods twice as often as Docker's and the CNI container.
SOURCES = (POD4, POD4, POD_B, POD_B, POD_DOCKER, CNI_POD)
# destination -> (receiver namespace role, the node's out interface, the node's address there)
DESTS = {
    topology.EXT4: ('external', 'to-ext', NODE_EXT4),
    DOC_EXT: ('external', 'to-ext', NODE_EXT4),
    topology.CL4: ('cluster', 'to-cluster', NODE_CL4),
    CL_B: ('cluster', 'to-cluster', NODE_CL4),
    topology.LL4: ('linklocal', 'to-ll', NODE_LL4),
}
MARKED = (31000, 31999)     # dports kube-proxy-like PREROUTING marks 0x4000

FOREIGN_IPT = """*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-POSTROUTING - [0:0]
-A PREROUTING -p udp -m udp --dport 31000:31999 -j MARK --set-xmark 0x4000/0x4000
-A PREROUTING -p tcp -m tcp --dport 31000:31999 -j MARK --set-xmark 0x4000/0x4000
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
COMMIT
"""
FOREIGN_NFT = """table ip early {
    chain post {
        type nat hook postrouting priority 50; policy accept;
        ip saddr 10.244.1.128/25 ip daddr 192.0.2.0/24 udp dport 30000-30499 snat to 203.0.113.9
        udp dport 30000-30004 ct state new snat to 203.0.113.9
    }
}
table inet late {
    chain post {
        type nat hook postrouting priority 150; policy accept;
        oifname "to-ll" meta l4proto tcp masquerade
    }
}
"""


RECEIVER_NO_RST = """table ip imq-receiver {
    chain out {
        type filter hook output priority 0; policy accept;
        tcp flags & rst == rst drop
    }
}
"""


class ExplainTopology(Topology):
    """topology.Topology (IPv4) plus: the pod also holds 10.244.1.130 and
    172.17.0.2; the node 203.0.113.7 (secondary, on to-ext); the external
    host 192.0.2.10 and the cluster-local host 172.20.0.10, each reached
    through the node's link to it, and sending no TCP reset; a CNI container (namespace ``cpod``,
    10.244.7.2) on the bridge network ``imqexplain`` that the real bridge
    plugin made on the node, ipMasq on (its conf file and state in a
    temporary directory); no reverse-path filter anywhere (the receivers
    need not answer: they only say what they saw)."""

    cni_net = None
    cni_conf = None

    def build(self):
        super().build()
        pod, node = self.ns['pod'], self.ns['node']
        self.ns['cpod'] = netlab.Netns('cpod')
        self.cni_conf = tempfile.mkdtemp(prefix='imq-cni-conf-')
        self.cni_net = cni.Network(node, self.cni_conf, 'imqexplain', backend=self.backend, subnet4=CNI_SUBNET,
                                   subnet6=None, bridge='cni-imqx')
        added = self.cni_net.add(self.ns['cpod'], 'imq-explain-ctr')
        assert [ip['address'] for ip in added['ips']] == [CNI_POD + '/24'], added
        netlab.addr(pod, 'eth0', POD_B + '/24')
        netlab.addr(pod, 'eth0', POD_DOCKER + '/16')
        netlab.addr(node, 'to-ext', SNAT_ADDR + '/24')
        netlab.addr(self.ns['external'], 'eth0', DOC_EXT + '/24')
        netlab.addr(self.ns['cluster'], 'eth0', CL_B + '/24')
        node.exec(['ip', 'route', 'add', '192.0.2.0/24', 'dev', 'to-ext'])
        node.exec(['ip', 'route', 'add', '172.20.0.0/24', 'dev', 'to-cluster'])
        for ns in self.ns.values():
            for conf in ('all', 'default'):
                ns.sysctl('net.ipv4.conf.%s.rp_filter' % conf, 0)
        for ifname in ('to-pod', 'to-ext', 'to-cluster', 'to-ll'):
            node.sysctl('net.ipv4.conf.%s.rp_filter' % ifname, 0)
        for role in ('external', 'cluster', 'linklocal', 'cpod'):
            self.ns[role].sysctl('net.ipv4.conf.eth0.rp_filter', 0)
        # A receiver's RST to a SYN would end the node's conntrack entry before the test reads it.
        for role in ('external', 'cluster', 'linklocal'):
            self.ns[role].exec(['nft', '-f', '-'], input=RECEIVER_NO_RST)

    def close(self):
        try:
            super().close()
        finally:
            if self.cni_net is not None:
                self.cni_net.remove()
            if self.cni_conf:
                shutil.rmtree(self.cni_conf, ignore_errors=True)

    def cni_rules(self):
        """The nat rules the bridge plugin wrote (commented ``name: "imqexplain" ...``)."""
        return [line for line in netlab.nat_rules(self.nat_save()) if 'imqexplain' in line]


def module(topo, name, args):
    """Run a module of ours in the node, directly (AnsibleModule reads its
    arguments from a file); its result."""
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        json.dump({'ANSIBLE_MODULE_ARGS': args}, f)
    try:
        env = dict(os.environ, PYTHONPATH=netlab.COLLECTIONS, LC_ALL='C.UTF-8')
        out = topo.node.exec([sys.executable, os.path.join(MODULES, name + '.py'), f.name], check=False,
                             env=env, timeout=120)
    finally:
        os.unlink(f.name)
    return json.loads(out.stdout)


def explain_all(topo, flows):
    env = dict(os.environ, PYTHONPATH=netlab.COLLECTIONS)
    out = topo.node.exec([sys.executable, BATCH], input=json.dumps(flows), env=env, timeout=300)
    return json.loads(out.stdout)


def send(topo, flows):
    """Send every flow from the pod (the CNI container's from its namespace);
    ``{(proto, dst, dport): source seen}``."""
    expect = collections.Counter(DESTS[f['dst']][0] for f in flows)
    sniffers = {}
    seen = {}
    try:
        for role, count in expect.items():
            proc = topo.ns[role].popen([sys.executable, PROBE, 'sniff', '--expect', str(count), '--timeout', '8'],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            sniffers[role] = proc
            line = proc.stdout.readline()
            assert line.strip() == 'READY', (role, line, proc.stderr.read() if proc.poll() is not None else '')
        wires = collections.defaultdict(list)
        for f in flows:
            wires['cpod' if f['src'] == CNI_POD else 'pod'].append([f['src'], f['dst'], f['proto'], f['dport']])
        for role, wire in sorted(wires.items()):
            topo.ns[role].exec([sys.executable, PROBE, 'send'], input=json.dumps(wire), timeout=60)
    finally:
        for proc in sniffers.values():
            try:
                out, _err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _err = proc.communicate(timeout=5)
            for line in (out or '').splitlines():
                parts = line.split()
                if len(parts) == 5 and parts[0] == 'SEEN':
                    seen[(parts[1], parts[2], int(parts[3]))] = parts[4]
    return seen


def conntrack_sources(topo):
    """The node's conntrack table: ``{(proto, src, dst, dport): the source
    the flow left with}`` (the reply tuple's destination: the translated
    source, or the flow's own when nothing translated it)."""
    out = topo.node.exec(['conntrack', '-L'], timeout=30).stdout
    found = {}
    for line in out.splitlines():
        words = line.split()
        if not words or words[0] not in ('tcp', 'udp'):
            continue
        pairs = [w.split('=', 1) for w in words if '=' in w]
        src = [v for k, v in pairs if k == 'src']
        dst = [v for k, v in pairs if k == 'dst']
        dport = [v for k, v in pairs if k == 'dport']
        if len(src) == 2 and len(dst) == 2 and dport:
            found[(words[0], src[0], dst[0], int(dport[0]))] = dst[1]
    return found


def draw_policy(rng, backend, kind=None):
    """A random policy of ours, either backend, SNAT-to included.  Our
    nftables table runs where jump_position puts it (srcnat + 1 for
    append, srcnat - 1 for first: both drawn), never at 100 beside the
    foreign iptables rules, so the kernel's order is known from the listing
    and no flow is a tie of ours (see
    test_equal_priority_chains_run_newest_first_and_no_listing_shows_it for
    the tie two other chains at 100 make)."""
    args = {'backend': backend, 'masq_link_local': rng.random() < 0.5}
    kinds = ('defaults', 'exceptions', 'masquerade-only', 'snat-to', 'sources', 'interfaces')
    kind = kind or rng.choice(kinds)
    if rng.random() < 0.3:
        args['jump_position'] = 'first'

    if kind == 'masquerade-only':
        args['masquerade_cidrs'] = rng.sample(['203.0.113.0/24', '192.0.2.0/24', '172.20.0.0/16',
                                               '169.254.10.0/24'], 2)
        if '169.254.10.0/24' in args['masquerade_cidrs']:
            args['masq_link_local'] = True      # else link-local keeps its source, and the module says so
    else:
        args['nonmasquerade_cidrs'] = sorted(rng.sample(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16',
                                                         '192.0.2.0/24'], rng.randint(1, 4)))
    if kind == 'exceptions' and '10.0.0.0/8' in args['nonmasquerade_cidrs']:
        args['exception_cidrs'] = ['10.10.0.0/24']
    if kind == 'snat-to' or rng.random() < 0.2:
        args['snat_to'] = [SNAT_ADDR]
    if kind == 'sources' or rng.random() < 0.2:
        args['source_cidrs'] = ['10.244.1.0/25']
    if kind == 'interfaces' or rng.random() < 0.2:
        args['out_interfaces'] = rng.sample(['to-ext', 'to-cluster', 'to-ll'], 2)
    return args


def draw_flows(rng, count):
    flows = []
    # A third of the flows is service traffic (kube-proxy's mark), the rest plain egress.
    ports = rng.sample(range(30000, 30500), count) + rng.sample(range(MARKED[0], MARKED[0] + 500), count // 2)
    used = set()
    for _i in range(count):
        dst = rng.choice(sorted(DESTS))
        proto = rng.choice(('udp', 'tcp'))
        dport = ports.pop(rng.randrange(len(ports)))
        while (proto, dst, dport) in used:
            dport = ports.pop()
        used.add((proto, dst, dport))
        flows.append({'src': rng.choice(SOURCES), 'dst': dst, 'proto': proto, 'dport': dport,
                      'out_interface': DESTS[dst][1],
                      'mark': '0x4000' if MARKED[0] <= dport <= MARKED[1] else '0'})
    return flows


def expected(flow, answer):
    """The source the receiver must see, by the explanation."""
    if answer['verdict'] == 'masquerade':
        return DESTS[flow['dst']][2]
    if answer['verdict'] == 'snat':
        return answer['to']
    return flow['src']


def test_explanation_agrees_with_real_packets():
    rng = random.Random(SEED)
    policies = max(2, -(-CASES // FLOWS_PER_POLICY))
    per_policy = -(-CASES // policies)
    started = time.monotonic()
    total, missing, tally = 0, [], Sorted(expected)
    unknown, ties, wrong = tally.unknown, tally.ties, tally.wrong
    verdicts, deciders = collections.Counter(), collections.Counter()
    with ExplainTopology.with_tools('nft', ipv6=False) as topo:
        topo.node.exec([topo.backend.tool('iptables-restore'), '--noflush'], input=FOREIGN_IPT)
        topo.node.exec(['nft', '-f', '-'], input=FOREIGN_NFT)
        cni_rules = topo.cni_rules()
        assert len(cni_rules) == 3 and any('-j MASQUERADE' in r for r in cni_rules), cni_rules
        for index in range(policies):
            backend = ('iptables', 'nftables')[index % 2]
            # The first policy of each backend translates with SNAT: every verdict is drawn in the shortest run.
            args = draw_policy(rng, backend, 'snat-to' if index < 2 else None)
            res = module(topo, 'masq_chain', args)
            assert not res.get('failed'), (SEED, args, res.get('msg'))
            topo.node.exec(['conntrack', '-F'], check=False)
            flows = draw_flows(rng, per_policy)
            answers = explain_all(topo, flows)
            seen = send(topo, flows)
            tracked = conntrack_sources(topo)
            for flow, answer in zip(flows, answers):
                total += 1
                verdicts[answer['verdict']] += 1
                deciders[(answer['decided_by'] or {}).get('owner')] += 1
                got = seen.get((flow['proto'], flow['dst'], flow['dport']))
                left = tracked.get((flow['proto'], flow['src'], flow['dst'], flow['dport']))
                if got is None or left is None:
                    missing.append((flow, answer['msg'], 'receiver saw %s, conntrack %s' % (got, left)))
                elif left != got:
                    wrong.append((args, flow, answer['msg'], 'receiver saw %s, conntrack says %s' % (got, left)))
                else:
                    tally.add((args,), flow, answer, got)
    took = time.monotonic() - started
    print('snat_explain packets: %d flows over %d policies in %.1f s (seed %d): %s; deciding owners %s; %d of the '
          'unknown are equal-priority chains that disagree' % (total, policies, took, SEED, dict(verdicts),
                                                               dict(deciders), len(ties)))
    assert not missing, (SEED, missing[:5])
    assert not wrong, (SEED, len(wrong), wrong[:5])
    # Every unknown counts, the equal-priority ones too: under 5% of the drawn flows, each named.
    assert (len(unknown) + len(ties)) * 20 < total, (SEED, len(unknown), len(ties), unknown[:5], ties[:5])
    # No tie: the only base chain at 100 here is iptables-nft's POSTROUTING; ours is at srcnat + 1 or
    # srcnat - 1 (jump_position), the foreign tables at 50 and 150 (at 100, ours made 1.5 to 2% of the flows ties).
    assert not ties, (SEED, len(ties), ties[:5])
    assert all(reason.startswith('cannot evaluate udp dport 30000-30004 ct state new')
               or reason.startswith('cannot evaluate ct state new') for _f, reason, _g in unknown), unknown
    # The draw reached every verdict (a test that can fail must see each one), and the CNI network's rule decided.
    assert verdicts['masquerade'] and verdicts['snat'] and verdicts['unchanged'], dict(verdicts)
    assert deciders['cni'], dict(deciders)


def test_module_answers_and_reads_only():
    """The module itself, on one node with ours and the foreign rules:
    every command it ran is a listing, the node is the same afterwards, bad
    input fails naming the value, and the answer names the deciding rule."""
    with ExplainTopology.with_tools('nft', ipv6=False) as topo:
        topo.node.exec([topo.backend.tool('iptables-restore'), '--noflush'], input=FOREIGN_IPT)
        topo.node.exec(['nft', '-f', '-'], input=FOREIGN_NFT)
        assert not module(topo, 'masq_chain', {'backend': 'iptables'}).get('failed')
        before = topo.rules_now()
        res = module(topo, 'snat_explain', {'src': POD4, 'dst': topology.EXT4, 'proto': 'udp', 'dport': '30101',
                                            'out_interface': 'to-ext', '_ansible_check_mode': True})
        assert not res.get('failed'), res
        assert res['verdict'] == 'masquerade' and res['changed'] is False
        assert res['decided_by']['owner'] == 'ip-masq-agent' and res['decided_by']['chain'] == 'IP-MASQ-AGENT'
        assert res['msg'].startswith('10.244.1.2 → 203.0.113.10: MASQUERADE by ours (IP-MASQ-AGENT rule ')
        assert 'after POSTROUTING rule 4 jumped there' in res['msg']     # the CNI container's rule is first
        listings = ('iptables', 'iptables-save', 'iptables-legacy-save', 'nft', 'ip6tables', 'ip6tables-save')
        assert all(c.split()[0].rsplit('/', 1)[-1] in listings for c in res['commands']), res['commands']
        # Docker's rule decides for its container; kube-proxy's for marked traffic.
        res = module(topo, 'snat_explain', {'src': POD_DOCKER, 'dst': topology.CL4, 'proto': 'tcp',
                                            'out_interface': 'to-cluster'})
        assert (res['verdict'], res['decided_by']['owner']) == ('masquerade', 'docker'), res
        res = module(topo, 'snat_explain', {'src': POD4, 'dst': topology.CL4, 'proto': 'icmp',
                                            'out_interface': 'to-cluster', 'mark': '0x4000'})
        assert (res['verdict'], res['decided_by']['owner']) == ('masquerade', 'kube-proxy'), res
        # The CNI bridge network's own chain decides for its container (the real plugin's rules).
        res = module(topo, 'snat_explain', {'src': CNI_POD, 'dst': topology.EXT4, 'proto': 'udp', 'dport': '30101',
                                            'out_interface': 'to-ext'})
        assert (res['verdict'], res['decided_by']['owner']) == ('masquerade', 'cni'), res
        assert res['decided_by']['chain'].startswith('CNI-') and res['decided_by']['position'] == 2, res
        res = module(topo, 'snat_explain', {'src': CNI_POD, 'dst': '10.244.7.9', 'proto': 'udp', 'dport': '30101',
                                            'out_interface': 'cni-imqx'})
        assert res['verdict'] == 'unchanged' and any(s['action'] == 'accept' for s in res['path']), res
        # The early nft table asks the conntrack state for a few ports: unknown, named, where it is.
        res = module(topo, 'snat_explain', {'src': POD4, 'dst': topology.EXT4, 'proto': 'udp', 'dport': '30001',
                                            'out_interface': 'to-ext'})
        assert res['verdict'] == 'unknown', res
        assert res['reason'] == 'cannot evaluate ct state new, in nft ip early chain post rule 2', res['reason']
        # Without the out interface, Docker's "! -o docker0" cannot be evaluated: unknown, named.
        res = module(topo, 'snat_explain', {'src': POD_DOCKER, 'dst': topology.CL4, 'proto': 'tcp'})
        assert res['verdict'] == 'unknown' and '! -o docker0 (no out_interface given)' in res['reason'], res
        res = module(topo, 'snat_explain', {'src': '10.244.1.2/24', 'dst': topology.CL4})
        assert res.get('failed') and "src: '10.244.1.2/24' is not an IPv4 or IPv6 address" in res['msg'], res
        assert topo.rules_now() == before


EQUAL_NFT = """table inet other {
    chain post {
        type nat hook postrouting priority srcnat; policy accept;
        ip saddr 10.244.1.2 snat ip to 203.0.113.7
    }
}
"""


def _table_order(topo):
    """What the nft listing says of the order of the tables: each table in listing order, and which has the higher handle."""
    tables = [t['table'] for t in json.loads(topo.node.exec(['nft', '-j', 'list', 'tables']).stdout)['nftables']
              if 'table' in t]
    names = ['%s %s' % (t['family'], t['name']) for t in tables]
    handles = dict(('%s %s' % (t['family'], t['name']), t['handle']) for t in tables)
    return names, sorted(names, key=handles.get)


def test_equal_priority_chains_run_newest_first_and_no_listing_shows_it():
    """Two nat postrouting base chains at priority 100 that translate one
    flow differently: iptables-nft's POSTROUTING (SNAT to .8) and a table of
    nft's own (SNAT to .7).  The kernel keeps a hook's base chains sorted by
    priority and puts a new one before those of equal priority
    (nf_hook_entries_grow, also for the nat core's own list of nat chains),
    so the chain registered last runs first; a chain is registered when it is
    made.  iptables-nft makes its POSTROUTING only when a rule needs it, so
    its table can be older than the chain: here the nat table is made
    first, the nft table next, the POSTROUTING chain last.  The packet
    leaves with .8; the nft table made again (delete and add in one
    transaction, as nft -f replaces a table), it leaves with .7.  Ours is
    not here: our table's chain is never at 100 (srcnat + 1 or srcnat - 1
    by jump_position, test_nft_priority.py), so it is never part of such a
    tie; any two other tools' chains at 100 are.  The listing (tables, their order and handles) is the same order both
    times, so nothing the explanation can read tells the order: it answers
    unknown, names the chains and lists both candidates, and the packet
    took one of them."""
    flow = {'src': POD4, 'dst': topology.EXT4, 'proto': 'udp', 'dport': 30100, 'out_interface': 'to-ext'}
    seen, listings, answers = [], [], []
    with Topology.with_tools('nft', ipv6=False) as topo:
        ipt = topo.backend.tool('iptables')
        topo.node.exec([ipt, '-w', '-t', 'nat', '-A', 'PREROUTING', '-s', '192.0.2.99', '-j', 'ACCEPT'])
        topo.node.exec(['nft', '-f', '-'], input=EQUAL_NFT)
        topo.node.exec([ipt, '-w', '-t', 'nat', '-A', 'POSTROUTING', '-s', POD4, '-j', 'SNAT', '--to-source',
                        '203.0.113.8'])
        for again in (False, True):
            if again:
                topo.node.exec(['nft', '-f', '-'], input='delete table inet other\n' + EQUAL_NFT)
            topo.node.exec(['conntrack', '-F'], check=False)
            answers.append(module(topo, 'snat_explain', dict(flow, dport=str(flow['dport']))))
            listings.append(_table_order(topo))
            seen.append(send(topo, [flow]).get(('udp', flow['dst'], flow['dport'])))
    assert seen == ['203.0.113.8', '203.0.113.7'], seen
    assert listings[0] == listings[1] == (['ip nat', 'inet other'], ['ip nat', 'inet other']), listings
    for answer in answers:
        assert answer['verdict'] == 'unknown' and answer['decided_by'] is None, answer
        assert answer['reason'].startswith('base chains of equal priority 100 translate the flow differently '
                                           '(iptables-nft nat POSTROUTING, nft inet other post): the kernel runs '
                                           'the one registered last first, and no listing shows which that is'), \
            answer['reason']
        assert sorted((c['verdict'], c['to'], c['decided_by']['backend']) for c in answer['candidates']) == [
            ('snat', '203.0.113.7', 'nft'), ('snat', '203.0.113.8', 'iptables-nft')], answer['candidates']
