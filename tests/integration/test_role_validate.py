"""The ip_masq role refuses a bad inventory on the controller, naming the
host and every bad entry, before any node is touched (no node is contacted
here: the hosts are names only)."""
import json
import os
import subprocess

import pytest
import yaml

from ipmasq_lab import netlab
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.config import parse_config

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(netlab.ROOT, 'inventories', 'example')


def play(playbook, inventory, extra=None):
    argv = [os.path.join(netlab.VENV_BIN, 'ansible-playbook'), '-i', inventory,
            os.path.join(HERE, 'playbooks', playbook)]
    if extra:
        argv += ['-e', extra]
    env = netlab.ansible_env()
    env['ANSIBLE_STDOUT_CALLBACK'] = 'default'
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)


def write_inventory(tmp_path, east, west):
    (tmp_path / 'group_vars').mkdir()
    (tmp_path / 'hosts.yml').write_text(
        'all:\n  children:\n    cluster_east:\n      hosts:\n        east-1:\n'
        '    cluster_west:\n      hosts:\n        west-1:\n')
    (tmp_path / 'group_vars' / 'cluster_east.yml').write_text(east)
    (tmp_path / 'group_vars' / 'cluster_west.yml').write_text(west)
    return str(tmp_path / 'hosts.yml')


def test_example_inventory_validates_and_normalises():
    proc = play('role_validate.yml', os.path.join(EXAMPLE, 'hosts.yml'))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"10.244.0.0/16"' in proc.stdout and '"fd00:18::/48"' in proc.stdout


def test_bad_inventory_fails_naming_host_and_every_bad_entry(tmp_path):
    inv = write_inventory(
        tmp_path,
        'ip_masq_nonmasquerade_cidrs: [10.244.0.0/16]\n',
        'ip_masq_nonmasquerade_cidrs: [10.0.0.1/8, banana, 172.18.0.0/16]\n')
    proc = play('role_validate.yml', inv)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert 'ok: [east-1]' in out
    assert 'fatal: [west-1]' in out
    assert 'west-1' in out and "'10.0.0.1/8'" in out and '10.0.0.0/8' in out and "'banana'" in out
    assert 'fatal: [east-1]' not in out


def test_bad_entries_get_advice_the_role_can_follow(tmp_path):
    """The role has no bare_address or duplicates option: its messages must not
    suggest them, only what to write in the inventory."""
    inv = write_inventory(tmp_path, 'ip_masq_nonmasquerade_cidrs: [10.244.0.0/16, 10.30.0.7, 10.244.0.0/16]\n',
                          'ip_masq_nonmasquerade_cidrs: [10.0.0.0/8]\n')
    proc = play('role_validate.yml', inv)
    out = proc.stdout + proc.stderr
    assert 'fatal: [east-1]' in out and 'fatal: [west-1]' not in out
    assert "'10.30.0.7': a bare address, not a CIDR: write 10.30.0.7/32 for the single host" in out
    assert "duplicate of [0] '10.244.0.0/16'; remove it" in out
    assert 'bare_address' not in out and 'duplicates=' not in out


def test_upstream_rule_format_keeps_a_cidr_listed_twice(tmp_path):
    """As the upstream agent, which writes one rule per entry: the same list
    that the docs format refuses passes with ip_masq_rule_format: upstream."""
    twice = 'ip_masq_nonmasquerade_cidrs: [10.244.0.0/16, 10.30.0.0/16, 10.244.0.0/16]\n'
    inv = write_inventory(tmp_path, twice + 'ip_masq_rule_format: upstream\n', twice)
    proc = play('role_validate.yml', inv)
    out = proc.stdout + proc.stderr
    assert 'fatal: [east-1]' not in out and 'fatal: [west-1]' in out
    assert "duplicate of [0] '10.244.0.0/16'; remove it" in out
    east = out[out.index('ok: [east-1]'):]
    assert '"10.244.0.0/16",\n        "10.30.0.0/16",\n        "10.244.0.0/16"' in east, east


def test_catch_all_is_refused_with_advice(tmp_path):
    inv = write_inventory(tmp_path, 'ip_masq_nonmasquerade_cidrs: [0.0.0.0/1, 128.0.0.0/1]\n',
                          'ip_masq_nonmasquerade_cidrs: [10.0.0.0/8]\n')
    proc = play('role_validate.yml', inv)
    out = proc.stdout + proc.stderr
    assert 'fatal: [east-1]' in out and 'fatal: [west-1]' not in out
    assert 'all of IPv4' in out and 'state: absent' in out


def test_ipv6_cidr_while_ipv6_off_is_refused(tmp_path):
    inv = write_inventory(tmp_path, 'ip_masq_nonmasquerade_cidrs: [10.0.0.0/8, "fd00::/8"]\n',
                          'ip_masq_nonmasquerade_cidrs: [10.0.0.0/8, "fd00::/8"]\nip_masq_enable_ipv6: true\n')
    proc = play('role_validate.yml', inv)
    out = proc.stdout + proc.stderr
    assert 'fatal: [east-1]' in out and 'fd00::/8' in out and 'ip_masq_enable_ipv6 is false' in out
    assert 'fatal: [west-1]' not in out


def test_a_wrong_type_reads_as_one_line_per_variable_without_the_spec_dump(tmp_path):
    """The role's one task checks the types with ansible-core's validator on the
    role's spec, one line per bad variable naming the host; ansible-core's own
    check (which would print the whole spec) does not run: the entry point is not
    called main."""
    inv = write_inventory(tmp_path, '', '')
    proc = play('role_argspec.yml', inv, '{"ip_masq_nonmasquerade_cidrs": {"a": 1}, "ip_masq_cidr_limit": "many",'
                                         ' "ip_masq_jump_position": "last"}')
    out = (proc.stdout + proc.stderr).replace('\\"', '"')
    assert proc.returncode != 0
    assert 'ip_masq_nonmasquerade_cidrs of east-1: must be a list of strings, got a mapping: {"a": 1}.' in out
    assert 'ip_masq_cidr_limit of east-1: must be a whole number, got a string: "many".' in out
    assert 'ip_masq_jump_position of east-1: must be one of append, first, got a string: "last".' in out
    # Not the spec dump, not the internal class names, and ansible-core's task never ran.
    assert 'argument_spec_data' not in out and 'description' not in out and '<class' not in out
    assert 'Validating arguments against arg spec' not in out
    assert 'Run the steps this node still needs' not in out


@pytest.mark.parametrize('extra,fragment', [
    ('{"ip_masq_jump_position": "last"}', 'ip_masq_jump_position'),
    ('{"ip_masq_state": "gone"}', 'ip_masq_state'),
    ('{"ip_masq_docker": "maybe"}', 'ip_masq_docker'),
    ('{"ip_masq_nonmasquerade_cidrs": {"a": 1}}', 'ip_masq_nonmasquerade_cidrs'),
])
def test_argument_spec_rejects_bad_values_before_any_task(tmp_path, extra, fragment):
    inv = write_inventory(tmp_path, '', '')
    proc = play('role_argspec.yml', inv, extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert '%s of east-1: must be' % fragment in out
    # Nothing after the argument check ran.
    assert 'Run the steps this node still needs' not in out


@pytest.mark.parametrize('interval,ok', [
    ('60s', True), ('1m0s', True), ('1.5h', True), ('0s', False), ('1d', False), ('soon', False)])
def test_resync_interval_is_a_go_duration(tmp_path, interval, ok):
    inv = write_inventory(tmp_path, 'ip_masq_resync_interval: "%s"\n' % interval, '')
    proc = play('role_validate.yml', inv)
    out = proc.stdout + proc.stderr
    if ok:
        assert 'fatal: [east-1]' not in out, out
    else:
        assert 'fatal: [east-1]' in out and interval in out


# ---------------------------------------------------------------- the extensions
# (ip_masq_exception_cidrs, ip_masq_masquerade_cidrs, ip_masq_snat_to,
# ip_masq_snat_to_require_local, ip_masq_source_cidrs, ip_masq_out_interfaces).
# One ansible-playbook run per test, one host per case: the hosts are names
# only, and the play runs the role's validation and renders the config file
# on the controller (playbooks/role_config.yml).

def run_hosts(tmp_path, hosts):
    """{host: (failure message or None, rendered config file or None)} of one run."""
    (tmp_path / 'hosts.yml').write_text(yaml.safe_dump({'all': {'hosts': hosts}}))
    argv = [os.path.join(netlab.VENV_BIN, 'ansible-playbook'), '-i', str(tmp_path / 'hosts.yml'),
            os.path.join(HERE, 'playbooks', 'role_config.yml')]
    env = netlab.ansible_env({'ANSIBLE_FORKS': str(len(hosts))})
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    data = json.loads(proc.stdout[proc.stdout.index('{'):])
    out = {host: (None, None) for host in hosts}
    for task in data['plays'][0]['tasks']:
        for host, result in task['hosts'].items():
            if result.get('failed'):
                out[host] = (result['msg'], None)
            elif task['task']['name'] == 'Show the config file':
                out[host] = (None, result['msg'])
    return out


BAD_ENTRIES = {
    'exc': ({'ip_masq_exception_cidrs': ['10.1.0.0/16', '10.2.0.1/16']},
            ['ip_masq_exception_cidrs of exc', "'10.2.0.1/16'", '10.2.0.0/16']),
    'masq': ({'ip_masq_masquerade_cidrs': ['banana']}, ['ip_masq_masquerade_cidrs of masq', "'banana'"]),
    'src': ({'ip_masq_source_cidrs': ['10.244.0.0/33']}, ['ip_masq_source_cidrs of src', "'10.244.0.0/33'"]),
    'src-bare': ({'ip_masq_source_cidrs': ['10.244.0.7']},
                 ['ip_masq_source_cidrs of src-bare', 'write 10.244.0.7/32']),
    'snat-cidr': ({'ip_masq_snat_to': ['203.0.113.0/24']},
                  ['ip_masq_snat_to of snat-cidr', "'203.0.113.0/24'", 'a prefix length has no place here']),
    'snat-two': ({'ip_masq_snat_to': ['203.0.113.7', '203.0.113.8']},
                 ['ip_masq_snat_to of snat-two', "'203.0.113.8'", 'at most one address or range per family']),
    'snat-back': ({'ip_masq_snat_to': ['203.0.113.9-203.0.113.7']},
                  ['ip_masq_snat_to of snat-back', 'write 203.0.113.7-203.0.113.9']),
    'snat-v6': ({'ip_masq_snat_to': ['2001:db8::7']},
                ['ip_masq_snat_to of snat-v6', "'2001:db8::7'", 'ip_masq_enable_ipv6: false']),
    'if': ({'ip_masq_out_interfaces': ['eth0', 'a-name-too-long0', '-eth1', 'eth*', 'eth 2', '..']},
           ['ip_masq_out_interfaces of if', '"a-name-too-long0"', '"-eth1"', '"eth*"', '"eth 2"', '".."',
            'are not interface names']),
    'v6-off': ({'ip_masq_source_cidrs': ['10.244.0.0/16', 'fd00:10::/64']},
               ['ip_masq_source_cidrs of v6-off', 'fd00:10::/64', 'ip_masq_enable_ipv6 is false']),
}


def test_bad_entries_of_the_extensions_fail_naming_variable_and_value(tmp_path):
    hosts = {name: values for name, (values, _frags) in BAD_ENTRIES.items()}
    hosts['good'] = {'ip_masq_out_interfaces': ['eth0', 'bond0.100', 'br-1a2b_c', 'x' * 15]}
    out = run_hosts(tmp_path, hosts)
    assert out['good'][0] is None, out['good']
    for name, (_values, fragments) in BAD_ENTRIES.items():
        msg = out[name][0]
        assert msg, (name, out[name])
        for fragment in fragments:
            assert fragment in msg, (name, fragment, msg)
        # The role cannot pass filter options: no advice to use them.
        assert 'bare_address' not in msg and 'duplicates=' not in msg, msg
    assert '"eth0"' not in out['if'][0]


V6 = {'ip_masq_enable_ipv6': True, 'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8', 'fd00::/8']}
# host: (variables, the two variables the message names, more of the message)
COMBINATIONS = {
    'masq-list': ({'ip_masq_masquerade_cidrs': ['192.0.2.0/24'], 'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8']},
                  ('ip_masq_masquerade_cidrs', 'ip_masq_nonmasquerade_cidrs'), 'leave ip_masq_nonmasquerade_cidrs'),
    'masq-reserved': ({'ip_masq_masquerade_cidrs': ['192.0.2.0/24'], 'ip_masq_nomasq_all_reserved_ranges': True},
                      ('ip_masq_masquerade_cidrs', 'ip_masq_nomasq_all_reserved_ranges'), 'cannot be combined'),
    'masq-exc': ({'ip_masq_masquerade_cidrs': ['192.0.2.0/24'], 'ip_masq_exception_cidrs': ['10.1.0.0/16']},
                 ('ip_masq_masquerade_cidrs', 'ip_masq_exception_cidrs'), 'list the exceptions in'),
    'exc-outside': ({'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8'],
                     'ip_masq_exception_cidrs': ['10.1.0.0/16', '192.168.1.0/24']},
                    ('ip_masq_exception_cidrs', 'ip_masq_nonmasquerade_cidrs'), '192.168.1.0/24 is not inside'),
    'exc-partly': ({'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/9'], 'ip_masq_exception_cidrs': ['10.0.0.0/8']},
                   ('ip_masq_exception_cidrs', 'ip_masq_nonmasquerade_cidrs'), '10.0.0.0/8 is not inside'),
    'exc-ll-masq': ({'ip_masq_exception_cidrs': ['169.254.169.254/32'], 'ip_masq_masq_link_local': True},
                    ('ip_masq_exception_cidrs', 'ip_masq_nonmasquerade_cidrs'), '169.254.169.254/32 is not'),
    'src-no-v6': (dict(V6, ip_masq_source_cidrs=['10.244.0.0/16']),
                  ('ip_masq_source_cidrs', 'ip_masq_enable_ipv6'), 'lists no IPv6 source'),
    'src-no-v4': (dict(V6, ip_masq_source_cidrs=['fd00:10::/64']),
                  ('ip_masq_source_cidrs', 'ip_masq_enable_ipv6'), 'lists no IPv4 source'),
    'masq-ll': ({'ip_masq_masquerade_cidrs': ['192.0.2.0/24', '169.254.169.254/32']},
                ('ip_masq_masquerade_cidrs', 'ip_masq_masq_link_local'),
                'masq-ll: 169.254.169.254/32 lies inside link-local'),
    'masq-limit': ({'ip_masq_masquerade_cidrs': ['192.0.2.0/25', '192.0.2.128/25'], 'ip_masq_cidr_limit': 1},
                   ('ip_masq_masquerade_cidrs', 'ip_masq_cidr_limit'), '2 CIDRs is over'),
}
for _option, _value in (('ip_masq_exception_cidrs', ['10.1.0.0/16']), ('ip_masq_masquerade_cidrs', ['192.0.2.0/24']),
                        ('ip_masq_snat_to', ['203.0.113.7']), ('ip_masq_source_cidrs', ['10.244.0.0/16']),
                        ('ip_masq_out_interfaces', ['eth0'])):
    COMBINATIONS['upstream-' + _option[8:]] = (
        {_option: _value, 'ip_masq_rule_format': 'upstream'},
        (_option, 'ip_masq_rule_format'), 'Set ip_masq_rule_format: docs')


# The controls: the same options where they make sense (tests/unit/test_role_args.py
# reads them too).
CONTROLS = {
    'ok-masq': {'ip_masq_masquerade_cidrs': ['192.0.2.0/24']},
    'ok-masq-ll': {'ip_masq_masquerade_cidrs': ['169.254.169.254/32'], 'ip_masq_masq_link_local': True},
    'ok-exc': {'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8'],
               'ip_masq_exception_cidrs': ['10.1.0.0/16', '169.254.169.254/32']},
    'ok-exc-reserved': {'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8'], 'ip_masq_nomasq_all_reserved_ranges': True,
                        'ip_masq_exception_cidrs': ['198.51.100.0/25']},
    'ok-v6': dict(V6, ip_masq_source_cidrs=['10.244.0.0/16', 'fd00:10::/64'],
                  ip_masq_exception_cidrs=['fd00:20::/32', 'fe80::1/128'], ip_masq_snat_to=['2001:db8::7']),
}


def test_combinations_that_make_no_sense_fail_naming_both_variables(tmp_path):
    hosts = {name: values for name, (values, _names, _frag) in COMBINATIONS.items()}
    hosts.update(CONTROLS)
    out = run_hosts(tmp_path, hosts)
    for name in CONTROLS:
        assert out[name][0] is None, (name, out[name][0])
    for name, (_values, names, fragment) in COMBINATIONS.items():
        msg = out[name][0]
        assert msg, (name, out[name])
        for variable in names:
            assert variable in msg, (name, variable, msg)
        assert 'of %s' % name in msg and fragment in msg, (name, msg)
    # Only the options that conflict are named.
    assert 'ip_masq_nomasq_all_reserved_ranges' not in out['masq-list'][0]


BASE_CONFIG = ('# Ansible managed\n'
               '# The Kubernetes ip-masq-agent config schema: the same file the upstream agent reads.\n'
               'nonMasqueradeCIDRs:\n  - 10.244.0.0/16\n  - 10.30.0.0/16\n'
               'masqLinkLocal: false\nmasqLinkLocalIPv6: false\nresyncInterval: 60s\ncidrLimit: 64\n')
EXT_COMMENT = '# Extensions of ipmasq.agent: the upstream agent ignores these keys.\n'


def test_the_config_file_carries_the_extension_keys_only_when_set(tmp_path):
    base = {'ip_masq_nonmasquerade_cidrs': ['10.244.0.0/16', '10.30.0.0/16']}
    out = run_hosts(tmp_path, {
        'plain': base,
        'empty': dict(base, ip_masq_exception_cidrs=[], ip_masq_snat_to=[], ip_masq_snat_to_require_local=True),
        'some': dict(base, ip_masq_exception_cidrs=['10.244.7.0/24'], ip_masq_source_cidrs=[' 10.244.0.0/16'],
                     ip_masq_out_interfaces=['eth0', 'true']),
        'snat': dict(base, ip_masq_snat_to=['203.0.113.9 - 203.0.113.11'], ip_masq_snat_to_require_local=False),
        'masq': {'ip_masq_masquerade_cidrs': ['192.0.2.0/24', '198.51.100.0/24']},
    })
    assert out['plain'] == (None, BASE_CONFIG)
    assert out['empty'] == (None, BASE_CONFIG)
    assert out['some'] == (None, BASE_CONFIG + EXT_COMMENT + (
        'exceptionCIDRs:\n  - 10.244.7.0/24\nsourceCIDRs:\n  - 10.244.0.0/16\n'
        'outInterfaces:\n  - "eth0"\n  - "true"\n'))
    assert out['snat'] == (None, BASE_CONFIG + EXT_COMMENT + 'snatTo:\n  - 203.0.113.9-203.0.113.11\n'
                           'snatToRequireLocal: false\n')
    # Masquerade-only mode: the default non-masquerade list is left out.
    assert out['masq'] == (None, BASE_CONFIG.replace(
        'nonMasqueradeCIDRs:\n  - 10.244.0.0/16\n  - 10.30.0.0/16\n',
        '# nonMasqueradeCIDRs: not set: masqueradeCIDRs below lists the only destinations masqueraded\n')
        + EXT_COMMENT + 'masqueradeCIDRs:\n  - 192.0.2.0/24\n  - 198.51.100.0/24\n')
    # The agent's own reader takes every key back (the resync reads this file).
    settings, warnings = parse_config(out['some'][1])
    assert warnings == []
    assert settings['out_interfaces'] == ['eth0', 'true'] and settings['source_cidrs'] == ['10.244.0.0/16']
    settings, warnings = parse_config(out['snat'][1])
    assert settings['snat_to'] == ['203.0.113.9-203.0.113.11'] and settings['snat_to_require_local'] is False
