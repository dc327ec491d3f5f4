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
import hashlib
import json
import os
import re
import subprocess

import pytest

from ipmasq_lab import cni, netlab
from ipmasq_lab.topology import NO_REPLY, NODE_CL4, NODE_CL6, NODE_EXT4, NODE_EXT6, POD4, Topology

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

            # Our policy covers IPv6 here (the network is dual-stack; ipv6 false would leave it on).
            res = four_steps(topo, tree, {'root': tree.root, 'ipv6': True})
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
            res = run(topo.node, topo.backend, {'root': tree.root, 'state': 'absent', 'ipv6': True}, ['apply1', 'apply2'])
            assert res['apply1']['changed'] is True and res['apply2']['changed'] is False
            assert open(net.path).read() == original
            other.delete(other_pod, 'o1')
        finally:
            other_pod.delete()
            net.remove()
            other.remove()


def test_check_diff_and_all_or_nothing(tree, conf_dir):
    """Two network files (a .conflist and a single-plugin .conf), the second
    immutable: the run fails naming it, the first file is as it was, and the
    running pod's CNI rules are all still there.  Once the second can be
    written, check mode shows both edits as diffs and changes nothing."""
    backend = netlab.Backend('nft')
    node, pod = netlab.Netns('node'), netlab.Netns('pod')
    net = cni.Network(node, conf_dir, NET, backend=backend, subnet6=None)
    single = os.path.join(conf_dir, '20-single.conf')
    single_text = ('{"cniVersion": "0.4.0", "name": "single", "type": "ptp", "ipMasq": true,\n '
                   '"ipam": {"type": "host-local", "subnet": "10.244.9.0/24"}}\n')
    with open(single, 'w') as handle:
        handle.write(single_text)
    try:
        net.add(pod, 'c1')
        masq = [line for line in netlab.nat_rules(backend.save(node)) if COMMENT.search(line)]
        assert len(masq) == 3
        original = open(net.path).read()
        subprocess.run(['chattr', '+i', single], check=True)
        try:
            res = run(node, backend, {'root': tree.root})['apply1']
        finally:
            subprocess.run(['chattr', '-i', single], check=True)
        assert res.get('failed') and '20-single.conf' in res['msg'] and 'chattr' in res['msg'], res['msg']
        assert open(net.path).read() == original and open(single).read() == single_text
        assert [line for line in netlab.nat_rules(backend.save(node)) if COMMENT.search(line)] == masq
        assert not [name for name in os.listdir(conf_dir) if name.endswith('~') or '.ipmasq-tmp' in name]

        rules_before = netlab.nat_rules(backend.save(node))
        check = run(node, backend, {'root': tree.root}, ['check1'])['check1']
        assert check['changed'] is True and check['msg'].startswith('cni: would edit 2 files'), check['msg']
        assert [d['before_header'] for d in check['diff']] == [CONF_DIR + '/10-imqnet.conflist',
                                                               CONF_DIR + '/20-single.conf']
        assert check['diff'][1]['after'] == single_text.replace('"ipMasq": true', '"ipMasq": false')
        assert len(check['removed_rules']) == 3
        assert open(net.path).read() == original and open(single).read() == single_text
        assert netlab.nat_rules(backend.save(node)) == rules_before
        net.delete(pod, 'c1')
    finally:
        subprocess.run(['chattr', '-i', single], check=False)
        node.delete()
        pod.delete()
        net.remove()
        backend.remove()


# The bridge plugin's nftables flavour (plugins >= 1.5, "ipMasqBackend":
# "nftables"; Debian 12's 1.1.1 does not have it): what pkg/ip/
# ipmasq_nftables_linux.go writes for one container of imqnet (the topology's
# pod) and one of another network, as nft -f input.
NFT_FLAVOUR = '''table inet cni_plugins_masquerade {
    comment "Masquerading for plugins from github.com/containernetworking/plugins"
    chain masq_checks {
        comment "Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet"
        ip saddr 10.244.1.2 ip daddr != 10.244.1.0/24 masquerade comment "%(net)s-%(inst)s, net: imqnet, if: eth0, id: c1"
        ip saddr 10.244.9.2 ip daddr != 10.244.9.0/24 masquerade comment "%(other)s-%(inst)s, net: othernet, if: eth0, id: o1"
    }
    chain postrouting {
        type nat hook postrouting priority srcnat; policy accept;
        ip daddr 224.0.0.0/4 return
        ip6 daddr ff00::/8 return
        goto masq_checks
    }
}
'''


def _sha(text, digits=16):
    return hashlib.sha512(text.encode()).hexdigest()[:digits]


def test_nftables_flavour_rules_removed_on_packets(tree, conf_dir):
    """The plugin's nftables flavour: before, the pod is masqueraded by the
    rule in masq_checks; after cni_ip_masq, only imqnet's rule is gone (the
    table, its postrouting chain and othernet's rule stay) and our nftables
    table alone decides."""
    conf = cni.conflist(NET, subnet6=None)
    conf['plugins'][0]['ipMasqBackend'] = 'nftables'
    path = os.path.join(conf_dir, '10-imqnet.conflist')
    with open(path, 'w') as handle:
        json.dump(conf, handle, indent=2)
    ruleset = NFT_FLAVOUR % {'net': _sha(NET), 'other': _sha('othernet'), 'inst': _sha('eth0:c1')}
    with Topology.with_tools('nft', ipv6=False) as topo:
        topo.node.exec(['nft', '-f', '-'], input=ruleset)
        names = ('external', 'cluster-local')
        assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': NODE_CL4}
        topo.masq(backend='nftables')
        assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': NODE_CL4}

        res = run(topo.node, topo.backend, {'root': tree.root})['apply1']
        assert not res.get('failed'), res['msg']
        assert res['removed_rules'] == ['inet cni_plugins_masquerade masq_checks: ip saddr 10.244.1.2 ip daddr != '
                                        '10.244.1.0/24 masquerade comment "%s-%s, net: imqnet, if: eth0, id: c1"'
                                        % (_sha(NET), _sha('eth0:c1'))], res['removed_rules']
        left = topo.node.exec(['nft', 'list', 'table', 'inet', 'cni_plugins_masquerade']).stdout
        assert 'net: othernet' in left and 'goto masq_checks' in left and 'net: imqnet' not in left
        assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': POD4}


ROLE_PLAYBOOK = os.path.join(HERE, 'playbooks', 'role_sandbox.yml')


def role(topo, values, state='present'):
    rc, tasks = netlab.playbook(topo.node, ROLE_PLAYBOOK, extra_vars=dict(values, ip_masq_state=state),
                                backend=topo.backend)
    failed = [(name, res.get('msg')) for name, res in tasks if res.get('failed')]
    assert rc == 0 and not failed, failed
    return [name for name, res in tasks if res.get('changed')]


def test_the_role_switches_the_network_off_and_its_audit_passes(tree, conf_dir):
    """The whole role (ip_masq_cni: auto, its default) on the node of a
    running dual-stack CNI pod, our policy covering IPv6 too (with
    fd00::/8 kept): before, the CNI rule SNATs the pod; after, only ours
    decides, the audit (on_offenders fail) passes, a second run changes
    nothing, and absent puts the network file back.  (With IPv6 not ours
    the network stays on: test_cni_loading.py.)"""
    values = netlab.role_node_paths(tree.path('/node'))
    values.update(ip_masq_cni_conf_dirs=[conf_dir], ip_masq_install_packages=False, ip_masq_resync_systemctl=False,
                  ip_masq_docker='skip', ip_masq_flannel='skip', ip_masq_kubelet='skip', ip_masq_audit='fail',
                  ip_masq_enable_ipv6=True, ip_masq_nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'])
    ours = dict(OURS, external6=NODE_EXT6)
    with CniTopology.with_tools('nft', ipv6=True) as topo:
        net = cni.Network(topo.node, conf_dir, NET, backend=topo.backend)
        try:
            original = open(net.path).read()
            net.add(topo.pod, 'c1')
            assert topo.probe(RECEIVERS) == CNI_SNAT
            changed = role(topo, values)
            assert any('daemon' in name.lower() for name in changed), changed
            assert cni_masq(topo, 4) == [] and cni_masq(topo, 6) == []
            assert open(net.path).read() == original.replace('"ipMasq": true', '"ipMasq": false')
            assert topo.probe(RECEIVERS) == ours
            assert role(topo, values) == []
            role(topo, values, state='absent')
            assert open(net.path).read() == original
            net.delete(topo.pod, 'c1')
        finally:
            net.remove()
