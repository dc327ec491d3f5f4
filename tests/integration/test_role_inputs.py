"""The role's variables in every form users give them (issue 26's table, one
test per row): typed YAML, ``-e name=value`` strings, JSON, Jinja. The node
applies exactly the policy the controller checked, the config file records it,
the resync builds the same from that file, and a second run changes nothing;
what is refused is refused on the controller, every problem at once, one line
each naming the host and the variable, and nothing is written.

Each role run is the whole role (tests/integration/playbooks/role_sandbox.yml)
inside a namespace of the test's own, its files under the test's tmp_path."""
import json
import os

import pytest
import yaml

from ipmasq_lab import netlab, policy_view
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.config import parse_config

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, 'playbooks', 'role_sandbox.yml')
OUTSIDE = os.path.join(HERE, 'playbooks', 'action_outside_role.yml')
NODE_TASK = "ipmasq.agent.ip_masq : Validate, write the agent's files, apply the policy and audit, in one node run"
FIVE = policy_view.ipt_expect(['169.254.0.0/16'] + policy_view.DEFAULT_CIDRS)


def base_vars(root, **extra):
    values = netlab.role_node_paths(root)
    values.update(ip_masq_install_packages=False, ip_masq_docker='skip', ip_masq_flannel='skip',
                  ip_masq_kubelet='skip', ip_masq_audit='skip', ip_masq_resync_systemctl=False)
    values.update(extra)
    return values


def role(node, values, args=(), check_mode=False, path=PLAYBOOK):
    """One role run: ``(rc, the one task's result, every task's name)``."""
    rc, tasks = netlab.playbook(node.ns, path, extra_vars=values, backend=node.backend, args=args,
                                check_mode=check_mode)
    one = [res for name, res in tasks if name.endswith(NODE_TASK.split(' : ')[1]) or name == 'Outside the role']
    return rc, (one[0] if one else {}), [name for name, _res in tasks]


def kv(**values):
    """``-e name=value`` for each: what a user types (the value arrives as a string)."""
    out = []
    for name, value in values.items():
        out += ['-e', '%s=%s' % (name, value)]
    return out


def config(values):
    with open(values['ip_masq_config_path'], encoding='utf-8') as handle:
        return handle.read()


def resync_cycle(node, values):
    """The rendered service's command, run in the node's namespace as systemd runs it."""
    from test_role_sandbox import service_command  # pylint: disable=import-outside-toplevel
    argv, env = service_command(values['ip_masq_unit_dir'])
    proc = node.ns.exec(argv, check=False, env=dict(node.backend.env(), **env))
    return proc.returncode, proc.stdout + proc.stderr


def nothing_written(node, values):
    assert not os.path.exists(values['ip_masq_config_path'])
    assert not os.path.exists(os.path.join(values['ip_masq_unit_dir'], 'ip-masq-agent.service'))
    assert policy_view.ours(node.rules(4)) == [] and policy_view.ours(node.rules(6)) == []


# -------------------------------------------------------------- rows applied

def test_false_given_on_the_command_line_is_false_on_the_node_and_stays_so(nft_node, tmp_path):
    """-e ip_masq_masq_link_local=false (and the four other booleans): the node
    kept link-local, wrote no ip6tables chain and no --random-fully (13 rules
    at 4af2eab); the resync, which reads the config file, agrees; a second run
    changes nothing."""
    values = base_vars(tmp_path, ip_masq_resync_enabled=True)
    args = kv(ip_masq_masq_link_local='false', ip_masq_enable_ipv6='false', ip_masq_random_fully='false',
              ip_masq_nomasq_all_reserved_ranges='false', ip_masq_masq_link_local_ipv6='false')
    rc, one, _names = role(nft_node, values, args)
    assert rc == 0, one.get('msg')
    assert policy_view.ours(nft_node.rules(4)) == FIVE
    assert policy_view.ours(nft_node.rules(6)) == []
    assert '--random-fully' not in nft_node.save(4)
    settings, _warnings = parse_config(config(values))
    assert settings['masq_link_local'] is False and settings['masq_link_local_ipv6'] is False
    rc, out = resync_cycle(nft_node, values)
    assert rc == 0, out
    assert 'repaired' not in out and policy_view.ours(nft_node.rules(4)) == FIVE
    rc, one, _names = role(nft_node, values, args)
    assert rc == 0 and one['changed'] is False, one.get('changed_parts')


def test_an_interface_given_as_a_string_is_one_interface_for_the_node_and_the_resync(nft_node, tmp_path):
    """-e ip_masq_out_interfaces=eth0: the config file listed "e", "t", "h", "0"
    at 4af2eab, and the resync rewrote the chain for those four names."""
    values = base_vars(tmp_path, ip_masq_resync_enabled=True)
    rc, one, _names = role(nft_node, values, kv(ip_masq_out_interfaces='eth0'))
    assert rc == 0, one.get('msg')
    assert parse_config(config(values))[0]['out_interfaces'] == ['eth0']
    before = policy_view.ours(nft_node.rules(4))
    assert any('-o eth0' in line for line in before) and not any('-o e ' in line for line in before)
    rc, out = resync_cycle(nft_node, values)
    assert rc == 0, out
    assert policy_view.ours(nft_node.rules(4)) == before


@pytest.mark.parametrize('given', ['t', 1.0, '{{ 1 == 1 }}'])
def test_resync_enabled_as_ansible_reads_it(nft_node, tmp_path, given):
    """ip_masq_resync_enabled: t (or 1.0): the spec said true, the action's own
    as_bool said false and removed the resync's units and code (at 4af2eab)."""
    values = base_vars(tmp_path, ip_masq_resync_enabled=given)
    rc, one, _names = role(nft_node, values)
    assert rc == 0, one.get('msg')
    assert os.path.exists(os.path.join(values['ip_masq_unit_dir'], 'ip-masq-agent.timer'))
    assert one['settings']['ip_masq_resync_enabled'] is True


@pytest.mark.parametrize('extra', [
    {'ip_masq_to_ports': [1024, 2000]},
    {'ip_masq_to_ports': 1024},
    {'ip_masq_cidr_limit': 100},
    {'ip_masq_cidr_limit': 64.0},
    {'ip_masq_audit': 'warn', 'ip_masq_audit_allow': 'docker'},
    {'ip_masq_out_interfaces': 5},
], ids=['ports-ints', 'ports-int', 'limit-100', 'limit-64.0', 'allow-string', 'interfaces-int'])
def test_values_the_node_refused_are_converted_once_on_the_controller(nft_node, tmp_path, extra):
    """Accepted on the controller and refused on the node after the config file,
    the units and the code were written (or "'_AnsibleTaggedInt' object is not
    iterable"), at 4af2eab: now converted as ansible-core converts them, once,
    and the node applies what the controller checked."""
    values = base_vars(tmp_path, ip_masq_resync_enabled=False, **extra)
    rc, one, _names = role(nft_node, values)
    assert rc == 0, one.get('msg')
    assert one['chain']['changed'] is True
    rules = policy_view.ours(nft_node.rules(4))     # the node's own nat table, not the result
    assert any(' -j MASQUERADE' in line for line in rules), rules
    if 'ip_masq_to_ports' in extra:
        assert any('--to-ports 1024' in line for line in rules), rules
    if 'ip_masq_out_interfaces' in extra:
        assert any(' -o 5 ' in line for line in rules), rules
    rc, one, _names = role(nft_node, values)
    assert rc == 0 and one['changed'] is False


# -------------------------------------------------------------- rows refused

def refused(node, tmp_path, extra=None, args=()):
    values = base_vars(tmp_path, ip_masq_resync_enabled=True, **(extra or {}))
    rc, one, names = role(node, values, args)
    assert rc != 0 and one.get('failed'), one
    nothing_written(node, values)
    assert not any('Run the steps' in name for name in names if one.get('failed'))
    return one['msg']


def test_an_allow_entry_the_audit_refuses_is_refused_before_anything_is_written(nft_node, tmp_path):
    """ip_masq_audit_allow: [1]: refused on the node after the chain was applied (4af2eab)."""
    msg = refused(nft_node, tmp_path, {'ip_masq_audit': 'warn', 'ip_masq_audit_allow': [1]})
    assert msg.startswith('ip_masq_audit_allow of localhost: allow[0] is 1') and len(msg.splitlines()) == 1


def test_messages_name_the_role_variable_and_the_host_not_a_filter_option(nft_node, tmp_path):
    """-e ip_masq_allow_catch_all=false / -e ip_masq_resync_interval=60: the
    messages spoke of a filter's option (allow_catch_all, the go_duration filter)."""
    msg = refused(nft_node, tmp_path, {'ip_masq_nonmasquerade_cidrs': ['0.0.0.0/0']},
                  kv(ip_masq_allow_catch_all='false', ip_masq_resync_interval='60'))
    lines = msg.splitlines()
    assert len(lines) == 2, msg
    assert lines[0].startswith('ip_masq_nonmasquerade_cidrs of localhost') and 'ip_masq_allow_catch_all' in lines[0]
    assert lines[1].startswith('ip_masq_resync_interval of localhost: "60"')
    assert 'go_duration' not in msg and 'allow_catch_all must' not in msg


def test_every_problem_in_one_run_types_and_values_together(nft_node, tmp_path):
    """ip_masq_masq_link_local: maybe plus three bad CIDRs: only the boolean was reported."""
    msg = refused(nft_node, tmp_path, {'ip_masq_masq_link_local': 'maybe',
                                       'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8', 'banana'],
                                       'ip_masq_exception_cidrs': ['10.1.0.0/33'],
                                       'ip_masq_source_cidrs': ['pods']})
    lines = msg.splitlines()
    assert lines[0] == 'ip_masq_masq_link_local of localhost: must be true or false, got a string: "maybe".'
    assert [line.split(' of ')[0] for line in lines[1:]] == [
        'ip_masq_nonmasquerade_cidrs', 'ip_masq_exception_cidrs', 'ip_masq_source_cidrs']
    assert "'banana'" in lines[1] and '10.1.0.0/33' in lines[2] and "'pods'" in lines[3]


@pytest.mark.parametrize('interval', ['1ns', '499us'])
def test_an_interval_systemd_would_round_to_zero_is_refused(nft_node, tmp_path, interval):
    """ip_masq_resync_interval: 1ns was accepted and the timer got OnUnitActiveSec=0s."""
    msg = refused(nft_node, tmp_path, {'ip_masq_resync_interval': interval})
    assert msg.startswith('ip_masq_resync_interval of localhost: %s is shorter than a millisecond' % interval)


def test_a_type_error_under_tags_is_one_line_not_the_spec_dump(nft_node, tmp_path):
    """Any --tags skipped ip_masq_args, and a type error became ansible-core's 15 KB dump."""
    values = base_vars(tmp_path, ip_masq_cidr_limit='many')
    rc, one, names = role(nft_node, values, ['--tags', 'ip_masq_chain'])
    assert rc != 0 and one['msg'] == 'ip_masq_cidr_limit of localhost: must be a whole number, got a string: "many".'
    assert not any('Validating arguments' in name for name in names)
    assert 'argument_spec_data' not in json.dumps(one)
    nothing_written(nft_node, values)


# -------------------------------------------------------------- the action on its own

def test_the_action_outside_the_role_validates_and_applies(nft_node, tmp_path):
    """ipmasq.agent.ip_masq used outside the role, even with validate_only:
    "Task failed: 'ip_masq_state'" (a KeyError) at 4af2eab."""
    values = base_vars(tmp_path, ip_masq_resync_enabled=False, ip_masq_nonmasquerade_cidrs=['10.244.0.0/16'])
    rc, tasks = netlab.playbook(nft_node.ns, OUTSIDE, extra_vars=dict(values, validate_only=True),
                                backend=nft_node.backend)
    ((_name, res),) = [(n, r) for n, r in tasks if n == 'Outside the role']
    assert rc == 0, res.get('msg')
    assert res['masq_chain']['nonmasquerade_cidrs'] == ['10.244.0.0/16']
    assert policy_view.ours(nft_node.rules(4)) == []
    rc, tasks = netlab.playbook(nft_node.ns, OUTSIDE, extra_vars=dict(values, validate_only=False),
                                backend=nft_node.backend)
    ((_name, res),) = [(n, r) for n, r in tasks if n == 'Outside the role']
    assert rc == 0, res.get('msg')
    assert policy_view.ours(nft_node.rules(4)) == policy_view.ipt_expect(['169.254.0.0/16', '10.244.0.0/16'])
    assert yaml.safe_load(config(values))['nonMasqueradeCIDRs'] == ['10.244.0.0/16']


# -------------------------------------------------------------- the node module on its own

NODE_PLAYBOOK = os.path.join(HERE, 'playbooks', 'node_chain.yml')


@pytest.mark.parametrize('cidrs,allow,fragment', [
    (['fd00::%eth0/8'], False, "'fd00::%eth0/8': an IPv6 zone index"),
    (['0.0.0.0/0'], False, "'0.0.0.0/0' covers all of IPv4"),
    (['10.0.0.0/8', '10.0.0.0/8'], False, "[1] '10.0.0.0/8': a duplicate of [0] '10.0.0.0/8'"),
    (['0.0.0.0/1', '128.0.0.0/1', '10.0.0.0/8'], False, 'together cover all of IPv4'),
], ids=['zone', 'catch-all', 'duplicates', 'catch-all-two'])
def test_the_node_module_refuses_what_the_controller_refuses(nft_node, tmp_path, cidrs, allow, fragment):
    """ipmasq.agent.ip_masq_node called directly with fd00::%eth0/8 (the zone was
    dropped), 0.0.0.0/0 (nothing masqueraded) or duplicates (only a warning):
    applied at 4af2eab; refused now, before its files part writes anything."""
    written = str(tmp_path / 'etc' / 'agent-config')
    node_args = {'files': {'files': [{'path': written, 'content': 'x\n'}]},
                 'chain': {'nonmasquerade_cidrs': cidrs, 'ipv6': True}}
    if allow:
        node_args['allow_catch_all'] = True
    rc, tasks = netlab.playbook(nft_node.ns, NODE_PLAYBOOK, extra_vars={'node_args': node_args},
                                backend=nft_node.backend)
    ((_name, res),) = [(n, r) for n, r in tasks if n == 'Node run']
    assert rc != 0 and res.get('failed'), res
    assert fragment in res['msg'] and res['msg'].rstrip().endswith('Nothing was changed.'), res['msg']
    assert res.get('failed_part') == 'chain'
    assert not os.path.exists(written)
    assert policy_view.ours(nft_node.rules(4)) == [] and policy_view.ours(nft_node.rules(6)) == []


def test_the_node_module_takes_a_catch_all_the_role_allowed(nft_node, tmp_path):
    """ip_masq_allow_catch_all: true reaches the node as allow_catch_all."""
    node_args = {'chain': {'nonmasquerade_cidrs': ['0.0.0.0/0']}, 'allow_catch_all': True}
    rc, tasks = netlab.playbook(nft_node.ns, NODE_PLAYBOOK, extra_vars={'node_args': node_args},
                                backend=nft_node.backend)
    ((_name, res),) = [(n, r) for n, r in tasks if n == 'Node run']
    assert rc == 0 and res['chain']['changed'] is True, res.get('msg')


# -------------------------------------------------------------- the result's size

def test_the_result_keeps_its_keys_but_not_the_node_module_s_arguments_below_vvv(nft_node, tmp_path):
    """The node module's arguments (ansible-core's invocation: the config file's and the units' whole text) are
    not kept in the role task's result below -vvv, where no callback shows them: every documented key is."""
    values = base_vars(tmp_path, ip_masq_resync_enabled=True, ip_masq_audit='warn')
    for _run in range(2):          # the first run writes, the second changes nothing
        rc, one, _names = role(nft_node, values)
        assert rc == 0, one.get('msg')
    assert not one['changed'] and one['steps'] == [] and one['msg'] == 'no change'
    assert 'invocation' not in one
    documented = ('audit', 'chain', 'changed_parts', 'changed_paths', 'daemon_steps', 'facts', 'files', 'masq_chain',
                  'msg', 'parts', 'resync_code', 'resync_files', 'steps', 'units')
    assert [key for key in documented if key not in one] == []
    assert one['chain']['changed'] is False and one['resync_code']['changed'] is False
