"""The resync's metrics file (module_utils/_core/agent/metrics.py): rendering (read
back with the real Prometheus text-format parser), reading our own file back,
carrying the counters over from cycle to cycle, the drift kinds the plans
give, and the resync's handling of a file it cannot write.  The file written
by real cycles on real iptables and nftables: tests/integration/test_resync_metrics.py."""
import io
import os
import stat

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import (
    chain as iptables,
    rules as iptables_rules,
    save as iptables_save,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import metrics as m, resync as r
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import table as nftables, rules as nftables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import policy
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError

T0 = 1764000000.25
BOOT = T0 - 3600


def families(text):
    """{family name: {(sample name, sorted labels): value}} and the types, by the real parser."""
    values, types, helps = {}, {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        helps[fam.name] = fam.documentation
        for s in fam.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values, types, helps


def read(directory):
    with open(os.path.join(str(directory), m.FILE_NAME)) as handle:
        return handle.read()


def update(directory, outcome='ok', now=T0, **kwargs):
    kwargs.setdefault('booted', BOOT)
    return m.update(str(directory), outcome, 0.125, now=now, **kwargs)


# --------------------------------------------------------------------------
# rendering and reading back
# --------------------------------------------------------------------------

RULES = {('ipv4', 'iptables'): 6, ('ipv6', 'iptables'): 0, ('ipv4', 'nftables'): 0, ('ipv6', 'nftables'): 0}


def test_a_cycle_renders_every_metric_with_help_and_type(tmp_path):
    text, problem = update(tmp_path, config_valid=True, rules=RULES)
    assert problem is None and text == read(tmp_path)
    values, types, helps = families(text)
    assert types == {
        'ip_masq_agent_last_run_timestamp_seconds': 'gauge',
        'ip_masq_agent_last_success_timestamp_seconds': 'gauge',
        'ip_masq_agent_cycle_duration_seconds': 'gauge',
        'ip_masq_agent_config_valid': 'gauge',
        'ip_masq_agent_runs': 'counter',
        'ip_masq_agent_drift_repairs': 'counter',
        'ip_masq_agent_rules': 'gauge',
    }
    assert all(helps.values())
    assert values[('ip_masq_agent_last_run_timestamp_seconds', ())] == T0
    assert values[('ip_masq_agent_last_success_timestamp_seconds', ())] == T0
    assert values[('ip_masq_agent_cycle_duration_seconds', ())] == 0.125
    assert values[('ip_masq_agent_config_valid', ())] == 1
    assert [values[('ip_masq_agent_runs_total', (('result', res),))] for res in m.RESULTS] == [1, 0, 0]
    assert all(values[('ip_masq_agent_drift_repairs_total', (('kind', kind),))] == 0 for kind in m.DRIFT_KINDS)
    for (family, backend), count in RULES.items():
        assert values[('ip_masq_agent_rules', (('backend', backend), ('family', family)))] == count
    assert len(values) == 4 + len(m.RESULTS) + len(m.DRIFT_KINDS) + 4
    assert stat.S_IMODE(os.stat(os.path.join(str(tmp_path), m.FILE_NAME)).st_mode) == 0o644
    assert os.listdir(str(tmp_path)) == [m.FILE_NAME], 'no temporary file is left behind'


def test_unknown_values_are_left_out(tmp_path):
    text, _problem = update(tmp_path, outcome='failed')
    values, types, _helps = families(text)
    assert 'ip_masq_agent_config_valid' not in types and 'ip_masq_agent_rules' not in types
    assert values[('ip_masq_agent_last_success_timestamp_seconds', ())] == 0


def test_label_values_and_help_are_escaped():
    odd = 'a "quoted" back\\slash\nnewline'
    text = m.render({m.DRIFT: [((('kind', odd),), 3)]})
    values, _types, _helps = families(text)
    assert values[('ip_masq_agent_drift_repairs_total', (('kind', odd),))] == 3
    assert m.parse(text) == {(m.DRIFT, (('kind', odd),)): 3.0}
    assert m.escape_help('a\\b\nc') == 'a\\\\b\\nc'


@pytest.mark.parametrize('text,why', [
    ('ip_masq_agent_runs_total{result="ok"} 1 2 3\n', 'not a sample of ours'),
    ('node_load1 0.5\n', 'not a sample of ours'),
    ('ip_masq_agent_runs_total{result="ok} 1\n', 'garbled'),
    ('ip_masq_agent_runs_total{result=ok} 1\n', 'bad label'),
    ('ip_masq_agent_runs_total{result="ok"} one\n', 'could not convert'),
    ('ip_masq_agent_runs_total{result="ok"} -1\n', 'not a count'),
    ('ip_masq_agent_runs_total{result="ok"} 1.5\n', 'not a count'),
    ('ip_masq_agent_drift_repairs_total{kind="chain_rules"} NaN\n', 'not a count'),
    ('ip_masq_agent_drift_repairs_total{kind="chain_rules"} +Inf\n', 'not a count'),
    ('ip_masq_agent_last_success_timestamp_seconds -5\n', 'not a timestamp'),
    ('\x00\xff garbage', 'not a sample of ours'),
])
def test_a_garbled_file_starts_the_counters_again(tmp_path, text, why):
    path = os.path.join(str(tmp_path), m.FILE_NAME)
    with open(path, 'w') as handle:
        handle.write('ip_masq_agent_runs_total{result="ok"} 41\n' + text)
    state, problem = m.read_carried(path)
    assert why in problem and state.runs['ok'] == 0 and state.last_run is None
    out, problem = update(tmp_path)
    assert why in problem
    values = families(out)[0]
    assert values[('ip_masq_agent_runs_total', (('result', 'ok'),))] == 1


def test_a_file_that_is_not_text_or_too_large_is_not_ours(tmp_path):
    path = os.path.join(str(tmp_path), m.FILE_NAME)
    with open(path, 'wb') as handle:
        handle.write(b'\xff\xfe')
    assert 'garbled' in m.read_carried(path)[1]
    with open(path, 'wb') as handle:
        handle.write(b'# x\n' * (m.MAX_BYTES // 4 + 1))
    assert 'larger than' in m.read_carried(path)[1]


def test_our_file_reads_back_whole():
    state = m.Carried()
    state.runs.update(ok=7, failed=2, config_refused=1)
    state.drift.update(chain_rules=3, table_missing=1, some_future_kind=4)
    state.last_success = T0 - 60
    text = m.render(m.samples(state, T0, 0.5, True, RULES))
    back = m.carried(text)
    assert (back.runs, back.drift, back.last_run, back.last_success) == (
        state.runs, state.drift, T0, T0 - 60)
    assert families(text)[0][('ip_masq_agent_drift_repairs_total', (('kind', 'some_future_kind'),))] == 4


# --------------------------------------------------------------------------
# cycle after cycle
# --------------------------------------------------------------------------

def test_counters_carry_over_and_drift_counts_once_per_kind_and_cycle(tmp_path):
    # The first cycle (no file yet) counts no drift: nothing to compare with.
    update(tmp_path, repairs=['chain_missing', 'jump_missing'], config_valid=True, rules=RULES)
    values = families(read(tmp_path))[0]
    assert values[('ip_masq_agent_drift_repairs_total', (('kind', 'chain_missing'),))] == 0

    update(tmp_path, now=T0 + 60, repairs=['chain_rules', 'chain_rules', 'jump_duplicate'], config_valid=True,
           rules=RULES)
    update(tmp_path, now=T0 + 120, repairs=['chain_rules'], config_valid=True, rules=RULES)
    values = families(read(tmp_path))[0]
    assert values[('ip_masq_agent_drift_repairs_total', (('kind', 'chain_rules'),))] == 2
    assert values[('ip_masq_agent_drift_repairs_total', (('kind', 'jump_duplicate'),))] == 1
    assert values[('ip_masq_agent_runs_total', (('result', 'ok'),))] == 3
    assert values[('ip_masq_agent_last_success_timestamp_seconds', ())] == T0 + 120

    # A failed cycle and a refused config: counted, the last success kept.
    update(tmp_path, outcome='failed', now=T0 + 180, config_valid=True)
    update(tmp_path, outcome='config_refused', now=T0 + 240, config_valid=False, rules=RULES,
           repairs=['table_rewritten'])
    values = families(read(tmp_path))[0]
    assert [values[('ip_masq_agent_runs_total', (('result', res),))] for res in m.RESULTS] == [3, 1, 1]
    assert values[('ip_masq_agent_last_success_timestamp_seconds', ())] == T0 + 120
    assert values[('ip_masq_agent_last_run_timestamp_seconds', ())] == T0 + 240
    assert values[('ip_masq_agent_config_valid', ())] == 0
    assert values[('ip_masq_agent_drift_repairs_total', (('kind', 'table_rewritten'),))] == 1


def test_the_first_cycle_after_a_boot_counts_no_drift(tmp_path):
    update(tmp_path)
    # Rebooted after that cycle: the rules are gone, and putting them back is not drift.
    update(tmp_path, now=T0 + 600, booted=T0 + 500, repairs=['chain_missing', 'jump_missing'])
    update(tmp_path, now=T0 + 660, booted=T0 + 500, repairs=['chain_rules'])
    values = families(read(tmp_path))[0]
    assert values[('ip_masq_agent_drift_repairs_total', (('kind', 'chain_missing'),))] == 0
    assert values[('ip_masq_agent_drift_repairs_total', (('kind', 'chain_rules'),))] == 1


def test_the_boot_time_comes_from_proc_uptime():
    booted = m.boot_time(T0)
    assert booted is None or booted < T0


def test_a_missing_directory_is_an_error_and_is_not_created(tmp_path):
    missing = os.path.join(str(tmp_path), 'node-exporter')
    with pytest.raises(OSError, match='does not exist'):
        m.update(missing, 'ok', 0.1)
    assert not os.path.exists(missing)


# --------------------------------------------------------------------------
# rules in place
# --------------------------------------------------------------------------

def test_rules_in_place_iptables_counts_the_chain_and_its_jump():
    result = {'selected_backend': 'iptables',
              'ipv4': {'managed': True, 'rules': ['a', 'b', 'c'], 'jump': 'j'},
              'ipv6': {'managed': False, 'rules': [], 'jump': None}}
    counts = m.rules_in_place(result, policy.Policy())
    assert counts == {('ipv4', 'iptables'): 4, ('ipv6', 'iptables'): 0,
                      ('ipv4', 'nftables'): 0, ('ipv6', 'nftables'): 0}


def test_rules_in_place_nftables_counts_the_rules_each_family_can_meet():
    four = policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8'])
    counts = m.rules_in_place({'selected_backend': 'nftables'}, four)
    # fib local, link-local, the set, masquerade (meta nfproto ipv4)
    assert counts[('ipv4', 'nftables')] == len(nftables_rules.Desired(four).rules) == 4
    assert counts[('ipv6', 'nftables')] == 0 and counts[('ipv4', 'iptables')] == 0
    both = policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'], ipv6=True)
    counts = m.rules_in_place({'selected_backend': 'nftables'}, both)
    # fib local and the masquerade are both families'; link-local and the set one family's each.
    assert (counts[('ipv4', 'nftables')], counts[('ipv6', 'nftables')]) == (4, 4)
    assert len(nftables_rules.Desired(both).rules) == 6
    assert m.rules_in_place({'selected_backend': None}, both) == dict.fromkeys(counts, 0)


# --------------------------------------------------------------------------
# the kinds the plans give, next to their actions
# --------------------------------------------------------------------------

HEADER = '# Generated by iptables-save v1.8.9 (nf_tables) on Sat Nov 21 10:00:00 2026\n'


def save(*rules, chains=('IP-MASQ-AGENT',)):
    lines = [HEADER.rstrip('\n'), '*nat', ':POSTROUTING ACCEPT [0:0]'] + [':%s - [0:0]' % c for c in chains]
    return iptables_save.parse_save('\n'.join(lines + list(rules) + ['COMMIT', '']))


POL = policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8'])
JUMP = '-A POSTROUTING ' + iptables_rules.jump_spec(POL.chain)
CHAIN_RULES = iptables_rules.chain_rules(POL, 4)


@pytest.mark.parametrize('rules,chains,pol,kinds', [
    ([JUMP] + CHAIN_RULES, ('IP-MASQ-AGENT',), POL, []),
    ([], (), POL, ['chain_missing', 'jump_missing']),
    ([JUMP] + CHAIN_RULES[1:], ('IP-MASQ-AGENT',), POL, ['chain_rules']),
    ([JUMP, JUMP] + CHAIN_RULES, ('IP-MASQ-AGENT',), POL, ['jump_duplicate']),
    (['-A POSTROUTING -o eth0 -j IP-MASQ-AGENT'] + CHAIN_RULES, ('IP-MASQ-AGENT',), POL,
     ['jump_wrong', 'jump_wrong']),
    (CHAIN_RULES, ('IP-MASQ-AGENT',), POL, ['jump_missing']),
    (['-A POSTROUTING -j ACCEPT', JUMP] + CHAIN_RULES, ('IP-MASQ-AGENT',),
     policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8'], jump_position='first'), ['jump_position']),
    (['-A POSTROUTING -j ACCEPT', JUMP, JUMP] + CHAIN_RULES, ('IP-MASQ-AGENT',),
     policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8'], jump_position='first'), ['jump_duplicate']),
])
def test_iptables_plans_give_a_kind_per_action(rules, chains, pol, kinds):
    plan = iptables.plan_present(4, save(*rules, chains=chains), pol)
    assert plan.kinds == kinds and len(plan.kinds) == len(plan.actions), plan.actions


def test_iptables_removal_is_chain_unwanted():
    plan = iptables.plan_absent(6, save(JUMP, *CHAIN_RULES), POL.chain)
    assert plan.kinds == ['chain_unwanted', 'chain_unwanted'] and len(plan.actions) == 2
    assert iptables.plan_absent(6, save(chains=()), POL.chain).kinds == []


def test_nftables_plans_give_a_kind_per_action():
    create = nftables.plan_present(None, POL)
    assert create.kinds == ['table_missing'] and len(create.actions) == 1
    assert nftables.plan_absent(None, 'ip-masq-agent').kinds == []


class FakeNode:
    """iptables-save and nft answered from canned text (for the plans only)."""

    def __init__(self, ipt, nft_table):
        self.ipt, self.table = ipt, nft_table

    @staticmethod
    def find(name):
        return '/usr/sbin/' + name

    def run(self, argv, data=None):
        if argv[0].endswith('nft'):
            if self.table is None:
                return 1, '', 'Error: No such file or directory'
            import json  # pylint: disable=import-outside-toplevel
            return 0, json.dumps({'nftables': [{'metainfo': {'version': '1.0.6'}}] + self.table}), ''
        if 'ip6tables' in argv[0]:
            return 0, HEADER + '*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n', ''
        return 0, self.ipt, ''


NFT_TABLE = [{'table': {'family': 'inet', 'name': 'ip-masq-agent'}},
             {'chain': {'family': 'inet', 'table': 'ip-masq-agent', 'name': 'postrouting', 'type': 'nat',
                        'hook': 'postrouting', 'prio': 100, 'policy': 'accept'}}]


def _sync(node, choice):
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import sync  # pylint: disable=import-outside-toplevel
    b = backends.Backends(node.run, node.find, choice=choice, proc_read=lambda path: [],
                          probe=lambda questions: [[] if q[0] == 'tables' else True for q in questions])
    return sync.sync(POL, b, check_mode=True)


def test_the_other_backend_is_other_backend_in_the_result():
    ipt = '\n'.join([HEADER.rstrip('\n'), '*nat', ':POSTROUTING ACCEPT [0:0]', ':IP-MASQ-AGENT - [0:0]', JUMP]
                    + CHAIN_RULES + ['COMMIT', ''])
    result = _sync(FakeNode(ipt, NFT_TABLE), 'iptables')
    assert result['drift_kinds'] == ['other_backend'] and len(result['actions']) == 1
    result = _sync(FakeNode(ipt, None), 'nftables')
    assert result['drift_kinds'] == ['table_missing', 'other_backend', 'other_backend'], result['actions']
    assert len(result['actions']) == 3


def test_every_kind_a_resync_can_give_is_in_the_vocabulary():
    kinds = set()
    for source in (iptables, nftables, backends):
        with open(source.__file__) as handle:
            text = handle.read()
        kinds.update(word for word in m.DRIFT_KINDS + ('table_unwanted',) if "'%s'" % word in text)
    assert kinds == set(m.DRIFT_KINDS) | {'table_unwanted'}


# --------------------------------------------------------------------------
# the resync and its flag
# --------------------------------------------------------------------------

def test_the_flag_is_off_by_default():
    assert r.parse_args([]).metrics_dir is None
    assert r.parse_args(['--metrics-dir', '/var/lib/prometheus/node-exporter']).metrics_dir == \
        '/var/lib/prometheus/node-exporter'


def _opts(metrics_dir, *extra):
    return r.parse_args(['--metrics-dir', str(metrics_dir)] + list(extra))


def test_a_metrics_file_that_cannot_be_written_is_a_warning_only(tmp_path, monkeypatch):
    monkeypatch.setattr(r, '_cycle', lambda opts, log, seen: r.EXIT_OK)
    out = io.StringIO()
    code = r.cycle(_opts(tmp_path / 'missing'), r.Log('journal', stream=out))
    assert code == r.EXIT_OK
    assert out.getvalue().startswith('<4>metrics: %s was not written (the directory %s does not exist'
                                     % (tmp_path / 'missing' / m.FILE_NAME, tmp_path / 'missing'))


def test_a_failed_cycle_is_counted_and_still_raises(tmp_path, monkeypatch):
    def fail(opts, log, seen):
        seen['config_valid'] = True
        raise MasqError('iptables-restore failed')
    monkeypatch.setattr(r, '_cycle', fail)
    out = io.StringIO()
    with pytest.raises(MasqError):
        r.cycle(_opts(tmp_path), r.Log('journal', stream=out))
    assert out.getvalue() == ''
    values = families(read(tmp_path))[0]
    assert values[('ip_masq_agent_runs_total', (('result', 'failed'),))] == 1
    assert values[('ip_masq_agent_config_valid', ())] == 1


def test_check_mode_and_no_flag_write_no_metrics(tmp_path, monkeypatch):
    monkeypatch.setattr(r, '_cycle', lambda opts, log, seen: r.EXIT_OK)
    assert r.cycle(_opts(tmp_path, '--check'), r.Log('plain', stream=io.StringIO())) == r.EXIT_OK
    assert r.cycle(r.parse_args([]), r.Log('plain', stream=io.StringIO())) == r.EXIT_OK
    assert os.listdir(str(tmp_path)) == []
