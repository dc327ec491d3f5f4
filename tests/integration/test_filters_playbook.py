"""The ipmasq.agent filters through ansible-playbook, as a user runs them.

Only the controller is involved: every host of the inventories in filters/
uses connection local, and nothing touches the network. The playbooks and
inventories live in tests/integration/filters/.
"""
import json
import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FILTERS = os.path.join(HERE, 'filters')
ANSIBLE_PLAYBOOK = os.path.join(ROOT, '.venv', 'bin', 'ansible-playbook')
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')
FATAL = re.compile(r'^fatal: \[(?P<host>[^\]]+)\]: FAILED! => (?P<result>\{.*\})$', re.MULTILINE)

RESERVED = ['100.64.0.0/10', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24',
            '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4']


def playbook(tmp_path, playbook_name, inventory, *extra_args, pythonpath=None):
    """Run ansible-playbook with a clean, local-only environment; return (rc, stdout+stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_HOME=str(tmp_path / 'ansible-home'),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / 'ansible-tmp'),
        ANSIBLE_CONFIG=str(tmp_path / 'no-ansible.cfg'),
        ANSIBLE_NOCOLOR='1',
        ANSIBLE_FORCE_COLOR='0',
        ANSIBLE_STDOUT_CALLBACK='ansible.builtin.default',
        ANSIBLE_RETRY_FILES_ENABLED='0',
    )
    if pythonpath:
        env['PYTHONPATH'] = pythonpath
    argv = [ANSIBLE_PLAYBOOK, '-i', inventory, os.path.join(FILTERS, playbook_name),
            '-e', 'out_dir=%s' % (tmp_path / 'out')] + list(extra_args)
    (tmp_path / 'out').mkdir(exist_ok=True)
    proc = subprocess.run(argv, cwd=FILTERS, env=env, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def failures(output):
    """{host: msg} of every 'fatal: [host]: FAILED! => {...}' line."""
    return {m.group('host'): json.loads(m.group('result'))['msg'] for m in FATAL.finditer(output)}


def inventory(name):
    return os.path.join(FILTERS, 'inventories', name)


def test_good_inventory_is_normalised_as_expected(tmp_path):
    rc, output = playbook(tmp_path, 'validate_inventory.yml', inventory('good'))
    assert rc == 0, output
    assert 'WARNING: 172.20.0.0/16 lies inside 172.16.0.0/12; traffic to it is not masqueraded' in output
    node_a = json.loads((tmp_path / 'out' / 'node-a.json').read_text())
    assert node_a == {
        'nonmasq': ['10.244.0.0/17', '10.244.128.0/17', '10.244.3.0/24', '192.168.10.0/24', '172.16.0.0/12',
                    'fd00:10::/48'],
        'pods': ['10.244.0.0/16', 'fd00:10::/64'],
        'aggregate': ['10.244.0.0/16', '172.16.0.0/12', '192.168.10.0/24', 'fd00:10::/48'],
        'summary': '6 entries became 4: 1 entry inside other entries, 2 adjacent entries joined into 1 block',
        'merged_into': ['10.244.0.0/16'],
        'split': {'ipv4': ['10.244.0.0/17', '10.244.128.0/17', '10.244.3.0/24', '192.168.10.0/24', '172.16.0.0/12'],
                  'ipv6': ['fd00:10::/48']},
        'with_reserved': ['10.244.0.0/17', '10.244.128.0/17', '10.244.3.0/24', '192.168.10.0/24', '172.16.0.0/12',
                          'fd00:10::/48'] + RESERVED,
        'external_warnings': [{'cidr': '172.20.0.0/16', 'other': '172.16.0.0/12', 'relation': 'inside'}],
        'raw_entries_that_are_cidrs': ['10.244.0.0/17', '10.244.128.0/17', '10.244.3.0/24', ' 192.168.10.0/24',
                                       '172.16.0.0/12', 'FD00:10::/48'],
        'raw_ipv6_entries': ['FD00:10::/48'],
        'first_raw_entry_is_cidr': True,
    }
    node_b = json.loads((tmp_path / 'out' / 'node-b.json').read_text())
    assert node_b['nonmasq'] == ['10.0.0.0/8', '2001:db8::/32']
    assert node_b['aggregate'] == ['10.0.0.0/8', '2001:db8::/32']
    assert node_b['summary'] == '2 entries, nothing to merge'
    assert node_b['external_warnings'] == []


def test_bad_inventory_fails_naming_each_host_and_each_bad_entry(tmp_path):
    rc, output = playbook(tmp_path, 'validate_inventory.yml', inventory('bad'))
    assert rc == 2, output
    msgs = failures(output)
    assert sorted(msgs) == ['bad-a', 'bad-b'], output

    bad_a = msgs['bad-a']
    assert "The filter plugin 'ipmasq.agent.nonmasq_guard' failed" in bad_a
    assert 'ipmasq.agent.nonmasq_guard: 3 problems in ip_masq_nonmasquerade_cidrs (4 entries): ' in bad_a
    assert ("[1] '10.0.0.1/8': host bits set: the aligned network is 10.0.0.0/8 "
            "(for the single host write 10.0.0.1/32)") in bad_a
    assert "[2] 'banana': not an IP address or CIDR" in bad_a
    assert "[3] '0.0.0.0/0' covers all of IPv4" in bad_a
    for advice in ('nothing is ever masqueraded', 'list only the pod and node networks',
                   'use state: absent instead', 'allow_catch_all=true'):
        assert advice in bad_a
    assert "[0] '10.244.0.0/16'" not in bad_a

    bad_b = msgs['bad-b']
    assert 'ipmasq.agent.nonmasq_guard: 3 problems in ip_masq_nonmasquerade_cidrs (4 entries): ' in bad_b
    assert "[1] '192.168.1.1': a bare address, not a CIDR; refused (bare_address=refuse): write 192.168.1.1/32" \
        in bad_b
    assert "[2] '10.244.0.0/16 ': duplicate of [0] '10.244.0.0/16' (both are 10.244.0.0/16)" in bad_b
    assert '[3] 8: not a string but a number' in bad_b
    assert 'covers all of' not in bad_b

    # any_errors_fatal: no host reached the play that stands for touching the nodes
    assert 'Use the validated lists' not in output
    assert list((tmp_path / 'out').iterdir()) == []
    assert re.search(r'^bad-a\s+: ok=0\s+changed=0\s+unreachable=0\s+failed=1', output, re.MULTILINE)


def test_pod_network_not_covered_fails_the_assert(tmp_path):
    rc, output = playbook(tmp_path, 'validate_inventory.yml', inventory('good'),
                          '-e', json.dumps({'pod_cidrs': ['10.250.0.0/16', '10.244.0.0/15']}))
    assert rc == 2, output
    msgs = failures(output)
    assert list(msgs) == ['node-a'], output      # node-b's own list covers 10.0.0.0/8
    assert msgs['node-a'] == ('pod_cidrs not (fully) covered by ip_masq_nonmasquerade_cidrs, so pod-to-pod traffic '
                              "would be masqueraded: ['10.244.0.0/15', '10.250.0.0/16']")
    assert list((tmp_path / 'out').iterdir()) == []


def test_without_netaddr_the_filter_names_it_and_the_rest_works(tmp_path):
    fake = tmp_path / 'hide' / 'netaddr'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text("raise ImportError(\"No module named 'netaddr' (hidden by the test)\")\n")
    rc, output = playbook(tmp_path, 'no_netaddr.yml', 'localhost,', '-c', 'local',
                          pythonpath=str(tmp_path / 'hide'))
    assert rc == 2, output
    assert re.search(r'TASK \[Other filters and tests still load and work\][^\n]*\nok: \[localhost\]', output), output
    msg = failures(output)['localhost']
    assert 'ipmasq.agent.cidr_list: this plugin needs the Python library netaddr' in msg
    assert 'hidden by the test' in msg and 'pip install netaddr' in msg


@pytest.mark.parametrize('name', ['good', 'bad'])
def test_inventories_parse(tmp_path, name):
    """The inventories themselves are valid (a YAML slip would fail the tests above for the wrong reason)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(ANSIBLE_HOME=str(tmp_path), ANSIBLE_CONFIG=str(tmp_path / 'none.cfg'))
    proc = subprocess.run([os.path.join(ROOT, '.venv', 'bin', 'ansible-inventory'), '-i', inventory(name), '--list'],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    hostvars = json.loads(proc.stdout)['_meta']['hostvars']
    assert len(hostvars) == 2
    assert all(isinstance(h['ip_masq_nonmasquerade_cidrs'], list) for h in hostvars.values())
