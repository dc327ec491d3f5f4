"""The whole ip_masq role (tasks/main.yml, not one tasks file) against real
iptables in a network namespace, with its node-side parts: the config file,
the resync code and the systemd units are written into a temporary directory
(this machine's /etc, /usr/local and systemd are never touched), and the
command line of the rendered ip-masq-agent.service is run in the namespace, as
systemd would run it, to repair drift.

tests/versions.sh runs this file with the oldest supported and the newest
ansible-core (IMQ_ANSIBLE_BIN); pytest runs it with .venv's."""
import os
import shlex

import pytest
import yaml

from ipmasq_lab import netlab, policy_view
from ipmasq_lab.policy_view import FOREIGN

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, 'playbooks', 'role_sandbox.yml')
CIDRS = ['10.244.0.0/16', '10.30.0.0/16']   # cluster_east of inventories/example


def role_vars(base, **extra):
    values = netlab.role_node_paths(base)
    values.update({
        'ip_masq_nonmasquerade_cidrs': CIDRS,
        'ip_masq_masq_link_local': False,
        'ip_masq_install_packages': False,
        'ip_masq_docker': 'skip',
        'ip_masq_flannel': 'skip',
        'ip_masq_kubelet': 'skip',
        'ip_masq_audit': 'fail',
        'ip_masq_resync_systemctl': False,
    })
    values.update(extra)
    return values


def run(node, values, check_mode=False, fail=False):
    rc, tasks = netlab.playbook(node.ns, PLAYBOOK, extra_vars=values, backend=node.backend, check_mode=check_mode)
    failed = [(name, res.get('msg')) for name, res in tasks if res.get('failed')]
    if fail:
        assert rc != 0 and len(failed) == 1, failed
        return failed[0], [name for name, res in tasks if not res.get('skipped')]
    assert rc == 0 and not failed, failed
    return [changed_name(name.split(' : ', 1)[-1], res) for name, res in tasks if res.get('changed')]


NODE_TASK = "Validate, write the agent's files, apply the policy and audit, in one node run"
PARTS = {'files': "Write the agent's files", 'resync_code': 'Install the resync code', 'chain': 'Apply the SNAT policy'}


def changed_name(name, res):
    """The role's one task (ipmasq.agent.ip_masq) by the parts of its node
    run that changed, named as the tasks that did them before it."""
    if name != NODE_TASK:
        return name
    return '%s (%s)' % (name, ', '.join(PARTS[part] for part in PARTS if (res.get(part) or {}).get('changed')))


def service_command(unit_dir):
    """ExecStart= and Environment= of the rendered service, as systemd reads them."""
    with open(os.path.join(unit_dir, 'ip-masq-agent.service')) as handle:
        text = handle.read().replace('\\\n', ' ')
    argv, env = None, {}
    for line in text.splitlines():
        if line.startswith('ExecStart='):
            argv = [a.replace('$$', '$').replace('%%', '%') for a in shlex.split(line[len('ExecStart='):])]
        elif line.startswith('Environment='):
            env.update(item.split('=', 1) for item in shlex.split(line[len('Environment='):]))
    assert argv, text
    return argv, env


def test_the_role_four_steps_then_the_resync_repairs_then_absent(pnode, tmp_path):
    """On every policy backend (ip_masq_backend: iptables on both iptables
    backends, and nftables)."""
    node = pnode
    # kube-proxy's rules: foreign, kept, and accepted by the audit (ip_masq_audit: fail).
    for args in FOREIGN:
        if 'KUBE-POSTROUTING' in args:
            node.ipt(*args)
    foreign = node.foreign()
    values = role_vars(tmp_path, ip_masq_backend=node.policy)
    # masqLinkLocal false: link-local kept; nft lists the set's elements in address order.
    want = node.expect(CIDRS, nft_cidrs4=['10.30.0.0/16', '10.244.0.0/16'])

    assert run(node, values, check_mode=True), 'check mode reported no change'
    assert node.state() == {'ipv4': [], 'ipv6': [], 'nft': None}
    assert not os.path.exists(values['ip_masq_config_path'])
    # Check and diff mode: the one task shows one diff per file and one per table it would write.
    rc, tasks = netlab.playbook(node.ns, PLAYBOOK, extra_vars=values, backend=node.backend, check_mode=True, diff=True)
    assert rc == 0, tasks
    diffs = [res['diff'] for name, res in tasks if name.endswith(NODE_TASK)][0]
    headers = [d['after_header'] for d in diffs]
    unit_dir = values['ip_masq_unit_dir']
    for path in [values['ip_masq_config_path']] + [unit_dir + '/ip-masq-agent.' + u for u in ('service', 'timer', 'path')]:
        assert headers.count(path) == 1, (path, headers)
    tables = [h for h in headers if h.startswith(('nft list table', 'iptables')) or ' nat (IPv' in h]
    assert len(tables) == 1 and len(set(headers)) == len(headers), headers
    assert [d for d in diffs if d['after_header'] == values['ip_masq_config_path']][0]['after'].endswith(
        '  - 10.30.0.0/16\nmasqLinkLocal: false\nmasqLinkLocalIPv6: false\nresyncInterval: 60s\ncidrLimit: 64\n')
    assert node.state() == {'ipv4': [], 'ipv6': [], 'nft': None}
    assert not os.path.exists(values['ip_masq_config_path'])
    # One line says what the run would do; the audit (which reads the node as check mode left it) says the
    # same, and does not send the user to a module the role runs for them.
    node_run = [res for name, res in tasks if name.endswith(NODE_TASK)][0]
    assert '\n' not in node_run['msg'] and 'would write' in node_run['msg'], node_run['msg']
    assert 'IP-MASQ-AGENT: would write ' in node_run['msg'], node_run['msg']
    problems = node_run['audit'] and node_run.get('problems') or []
    assert problems and all('this run would apply it' in p for p in problems), problems
    assert 'run ipmasq.agent.masq_chain' not in repr(tasks)

    changed = run(node, values)
    assert 'Apply the SNAT policy' in ' '.join(changed), changed
    assert node.state() == want
    assert node.foreign() == foreign
    with open(values['ip_masq_config_path']) as handle:
        config = yaml.safe_load(handle)
    assert config['nonMasqueradeCIDRs'] == CIDRS and config['masqLinkLocal'] is False
    assert sorted(os.listdir(values['ip_masq_unit_dir'])) == [
        'ip-masq-agent.path', 'ip-masq-agent.service', 'ip-masq-agent.timer']

    assert run(node, values, check_mode=True) == []
    rc, tasks = netlab.playbook(node.ns, PLAYBOOK, extra_vars=values, backend=node.backend)
    assert rc == 0 and not [name for name, res in tasks if res.get('changed') or res.get('failed')], tasks
    assert [res['msg'] for name, res in tasks if name.endswith(NODE_TASK)] == ['no change']

    # The node-side resync, as systemd starts it (--backend from the role), repairs drift on its own.
    if node.policy == 'iptables':
        node.ipt('-F', 'IP-MASQ-AGENT')
    else:
        node.nft('flush', 'chain', 'inet', 'ip-masq-agent', 'postrouting')
    assert node.state() != want
    argv, env = service_command(values['ip_masq_unit_dir'])
    assert argv[argv.index('--backend') + 1] == node.policy
    env['PATH'] = os.pathsep.join([node.backend.path_dir, '/usr/sbin', '/usr/bin', '/sbin', '/bin'])
    proc = node.ns.exec(argv, check=False, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert node.state() == want
    assert node.foreign() == foreign

    absent = dict(values, ip_masq_state='absent')
    assert run(node, absent)
    assert node.state() == {'ipv4': [], 'ipv6': [], 'nft': None}
    assert node.foreign() == foreign
    assert os.listdir(values['ip_masq_unit_dir']) == []
    assert not os.path.exists(values['ip_masq_config_path'])
    assert run(node, absent) == []


def test_a_node_without_systemd_is_told_up_front_and_nothing_changes(nft_node, tmp_path):
    """The resync needs systemd: without /run/systemd/system the role stops before
    its first change, saying why and what to do."""
    values = role_vars(tmp_path, __ip_masq_systemd_dir=str(tmp_path / 'no-systemd-here'))
    before = nft_node.save(4), nft_node.save(6)
    (name, msg), ran = run(nft_node, values, fail=True)
    assert name.endswith(NODE_TASK), name
    assert 'localhost does not run systemd' in msg and 'ip_masq_resync_enabled: false' in msg
    assert 'Nothing was changed' in msg and 'no-systemd-here is missing' in msg
    assert (nft_node.save(4), nft_node.save(6)) == before
    assert not os.path.exists(values['ip_masq_config_path'])
    assert not [n for n in ran if 'Install' in n or 'Apply' in n], ran
    assert not os.listdir(values['ip_masq_unit_dir'])


# The extensions (ip_masq_exception_cidrs, ip_masq_source_cidrs): the role's
# listing, written by hand. Pods in 10.244.0.0/16 masquerade to 10.244.7.0/24
# (inside the kept 10.244.0.0/16) all the same; only pod traffic is rewritten.
EXC_COMMENT = '-m comment --comment "ip-masq-agent: an exception inside the cluster-local CIDRs is subject to MASQUERADE"'
EXT_IPT = [
    ':IP-MASQ-AGENT -',
    policy_view.JUMP % ('IP-MASQ-AGENT', 'IP-MASQ-AGENT'),
    '-A IP-MASQ-AGENT -s 10.244.0.0/16 -d 10.244.7.0/24 %s -m addrtype ! --dst-type LOCAL -j MASQUERADE' % EXC_COMMENT,
    '-A IP-MASQ-AGENT -d 169.254.0.0/16 ' + policy_view.RET,
    '-A IP-MASQ-AGENT -d 10.244.0.0/16 ' + policy_view.RET,
    '-A IP-MASQ-AGENT -d 10.30.0.0/16 ' + policy_view.RET,
    '-A IP-MASQ-AGENT -s 10.244.0.0/16 ' + policy_view.MASQ,
]
EXT_NFT = {
    'sets': {'nonmasq-ipv4': ('ipv4_addr', ['interval'], ['10.30.0.0/16', '10.244.0.0/16']),
             'exceptions-ipv4': ('ipv4_addr', ['interval'], ['10.244.7.0/24']),
             'sources-ipv4': ('ipv4_addr', ['interval'], ['10.244.0.0/16'])},
    'chains': {'postrouting': (policy_view.NFT_HEADER, [
        'ip saddr != @sources-ipv4 return comment "ip-masq-agent: traffic from other sources keeps its source address"',
        policy_view.NFT_LOCAL,
        'ip daddr @exceptions-ipv4 masquerade comment '
        '"ip-masq-agent: an exception inside the cluster-local CIDRs is subject to MASQUERADE"',
        'ip daddr 169.254.0.0/16 ' + policy_view.NFT_RET,
        'ip daddr @nonmasq-ipv4 ' + policy_view.NFT_RET,
        'meta nfproto ipv4 masquerade ' + policy_view.NFT_MASQ_COMMENT,
    ])},
    'other': [],
}


@pytest.mark.parametrize('kind', ['iptables-nft', 'nftables'])
def test_the_role_applies_the_extensions_and_the_resync_keeps_them(make_node, tmp_path, kind):
    """ip_masq_exception_cidrs and ip_masq_source_cidrs from the inventory to
    the node: the listing, the config file (the resync's input), a second
    run and a resync cycle that change nothing, and a cycle that repairs
    drift. Then a combination that makes no sense fails on the controller:
    nothing on the node changes."""
    node = make_node(kind)
    values = role_vars(tmp_path, ip_masq_backend=node.policy, ip_masq_audit='skip',
                       ip_masq_exception_cidrs=[' 10.244.7.0/24'], ip_masq_source_cidrs=['10.244.0.0/16'])
    want = ({'ipv4': [], 'ipv6': [], 'nft': EXT_NFT} if node.policy == 'nftables'
            else {'ipv4': EXT_IPT, 'ipv6': [], 'nft': None})
    assert 'Apply the SNAT policy' in ' '.join(run(node, values))
    assert node.state() == want
    with open(values['ip_masq_config_path']) as handle:
        config = yaml.safe_load(handle)
    assert config['exceptionCIDRs'] == ['10.244.7.0/24'] and config['sourceCIDRs'] == ['10.244.0.0/16']
    assert not {'masqueradeCIDRs', 'snatTo', 'snatToRequireLocal', 'outInterfaces'} & set(config)
    assert run(node, values) == []

    argv, env = service_command(values['ip_masq_unit_dir'])
    env['PATH'] = os.pathsep.join([node.backend.path_dir, '/usr/sbin', '/usr/bin', '/sbin', '/bin'])
    before = node.snapshot()
    proc = node.ns.exec(argv, check=False, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert node.snapshot() == before, 'the resync changed a policy that had not drifted'
    if node.policy == 'iptables':
        node.ipt('-F', 'IP-MASQ-AGENT')
    else:
        node.nft('flush', 'chain', 'inet', 'ip-masq-agent', 'postrouting')
    assert node.state() != want
    proc = node.ns.exec(argv, check=False, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert node.state() == want

    with open(values['ip_masq_config_path']) as handle:
        config_text = handle.read()
    before = node.snapshot()
    (name, msg), ran = run(node, dict(values, ip_masq_masquerade_cidrs=['192.0.2.0/24']), fail=True)
    # The role's one task refuses it on the controller: no later task runs, the node is not touched.
    assert name.endswith(NODE_TASK), name
    assert 'ip_masq_masquerade_cidrs of localhost cannot be combined with ip_masq_exception_cidrs' in msg, msg
    assert ran[-1].endswith(NODE_TASK), ran
    assert node.snapshot() == before
    with open(values['ip_masq_config_path']) as handle:
        assert handle.read() == config_text
