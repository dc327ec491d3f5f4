"""The CNI networks the runtime loads and what their keys mean, on the real
bridge plugin (Debian's containernetworking-plugins in /usr/lib/cni) run
inside a node namespace the test made: a dot-file network, a key spelled
with a Unicode fold (``ipMaſq``), kube-flannel's network through flannel's
plugin (EMULATED: Debian does not package it; ipmasq_lab/cni_runtime.py's
``flannel_delegate`` applies its one rule, ``ipMasq = !FLANNEL_IPMASQ`` when
the delegate has no key ``ipMasq``, and the real bridge plugin runs the
delegate), and a dual-stack network when our policy does not cover IPv6.

Needs root; nothing happens in the root network namespace; the files are
in a temporary tree the module sees through ``root``.
"""
import os

import pytest

from ipmasq_lab import cni, cni_runtime, netlab
from ipmasq_lab.topology import NODE_CL4, NODE_CL6, NODE_EXT4, NODE_EXT6, NO_REPLY
from test_cni import CONF_DIR, CniTopology, cni_masq, role, rules, run

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)'),
    pytest.mark.skipif(not cni.installed(), reason='needs Debian\'s %s (scripts/bootstrap.sh)' % cni.PACKAGE),
]

# kube-flannel's network file (kube-flannel.yml, cni-conf.json).
FLANNEL = '''{
  "name": "cbr0",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "flannel",
      "delegate": {
        "hairpinMode": true,
        "isDefaultGateway": true
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
'''
SUBNET_ENV = 'FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=false\n'


@pytest.fixture
def conf_dir(tree):
    real = tree.path(CONF_DIR)
    os.makedirs(real)
    return real


SWITCHED = 'the plugin no longer masquerades its containers'


def ours(result):
    """The module's own warnings (not ansible-core's about the templated args of the test playbook), less the
    one each run that switches a network off gives by design (issue 32 item 13: test_cni_run holds it)."""
    return [w for w in result.get('warnings') or [] if 'argsplat' not in w and SWITCHED not in w]


def _pod_addr(result, family=4):
    return [ip['address'].split('/')[0] for ip in result['ips'] if (':' in ip['address']) == (family == 6)][0]


def test_flannel_delegate_gets_ipmasq_false_on_packets(tree, conf_dir):
    """flanneld's masquerading is off (FLANNEL_IPMASQ=false, as the role
    leaves it): before, flannel's plugin (emulated) hands the bridge plugin
    ipMasq true and a new pod is masqueraded; after cni_ip_masq, the delegate
    says false, the running pod's rules are gone, a new pod gets none and
    only ours decides; a second run changes nothing; absent puts the file
    back byte for byte."""
    env = tree.path('/run/flannel/subnet.env')
    os.makedirs(os.path.dirname(env))
    with open(env, 'w') as handle:
        handle.write(SUBNET_ENV)
    with CniTopology.with_tools('nft', ipv6=False) as topo:
        net = cni_runtime.FileNetwork(topo.node, conf_dir, '10-flannel.conflist', FLANNEL, backend=topo.backend,
                                      flannel_ipmasq=False, flannel_subnet4='10.244.7.0/24')
        try:
            assert net.conf()['plugins'][0]['ipMasq'] is True     # the emulated rule: !FLANNEL_IPMASQ
            net.add(topo.pod, 'c1')
            assert len(cni_masq(topo, 4, 'cbr0')) == 3
            topo.masq()
            names = ('external', 'cluster-local')
            assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': NODE_CL4}

            res = run(topo.node, topo.backend, {'root': tree.root}, ['apply1', 'apply2'])
            assert not res['apply1'].get('failed'), res['apply1']['msg']
            assert res['apply1']['changed'] is True and res['apply2']['changed'] is False, res
            assert any('delegate of flannel' in m for m in res['apply1']['messages']), res['apply1']['messages']
            assert not ours(res['apply1'])
            assert net.conf()['plugins'][0]['ipMasq'] is False
            assert cni_masq(topo, 4, 'cbr0') == []

            net.delete(topo.pod, 'c1')
            pod = _pod_addr(net.add(topo.pod, 'c2'))
            assert cni_masq(topo, 4, 'cbr0') == []
            assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': pod}
            net.delete(topo.pod, 'c2')

            res = run(topo.node, topo.backend, {'root': tree.root, 'state': 'absent'})
            assert res['apply1']['changed'] is True
            with open(net.path) as handle:
                assert handle.read() == FLANNEL
        finally:
            net.remove()


def _bridge_file(name, subnet, bridge, masq):
    return ('{\n  "cniVersion": "0.4.0",\n  "name": "%s",\n  "type": "bridge",\n  "bridge": "%s",\n'
            '  "isGateway": true,\n  %s,\n  "ipam": {"type": "host-local", "ranges": [[{"subnet": "%s"}]],'
            ' "routes": [{"dst": "0.0.0.0/0"}]}\n}\n' % (name, bridge, masq, subnet))


def test_dot_file_and_folded_key_networks_are_switched_off(tree, conf_dir):
    """A dot-file network (libcni loads it) and one whose ipMasq is spelled
    twice, false then ``ipMaſq`` (U+017F) true: the real bridge plugin
    masquerades both.  After cni_ip_masq (a second run changes nothing),
    new containers of either get no masquerade rule, and the pod of the first
    is seen by the cluster-local host with its own address."""
    hidden = _bridge_file('hidnet', '10.244.7.0/24', 'cni-imq0', '"ipMasq": true')
    folded = _bridge_file('foldnet', '10.244.8.0/24', 'cni-imq1', '"ipMasq": false, "ipMa\u017fq": true')
    with CniTopology.with_tools('nft', ipv6=False) as topo:
        first = cni_runtime.FileNetwork(topo.node, conf_dir, '.10-hidden.conf', hidden, backend=topo.backend)
        second = cni_runtime.FileNetwork(topo.node, conf_dir, '20-fold.conf', folded, backend=topo.backend)
        other_pod = netlab.Netns('foldpod')
        try:
            first.add(topo.pod, 'c1')
            second.add(other_pod, 'f1')
            assert len(cni_masq(topo, 4, 'hidnet')) == 3 and len(cni_masq(topo, 4, 'foldnet')) == 3
            topo.masq()
            names = ('external', 'cluster-local')
            assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': NODE_CL4}

            res = run(topo.node, topo.backend, {'root': tree.root}, ['apply1', 'apply2'])
            assert res['apply1']['changed'] is True and res['apply2']['changed'] is False, res
            assert sorted(res['apply1']['edited']) == [CONF_DIR + '/.10-hidden.conf', CONF_DIR + '/20-fold.conf']
            with open(second.path) as handle:
                assert handle.read() == folded.replace('"ipMa\u017fq": true', '"ipMa\u017fq": false')
            assert cni_masq(topo, 4, 'hidnet') == [] and cni_masq(topo, 4, 'foldnet') == []

            first.delete(topo.pod, 'c1')
            second.delete(other_pod, 'f1')
            pod = _pod_addr(first.add(topo.pod, 'c2'))
            second.add(other_pod, 'f2')
            assert cni_masq(topo, 4, 'hidnet') == [] and cni_masq(topo, 4, 'foldnet') == []
            assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': pod}
            first.delete(topo.pod, 'c2')
            second.delete(other_pod, 'f2')
        finally:
            other_pod.delete()
            first.remove()
            second.remove()


def test_dual_stack_network_stays_on_while_ipv6_is_not_ours(tree, conf_dir):
    """Our policy does not cover IPv6 (ipv6 false, the default): a dual-stack
    network keeps its masquerading, file and rules (its IPv6 pod still reaches
    the external host, masqueraded), and the warning names the file and what
    to set.  With ipv6 true, it is switched off."""
    with CniTopology.with_tools('nft', ipv6=True) as topo:
        net = cni.Network(topo.node, conf_dir, 'dualnet', backend=topo.backend)
        try:
            with open(net.path) as handle:
                original = handle.read()
            net.add(topo.pod, 'c1')
            before = rules(topo, 4), rules(topo, 6)
            assert len(cni_masq(topo, 4, 'dualnet')) == 3 and len(cni_masq(topo, 6, 'dualnet')) == 3
            names = ('external', 'external6', 'cluster-local6')
            assert topo.probe(names) == {'external': NODE_EXT4, 'external6': NODE_EXT6, 'cluster-local6': NODE_CL6}

            res = run(topo.node, topo.backend, {'root': tree.root}, ['check1', 'apply1', 'apply2'])
            for step in ('check1', 'apply1', 'apply2'):
                assert res[step]['changed'] is False and res[step]['edited'] == [], (step, res[step])
                assert res[step]['removed_rules'] == []
                (warning,) = ours(res[step])
                assert CONF_DIR + '/10-dualnet.conflist' in warning and 'IPv6' in warning, warning
                assert 'Set ip_masq_enable_ipv6: true (our policy then covers IPv6) or ip_masq_cni: skip' in warning
            with open(net.path) as handle:
                assert handle.read() == original
            assert (rules(topo, 4), rules(topo, 6)) == before
            assert topo.probe(names) == {'external': NODE_EXT4, 'external6': NODE_EXT6, 'cluster-local6': NODE_CL6}
            # A new container of it still gets its IPv6 masquerading.
            net.delete(topo.pod, 'c1')
            net.add(topo.pod, 'c2')
            assert len(cni_masq(topo, 6, 'dualnet')) == 3

            res = run(topo.node, topo.backend, {'root': tree.root, 'ipv6': True})
            assert res['apply1']['changed'] is True and not ours(res['apply1']), res['apply1']
            assert cni_masq(topo, 4, 'dualnet') == [] and cni_masq(topo, 6, 'dualnet') == []
            assert topo.probe(('external6',)) == {'external6': NO_REPLY}
            net.delete(topo.pod, 'c2')
        finally:
            net.remove()


def test_the_role_leaves_a_dual_stack_network_on_and_says_what_to_set(tree, conf_dir):
    """The role with its defaults (ip_masq_enable_ipv6 false, ip_masq_cni
    auto): the dual-stack network's file and rules stay and the run warns,
    naming the file and the variables; with ip_masq_enable_ipv6 true the
    network is switched off."""
    values = netlab.role_node_paths(tree.path('/node'))
    values.update(ip_masq_cni_conf_dirs=[conf_dir], ip_masq_install_packages=False, ip_masq_resync_systemctl=False,
                  ip_masq_docker='skip', ip_masq_flannel='skip', ip_masq_kubelet='skip', ip_masq_audit='warn')
    with CniTopology.with_tools('nft', ipv6=True) as topo:
        net = cni.Network(topo.node, conf_dir, 'dualnet', backend=topo.backend)
        try:
            with open(net.path) as handle:
                original = handle.read()
            net.add(topo.pod, 'c1')
            before = cni_masq(topo, 4, 'dualnet'), cni_masq(topo, 6, 'dualnet')
            rc, tasks = netlab.playbook(topo.node, os.path.join(os.path.dirname(__file__), 'playbooks',
                                                                'role_sandbox.yml'),
                                        extra_vars=dict(values, ip_masq_state='present'), backend=topo.backend)
            assert rc == 0, [(n, r.get('msg')) for n, r in tasks if r.get('failed')]
            warnings = ' '.join(w for _n, r in tasks for w in r.get('warnings') or [])
            assert conf_dir + '/10-dualnet.conflist' in warnings and 'ip_masq_enable_ipv6: true' in warnings, warnings
            with open(net.path) as handle:
                assert handle.read() == original
            assert (cni_masq(topo, 4, 'dualnet'), cni_masq(topo, 6, 'dualnet')) == before

            role(topo, dict(values, ip_masq_enable_ipv6=True))
            assert cni_masq(topo, 4, 'dualnet') == [] and cni_masq(topo, 6, 'dualnet') == []
            assert open(net.path).read() == original.replace('"ipMasq": true', '"ipMasq": false')
            net.delete(topo.pod, 'c1')
        finally:
            net.remove()
