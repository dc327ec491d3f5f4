"""The backend interface is closed: a backend that lives in tests/ only
(tests/lab/ipmasq_lab/backend_probe.py, "ours" is a JSON file), registered
from the test with ``backends.register`` and nowhere else, runs through
every consumer with no change under plugins/: the sync (a new node, a run
that changes nothing, auto keeping a node, a switch to and from it that
removes ours from the other backend, state=absent), the masq_chain result,
its msg and diff, the drift words the resync logs, the metrics and the SNAT
report.  Any consumer that still names iptables or nftables fails here.

The node has neither iptables nor nft (``find`` finds nothing, the kernel
holds nothing of ours): the real backends are registered and asked, and
stay out of it."""
import json
import os

import pytest

from ipmasq_lab.backend_probe import registered

from ansible_collections.ipmasq.agent.plugins.filter import snat_report
from ansible_collections.ipmasq.agent.plugins.module_utils import _msg
from ansible_collections.ipmasq.agent.plugins.module_utils._core import backends, metrics, sync
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.lock import Lock
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import Policy

CHAIN = 'IP-MASQ-AGENT'
LINES = ['ipv4 RETURN 10.0.0.0/8', 'ipv4 MASQUERADE']


class NoTools:
    """A node without iptables or nft: nothing runs, the kernel holds nothing of ours."""

    def __init__(self):
        self.ran = []

    def run(self, argv, data=None):
        self.ran.append(argv)
        raise AssertionError('no tool should run: %r' % (argv,))

    @staticmethod
    def find(name):
        return None


@pytest.fixture
def probe(tmp_path):
    (tmp_path / 'probe').mkdir()
    with registered(tmp_path / 'probe') as cls:
        yield cls
    assert 'probe' not in backends.BACKENDS and cls not in backends.REGISTRY


@pytest.fixture
def masq_chain(tmp_path):
    """masq_chain's run (``_masq_chain.apply_checked``: sync, msg, diff) on the node without tools."""
    node = NoTools()

    def apply(choice='auto', state='present', check_mode=False, policy=None):
        pol = (policy or Policy(nonmasquerade_cidrs=['10.0.0.0/8'])) if state == 'present' else None
        b = backends.Backends(node.run, node.find, choice=choice, proc_read=lambda path: [],
                              probe=lambda questions: [False] * len(questions))
        result = sync.sync(pol, b, state=state, check_mode=check_mode, chain=CHAIN,
                           lock=Lock(str(tmp_path / 'writers.lock')))
        result['msg'] = _msg.chain_msg(result, check_mode)
        result['diff'] = {'before': backends.diff_text(result, 'before'), 'after': backends.diff_text(result, 'after')}
        return result
    yield apply
    assert node.ran == []


def ours(cls):
    path = os.path.join(cls.directory, CHAIN + '.json')
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return json.load(handle)['lines']


def test_registered_it_is_a_choice_and_every_consumer_loops_over_it(probe):
    assert backends.BACKENDS[-1] == 'probe' and backends.check_backend('probe') == 'probe'
    assert backends.REGISTRY[-1] is probe
    assert 'probe' in metrics.writers() and 'probe: the lines of our file for the family' in metrics.rules_help()


def test_a_new_node_auto_chooses_it_then_a_run_changes_nothing(probe, masq_chain):
    first = masq_chain()
    assert ours(probe) == LINES
    assert first['changed'] and first['selected_backend'] == 'probe'
    assert first['selected_backend_reason'] == 'auto: a node with neither policy yet, where the probe directory exists'
    assert first['actions'] == ['probe: write %s (2 lines)' % first['probe']['path']]
    assert first['drift_kinds'] == ['probe_missing']
    assert first['msg'] == 'IP-MASQ-AGENT: probe file (2 lines) written'
    assert first['diff']['before'].endswith('# probe %s\n' % first['probe']['path'])
    assert first['diff']['after'].endswith('# probe %s\n%s' % (first['probe']['path'], ''.join(x + '\n' for x in LINES)))
    assert first['ipv4']['managed'] is False and first['nftables']['managed'] is False

    again = masq_chain()
    assert not again['changed'] and again['actions'] == []
    assert again['selected_backend_reason'] == 'auto: the node has our probe file %s' % again['probe']['path']
    assert again['msg'] == 'IP-MASQ-AGENT: no change (probe file in place)'
    assert backends.in_sync_text(again) == 'in sync: %s (%s); nothing written.' % (
        again['probe']['path'], again['selected_backend_reason'])
    assert backends.log_lines(again) == []


def test_check_mode_writes_nothing(probe, masq_chain):
    result = masq_chain(check_mode=True)
    assert result['changed'] and ours(probe) is None
    assert result['msg'] == 'IP-MASQ-AGENT: would write probe file (2 lines)'


def test_drift_is_repaired_and_said_by_the_resync_the_metrics_and_the_report(probe, masq_chain, tmp_path):
    pol = Policy(nonmasquerade_cidrs=['10.0.0.0/8'])
    masq_chain(policy=pol)
    with open(os.path.join(probe.directory, CHAIN + '.json'), 'w') as handle:
        json.dump({'ours': True, 'lines': LINES[1:]}, handle)          # someone took the RETURN out
    result = masq_chain(choice='probe', policy=pol)
    assert ours(probe) == LINES
    (action,) = result['actions']
    assert action.startswith('probe: rewrite ') and result['drift_kinds'] == ['probe_rewritten']
    # The resync's journal line and debug line.
    assert backends.drift_words(result, action, set()) == 'missing `ipv4 RETURN 10.0.0.0/8`'
    assert backends.log_lines(result) == ['probe input:\n' + '\n'.join(LINES)]
    # The metrics: the rules in place, by family and backend, and the drift repaired.
    rules = metrics.rules_in_place(result, pol)
    assert rules[('ipv4', 'probe')] == 2 and rules[('ipv4', 'iptables')] == rules[('ipv4', 'nftables')] == 0
    directory = tmp_path / 'metrics'
    directory.mkdir()
    metrics.update(str(directory), 'ok', 0.5, rules=rules, now=1000.0, booted=1.0)
    text, _problem = metrics.update(str(directory), 'ok', 0.5, repairs=result['drift_kinds'], rules=rules,
                                    now=1060.0, booted=1.0)
    assert 'ip_masq_agent_rules{family="ipv4",backend="probe"} 2\n' in text
    assert 'ip_masq_agent_drift_repairs_total{kind="probe_rewritten"} 1\n' in text
    assert 'nftables: the rules of our chain that match the family; probe: the lines of our file for the family).' in text
    # The SNAT report of the fleet.
    host = snat_report._host('node1', {'chain': result, 'snat': {'chain': CHAIN, 'sources': []}})
    assert host['chain'] == 'drifted' and host['policy_backend'] == 'probe'
    assert host['chain_drift'] == {'probe': result['probe']['drift']}
    (finding,) = [f for f in host['findings'] if 'drifted' in f['what']]
    assert finding['what'].endswith('. probe file: missing `ipv4 RETURN 10.0.0.0/8`')
    # A file gone: missing.
    os.unlink(os.path.join(probe.directory, CHAIN + '.json'))
    assert snat_report._host('node1', {'chain': masq_chain(choice='probe', policy=pol), 'snat': {}})['chain'] == 'missing'


def test_a_switch_to_and_from_it_removes_ours_from_the_other(probe, masq_chain, tmp_path):
    (tmp_path / 'other').mkdir()
    with registered(tmp_path / 'other', name='probe-b') as other:
        masq_chain(choice='probe')
        moved = masq_chain(choice='probe-b')
        assert ours(other) == LINES and ours(probe) is None
        assert moved['actions'] == ['probe-b: write %s (2 lines)' % moved['probe-b']['path'],
                                    'probe: remove %s' % moved['probe']['path']]
        assert moved['drift_kinds'] == ['probe_missing', 'other_backend']
        assert moved['msg'] == 'IP-MASQ-AGENT: probe file removed, probe-b file (2 lines) written'
        # auto keeps the node where ours is now.
        kept = masq_chain()
        assert kept['selected_backend'] == 'probe-b' and not kept['changed']
        back = masq_chain(choice='probe')
        assert ours(probe) == LINES and ours(other) is None
        assert back['selected_backend'] == 'probe' and back['drift_kinds'] == ['probe_missing', 'other_backend']


def test_a_switch_whose_removal_fails_is_undone(probe, masq_chain, tmp_path):
    (tmp_path / 'other').mkdir()
    with registered(tmp_path / 'other', name='probe-b') as other:
        masq_chain(choice='probe-b')
        other.fail_removal = True
        with pytest.raises(MasqError, match='probe-b: cannot remove'):
            masq_chain(choice='probe')
        assert ours(other) == LINES and ours(probe) is None


def test_state_absent_removes_ours_and_then_changes_nothing(probe, masq_chain):
    masq_chain(choice='probe')
    gone = masq_chain(state='absent')
    assert ours(probe) is None and gone['changed'] and gone['selected_backend'] is None
    assert gone['actions'] == ['probe: remove %s' % gone['probe']['path']]
    assert gone['msg'] == 'IP-MASQ-AGENT: probe file removed'
    assert gone['diff']['after'] == backends.diff_text(gone, 'after') and LINES[0] in gone['diff']['before']
    again = masq_chain(state='absent')
    assert not again['changed'] and again['msg'] == 'IP-MASQ-AGENT: no change (IPv4 absent, IPv6 absent)'


def test_without_it_the_choice_is_refused(tmp_path):
    with pytest.raises(MasqError, match="backend: 'probe' is not one of 'auto', 'iptables', 'nftables'"):
        backends.check_backend('probe')
