"""CNI networks as a source of SNAT (ipmasq.agent.cni_ip_masq), on real
packets: Debian's containernetworking-plugins (bridge, ptp, portmap,
host-local) run with CNI_COMMAND=ADD/DEL inside the node namespace of a
topology (topology.py), from network files in a temporary tree that the
module sees through its ``root`` option (lab: ipmasq_lab/cni.py).

The pod of the CNI network (10.244.7.0/24, fd00:244:7::/64) talks to the
topology's cluster-local host (10.10.0.10, route back to 10.244.0.0/16) and
external host (203.0.113.10, no route back).  The cluster-local host shows
who decides: the bridge plugin's ``"ipMasq": true`` masquerades it (it sees
the node's 10.10.0.1); our policy keeps 10.0.0.0/8 (it sees the pod).

Needs root; nothing happens in the root network namespace, nothing reads or
writes this machine's /etc/cni or /var/lib/cni.
"""
import os
import re

import pytest

from ipmasq_lab import cni, netlab
from ipmasq_lab.topology import NO_REPLY, NODE_CL4, NODE_CL6, NODE_EXT4, NODE_EXT6, Topology

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)'),
    pytest.mark.skipif(not cni.installed(), reason='needs Debian\'s %s (scripts/bootstrap.sh)' % cni.PACKAGE),
]

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, 'playbooks', 'cni_ip_masq.yml')
FOUR = ['check1', 'apply1', 'check2', 'apply2']
CONF_DIR = '/etc/cni/net.d'
NET = 'imqnet'
POD_CNI4, POD_CNI6 = '10.244.7.2', 'fd00:244:7::2'
RECEIVERS = ('external', 'cluster-local', 'external6', 'cluster-local6')
# The bridge plugin masquerades everything that leaves its subnet, IPv4 and IPv6.
CNI_SNAT = {'external': NODE_EXT4, 'cluster-local': NODE_CL4, 'external6': NODE_EXT6, 'cluster-local6': NODE_CL6}
# Our defaults (10.0.0.0/8 kept, no IPv6): ours alone decides.
OURS = {'external': NODE_EXT4, 'cluster-local': POD_CNI4, 'external6': NO_REPLY, 'cluster-local6': POD_CNI6}
COMMENT = re.compile(r'name: \\"([^"\\]*)\\" id: ')


@pytest.fixture(scope='module', autouse=True)
def root_namespace_untouched():
    """The root namespace's nat tables and nft tables are the same after these tests as before."""
    def state():
        return (netlab.nat_rules(netlab.run(['iptables-save', '-t', 'nat']).stdout),
                netlab.nat_rules(netlab.run(['ip6tables-save', '-t', 'nat']).stdout),
                netlab.run(['nft', 'list', 'tables']).stdout)
    before = state()
    yield
    assert state() == before


class CniTopology(Topology):
    """The topology with one more pod, ``cnipod``, that only the CNI plugin connects."""

    def build(self):
        Topology.build(self)
        self.ns['cnipod'] = netlab.Netns('cnipod')

    @property
    def pod(self):
        return self.ns['cnipod'] if 'cnipod' in self.ns else self.ns['pod']


def run(node, backend, margs, steps=('apply1',)):
    rc, tasks = netlab.playbook(node, PLAYBOOK, extra_vars={'margs': margs, 'steps': list(steps)}, backend=backend)
    res = {name.replace('Step ', ''): r for name, r in tasks if not r.get('skipped')}
    assert res, 'no step ran (rc=%d)' % rc
    return res


def save(topo, family, counters=False):
    tool = 'iptables-save' if family == 4 else 'ip6tables-save'
    return topo.node.exec([topo.backend.tool(tool), '-t', 'nat'] + (['-c'] if counters else [])).stdout


def rules(topo, family):
    return netlab.nat_rules(save(topo, family))


def cni_masq(topo, family, network=NET):
    """The rules commented for ``network`` by the bridge/ptp plugins (not portmap's "dnat name: ...")."""
    return [line for line in rules(topo, family) if COMMENT.search(line) and COMMENT.search(line).group(1) == network
            and 'dnat name' not in line and ':CNI-' not in line]


def portmap(topo, family):
    return [line for line in rules(topo, family) if 'HOSTPORT' in line or 'CNI-DN-' in line or 'dnat name' in line]


def packets(topo, chain, target, family=4):
    """Packets counted by the rules of ``chain`` that jump to ``target``."""
    total = 0
    for line in save(topo, family, counters=True).splitlines():
        m = re.match(r'^\[(\d+):\d+\] -A (\S+) .* -j (\S+)', line)
        if m and m.group(2) == chain and m.group(3) == target:
            total += int(m.group(1))
    return total


def four_steps(topo, tree, margs):
    """check / apply / check / apply: changed, changed, not, not; check mode changes no file and no rule."""
    before = tree.snapshot(), tree.all_files(), rules(topo, 4), rules(topo, 6)
    res = run(topo.node, topo.backend, margs, ['check1'])
    assert not res['check1'].get('failed'), res['check1'].get('msg')
    assert res['check1']['changed'] is True, res['check1']
    assert (tree.snapshot(), tree.all_files(), rules(topo, 4), rules(topo, 6)) == before, 'check mode changed something'
    res.update(run(topo.node, topo.backend, margs, ['apply1', 'check2', 'apply2']))
    for step, want in zip(FOUR, (True, True, False, False)):
        assert not res[step].get('failed'), (step, res[step].get('msg'))
        assert res[step]['changed'] is want, (step, res[step].get('messages'))
    assert res['check1']['edited'] == res['apply1']['edited']
    assert res['check1']['removed_rules'] == res['apply1']['removed_rules']
    assert res['check2']['msg'] == res['apply2']['msg'] == 'cni: no change'
    return res


@pytest.fixture
def conf_dir(tree):
    real = tree.path(CONF_DIR)
    os.makedirs(real)
    return real


@pytest.mark.parametrize('tools', ['nft', 'legacy'])
def test_bridge_network_masquerade_off_ours_decides(tools, tree, conf_dir):
    """Before: the CNI rule SNATs the pod (even with our chain in place).
    After cni_ip_masq: the file says false, the running pod's CNI rules are
    gone, and only ours decides (its counters say so); a DEL with the old
    configuration still succeeds; a DEL/ADD cycle with the edited file
    brings no CNI masquerade rule back; portmap's rules and another
    network's rules are untouched; absent restores the file."""
    with CniTopology.with_tools(tools, ipv6=True) as topo:
        net = cni.Network(topo.node, conf_dir, NET, backend=topo.backend, portmap=True)
        # Another network (not in the module's directory): a ptp network with its own pod.
        other_dir = tree.path('/opt/other-net.d')
        os.makedirs(other_dir)
        other = cni.Network(topo.node, other_dir, 'othernet', plugin='ptp', subnet4='10.244.8.0/24',
                            subnet6=None, backend=topo.backend)
        other_pod = netlab.Netns('otherpod')
        try:
            original = open(net.path).read()
            result = net.add(topo.pod, 'c1', port_mappings=[{'hostPort': 8081, 'containerPort': 8080,
                                                             'protocol': 'tcp'}])
            assert [ip['address'] for ip in result['ips']] == [POD_CNI4 + '/24', POD_CNI6 + '/64']
            other.add(other_pod, 'o1')
            assert len(cni_masq(topo, 4)) == 3 and len(cni_masq(topo, 6)) == 3
            others = cni_masq(topo, 4, 'othernet')
            assert len(others) == 3
            ports = portmap(topo, 4), portmap(topo, 6)
            assert ports[0], 'portmap wrote no rule'

            # Before: the bridge plugin SNATs everything that leaves its subnet.
            assert topo.probe(RECEIVERS) == CNI_SNAT
            # Our policy alone does not help: the CNI jump comes first in POSTROUTING.
            topo.masq()
            assert topo.probe(RECEIVERS) == CNI_SNAT
            (jump,) = [line for line in cni_masq(topo, 4) if line.startswith('-A POSTROUTING ')]
            cni_chain = jump.split(' -j ')[-1]
            assert packets(topo, cni_chain, 'MASQUERADE') > 0

            res = four_steps(topo, tree, {'root': tree.root})
            apply1 = res['apply1']
            assert apply1['edited'] == [CONF_DIR + '/10-imqnet.conflist']
            assert apply1['restart_required'] is False
            assert len(apply1['removed_rules']) == 6, apply1['removed_rules']
            edited = open(net.path).read()
            assert edited == original.replace('"ipMasq": true', '"ipMasq": false')
            diff = res['check1']['diff'][0]
            assert diff['before'] == original and diff['after'] == edited
            # The running pod's masquerade rules are gone (the emptied chain stays for DEL) ...
            assert cni_masq(topo, 4) == [] and cni_masq(topo, 6) == []
            assert ':%s -' % cni_chain in rules(topo, 4)
            # ... portmap's and the other network's are untouched.
            assert (portmap(topo, 4), portmap(topo, 6)) == ports
            assert cni_masq(topo, 4, 'othernet') == others

            # After: only ours decides, and its rules counted the packets.
            ours_masq, ours_return = packets(topo, 'IP-MASQ-AGENT', 'MASQUERADE'), packets(topo, 'IP-MASQ-AGENT', 'RETURN')
            assert topo.probe(RECEIVERS) == OURS
            assert packets(topo, 'IP-MASQ-AGENT', 'MASQUERADE') > ours_masq
            assert packets(topo, 'IP-MASQ-AGENT', 'RETURN') > ours_return

            # A runtime's DEL with its cached copy of the old file still succeeds, and removes the empty chain.
            edited_text = edited
            with open(net.path, 'w') as handle:
                handle.write(original)
            net.delete(topo.pod, 'c1')
            with open(net.path, 'w') as handle:
                handle.write(edited_text)
            assert ':%s -' % cni_chain not in rules(topo, 4)

            # ADD / DEL / ADD with the edited file: no CNI masquerade rule comes back.
            net.add(topo.pod, 'c2')
            net.delete(topo.pod, 'c2')
            addr4, addr6 = [ip['address'].split('/')[0] for ip in net.add(topo.pod, 'c3')['ips']]
            assert cni_masq(topo, 4) == [] and cni_masq(topo, 6) == []
            assert topo.probe(RECEIVERS) == dict(OURS, **{'cluster-local': addr4, 'cluster-local6': addr6})
            assert cni_masq(topo, 4, 'othernet') == others
            net.delete(topo.pod, 'c3')

            # absent: the original file back, byte for byte.
            res = run(topo.node, topo.backend, {'root': tree.root, 'state': 'absent'}, ['apply1', 'apply2'])
            assert res['apply1']['changed'] is True and res['apply2']['changed'] is False
            assert open(net.path).read() == original
            other.delete(other_pod, 'o1')
        finally:
            other_pod.delete()
            net.remove()
            other.remove()
