"""The resync's metrics file (``--metrics-dir``, the role's ip_masq_metrics_dir)
written by real cycles inside a network namespace, on each policy backend
(conftest.POLICIES), and read back with the real Prometheus text-format parser
(prometheus_client): after a clean cycle, a repaired drift and an invalid
config.  Also the role's unit with the variable set and unset, and systemd
running what it parsed from it.

What the file holds is documented in docs/docsite/rst/metrics.rst; its
rendering, parsing and counting are unit-tested in
tests/unit/plugins/module_utils/_core/test_metrics.py."""
import os
import stat
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ipmasq_lab import policy_view
from ipmasq_lab.policy_view import CHAIN, ours
from test_resync import SEED_001, Agent, lines
from test_resync_units import ROLE_PLAYBOOK, failed, parsed_service, playbook, render, role_vars, verify

PROM = 'ip_masq_agent.prom'
KINDS = ('chain_missing', 'chain_rules', 'jump_missing', 'jump_wrong', 'jump_duplicate', 'jump_position',
         'chain_unwanted', 'table_missing', 'table_rewritten', 'other_backend')
RESULTS = ('ok', 'failed', 'config_refused')
TYPES = {
    'ip_masq_agent_last_run_timestamp_seconds': 'gauge',
    'ip_masq_agent_last_success_timestamp_seconds': 'gauge',
    'ip_masq_agent_cycle_duration_seconds': 'gauge',
    'ip_masq_agent_config_valid': 'gauge',
    'ip_masq_agent_runs': 'counter',
    'ip_masq_agent_drift_repairs': 'counter',
    'ip_masq_agent_rules': 'gauge',
}


class Metrics:
    """The file as Prometheus reads it: one value per sample and label set."""

    def __init__(self, directory):
        path = os.path.join(str(directory), PROM)
        with open(path) as handle:
            self.text = handle.read()
        self.mode = stat.S_IMODE(os.stat(path).st_mode)
        self.values, self.types = {}, {}
        for family in text_string_to_metric_families(self.text):
            self.types[family.name] = family.type
            assert family.documentation, family.name
            for sample in family.samples:
                self.values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value

    def __getitem__(self, name):
        return self.values[(name, ())]

    def runs(self):
        return dict((r, self.values[('ip_masq_agent_runs_total', (('result', r),))]) for r in RESULTS)

    def drift(self):
        return dict((k, self.values[('ip_masq_agent_drift_repairs_total', (('kind', k),))]) for k in KINDS)

    def rules(self):
        return dict(((f, b), v) for (name, labels), v in self.values.items() if name == 'ip_masq_agent_rules'
                    for f, b in [(dict(labels)['family'], dict(labels)['backend'])])


def rules_on(node):
    """Our rules on the node, counted from the node itself: the chain's
    rules and the jump (iptables-save), or our nft chain's rules."""
    counts = dict(((f, b), 0) for f in ('ipv4', 'ipv6') for b in ('iptables', 'nftables'))
    for family in (4, 6):
        mine = [r for r in ours(node.rules(family)) if not r.startswith(':')]
        counts[('ipv%d' % family, 'iptables')] = len(mine)
    view = policy_view.nft_view(node.ns)
    if view is not None:
        counts[('ipv4', 'nftables')] = len(view['chains']['postrouting'][1])
    return counts


@pytest.fixture
def pagent(pnode, tmp_path):
    """The resync run on a node of each policy backend (as test_resync.py's)."""
    return Agent(pnode, tmp_path / 'agent')


def test_a_clean_cycle_a_repaired_drift_and_an_invalid_config(pagent, pnode, tmp_path):
    agent, node = pagent, pnode
    textfile = tmp_path / 'textfile'
    textfile.mkdir()
    flags = ('--metrics-dir', str(textfile))
    agent.write(SEED_001)
    start = time.time()
    proc = agent.run(*flags, check_rc=0)
    assert not lines(proc, '<4>'), 'writing the metrics logs nothing'
    applied = Metrics(textfile)
    assert applied.types == TYPES
    assert applied.mode == 0o644 and os.listdir(str(textfile)) == [PROM]
    assert applied.runs() == {'ok': 1, 'failed': 0, 'config_refused': 0}
    assert set(applied.drift().values()) == {0}, 'a first apply is not drift'
    assert start <= applied['ip_masq_agent_last_run_timestamp_seconds'] <= time.time()
    assert applied['ip_masq_agent_last_success_timestamp_seconds'] == applied['ip_masq_agent_last_run_timestamp_seconds']
    assert applied['ip_masq_agent_config_valid'] == 1
    # SEED_001: 10.0.0.0/8, link-local masqueraded. iptables: RETURN, MASQUERADE and the jump;
    # nftables: local destinations, the set, masquerade.
    expected = dict(((f, b), 0) for f in ('ipv4', 'ipv6') for b in ('iptables', 'nftables'))
    expected[('ipv4', node.policy)] = 3
    assert applied.rules() == expected == rules_on(node)

    # (1) a clean cycle: nothing written to the node, the counters carried over.
    writes = agent.restores()
    proc = agent.run(*flags, check_rc=0)
    assert proc.stderr == '' and agent.restores() == writes
    clean = Metrics(textfile)
    assert clean.runs() == {'ok': 2, 'failed': 0, 'config_refused': 0}
    assert set(clean.drift().values()) == {0}
    assert clean['ip_masq_agent_last_run_timestamp_seconds'] > applied['ip_masq_agent_last_run_timestamp_seconds']
    assert clean['ip_masq_agent_last_success_timestamp_seconds'] == clean['ip_masq_agent_last_run_timestamp_seconds']
    assert 0 < clean['ip_masq_agent_cycle_duration_seconds'] < 10
    assert clean['ip_masq_agent_config_valid'] == 1 and clean.rules() == rules_on(node)

    # (2) a repaired drift: its kind counted once, the last success moved on.
    if node.policy == 'iptables':
        node.ipt('-D', CHAIN, '1')
        kind = 'chain_rules'
    else:
        node.nft('delete', 'table', 'inet', 'ip-masq-agent')
        kind = 'table_missing'
    proc = agent.run(*flags, check_rc=0)
    assert lines(proc, '<4>repaired drift: ')
    repaired = Metrics(textfile)
    assert repaired.drift() == dict(dict.fromkeys(KINDS, 0), **{kind: 1})
    assert repaired.runs() == {'ok': 3, 'failed': 0, 'config_refused': 0}
    assert (repaired['ip_masq_agent_last_success_timestamp_seconds']
            == repaired['ip_masq_agent_last_run_timestamp_seconds']
            > clean['ip_masq_agent_last_success_timestamp_seconds'])
    assert repaired.rules() == rules_on(node) == applied.rules()

    # (3) an invalid config: refused (exit 2), the last success kept; the last good one still enforced.
    agent.write('nonMasqueradeCIDRs: [10.0.0.1/8]\n')
    agent.run(*flags, check_rc=2)
    refused = Metrics(textfile)
    assert refused['ip_masq_agent_config_valid'] == 0
    assert refused.runs() == {'ok': 3, 'failed': 0, 'config_refused': 1}
    assert (refused['ip_masq_agent_last_success_timestamp_seconds']
            == repaired['ip_masq_agent_last_success_timestamp_seconds'])
    assert refused['ip_masq_agent_last_run_timestamp_seconds'] > repaired['ip_masq_agent_last_run_timestamp_seconds']
    assert refused.drift() == repaired.drift() and refused.rules() == rules_on(node)
    assert os.listdir(str(textfile)) == [PROM]


def test_a_missing_directory_is_a_warning_and_the_cycle_goes_on(make_node, tmp_path):
    node = make_node('iptables-nft')
    agent = Agent(node, tmp_path)
    agent.write(SEED_001)
    missing = tmp_path / 'no-node-exporter'
    proc = agent.run('--metrics-dir', str(missing), check_rc=0)
    assert lines(proc, '<4>metrics: %s was not written (the directory %s does not exist'
                 % (missing / PROM, missing))
    assert node.state() == node.expect(['10.0.0.0/8'], masq_link_local=True)
    assert not missing.exists()
    # A garbled file of ours: the counters start again, once, with a warning.
    missing.mkdir()
    (missing / PROM).write_text('ip_masq_agent_runs_total{result="ok"} lots\n')
    proc = agent.run('--metrics-dir', str(missing), check_rc=0)
    assert lines(proc, '<4>metrics: the previous %s is not ours or is garbled' % (missing / PROM))
    assert Metrics(missing).runs() == {'ok': 1, 'failed': 0, 'config_refused': 0}
    assert agent.run('--metrics-dir', str(missing), check_rc=0).stderr == ''


# --------------------------------------------------------------------------
# the role: ip_masq_metrics_dir in the unit
# --------------------------------------------------------------------------

def test_the_unit_passes_the_directory_only_when_it_is_set(make_node, tmp_path):
    """Rendered with ip_masq_metrics_dir: --metrics-dir and a ReadWritePaths=
    (ProtectSystem=strict); systemd parses it, and the command line it parsed
    writes the file in a node's namespace.  Unset: neither."""
    plain = tmp_path / 'plain'
    plain.mkdir()
    service = render(plain)['ip-masq-agent.service']
    assert '--metrics-dir' not in service and 'ReadWritePaths' not in service

    node = make_node('iptables-nft')
    agent = Agent(node, tmp_path / 'agent')
    agent.write(SEED_001)
    textfile = tmp_path / 'textfile'
    textfile.mkdir()
    units = tmp_path / 'units'
    units.mkdir()
    service = render(units, ip_masq_metrics_dir=str(textfile), ip_masq_lib_dir=agent.lib,
                     ip_masq_config_path=agent.config)['ip-masq-agent.service']
    assert '  --metrics-dir "%s" \\' % textfile in service.splitlines()
    assert 'ReadWritePaths="-%s"' % textfile in service.splitlines()
    problems, dump = verify(units)
    assert [p for p in problems if 'ip-masq-agent.service' in p] == []
    argv, env = parsed_service(dump)
    assert argv[argv.index('--metrics-dir') + 1] == str(textfile)
    argv[argv.index('--state-file') + 1] = agent.state
    env['PATH'] = os.pathsep.join([node.backend.path_dir, '/usr/sbin', '/usr/bin', '/sbin', '/bin'])
    proc = node.ns.exec(argv + ['--log-format', 'journal'], check=False, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert Metrics(textfile).runs()['ok'] == 1


@pytest.mark.parametrize('value', ['relative/textfile', '/var/lib/node exporter'])
def test_a_bad_metrics_dir_fails_before_anything_is_written(tmp_path, value):
    values = role_vars(tmp_path, ip_masq_metrics_dir=value)
    rc, tasks = playbook(ROLE_PLAYBOOK, values)
    assert rc != 0
    assert any('ip_masq_metrics_dir of localhost: "%s"' % value in (msg or '')
               for _name, msg in failed(tasks)), failed(tasks)
    assert os.listdir(os.path.join(str(tmp_path), 'etc/systemd/system')) == []
