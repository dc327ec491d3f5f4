"""ipmasq.agent.snat_explain "after the role" (its option ``after``) against
real packets.

On the node of test_snat_explain.py (ours next to a Docker-like rule, a
kube-proxy-like KUBE-POSTROUTING with its mark, and foreign nft tables at
priorities 50 and 150), a policy of ours is in place.  Each round draws the
next policy (both policy backends: a switch from iptables to nftables, a
rewrite of the nft table, a switch back, a rewrite of the chain) and flows,
asks the explanation after that policy (the node must not change), then
really applies the policy (masq_chain with the same options, as the role's
node step applies its ``chain``), sends the packets and reads the source
each receiver saw.  Wherever the after answer is not ``unknown`` it must
agree with the packet; ``unknown`` stays under 5% and names its match.

With the role's daemon steps (``after.daemons``), the same node's Docker
(still masquerading: the role edits daemon.json, restarts Docker, then
removes its rule) and real CNI bridge network (its running container's
rules): the explanation after the policy and those steps, then
the policy applied and the daemon steps really run (the node run's daemon
part, as the role's daemon.yml runs it, Docker's restart by the
restartable stand-in of ``fake_docker``), and the packets sent
(test_after_mode_projects_the_daemons_rules: 63 flows, about 12 s).

Cost: ``IMQ_EXPLAIN_AFTER_CASES`` flows (default 100, over 4 rounds),
``IMQ_EXPLAIN_SEED`` the random seed (default: a new one, printed on
failure).  Needs root; nothing happens in the root network namespace.
"""
import collections
import json
import os
import random
import sys
import time

import pytest

from ipmasq_lab import fake_docker, netlab, topology
from ipmasq_lab.explained import Sorted
# autouse: the root namespace stays as it was.
from test_packets import root_namespace_untouched  # noqa: F401 pylint: disable=unused-import
from test_snat_explain import (CNI_POD, FOREIGN_IPT, FOREIGN_NFT, POD_B, POD_DOCKER, SEED, ExplainTopology, draw_flows,
                               draw_policy, expected, module, send)
from ipmasq_lab.topology import POD4

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)')

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = os.path.join(HERE, 'explain_after_batch.py')
CASES = int(os.environ.get('IMQ_EXPLAIN_AFTER_CASES', '100'))
# The policy backend of each round, after an iptables policy: a switch, a rewrite, a switch back, a rewrite.
ROUNDS = ('nftables', 'nftables', 'iptables', 'iptables')


def explain_after(topo, after, flows):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([netlab.COLLECTIONS, HERE]))
    out = topo.node.exec([sys.executable, BATCH], input=json.dumps({'after': after, 'flows': flows}), env=env,
                         timeout=300)
    return json.loads(out.stdout)


def foreign(topo):
    topo.node.exec([topo.backend.tool('iptables-restore'), '--noflush'], input=FOREIGN_IPT)
    topo.node.exec(['nft', '-f', '-'], input=FOREIGN_NFT)


def test_after_mode_agrees_with_real_packets():
    rng = random.Random(SEED)
    rounds = max(len(ROUNDS), -(-CASES // 25))
    per_round = -(-CASES // rounds)
    started = time.monotonic()
    total, missing, tally = 0, [], Sorted(expected)
    unknown, ties, wrong = tally.unknown, tally.ties, tally.wrong
    verdicts = collections.Counter()
    with ExplainTopology.with_tools('nft', ipv6=False) as topo:
        foreign(topo)
        first = draw_policy(rng, 'iptables')
        assert not module(topo, 'masq_chain', first).get('failed'), (SEED, first)
        for index in range(rounds):
            args = draw_policy(rng, ROUNDS[index % len(ROUNDS)], 'snat-to' if index == 0 else None)
            flows = draw_flows(rng, per_round)
            before = topo.rules_now()
            answers = explain_after(topo, {'chain': args}, flows)
            assert topo.rules_now() == before, 'after mode changed the node'
            if index == 0:
                # The module says what the batch (its code, many flows in one process) says.
                one = module(topo, 'snat_explain', dict(flows[0], dport=str(flows[0]['dport']), after={'chain': args}))
                assert (one['verdict'], one['to'], one['decided_by']) == (
                    answers[0]['verdict'], answers[0]['to'], answers[0]['decided_by']), (SEED, one, answers[0])
            res = module(topo, 'masq_chain', args)
            assert not res.get('failed'), (SEED, args, res.get('msg'))
            topo.node.exec(['conntrack', '-F'], check=False)
            seen = send(topo, flows)
            for flow, answer in zip(flows, answers):
                total += 1
                verdicts[answer['verdict']] += 1
                got = seen.get((flow['proto'], flow['dst'], flow['dport']))
                if got is None:
                    missing.append((flow, answer['msg']))
                else:
                    tally.add((args,), flow, answer, got)
    took = time.monotonic() - started
    print('snat_explain after mode: %d flows over %d rounds in %.1f s (seed %d): %s'
          % (total, rounds, took, SEED, dict(verdicts)))
    assert not missing, (SEED, missing[:5])
    assert not wrong, (SEED, len(wrong), wrong[:5])
    # Every unknown counts, the equal-priority ones too (as in test_snat_explain.py), and there is no tie here:
    # ours is at srcnat - 1 or + 1, the foreign tables at 50 and 150.
    assert (len(unknown) + len(ties)) * 20 < total, (SEED, len(unknown), len(ties), unknown[:5], ties[:5])
    assert not ties, (SEED, len(ties), ties[:5])
    assert verdicts['masquerade'] and verdicts['snat'] and verdicts['unchanged'], dict(verdicts)


def test_after_mode_module(tmp_path):
    """The module in after mode: the answer now and after side by side, the
    policy run's words, only listings run, the node unchanged, bad policy
    input named; Docker's rule stays where the role would not restart Docker
    (its running daemon masquerades, daemon.json already says no) and goes
    where the role restarts it (daemon.json edited), the notes saying what
    that assumes."""
    with ExplainTopology.with_tools('nft', ipv6=False) as topo:
        foreign(topo)
        assert not module(topo, 'masq_chain', {'backend': 'iptables'}).get('failed')
        before = topo.rules_now()
        flow = {'src': POD4, 'dst': topology.EXT4, 'proto': 'udp', 'dport': '30101', 'out_interface': 'to-ext'}
        after = {'chain': {'backend': 'nftables', 'snat_to': ['203.0.113.7']}}
        res = module(topo, 'snat_explain', dict(flow, after=after, _ansible_check_mode=True))
        assert not res.get('failed'), res
        assert res['after'] is True and res['changed'] is False
        assert res['now']['verdict'] == 'masquerade' and res['now']['decided_by']['chain'] == 'IP-MASQ-AGENT', res
        assert (res['verdict'], res['to']) == ('snat', '203.0.113.7'), res
        assert res['decided_by']['owner'] == 'ip-masq-agent' and res['decided_by']['table'] == 'inet ip-masq-agent'
        assert 'nftables' in res['policy'], res['policy']
        listed = ('iptables', 'iptables-save', 'iptables-legacy-save', 'iptables-nft-save', 'iptables-legacy',
                  'iptables-nft', 'nft', 'ip6tables', 'ip6tables-save', 'ip6tables-legacy-save',
                  'ip6tables-nft-save', 'ip6tables-legacy', 'ip6tables-nft')
        assert all(c.split()[0].rsplit('/', 1)[-1] in listed for c in res['commands']), res['commands']
        # Docker's rule stays: the role leaves it unless its docker step removes it.
        res = module(topo, 'snat_explain', {'src': POD_DOCKER, 'dst': topology.CL4, 'proto': 'tcp',
                                            'out_interface': 'to-cluster', 'after': after})
        assert (res['verdict'], res['decided_by']['owner']) == ('masquerade', 'docker'), res
        # The running Docker still masquerades, though daemon.json already says "ip-masq": false: the role's step
        # edits nothing, so it restarts nothing, and its clean-up leaves the rule: so does after mode.
        daemon_json = str(tmp_path / 'etc/docker/daemon.json')
        docker = [step for step in daemon_steps(str(tmp_path), topo, daemon_json='{}\n', docker_cli=True)
                  if step['name'] == 'docker']
        with open(daemon_json, 'w') as f:
            f.write('{"ip-masq": false}\n')
        docker_flow = {'src': POD_DOCKER, 'dst': topology.CL4, 'proto': 'tcp', 'out_interface': 'to-cluster'}
        res = module(topo, 'snat_explain', dict(docker_flow, after=dict(after, daemons=docker)))
        assert (res['verdict'], res['decided_by']['owner']) == ('masquerade', 'docker'), res
        assert not [n for n in res['notes'] if 'step removes' in n or 'restarts' in n], res['notes']
        # daemon.json does not say "ip-masq": false yet, and no docker CLI answers: the role edits it, restarts
        # Docker, then its clean-up removes the rule. After mode foresees that restart, and the notes say so.
        for key in ('edit', 'cleanup'):
            docker[0][key]['docker_bin'] = str(tmp_path / 'no-docker')
        with open(daemon_json, 'w') as f:
            f.write('{}\n')
        res = module(topo, 'snat_explain', dict(docker_flow, after=dict(after, daemons=docker)))
        # Ours leaves the cluster-local host alone, and nothing else masquerades it then.
        assert (res['verdict'], res['decided_by']) == ('unchanged', None), res
        notes = ' '.join(res['notes'])
        assert ("after mode: the role's docker step edits /etc/docker/daemon.json and restarts docker.service; "
                "the answer foresees that restart: after the restart with ip-masq off") in notes, res['notes']
        assert "after mode: the role's docker step removes IPv4: -A POSTROUTING -s 172.17.0.0/16" in notes, notes
        # A rule in the CNI container's chain that is not the plugin's: the role's CNI step fails there, so does
        # after mode, naming it.
        cni = [step for step in daemon_steps(str(tmp_path / 'cni'), topo) if step['name'] == 'cni']
        chain = [r.split()[1] for r in topo.cni_rules() if r.split()[1].startswith('CNI-')][0]
        topo.iptables(['-t', 'nat', '-A', chain, '-d', '198.51.100.9', '-j', 'RETURN'])
        res = module(topo, 'snat_explain', dict(flow, after=dict(after, daemons=cni)))
        assert res.get('failed') and res['msg'].startswith("after mode: the role's cni step fails here, so there is "
                                                           "no answer after the role: cannot remove the CNI"), res
        assert '-A %s -d 198.51.100.9/32 -j RETURN' % chain in res['msg'], res['msg']
        topo.iptables(['-t', 'nat', '-D', chain, '-d', '198.51.100.9', '-j', 'RETURN'])
        # A policy under another chain name: ours is then that chain (the old one removed, as a rename removes it).
        res = module(topo, 'snat_explain', dict(flow, after={'chain': {'backend': 'iptables', 'chain': 'MASQ-B'}}))
        assert (res['verdict'], res['decided_by']['owner'], res['decided_by']['chain']) == (
            'masquerade', 'ip-masq-agent', 'MASQ-B'), res
        assert 'IP-MASQ-AGENT' not in [step['chain'] for step in res['path']], res['path']
        # Bad policy input: the option and the value named, nothing run.
        res = module(topo, 'snat_explain', dict(flow, after={'chain': {'nonmasquerade_cidrs': ['10.0.0.0/33']}}))
        assert res.get('failed') and res['msg'].startswith('after.chain:') and '10.0.0.0/33' in res['msg'], res
        res = module(topo, 'snat_explain', dict(flow, after={'chain': {}, 'restart': {}}))
        assert res.get('failed') and 'restart is not a key of after' in res['msg'], res
        # A bad daemon step: named, nothing run.
        for steps, words in (({}, "after.daemons: give the role's daemon steps as a list; got {}"),
                             ([{'name': 'dockerd'}], "after.daemons[0].name: 'dockerd' is not a daemon of the registry"),
                             ([{'name': 'docker', 'edit': {'remove_stale_rules': 'maybe'}}],
                              "after.daemons.docker.edit: argument 'remove_stale_rules' is of type str")):
            res = module(topo, 'snat_explain', dict(flow, after={'chain': {}, 'daemons': steps}))
            assert res.get('failed') and res['msg'].startswith(words), (steps, res)
        assert topo.rules_now() == before


DOCKER_UNIT = """[Unit]
Description=Docker Application Container Engine (a test's unit: nothing runs it)

[Service]
ExecStart=/usr/bin/dockerd -H fd://
"""


FLANNEL_UNIT = """[Unit]
Description=flannel (a test's unit: nothing runs it)

[Service]
ExecStart=/usr/bin/flanneld --ip-masq --kube-subnet-mgr
"""
SUBNET_ENV = 'FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=%s\n'
# flanneld's masquerading (as it writes it with --ip-masq, its IPv4 part), after ours in POSTROUTING.
FLANNEL_NAT = """*nat
:FLANNEL-POSTRTG - [0:0]
-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG
-A FLANNEL-POSTRTG -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j RETURN
-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully
COMMIT
"""


def restart_flanneld(root):
    """The stand-in of flanneld's restart: it writes subnet.env as its
    options (the unit's ExecStart) now say: FLANNEL_IPMASQ."""
    with open(os.path.join(root, 'etc/systemd/system/flanneld.service')) as f:
        masq = '--ip-masq' in f.read().split()
    with open(os.path.join(root, 'run/flannel/subnet.env'), 'w') as f:
        f.write(SUBNET_ENV % ('true' if masq else 'false'))


def flannel_step(root, topo):
    """The role's flannel step (``_role_args.daemon_step``), flanneld's unit
    (with ``--ip-masq``) and subnet.env (FLANNEL_IPMASQ=true) under
    ``root``, and its rules in the node's nat table."""
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry
    from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import daemon_step
    os.makedirs(os.path.join(root, 'run/flannel'))
    with open(os.path.join(root, 'etc/systemd/system/flanneld.service'), 'w') as f:
        f.write(FLANNEL_UNIT)
    restart_flanneld(root)
    topo.node.exec([topo.backend.tool('iptables-restore'), '--noflush'], input=FLANNEL_NAT)
    step = daemon_step(registry.daemon('flannel'), 'auto', 'present', '/backup', {})
    for key in ('edit', 'cleanup'):
        step[key].update(root=root)
    assert step['cleanup']['remove_stale_rules'] and not step['edit']['remove_stale_rules'], step
    return step


def daemon_steps(root, topo, daemon_json='{"ip-masq": false}\n', docker_cli=False):
    """The role's daemon steps (its own code: ``_role_args.daemon_step``)
    for Docker and the CNI networks, every path below the test's ``root``:
    Docker's files under ``root`` (its unit, and ``daemon_json``: by default
    one that already says ``"ip-masq": false``, so the Docker-like rule is
    the stale one the clean-up removes, no restart needed); with
    ``docker_cli`` the restartable docker CLI of ``fake_docker`` in
    ``root``/bin, Docker started with that daemon.json, else no docker CLI;
    the CNI network of the topology (ipMasq on), its cache and backups under
    ``root``."""
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry
    from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import daemon_step
    os.makedirs(os.path.join(root, 'etc/systemd/system'))
    os.makedirs(os.path.join(root, 'etc/docker'))
    with open(os.path.join(root, 'etc/systemd/system/docker.service'), 'w') as f:
        f.write(DOCKER_UNIT)
    with open(os.path.join(root, 'etc/docker/daemon.json'), 'w') as f:
        f.write(daemon_json)
    cli = os.path.join(root, 'no-docker')
    if docker_cli:
        cli = fake_docker.install(os.path.join(root, 'bin'), os.path.join(root, 'etc/docker/daemon.json'))
    values = {'ip_masq_docker_daemon_json': '/etc/docker/daemon.json', 'ip_masq_cni_conf_dirs': [topo.cni_conf],
              'ip_masq_cni_cache_dir': os.path.join(root, 'cni-cache'), 'ip_masq_enable_ipv6': False}
    backups = os.path.join(root, 'backup')
    docker = daemon_step(registry.daemon('docker'), 'auto', 'present', '/backup', values)
    cni = daemon_step(registry.daemon('cni'), 'auto', 'present', backups, values)
    # The paths the role does not move (no role variable): this machine's unit dirs and docker CLI.
    for key in ('edit', 'cleanup'):
        docker[key].update(root=root, docker_bin=cli)
    assert cni['cleanup'] is None and docker['cleanup']['remove_stale_rules'], (docker, cni)
    return [docker, cni]


def run_daemon_steps(topo, steps, restarts=None):
    """The role's daemon steps run for real, as daemon.yml runs them: the
    node run's ``daemon`` part with the edit's options; where that edit
    needs a restart, the "Restart a daemon" handler (``restarts``: the
    test's stand-in of each service, by name); then (installed) the
    clean-up's options.  Returns the services restarted."""
    restarted = []
    for step in steps:
        ran = module(topo, 'ip_masq_node', {'daemon': {'name': step['name'], 'options': step['edit']}})
        assert not ran.get('failed') and ran['daemon']['installed'], ran
        if ran['changed'] and ran['daemon']['restart_required']:
            service = ran['daemon']['service']
            assert service in (restarts or {}), ('no stand-in restarts %s' % service, ran['daemon'])
            restarts[service]()
            restarted.append(service)
        if step['cleanup'] is not None:
            ran = module(topo, 'ip_masq_node', {'daemon': {'name': step['name'], 'options': step['cleanup']}})
            assert not ran.get('failed'), ran
    return restarted


def test_after_mode_projects_the_daemons_rules(tmp_path):
    """After mode with the role's daemon steps, on a node whose Docker still
    masquerades (its daemon.json without ``"ip-masq": false``, the running
    Docker's default bridge masquerading, its rule in place): the role edits
    daemon.json, restarts Docker and then removes its rule; the CNI
    network's masquerade rules go at once.  After mode foresees the restart
    (the clean-up as after it, the same RuleMatch), and the answers agree
    with the packets once the policy and the daemon steps really ran, with
    the restart.  Docker's container and the CNI container are decided by
    Docker's and the CNI network's rules now, and not after."""
    rng = random.Random(SEED)
    root = str(tmp_path)
    with ExplainTopology.with_tools('nft', ipv6=False) as topo:
        foreign(topo)
        assert not module(topo, 'masq_chain', {'backend': 'iptables'}).get('failed')
        steps = daemon_steps(root, topo, daemon_json='{}\n', docker_cli=True)
        # flannel first, as the registry orders it; its chain after ours (and after the CNI network's rules).
        steps.insert(0, flannel_step(root, topo))
        bin_dir, daemon_json = os.path.join(root, 'bin'), os.path.join(root, 'etc/docker/daemon.json')
        assert fake_docker.masquerades(bin_dir)
        args = draw_policy(rng, 'iptables', 'snat-to')
        # Docker's container (ours now leaves the cluster-local host to the next rule, Docker's) and the CNI
        # container (its network's rule comes first), then drawn flows.
        fixed = [{'src': POD_DOCKER, 'dst': topology.CL4, 'proto': 'tcp', 'dport': 30401,
                  'out_interface': 'to-cluster', 'mark': '0'},
                 {'src': CNI_POD, 'dst': topology.EXT4, 'proto': 'udp', 'dport': 30402, 'out_interface': 'to-ext',
                  'mark': '0'},
                 {'src': POD_B, 'dst': topology.CL4, 'proto': 'tcp', 'dport': 30403, 'out_interface': 'to-cluster',
                  'mark': '0'}]
        flows = fixed + [f for f in draw_flows(rng, 60) if f['dport'] not in (30401, 30402, 30403)]
        after = {'chain': args, 'daemons': steps}
        before = topo.rules_now()
        answers = explain_after(topo, after, flows)
        one = module(topo, 'snat_explain', dict(fixed[0], dport=str(fixed[0]['dport']), after=after))
        assert topo.rules_now() == before, 'after mode changed the node'
        assert not one.get('failed'), one
        assert one['now']['decided_by']['owner'] == 'docker', one['now']
        # flanneld's chain decides our pod's flow to the cluster-local host now (ours leaves it to the next rule).
        now = module(topo, 'snat_explain', dict(fixed[2], dport=str(fixed[2]['dport'])))
        assert (now['verdict'], now['decided_by']['owner']) == ('masquerade', 'flannel'), now
        assert (one['verdict'], one['to'], one['decided_by']) == (
            answers[0]['verdict'], answers[0]['to'], answers[0]['decided_by']), (SEED, one, answers[0])
        assert any(n.startswith("after mode: the role's docker step removes IPv4: -A POSTROUTING -s 172.17.0.0/16")
                   for n in one['notes']), one['notes']
        assert any(n.startswith("after mode: the role's docker step edits /etc/docker/daemon.json and restarts "
                                "docker.service; the answer foresees that restart: after the restart with ip-masq off")
                   for n in one['notes']), one['notes']
        assert any(n.startswith("after mode: the role's cni step removes IPv4: ") for n in one['notes']), one['notes']
        assert any(n.startswith("after mode: the role's cni step edits %s/" % topo.cni_conf) for n in one['notes']), \
            one['notes']
        assert any(n.startswith("after mode: the role's flannel step removes IPv4: ") for n in one['notes']), one['notes']
        assert any(n.startswith("after mode: the role's flannel step edits /etc/systemd/system/flanneld.service and "
                                "restarts flanneld.service; the answer foresees that restart: after the restart "
                                "without --ip-masq") for n in one['notes']), one['notes']
        for answer in answers[:3]:
            assert (answer['decided_by'] or {}).get('owner') not in ('docker', 'cni', 'flannel'), answer
        # Now the role really runs: its policy (the node step's chain), then its daemon steps.
        res = module(topo, 'masq_chain', args)
        assert not res.get('failed'), (SEED, args, res.get('msg'))
        restarted = run_daemon_steps(topo, steps, {'flanneld.service': lambda: restart_flanneld(root),
                                                   'docker.service': lambda: fake_docker.restart(bin_dir, daemon_json)})
        assert restarted == ['flanneld.service', 'docker.service'] and not fake_docker.masquerades(bin_dir)
        assert 'FLANNEL' not in topo.nat_save()
        assert '172.17.0.0/16' not in topo.nat_save() and not [r for r in topo.cni_rules() if 'MASQUERADE' in r]
        topo.node.exec(['conntrack', '-F'], check=False)
        seen = send(topo, flows)
        tally = Sorted(expected)
        missing = []
        for flow, answer in zip(flows, answers):
            got = seen.get((flow['proto'], flow['dst'], flow['dport']))
            if got is None:
                missing.append((flow, answer['msg']))
            else:
                tally.add((args,), flow, answer, got)
    assert not missing, (SEED, missing[:5])
    assert not tally.wrong, (SEED, len(tally.wrong), tally.wrong[:5])
    assert (len(tally.unknown) + len(tally.ties)) * 20 < len(flows), (SEED, tally.unknown[:5], tally.ties[:5])
    assert not tally.ties, (SEED, len(tally.ties), tally.ties[:5])
    # The two containers' flows were answered and agreed (neither unknown).
    assert not [f for f, _r, _g in tally.unknown if f in fixed], tally.unknown
