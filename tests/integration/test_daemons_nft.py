"""docker_ip_masq and flannel_ip_masq against Docker's nftables firewall
backend and flannel's nftables mode, and the SNAT audit on the same tables,
run through ansible-playbook as a user would, on real nft inside network
namespaces of their own (never the root namespace).

Debian's docker.io does not ship Docker's nftables backend (and flanneld is
not packaged), so no daemon writes these tables here: each test loads them
with ``nft -f`` exactly as the daemons write them, from the files in
tests/unit/plugins/module_utils/snat_audit_data/, whose header names the
public source each is taken from:

- docker_bridges.nft: moby/moby
  integration/network/bridge/nftablesdoc/generated/usernet-portmap-noproxy.md
  at d99231d10cad1982e06b2aedd74dd5fb71125bbc (``ip docker-bridges`` of a
  daemon with the userland proxy off, its default bridge docker0 and a
  user-defined network bridge1);
- docker_bridges_ipv6.nft: moby/moby's nftabler golden files
  (libnetwork/drivers/bridge/internal/nftabler/testdata/
  TestNftabler_hairpin=true,internal=false,icc=true,masq=true,snat=false,
  gwm=nat,bindlh=false__ip.golden at fe826e6d9d3df8323ccdf9f3a301fcf2e16e17f8
  and __ip6.golden at 05e792777b8588bf52fbe3297edf977c48f78dd8: ``ip`` and
  ``ip6 docker-bridges`` of a dual-stack bridge br-dummy);
- flannel.nft: flannel-io/flannel pkg/trafficmngr/nftables/nftables.go at
  5c96864fd76c9df43155e90f5824e1e6f485d156 (``ip flannel-ipv4`` and ``ip6
  flannel-ipv6``: chain postrtg with --ip-masq, chain forward), its postrtg
  as flannel's e2e/rules.go at 70bb6a9dcfbd9ecc3f67ff74e199f887ce3305ff
  expects it.

The files of the node (units, daemon.json, subnet.env) live in a temporary
tree the modules see through ``root``; the Docker CLI is a stand-in script.
"""
import json
import os
import re
import shutil
import types

import pytest

from ipmasq_lab import cni, netlab
from test_docker_flannel_kubelet import (DOCKER_CE_UNIT, FAKE_DOCKER, FLANNEL_BINARY_UNIT, PLAYBOOK, fake_bin,
                                         four_steps, run)
from ipmasq_lab.topology import NODE_CL4, NODE_EXT4, POD4, Topology

HERE = os.path.dirname(os.path.abspath(__file__))
AUDIT_PLAYBOOK = os.path.join(HERE, 'playbooks', 'snat_sources.yml')
DATA = os.path.join(netlab.ROOT, 'tests', 'unit', 'plugins', 'module_utils', 'snat_audit_data')

DOCKER0_MASQ = ('oifname != "docker0" ip saddr 172.17.0.0/16 counter packets 0 bytes 0 masquerade '
                'comment "MASQUERADE"')
FLANNEL_UNIT = FLANNEL_BINARY_UNIT.replace('  -iface=eth0 \\\n  -ip-masq\n', '  -iface=eth0\n')
SUBNET_ENV = ('FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_IPV6_NETWORK=fd00:10:244::/56\n'
              'FLANNEL_IPV6_SUBNET=fd00:10:244:1::1/64\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=%s\n')


def nft_load(ns, name):
    ns.exec(['nft', '-f', os.path.join(DATA, name + '.nft')])


def ruleset(ns):
    return ns.exec(['nft', 'list', 'ruleset']).stdout


def without(text, *lines):
    """``text`` (an nft listing) without the rules ``lines`` (each must be there once)."""
    out = text.splitlines(True)
    for line in lines:
        (index,) = [i for i, have in enumerate(out) if have.strip() == line]
        del out[index]
    return ''.join(out)


def audit(ns, backend, **args):
    """ipmasq.agent.snat_sources (read only) in ``ns``: its result."""
    _rc, tasks = netlab.playbook(ns, AUDIT_PLAYBOOK, extra_vars={'audit_args': args}, backend=backend)
    ((name, result),) = [(n, r) for n, r in tasks if not r.get('skipped')]
    assert name == 'Audit' and not result.get('failed'), result.get('msg')
    return result


def offenders(result):
    return sorted((s['family'], s['table'], s['chain'], s['rule']) for s in result['offenders'])


def docker_cli(tree, bridge='docker0', subnets=('172.17.0.0/16',), masquerade='false'):
    """The stand-in Docker CLI: the default bridge and the user-defined network bridge1."""
    def net(name, net_id, opts, cidrs):
        return {'Name': name, 'Id': net_id, 'Driver': 'bridge', 'Scope': 'local',
                'IPAM': {'Driver': 'default', 'Options': None, 'Config': [{'Subnet': c} for c in cidrs]},
                'Options': opts, 'Labels': {}}
    nets = [net('bridge', 'f1e2d3c4b5a6' * 5 + 'abcd', {
        'com.docker.network.bridge.default_bridge': 'true',
        'com.docker.network.bridge.enable_ip_masquerade': masquerade,
        'com.docker.network.bridge.name': bridge}, subnets),
        net('bridge1', '0a1b2c3d4e5f' * 5 + '0123', {'com.docker.network.bridge.name': 'bridge1'}, ['192.0.2.0/24'])]
    tree.put('/bin/docker.json', json.dumps(nets))
    return fake_bin(tree, 'docker', FAKE_DOCKER)


def docker_tree(tree, daemon_json):
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', json.dumps(daemon_json, indent=2) + '\n')


# ==========================================================================
# Docker's nftables firewall backend
# ==========================================================================

def test_docker_nftables_default_bridge_rule_removed_others_kept(nft_node, tree):
    ns = nft_node.ns
    nft_load(ns, 'docker_bridges')
    docker_tree(tree, {'firewall-backend': 'nftables', 'ip-masq': False})
    margs = {'root': tree.root, 'remove_stale_rules': True, 'report_networks': True,
             'docker_bin': docker_cli(tree, masquerade='true')}
    before = ruleset(ns)
    ipt_before = nft_node.save(4)

    # The running Docker still masquerades (restart pending): its rule stays.
    res = run(nft_node, 'docker', margs)['apply1']
    assert res['changed'] is False and res['removed_rules'] == [] and ruleset(ns) == before
    assert any('restart pending' in m for m in res['messages'])

    # Before: the audit names Docker's masquerade of docker0 and of bridge1.
    audited = audit(ns, nft_node.backend)
    assert offenders(audited) == [
        ('ipv4', 'ip docker-bridges', 'nat-postrouting-out__bridge1',
         'oifname != "bridge1" ip saddr 192.0.2.0/24 counter masquerade comment "MASQUERADE"'),
        ('ipv4', 'ip docker-bridges', 'nat-postrouting-out__docker0',
         'oifname != "docker0" ip saddr 172.17.0.0/16 counter masquerade comment "MASQUERADE"')]

    # Docker restarted with ip-masq off and the rule survived. Check mode
    # removes nothing; then check, apply, check, apply.
    docker_cli(tree, masquerade='false')
    res = run(nft_node, 'docker', margs, ['check1'])['check1']
    assert res['changed'] is True and len(res['removed_rules']) == 1 and ruleset(ns) == before
    res = four_steps(nft_node, tree, 'docker', margs)
    want = ['IPv4: ip docker-bridges nat-postrouting-out__docker0: oifname != "docker0" ip saddr 172.17.0.0/16 '
            'counter masquerade comment "MASQUERADE"']
    assert res['check1']['removed_rules'] == want and res['apply1']['removed_rules'] == want
    assert res['check2']['removed_rules'] == [] and res['apply2']['removed_rules'] == []
    assert res['apply1']['bridge'] == {'name': 'docker0', 'subnets': ['172.17.0.0/16']}
    # Exactly that rule went: the hairpin rules, bridge1's rules, the chains and maps stay.
    assert ruleset(ns) == without(before, DOCKER0_MASQ)
    assert nft_node.save(4) == ipt_before
    # bridge1 is reported, not touched.
    assert [n['name'] for n in res['apply2']['masquerading_networks']] == ['bridge1']

    # After: only bridge1's masquerade is left for the audit to name.
    audited = audit(ns, nft_node.backend)
    assert [o[2] for o in offenders(audited)] == ['nat-postrouting-out__bridge1']
    hairpin = [s for s in audited['sources'] if s['chain'] == 'nat-postrouting-in__docker0']
    assert [(s['scope'], s['allowed']) for s in hairpin] == [('host', True)]


def test_docker_nftables_dual_stack_without_the_cli(nft_node, tree):
    """No Docker CLI: the bridge comes from daemon.json, any subnet of the
    rule's shape is Docker's; both families go in one transaction."""
    ns = nft_node.ns
    nft_load(ns, 'docker_bridges_ipv6')
    docker_tree(tree, {'firewall-backend': 'nftables', 'bridge': 'br-dummy', 'ipv6': True,
                       'fixed-cidr-v6': 'fd49:efd7:54aa::/64', 'ip-masq': False})
    margs = {'root': tree.root, 'remove_stale_rules': True, 'docker_bin': tree.path('/bin/no-docker-cli')}
    before = ruleset(ns)
    audited = audit(ns, nft_node.backend, ipv6=True)
    assert [(o[0], o[2]) for o in offenders(audited)] == [('ipv4', 'nat-postrouting-out__br-dummy'),
                                                          ('ipv6', 'nat-postrouting-out__br-dummy')]
    res = four_steps(nft_node, tree, 'docker', margs)
    assert [r.split(':')[0] for r in res['apply1']['removed_rules']] == ['IPv4', 'IPv6']
    assert ruleset(ns) == without(
        before,
        'oifname != "br-dummy" ip saddr 192.168.0.0/24 counter packets 0 bytes 0 masquerade comment "MASQUERADE"',
        'oifname != "br-dummy" ip6 saddr fd49:efd7:54aa::/64 counter packets 0 bytes 0 masquerade '
        'comment "MASQUERADE"')
    audited = audit(ns, nft_node.backend, ipv6=True)
    assert offenders(audited) == []
    assert {(s['chain'], s['scope']) for s in audited['sources']} == {
        ('nat-postrouting-in__br-dummy', 'host'), ('nat-postrouting-in__br-dummy', 'hairpin')}


def test_docker_nftables_rule_gone_between_read_and_write_is_read_again(nft_node, tree):
    """Docker removes its IPv4 rule itself between the run's read of the
    ruleset and its nft transaction (a hook of the nft on PATH, before its
    first write): the transaction fails and applies nothing, the run reads
    again once (the registry's retry, as for iptables) and removes what is
    left, the IPv6 rule; nothing fails, and a rerun changes nothing."""
    ns = nft_node.ns
    nft_load(ns, 'docker_bridges_ipv6')
    docker_tree(tree, {'firewall-backend': 'nftables', 'bridge': 'br-dummy', 'ipv6': True,
                       'fixed-cidr-v6': 'fd49:efd7:54aa::/64', 'ip-masq': False})
    margs = {'root': tree.root, 'remove_stale_rules': True, 'docker_bin': tree.path('/bin/no-docker-cli')}
    v4 = 'oifname != "br-dummy" ip saddr 192.168.0.0/24 counter packets 0 bytes 0 masquerade comment "MASQUERADE"'
    v6 = ('oifname != "br-dummy" ip6 saddr fd49:efd7:54aa::/64 counter packets 0 bytes 0 masquerade '
          'comment "MASQUERADE"')
    before = ruleset(ns)
    chain = 'nat-postrouting-out__br-dummy'
    listing = ns.exec(['nft', '-a', 'list', 'chain', 'ip', 'docker-bridges', chain]).stdout
    (handle,) = [m.group(1) for m in re.finditer(r'saddr 192\.168\.0\.0/24 .* # handle (\d+)', listing)]
    nft = shutil.which('nft', path=nft_node.backend.env()['PATH'])
    hook = cni.guarded(ns, [nft, 'delete', 'rule', 'ip', 'docker-bridges', chain, 'handle', handle])
    with cni.before_nft_write([hook]) as shim:
        env = {'PATH': shim + os.pathsep + nft_node.backend.env()['PATH']}
        _rc, tasks = netlab.playbook(ns, PLAYBOOK, extra_vars={'module': 'docker', 'margs': margs, 'steps': ['apply1']},
                                     backend=nft_node.backend, env_extra=env)
        with open(os.path.join(shim, 'calls')) as handle_file:
            calls = handle_file.read().splitlines()
    (res,) = [r for name, r in tasks if name == 'Step apply1' and not r.get('skipped')]
    assert not res.get('failed'), res['msg']
    assert calls == ['delete', 'delete'], calls     # the failed transaction, then the one read again
    assert res['changed'] is True and res['removed_rules'] == [
        'IPv6: ip6 docker-bridges %s: oifname != "br-dummy" ip6 saddr fd49:efd7:54aa::/64 counter masquerade '
        'comment "MASQUERADE"' % chain], res['removed_rules']
    assert any(m.startswith('The nat table changed between the read and the write') for m in res['messages']), \
        res['messages']
    assert ruleset(ns) == without(before, v4, v6)
    again = run(nft_node, 'docker', margs)['apply1']
    assert again['changed'] is False and again['removed_rules'] == [], again


# ==========================================================================
# flannel's nftables mode
# ==========================================================================

POSTRTG = ['IPv4: ip flannel-ipv4: chain postrtg (6 rules, 2 masquerading)',
           'IPv6: ip6 flannel-ipv6: chain postrtg (6 rules, 2 masquerading)']

# What flanneld sends, as knftables writes it (pkg/trafficmngr/nftables):
# started with --ip-masq, and stopped (its clean-up deletes both tables).
FLANNEL_START_MASQ = '''add table ip flannel-ipv4 { comment "rules for flannel-ipv4" ; }
add chain ip flannel-ipv4 postrtg { type nat hook postrouting priority 100 ; comment "chain to manage traffic masquerading by flannel" ; }
flush chain ip flannel-ipv4 postrtg
add rule ip flannel-ipv4 postrtg meta mark 0x4000 return
add rule ip flannel-ipv4 postrtg ip saddr 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade fully-random
'''
FLANNEL_STOP = '''delete table ip flannel-ipv4
delete table ip6 flannel-ipv6
'''


def test_flannel_nftables_postrtg_removed_tables_and_forward_kept(nft_node, tree):
    ns = nft_node.ns
    nft_load(ns, 'flannel')
    tree.put('/etc/systemd/system/flanneld.service', FLANNEL_UNIT)
    tree.put('/run/flannel/subnet.env', SUBNET_ENV % 'true')
    margs = {'root': tree.root}
    before = ruleset(ns)

    # The running flanneld still masquerades: found, kept.
    res = run(nft_node, 'flannel', margs)['apply1']
    assert res['changed'] is False and res['removed_rules'] == [] and res['stale_rules'] == POSTRTG
    assert ruleset(ns) == before

    audited = audit(ns, nft_node.backend, ipv6=True)
    assert [(o[1], o[2]) for o in offenders(audited)] == [('ip flannel-ipv4', 'postrtg')] * 2 + \
        [('ip6 flannel-ipv6', 'postrtg')] * 2

    # flanneld restarted without --ip-masq. Check mode removes nothing; then
    # check, apply, check, apply.
    tree.put('/run/flannel/subnet.env', SUBNET_ENV % 'false')
    res = run(nft_node, 'flannel', margs, ['check1'])['check1']
    assert res['changed'] is True and res['removed_rules'] == POSTRTG and ruleset(ns) == before
    res = four_steps(nft_node, tree, 'flannel', margs)
    for step in ('check1', 'apply1'):
        assert res[step]['removed_rules'] == POSTRTG and res[step]['edited'] == []
    assert res['apply2']['removed_rules'] == [] and res['apply2']['stale_rules'] == []
    after = ruleset(ns)
    assert 'postrtg' not in after and 'masquerade' not in after
    assert after.count('chain forward {') == 2 and 'table ip flannel-ipv4' in after and 'table ip6 flannel-ipv6' in after
    assert offenders(audit(ns, nft_node.backend, ipv6=True)) == []

    # What flanneld does next works on what is left: started again with
    # --ip-masq it re-creates its chain; stopped, it deletes both tables.
    ns.exec(['nft', '-f', '-'], input=FLANNEL_START_MASQ)
    assert 'chain postrtg' in ruleset(ns)
    ns.exec(['nft', '-f', '-'], input=FLANNEL_STOP)
    assert 'flannel' not in ruleset(ns)


# ==========================================================================
# A return in our table does not stop another table from masquerading
# ==========================================================================

def run_in(topo, module, margs):
    """A daemon module once in the topology's node (other_snat.yml, step apply1)."""
    node = types.SimpleNamespace(ns=topo.node, backend=topo.backend)
    return run(node, module, margs)['apply1']


@pytest.fixture
def topo():
    with Topology.with_tools('nft', ipv6=False) as built:
        yield built


def test_return_in_our_table_does_not_stop_flannels_masquerade(topo, tree):
    """Ours (table inet ip-masq-agent) returns for the cluster-local host
    (10.0.0.0/8 is a non-masquerade CIDR), yet flannel's postrtg, another
    base chain at the same hook, masquerades the connection: the audit names
    it.  Once flannel_ip_masq removed it, the pod's address arrives."""
    topo.masq(backend='nftables')
    nft_load(topo.node, 'flannel')
    assert topo.probe(['cluster-local', 'external']) == {'cluster-local': NODE_CL4, 'external': NODE_EXT4}
    audited = audit(topo.node, topo.backend)
    assert audited['ours_present'] and not audited['only_ours']
    assert [(o[1], o[2]) for o in offenders(audited)] == [('ip flannel-ipv4', 'postrtg')] * 2

    tree.put('/etc/systemd/system/flanneld.service', FLANNEL_UNIT)
    tree.put('/run/flannel/subnet.env', SUBNET_ENV % 'false')
    res = run_in(topo, 'flannel', {'root': tree.root})
    assert res['changed'] is True and res['removed_rules'] == POSTRTG

    assert topo.probe(['cluster-local', 'external']) == {'cluster-local': POD4, 'external': NODE_EXT4}
    audited = audit(topo.node, topo.backend)
    assert audited['only_ours'] and offenders(audited) == []
