"""The fleet form of the SNAT explanation: ``ansible-playbook
ipmasq.agent.explain`` (playbooks/explain.yml) over SSH against a four-host
fleet (tests/lab/ipmasq_lab/fleetlab.py, two groups of two), after
site.yml, with hosts broken by hand:

- east-1: our chain removed (the nat table restored without it);
- east-2: as the role left it (ours decides);
- west-1: a Docker-like MASQUERADE rule first in POSTROUTING;
- west-2: a CNI bridge network's chain (the bridge plugin's chain name and
  comment) jumped to first.

The play must name the deciding rule per host, sum them up, say that
cluster_east disagrees within itself and cluster_west does not; in after
mode (-e after=true) east-1 answers as the role will leave it (ours) with
the answer now beside it; a bad src fails on the controller naming the
value before any host is touched.  One fleet for the module (about 40 s of
one worker)."""
import json
import os

import pytest

from ipmasq_lab import fleetlab

# The record of the CNI chains the role emptied (a file name, not a chain's: _daemons/cni_chains.py).
CHAINS_RECORD = 'cni-emptied-chains.json'

FLOW = {'src': '172.17.0.2', 'dst': '203.0.113.10', 'proto': 'tcp', 'dport': '443', 'out_interface': 'eth0'}
DOCKER_RULE = ['-s', '172.17.0.0/16', '!', '-o', 'docker0', '-j', 'MASQUERADE']
CNI_CHAIN = 'CNI-1f2e3d4c5b6a79880a1b2c3d'
CNI_COMMENT = ['-m', 'comment', '--comment', 'name: "bridge" id: "0123456789abcdef"']
POD_NET, POD_ID = 'pods', 'fedcba9876543210'
# The chain the bridge plugin makes for that container: CNI- and the first 24 hex digits of
# sha512("pods" + "fedcba9876543210"), as Debian 12's /usr/lib/cni/bridge named it in a lab run
# (ipmasq_lab.cni.Network('pods').add(pod, 'fedcba9876543210')); literal, not the product's cni_names.chain_name.
POD_CHAIN = 'CNI-e28aa7952562bcc58ddd4afc'


@pytest.fixture(scope='module')
def fleet():
    with fleetlab.Fleet(clusters=(('cluster_east', 2), ('cluster_west', 2))) as made:
        run = made.playbook('site.yml')
        assert run.rc == 0, run.explain()
        east1 = made.host('east-1')
        saved = east1.ns.exec(['iptables-save', '-t', 'nat']).stdout
        east1.ns.exec(['iptables-restore'], input=''.join(line for line in saved.splitlines(True)
                                                          if 'IP-MASQ-AGENT' not in line))
        made.host('west-1').ipt('-I', 'POSTROUTING', '1', *DOCKER_RULE)
        west2 = made.host('west-2')
        west2.ipt('-N', CNI_CHAIN)
        west2.ipt('-A', CNI_CHAIN, '-d', '172.17.0.0/16', *CNI_COMMENT, '-j', 'ACCEPT')
        west2.ipt('-A', CNI_CHAIN, '!', '-d', '224.0.0.0/4', *CNI_COMMENT, '-j', 'MASQUERADE')
        west2.ipt('-I', 'POSTROUTING', '1', '-s', '172.17.0.0/16', *CNI_COMMENT, '-j', CNI_CHAIN)
        yield made


def summary(run):
    return next(iter(run.results('Sum up on the controller').values()))['ansible_facts']['ipmasq_explain_summary']


def test_the_play_names_the_deciding_rule_per_host(fleet):
    before = dict((h.name, h.nat()) for h in fleet.hosts)
    run = fleet.playbook('explain.yml', extra_vars=FLOW)
    assert run.rc == 0, run.explain()
    answers = run.results('Explain the flow')
    deciding = dict((name, (res['verdict'], (res['decided_by'] or {}).get('owner'),
                            (res['decided_by'] or {}).get('chain'))) for name, res in answers.items())
    assert deciding == {
        'east-1': ('unchanged', None, None),
        'east-2': ('masquerade', 'ip-masq-agent', 'IP-MASQ-AGENT'),
        'west-1': ('masquerade', 'docker', 'POSTROUTING'),
        'west-2': ('masquerade', 'cni', CNI_CHAIN),
    }, deciding
    assert answers['west-1']['decided_by']['rule'] == '-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE'
    assert answers['west-1']['decided_by']['position'] == 1
    out = summary(run)
    assert out['translated_hosts'] == ['east-2', 'west-1', 'west-2'] and out['unchanged_hosts'] == ['east-1']
    assert out['hosts']['west-2']['decided_by'] == 'cni (iptables-nft nat chain %s rule 2)' % CNI_CHAIN or \
        out['hosts']['west-2']['decided_by'] == 'cni (iptables-legacy nat chain %s rule 2)' % CNI_CHAIN, out['hosts']
    assert list(out['disagreeing_groups']) == ['cluster_east'], out['groups']
    assert out['disagreeing_groups']['cluster_east'] == {'masquerade': ['east-2'], 'unchanged': ['east-1']}
    assert 'group cluster_east disagrees: masquerade on east-2; unchanged on east-1' in out['lines']
    # It only reads.
    assert dict((h.name, h.nat()) for h in fleet.hosts) == before


@pytest.mark.parametrize('bad,words', [
    ({'src': '172.17.0.2/16'}, "src: '172.17.0.2/16' is not an IPv4 or IPv6 address"),
    ({'after': 'ture'}, 'after'),
])
def test_bad_input_fails_on_the_controller_before_any_host(fleet, bad, words):
    run = fleet.playbook('explain.yml', extra_vars=dict(FLOW, **bad))
    assert run.rc != 0
    assert run.touched_hosts() == ['localhost'], run.touched_hosts()
    failed = [res.get('msg') for _name, hosts in run.tasks for res in hosts.values() if res.get('failed')]
    assert failed and words in str(failed[0]), failed


def pod_network(host):
    """A CNI network of east-2's own (its file in the host's CNI directory, ipMasq on) and a running container's
    rules as the bridge plugin names them: the role's CNI step (ip_masq_cni: auto) removes them."""
    chain = POD_CHAIN
    comment = ['-m', 'comment', '--comment', 'name: "%s" id: "%s"' % (POD_NET, POD_ID)]
    conf = host.path('etc/cni/net.d')
    os.makedirs(conf, exist_ok=True)
    with open(os.path.join(conf, '10-%s.conflist' % POD_NET), 'w') as f:
        json.dump({'cniVersion': '1.0.0', 'name': POD_NET, 'plugins': [
            {'type': 'bridge', 'bridge': 'cni-pods', 'isGateway': True, 'ipMasq': True,
             'ipam': {'type': 'host-local', 'subnet': '10.88.0.0/16'}}]}, f)
    host.ipt('-N', chain)
    host.ipt('-A', chain, '-d', '10.88.0.0/16', *comment, '-j', 'ACCEPT')
    host.ipt('-A', chain, '!', '-d', '224.0.0.0/4', *comment, '-j', 'MASQUERADE')
    host.ipt('-A', 'POSTROUTING', '-s', '10.88.0.5', *comment, '-j', chain)
    return chain


def test_after_mode_answers_as_the_role_will_leave_each_host(fleet):
    """Last (it repairs the fleet): after mode, then the role really runs, then the plain answer must be the
    after answer, host by host.  The play passes each host's daemon steps: east-2's CNI network's rules, which
    the role's CNI step removes, are named in its notes, and gone after the real run; their chain, emptied, stays
    until a later run finds the container gone (then it is deleted)."""
    pods = pod_network(fleet.host('east-2'))
    before = dict((h.name, h.nat()) for h in fleet.hosts)
    assert ':%s - ' % pods in before['east-2'], before['east-2']
    run = fleet.playbook('explain.yml', extra_vars=dict(FLOW, after=True))
    assert run.rc == 0, run.explain()
    assert dict((h.name, h.nat()) for h in fleet.hosts) == before
    answers = run.results('Explain the flow')
    removes = [n for n in answers['east-2']['notes'] if n.startswith("after mode: the role's cni step removes")]
    assert len(removes) == 1 and removes[0].count(pods) == 3, answers['east-2']['notes']
    assert not [n for n in answers['west-2']['notes'] if 'step removes' in n], answers['west-2']['notes']
    assert answers['east-1']['after'] is True and answers['east-1']['now']['verdict'] == 'unchanged'
    # cluster_west puts our jump first (ip_masq_jump_position: first): the role moves it back before Docker's
    # and the CNI network's rules, so ours decides there too; the Docker rule stays (ip_masq_docker: skip here).
    after = dict((name, (res['verdict'], res['decided_by']['owner'], res['decided_by']['chain'],
                         res['decided_by']['position'])) for name, res in answers.items())
    assert set(owner for _v, owner, _c, _p in after.values()) == {'ip-masq-agent'}, after
    assert answers['west-1']['now']['decided_by']['owner'] == 'docker'
    out = summary(run)
    assert out['disagreeing_groups'] == {}, out['groups']
    assert out['hosts']['east-1']['now']['verdict'] == 'unchanged'
    # The role, for real; then the answer is what after mode said.
    ran = fleet.playbook('site.yml', extra_vars={'ip_masq_audit': 'warn'})
    assert ran.rc == 0, ran.explain()
    assert 'MASQUERADE' in fleet.host('west-1').nat() and 'docker0' in fleet.host('west-1').nat()
    east2 = fleet.host('east-2')
    nat = east2.nat()
    assert '-j %s' % pods not in nat and '-A %s ' % pods not in nat, nat
    # The chain itself stays, empty and unreferenced, while its container may run (the plugin's DEL needs it):
    # nothing on east-2 (libcni's cache, host-local's leases) can say the container is gone. It is recorded.
    assert ':%s - ' % pods in nat, nat
    with open(east2.path('var/lib/ipmasq-agent/backup', CHAINS_RECORD)) as f:
        assert [(e['chain'], e['network'], e['container']) for e in json.load(f)] == [(pods, POD_NET, POD_ID)]
    run = fleet.playbook('explain.yml', extra_vars=FLOW)
    assert run.rc == 0, run.explain()
    real = dict((name, (res['verdict'], res['decided_by']['owner'], res['decided_by']['chain'],
                        res['decided_by']['position'])) for name, res in run.results('Explain the flow').items())
    assert real == after
    # The container gone (libcni's cache, there now, holds no result of it): the next run deletes the chain itself.
    os.makedirs(east2.path('var/lib/cni/results'))
    ran = fleet.playbook('site.yml', limit='east-2', extra_vars={'ip_masq_audit': 'warn'})
    assert ran.rc == 0, ran.explain()
    assert pods not in east2.nat(), east2.nat()
    assert not os.path.exists(east2.path('var/lib/ipmasq-agent/backup', CHAINS_RECORD))
