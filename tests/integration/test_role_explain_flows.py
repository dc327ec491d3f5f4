"""ip_masq_explain_flows: the role's own form of ipmasq.agent.snat_explain
(issue 35: "After the role ... This is what --check should say about SNAT").

- In every form users give the variable (typed YAML in the inventory,
  group_vars, a Jinja expression, a ``key=value`` string, ``-e`` JSON, ``-e
  key=value``): good flows are read as the module takes them, a bad one is
  refused on the controller naming the variable, the host, the index and the
  value (one validate-only run carries the inventory's forms, no node is
  contacted), and a whole role run with a bad flow writes nothing.
- On real packets: on a node of the lab's topology with nothing applied,
  ``--check`` says, per flow, what the site run will do (after mode); the real
  run then says the same, and the packets agree.

Cost: three validate-only runs, one refused role run and two role runs
(about 20 s on a quiet machine)."""
import json
import os
import subprocess

import pytest
import yaml

from ipmasq_lab import netlab
from ipmasq_lab.topology import CL4, EXT4, LL4, NODE_EXT4, POD4, Topology
# autouse: the root namespace stays as it was.
from test_packets import root_namespace_untouched  # noqa: F401 pylint: disable=unused-import
from test_role_var_checks import node_root, role, snapshot

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)')

HERE = os.path.dirname(os.path.abspath(__file__))
VALIDATE = os.path.join(HERE, 'playbooks', 'role_validate.yml')
SANDBOX = os.path.join(HERE, 'playbooks', 'role_sandbox.yml')
VALIDATE_TASK = 'Validate the settings on the controller'
NODE_TASK = "Validate, write the agent's files, apply the policy and audit, in one node run"
EXPLAIN_TASK = 'Explain each flow of ip_masq_explain_flows'
SAY_TASK = 'Say what each flow does'
GOOD = {'src': '10.244.1.2', 'dst': '203.0.113.10', 'proto': 'tcp', 'dport': 443}
NOT_AN_ADDRESS = "'203.0.113.300' is not an IPv4 or IPv6 address"


def validate(inventory, args=()):
    """The role's validation (tasks_from validate.yml) over ``inventory``'s hosts: ``{host: result}``."""
    argv = [os.path.join(netlab.VENV_BIN, 'ansible-playbook'), '-i', inventory, VALIDATE] + list(args)
    env = netlab.ansible_env()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    data = json.loads(proc.stdout[proc.stdout.index('{'):])
    for play in data['plays']:
        for task in play['tasks']:
            if task['task']['name'].endswith(VALIDATE_TASK):
                return task['hosts']
    raise AssertionError(proc.stderr[-2000:])


def inventory(tmp_path, hosts, groups):
    """Hosts with their variables inline (typed YAML), and each group's in its group_vars file."""
    (tmp_path / 'group_vars').mkdir()
    tree = {'all': {'hosts': dict((name, dict(values, ansible_connection='local')) for name, values in hosts.items()),
                    'children': dict((group, {'hosts': {group + '-1': {'ansible_connection': 'local'}}})
                                     for group in groups)}}
    for group, values in groups.items():
        (tmp_path / 'group_vars' / (group + '.yml')).write_text(yaml.safe_dump(values), encoding='utf-8')
    (tmp_path / 'hosts.yml').write_text(yaml.safe_dump(tree), encoding='utf-8')
    return str(tmp_path / 'hosts.yml')


def test_every_form_is_read_as_the_module_takes_it_and_a_bad_flow_names_itself(tmp_path):
    flows = 'ip_masq_explain_flows'
    inv = inventory(tmp_path, {
        'typed': {flows: [GOOD, {'src': '10.244.1.2', 'dst': '10.10.0.10', 'mark': 16384}]},
        'jinja': {flows: "{{ [{'src': '10.244.1.2', 'dst': '203.0.113.10'}] }}"},
        'string': {flows: 'src=10.244.1.2 dst=203.0.113.10 proto=udp dport=53,src=10.244.1.2 dst=10.10.0.10'},
        'typed-bad': {flows: [GOOD, {'src': '10.244.1.2', 'dst': '203.0.113.300'}]},
        'element-bad': {flows: [GOOD, '10.0.0.1']},
        'string-bad': {flows: 'src=10.244.1.2 dst=203.0.113.10,src=10.244.1.2 dst=203.0.113.10 proto=tcp dport=70000'},
        'unset': {},
    }, {
        'group': {flows: [{'src': 'fd00:244:1::2', 'dst': '2001:db8:e::10', 'out_interface': 'eth0'}]},
        'groupbad': {flows: [{'src': '10.244.1.2', 'dst': 'fd00::1'}]},
    })
    hosts = validate(inv)
    ok = dict((name, res['explain']['flows']) for name, res in hosts.items() if not res.get('failed'))
    assert ok == {
        'typed': [dict(GOOD, dport='443'), {'src': '10.244.1.2', 'dst': '10.10.0.10', 'mark': '16384'}],
        'jinja': [{'src': '10.244.1.2', 'dst': '203.0.113.10'}],
        'string': [{'src': '10.244.1.2', 'dst': '203.0.113.10', 'proto': 'udp', 'dport': '53'},
                   {'src': '10.244.1.2', 'dst': '10.10.0.10'}],
        'group-1': [{'src': 'fd00:244:1::2', 'dst': '2001:db8:e::10', 'out_interface': 'eth0'}],
        'unset': [],
    }, hosts
    # validate.yml's result carries the after the fleet play passes: this host's policy and daemon steps.
    assert hosts['unset']['explain']['after'] == {'chain': hosts['unset']['masq_chain'], 'allow_catch_all': False,
                                                  'daemons': hosts['unset']['daemon_steps']}
    failed = dict((name, res['msg']) for name, res in hosts.items() if res.get('failed'))
    assert sorted(failed) == ['element-bad', 'groupbad-1', 'string-bad', 'typed-bad'], failed
    assert failed['typed-bad'].startswith('ip_masq_explain_flows[1].dst of typed-bad: %s' % NOT_AN_ADDRESS)
    assert failed['element-bad'] == ('ip_masq_explain_flows[1] of element-bad: must be a mapping, got a string: '
                                     '"10.0.0.1".')
    assert failed['string-bad'].startswith("ip_masq_explain_flows[1].dport of string-bad: '70000' is not a port")
    assert failed['groupbad-1'] == ('ip_masq_explain_flows[0] of groupbad-1: src 10.244.1.2 and dst fd00::1 are '
                                    'not of one IP family.')
    # -e as JSON and as key=value, over every host (extra vars win).
    (tmp_path / 'one').mkdir()
    one = inventory(tmp_path / 'one', {'e-1': {}}, {})
    hosts = validate(one, ['-e', json.dumps({flows: [GOOD, dict(GOOD, proto='icmp')]})])
    assert hosts['e-1']['msg'].startswith("ip_masq_explain_flows[1].dport of e-1: '443' needs proto"), hosts
    hosts = validate(one, ['-e', '%s="src=10.244.1.2 dst=203.0.113.10,src=10.244.1.2 dst=203.0.113.300"' % flows])
    assert hosts['e-1']['msg'].startswith('ip_masq_explain_flows[1].dst of e-1: %s' % NOT_AN_ADDRESS), hosts


def test_a_bad_flow_fails_the_role_before_the_node_is_touched(nft_node, tmp_path):
    """The whole role, -e key=value: refused by the one task, nothing written, no step run."""
    root, values = node_root(tmp_path)
    before = snapshot(nft_node, root)
    rc, one, names = role(nft_node, values, [
        '-e', 'ip_masq_explain_flows="src=10.244.1.2 dst=203.0.113.10 mark=0x1ffffffff"'])
    assert rc != 0 and one['msg'].startswith(
        "ip_masq_explain_flows[0].mark of localhost: '0x1ffffffff' is not a packet mark"), one
    assert snapshot(nft_node, root) == before
    assert not any('Run the steps' in name for name in names)


def answers(tasks):
    """``(the one task's result, the explain task's per-flow results, the lines said)``."""
    one = [res for name, res in tasks if name.endswith(NODE_TASK)][0]
    each = [res for name, res in tasks if name.endswith(EXPLAIN_TASK)]
    said = [res for name, res in tasks if name.endswith(SAY_TASK)]
    return one, (each[0]['results'] if each else []), (said[0]['msg'] if said else None)


def test_check_says_what_the_run_will_do_and_the_packets_agree(tmp_path):
    """Nothing applied yet: --check answers after the role (ours masquerades the external flow, the cluster-local
    and link-local ones keep their source) with the answer now beside it (unchanged); the real run answers the
    same, and the receivers see what it said."""
    flows = [{'src': POD4, 'dst': dst, 'proto': 'tcp', 'dport': '8080'} for dst in (EXT4, CL4, LL4)]
    with Topology.with_tools('nft', ipv6=False) as topo:
        values = netlab.role_node_paths(tmp_path)
        values.update(ip_masq_install_packages=False, ip_masq_docker='skip', ip_masq_flannel='skip',
                      ip_masq_kubelet='skip', ip_masq_cni='skip', ip_masq_audit='skip',
                      ip_masq_resync_enabled=False, ip_masq_explain_flows=flows)
        before = topo.rules_now()
        rc, tasks = topo.playbook(SANDBOX, values, check_mode=True)
        one, checked, said = answers(tasks)
        assert rc == 0, one.get('msg')
        assert one['steps'][-1] == 'explain' and one['explain']['flows'] == flows, one.get('steps')
        assert topo.rules_now() == before
        assert [(r['after'], r['now']['verdict'], r['verdict']) for r in checked] == [
            (True, 'unchanged', 'masquerade'), (True, 'unchanged', 'unchanged'), (True, 'unchanged', 'unchanged')]
        assert checked[0]['decided_by']['owner'] == 'ip-masq-agent'
        assert said == [r['msg'] for r in checked], said
        # The real run, the flows given as -e key=value this time.
        text = ','.join(' '.join('%s=%s' % item for item in flow.items()) for flow in flows)
        rc, tasks = topo.playbook(SANDBOX, dict((k, v) for k, v in values.items() if k != 'ip_masq_explain_flows'),
                                  args=['-e', 'ip_masq_explain_flows="%s"' % text])
        one, real, said = answers(tasks)
        assert rc == 0, one.get('msg')
        facts = [res for name, res in tasks if name.endswith('Keep the answers as ip_masq_explain')][0]
        kept = facts['ansible_facts']['ip_masq_explain']['flows']
        assert [(r['after'], r['verdict'], r['decided_by'] and r['decided_by']['owner']) for r in real] == [
            (False, r['verdict'], r['decided_by'] and r['decided_by']['owner']) for r in checked]
        assert [(k['flow'], k['verdict'], k['msg']) for k in kept] == [
            (flow, r['verdict'], r['msg']) for flow, r in zip(flows, real)]
        seen = topo.probe(['external', 'cluster-local', 'link-local'])
        assert seen == {'external': NODE_EXT4, 'cluster-local': POD4, 'link-local': POD4}, seen
