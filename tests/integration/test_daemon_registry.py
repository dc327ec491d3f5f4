"""A daemon is one file and one registry line: the test daemon "probe"
(tests/lab/ipmasq_lab/daemon_probe.py, in tests only) is registered by the
test and goes through the node run's daemons part (check mode: reads,
changes nothing), the role's generic daemon step (ip_masq_node's daemon
part: edit with a backup, then the clean-up of its nat rule), the SNAT
audit (its rule attributed to it, with its hint) and absent (its file
back byte for byte), on real iptables in a namespace the test makes, with
no change under plugins/.

The node's code runs in a Python process started inside the namespace
(``ip netns exec``), which registers the daemon: nothing it runs can reach
this machine's own nat table."""
import json
import os
import sys

from ipmasq_lab import daemon_probe, netlab

COLLECTIONS = os.path.join(netlab.ROOT, 'build', 'collections')
LAB = os.path.join(netlab.ROOT, 'tests', 'lab')
CONFIG_TEXT = '# probe\nlisten: 0.0.0.0\nmasquerade: true\n'
PROBE_NAT = [
    ['-t', 'nat', '-N', daemon_probe.PROBE_CHAIN],
    ['-t', 'nat', '-A', daemon_probe.PROBE_CHAIN, '-s', '10.99.0.0/16', '!', '-d', '10.99.0.0/16', '-j', 'MASQUERADE'],
    ['-t', 'nat', '-A', 'POSTROUTING', '-m', 'comment', '--comment', daemon_probe.PROBE_COMMENT,
     '-j', daemon_probe.PROBE_CHAIN],
]

# Runs inside the namespace: argv[1] is JSON (steps, root, whether to
# register the probe); prints JSON, one result per step.
NODE = r'''
import json, sys
given = json.loads(sys.argv[1])
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.node import audit
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry
from ansible_collections.ipmasq.agent.plugins.modules import ip_masq_node
from ipmasq_lab import daemon_probe
if given['register']:
    registry.DAEMONS = registry.DAEMONS + (daemon_probe.DAEMON,)
run = make_run()
with patch_module_args({}):
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
find = module.get_bin_path
out = []
for step in given['steps']:
    if step['kind'] == 'audit':
        res = audit(run, find)
        out.append([{'owner': s['owner'], 'chain': s['chain'], 'hint': s.get('hint'), 'rule': s.get('rule')}
                    for s in res['sources']])
        continue
    module.check_mode = step['check']
    module._diff = False
    module.params = dict({'files': None, 'resync_code': None, 'daemon_reload_for': [], 'chain': None,
                          'allow_catch_all': False, 'units': [], 'daemons': None, 'daemon': None,
                          'audit': None}, **step['params'])
    try:
        out.append(ip_masq_node.node_step(module, run, find))
    except MasqError as e:
        out.append({'failed': True, 'msg': e.msg})
print(json.dumps(out))
'''


def node_run(node, root, steps, register=True):
    env = node.backend.env(dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS, LAB])))
    proc = node.ns.exec([sys.executable, '-c', NODE, json.dumps({'steps': steps, 'register': register})],
                        check=False, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def probe_options(root, **more):
    options = {'state': 'present', 'root': root, 'backup_dir': '/var/lib/ipmasq-agent/backup'}
    options.update(more)
    return options


def probe_rules(node):
    return [r for r in node.rules(4) if 'PROBE' in r or daemon_probe.PROBE_COMMENT in r]


def test_a_daemon_registered_from_a_test_goes_through_every_step(node, tree):
    tree.put(daemon_probe.CONFIG, CONFIG_TEXT)
    for args in PROBE_NAT:
        node.ipt(*args)
    rules = node.rules(4)
    assert len(probe_rules(node)) == 3
    root = tree.root

    read = {'params': {'daemons': {'probe': probe_options(root, remove_stale_rules=True)}}, 'check': True}
    audit_step = {'kind': 'audit'}
    # Unregistered, ip_masq_node refuses the name before anything runs; the audit calls its rule unknown.
    unknown, sources = node_run(node, root, [dict(read, kind='node'), audit_step], register=False)
    assert unknown['failed'] and "'probe' is not a daemon of the registry" in unknown['msg'], unknown
    assert {s['owner'] for s in sources if s['chain'] == daemon_probe.PROBE_CHAIN} == {'unknown'}

    # Registered: the node run's daemons part reads it in check mode, and it is needed;
    # as a 'report' daemon it is only read, and what it would change is a warning.
    report = {'kind': 'node', 'check': True,
              'params': {'daemons': dict(read['params']['daemons'], report=['probe'])}}
    found, sources, reported = node_run(node, root, [dict(read, kind='node'), audit_step, report])
    assert reported['daemons_needed'] == [] and reported['daemons']['probe']['would_change'], reported
    assert [w for w in reported['warnings'] if w.startswith('probe would change (ip_masq_probe: report): ')]
    probe = found['daemons']['probe']
    assert probe['installed'] and probe['would_change'] and probe['needed'] and probe['error'] is None, probe
    assert found['daemons_needed'] == ['probe'] and found['changed'] is False
    assert tree.read(daemon_probe.CONFIG) == CONFIG_TEXT and node.rules(4) == rules
    # The audit tells its rule by its owner descriptor, with its hint.
    mine = [s for s in sources if s['chain'] == daemon_probe.PROBE_CHAIN]
    assert mine and {s['owner'] for s in mine} == {'probe'}, sources
    assert all(s['hint'] == daemon_probe.DAEMON.owner.hint for s in mine)

    # The role's daemon step: the edit (its rule stays until the restart), then the clean-up.
    edit = {'kind': 'node', 'check': False,
            'params': {'daemon': {'name': 'probe', 'options': probe_options(root)}}}
    cleanup = {'kind': 'node', 'check': False,
               'params': {'daemon': {'name': 'probe', 'options': probe_options(root, remove_stale_rules=True)}}}
    edited, = node_run(node, root, [edit])
    assert probe_rules(node) == probe_rules_of(rules)
    cleaned, again = node_run(node, root, [cleanup, edit])
    assert edited['changed'] and edited['daemon']['restart_required'] and edited['daemon']['service'] == 'probe.service'
    assert len(edited['daemon']['edited']) == 1 and edited['daemon']['edited'][0].endswith(daemon_probe.CONFIG)
    assert cleaned['changed'] and cleaned['daemon']['removed_rules'] == [
        'IPv4: -A POSTROUTING -m comment --comment "probe masq" -j PROBE-POSTRTG', 'IPv4: chain PROBE-POSTRTG'], cleaned['daemon']
    assert again['changed'] is False and again['msg'] == 'no change'
    assert tree.read(daemon_probe.CONFIG) == CONFIG_TEXT.replace('masquerade: true', 'masquerade: false')
    assert probe_rules(node) == [] and node.rules(4) == [r for r in rules if r not in probe_rules_of(rules)]

    # absent: the file back, byte for byte, from its backup.
    absent = {'kind': 'node', 'check': False,
              'params': {'daemon': {'name': 'probe', 'options': probe_options(root, state='absent')}}}
    restored, = node_run(node, root, [absent])
    assert restored['changed'] and restored['daemon']['restart_required']
    assert tree.read(daemon_probe.CONFIG) == CONFIG_TEXT


def probe_rules_of(rules):
    return [r for r in rules if 'PROBE' in r or daemon_probe.PROBE_COMMENT in r]
