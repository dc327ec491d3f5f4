"""The ip_masq role refuses a bad inventory on the controller, naming the
host and every bad entry, before any node is touched (no node is contacted
here: the hosts are names only)."""
import os
import subprocess

import pytest

import netlab

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
    """ip_masq's dependency ip_masq_args runs ansible-core's validator on the same spec
    before ansible-core's own check of ip_masq would print the whole spec after the error."""
    inv = write_inventory(tmp_path, '', '')
    proc = play('role_argspec.yml', inv, '{"ip_masq_nonmasquerade_cidrs": {"a": 1}, "ip_masq_cidr_limit": "many",'
                                         ' "ip_masq_jump_position": "last"}')
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert 'ip_masq role variables of east-1:' in out
    assert 'ip_masq_nonmasquerade_cidrs must be a list of strings, got a mapping: {"a": 1}' in out.replace('\\"', '"')
    assert 'ip_masq_cidr_limit must be a whole number, got a string: "many"' in out.replace('\\"', '"')
    assert 'ip_masq_jump_position must be one of: append, first, got: last' in out
    # Not the spec dump, not the internal class names, and nothing after the check ran.
    assert 'argument_spec_data' not in out and 'description' not in out and '<class' not in out
    assert 'Validating arguments against arg spec' not in out
    assert 'Validate and normalise the non-masquerade CIDRs' not in out


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
    assert 'ip_masq role variables of east-1:' in out and fragment in out
    # Nothing after the argument check ran.
    assert 'Validate and normalise the non-masquerade CIDRs' not in out


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
