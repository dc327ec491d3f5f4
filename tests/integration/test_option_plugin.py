"""A policy option is one table row and its rule: the test option
``nomasq_mark`` (tests/lab/ipmasq_lab/option_probe.py, in tests only:
packets carrying a firewall mark keep their source) is registered by the
test (its row with ``options.register``, its rule in each backend's
``OPTION_RULES``: ``option_probe.register``) and reaches

- the node: ip_masq_node's chain part (masq_chain's options) takes it, its
  rule is in the real nat table (iptables) and in our nftables table, and
  real packets that carry the mark keep their source while others are
  masqueraded;
- the resync: its flag is in the usage and the help, and the policy
  ``build_policy`` makes from the flag has the module's rules;
- the unit: ``_units`` puts the flag in ExecStart, and the resync started
  with that ExecStart's arguments, in the namespace, writes exactly the
  rules the module wrote.

Unregistered, the chain part, the Policy and the resync refuse it by name
and nothing is written.  No change under plugins/ names it.

The node's code runs in a Python process started inside a namespace the
test makes (``ip netns exec``), which registers the option: nothing it
runs can reach this machine's own nat table."""
import contextlib
import json
import os
import shlex
import sys

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import rules as iptables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.rules import Desired
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import resync_root
from ansible_collections.ipmasq.agent.plugins.plugin_utils import _units
from ansible_collections.ipmasq.agent.plugins.plugin_utils._config_file import config_text
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import role_args
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_vars import read
from ipmasq_lab import netlab, option_probe
from ipmasq_lab.topology import CL4, NODE_CL4, NODE_EXT4, POD4, Topology

COLLECTIONS = os.path.join(netlab.ROOT, 'build', 'collections')
LAB = os.path.join(netlab.ROOT, 'tests', 'lab')
ROLE_DEFAULTS = os.path.join(netlab.ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml')
MARK = '0x4000/0x4000'
KEPT = ['192.168.0.0/16']           # the cluster-local host (10.10.0.10) is masqueraded unless marked
CHAIN = 'IP-MASQ-AGENT'
TABLE = 'ip-masq-agent'

# Runs inside the namespace: argv[1] is JSON (steps, whether to register the
# option); prints JSON, one result per step.
NODE = r'''
import json, sys
given = json.loads(sys.argv[1])
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run
from ansible_collections.ipmasq.agent.plugins.modules import ip_masq_node
from ipmasq_lab import option_probe
if given['register']:
    option_probe.register()
run = make_run()
with patch_module_args({}):
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
out = []
for step in given['steps']:
    try:
        if step['kind'] == 'chain':
            module.check_mode = False
            module._diff = False
            module.params = {'files': None, 'resync_code': None, 'daemon_reload_for': [], 'chain': step['chain'],
                             'allow_catch_all': False, 'units': [], 'daemons': None, 'daemon': None, 'audit': None}
            res = ip_masq_node.node_step(module, run, module.get_bin_path)
            out.append({'changed': res['changed'], 'selected': res['chain'] and res['chain']['selected_backend']})
        elif step['kind'] == 'policy':
            out.append({'extra': Policy(**step['options']).extra})
        else:
            try:
                out.append({'rc': resync.main(step['argv'])})
            except SystemExit as e:
                out.append({'rc': e.code})
    except MasqError as e:
        out.append({'failed': True, 'msg': e.msg})
print(json.dumps(out))
'''


@contextlib.contextmanager
def registered():
    """The option in this (the controller's) process's table, for a ``with``."""
    unregister = option_probe.register()
    try:
        yield
    finally:
        unregister()


def node_run(topo, steps, register=True):
    env = topo.backend.env(dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS, LAB])))
    proc = topo.node.exec([sys.executable, '-c', NODE, json.dumps({'steps': steps, 'register': register})],
                          check=False, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def chain_step(backend, **more):
    chain = {'state': 'present', 'backend': backend, 'nonmasquerade_cidrs': KEPT}
    chain.update(more)
    return {'kind': 'chain', 'chain': chain}


def role_values(root, backend):
    """The role's checked variables for this policy, its files below ``root``
    (a state directory per backend: each resync's first cycle applies)."""
    with open(ROLE_DEFAULTS, encoding='utf-8') as handle:
        defaults = yaml.safe_load(handle)
    state = os.path.join(root, backend)
    os.makedirs(state, exist_ok=True)
    return role_args(read(dict(defaults, ip_masq_nonmasquerade_cidrs=KEPT, ip_masq_backend=backend,
                               ip_masq_config_path=os.path.join(root, 'config'), ip_masq_state_dir=state), 'h'))


def exec_argv(service):
    """The resync's arguments in the service's ExecStart=, unquoted as systemd does."""
    line = [line for line in service.replace('\\\n', ' ').splitlines() if line.startswith('ExecStart=')][0]
    argv = [a.replace('$$', '$').replace('%%', '%') for a in shlex.split(line[len('ExecStart='):])]
    return argv[argv.index('-c') + 2:]


def ours(topo, backend):
    """Our policy as the node holds it: the chain's rules, or the table's listing."""
    if backend == 'iptables':
        return [r for r in netlab.nat_rules(topo.nat_save(4)) if CHAIN in r]
    listed = topo.node.exec(['nft', 'list', 'table', 'inet', TABLE], check=False)
    return listed.stdout if listed.returncode == 0 else None


def test_the_resync_s_usage_help_and_policy_take_the_registered_option(tmp_path):
    assert option_probe.FLAG not in resync.usage()
    with registered():
        usage, text = resync.usage(), resync.help_text()
        assert '[%s MARK]' % option_probe.FLAG in usage
        assert '  %s MARK' % option_probe.FLAG in text and option_probe.OPTION.help[0] in text
        checked = role_values(str(tmp_path), 'iptables')
        values = dict(checked['values'], ip_masq_nomasq_mark=MARK)
        service = _units.units(values, checked['timer'], resync_root(values['ip_masq_lib_dir']), 'm')[_units.SERVICE]
        assert '  %s "%s" \\\n' % (option_probe.FLAG, MARK) in service
        opts = resync.parse_args(exec_argv(service))
        policy = resync._settings(config_text(values, checked['facts'], 'm'), opts)[2]  # pylint: disable=protected-access
        args = dict(checked['masq_chain'], nomasq_mark=MARK)
        module = Policy(**dict((key, args[key]) for key in options.POLICY_OPTIONS if key in args))
        assert policy.extra == module.extra == {'nomasq_mark': MARK}
        for got in (policy, module):
            assert iptables_rules.chain_rules(got, 4)[0] == (
                '-A %s -m mark --mark %s -m comment --comment "%s" -j RETURN' % (CHAIN, MARK, option_probe.COMMENT))
            assert Desired(got).rule_texts()[0] == 'meta mark & 0x00004000 == 0x00004000 return comment "%s"' % (
                option_probe.COMMENT)
        assert iptables_rules.chain_rules(policy, 4) == iptables_rules.chain_rules(module, 4)
        assert Desired(policy).rule_texts() == Desired(module).rule_texts()
        # The row's check: a bad value is refused by name, as a bad flag.
        with pytest.raises(MasqError, match="nomasq_mark: '0x4000/0x40' is not a firewall mark"):
            Policy(nomasq_mark='0x4000/0x40')
    # Taken out again: the table is as before.
    assert option_probe.NAME not in options.BY_NAME and option_probe.FLAG not in resync.usage()
    with pytest.raises(MasqError, match='nomasq_mark is not an option of the policy'):
        Policy(nomasq_mark=MARK)


def test_a_registered_option_reaches_the_node_the_resync_and_the_unit(tmp_path):
    root = str(tmp_path)
    with Topology.with_tools('nft', ipv6=False) as topo:
        # Unregistered: refused by name, by the chain part, the Policy and the resync; nothing written.
        unit = {}
        with registered():
            for backend in ('iptables', 'nftables'):
                checked = role_values(root, backend)
                values = dict(checked['values'], ip_masq_nomasq_mark=MARK)
                unit[backend] = exec_argv(_units.units(values, checked['timer'], resync_root(values['ip_masq_lib_dir']), 'm')[_units.SERVICE])
                if backend == 'iptables':
                    with open(values['ip_masq_config_path'], 'w', encoding='utf-8') as handle:
                        handle.write(config_text(values, checked['facts'], 'm'))
        refused, stderr = node_run(topo, [chain_step('iptables', nomasq_mark=MARK),
                                          {'kind': 'policy', 'options': {'nomasq_mark': MARK}},
                                          {'kind': 'resync', 'argv': unit['iptables']}], register=False)
        assert refused[0]['failed'] and 'nomasq_mark' in refused[0]['msg'], refused
        assert refused[1] == {'failed': True, 'msg': 'nomasq_mark is not an option of the policy (no row of the '
                                                     'options table names it). Nothing was changed.'}, refused
        assert refused[2] == {'rc': resync.EXIT_USAGE} and 'unknown option %s' % option_probe.FLAG in stderr
        # Registered, a bad value: the chain part and the resync (a bad flag) refuse it by name.
        bad, stderr = node_run(topo, [chain_step('iptables', nomasq_mark='0x4000/0x40'),
                                      {'kind': 'resync', 'argv': [a.replace(MARK, '0x4000/0x40') for a in unit['iptables']]}])
        assert bad[0]['failed'] and "nomasq_mark: '0x4000/0x40' is not a firewall mark" in bad[0]['msg'], bad
        assert bad[1] == {'rc': resync.EXIT_USAGE} and "nomasq_mark: '0x4000/0x40'" in stderr, (bad, stderr)
        assert ours(topo, 'iptables') == [] and ours(topo, 'nftables') is None

        # The node's own mark: every packet to the cluster-local host carries it.
        topo.iptables(['-t', 'mangle', '-A', 'PREROUTING', '-d', CL4, '-j', 'MARK', '--set-xmark', MARK])
        names = ['external', 'cluster-local']
        for backend in ('iptables', 'nftables'):
            # Without the option the mark changes nothing: both are masqueraded.
            plain, _err = node_run(topo, [chain_step(backend)])
            assert plain[0]['selected'] == backend, plain
            assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': NODE_CL4}
            # With it: its rule first in ours, marked packets keep their source.
            marked, _err = node_run(topo, [chain_step(backend, nomasq_mark=MARK), chain_step(backend, nomasq_mark=MARK)])
            assert marked[0]['changed'] and not marked[1]['changed'], marked
            written = ours(topo, backend)
            if backend == 'iptables':
                assert written[2] == ('-A %s -m mark --mark %s -m comment --comment "%s" -j RETURN'
                                      % (CHAIN, MARK, option_probe.COMMENT)), written
            else:
                assert '\t\tmeta mark & 0x00004000 == 0x00004000 return comment "%s"\n' % option_probe.COMMENT in written
            assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': POD4}
            # The resync, started with the unit's arguments, writes the same; then nothing drifted.
            again, err = node_run(topo, [chain_step(backend, state='absent'),
                                         {'kind': 'resync', 'argv': unit[backend] + ['--log-format', 'plain']},
                                         {'kind': 'resync', 'argv': unit[backend] + ['--log-format', 'plain']}])
            assert again[0]['changed'] and again[1:] == [{'rc': 0}, {'rc': 0}], (again, err)
            assert ours(topo, backend) == written
            assert err.count('applied') >= 1 and 'repaired' not in err, err
            assert topo.probe(names) == {'external': NODE_EXT4, 'cluster-local': POD4}
        assert ours(topo, 'iptables') == []
