"""The nftables backend converges when nft lists an anonymous set in another
order than the one given (issue 18, item 1): ``out_interfaces: [eth0, b0]``
comes back from the kernel as ``oifname != { "b0", "eth0" }``.  A second
module run changes nothing, and a second resync cycle repairs no drift.

The comparison itself (every anonymous set as a set) is unit-tested in
tests/unit/plugins/module_utils/_core/test_nftables.py."""
import pytest

from test_extensions import Steps
from test_resync import Agent, lines
from test_resync_metrics import Metrics

# Not in the order nft lists them (it lists { "b0", "lo", "eth0" }), and to_ports
# for the protocol set { tcp, udp, sctp } of each port range's rule.
ARGS = dict(nonmasquerade_cidrs=['10.0.0.0/8'], out_interfaces=['eth0', 'b0', 'lo'], to_ports=['1024-29999', '30000-65535'])


@pytest.fixture
def node(make_node):
    return make_node('nftables')


def test_a_second_run_changes_nothing(node):
    steps = Steps(node)
    steps.masq('apply1', ARGS)
    steps.sh('listed', 'nft list chain inet ip-masq-agent postrouting')
    steps.masq('apply2', ARGS)
    res = steps.run()
    assert not res['apply1'].get('failed'), res['apply1'].get('msg')
    assert res['apply1']['changed'] is True
    # The kernel lists the set in its own order: the reason the table was rewritten every run.
    assert 'oifname != { "b0", "lo", "eth0" } return' in res['listed']['stdout']
    assert not res['apply2'].get('failed'), res['apply2'].get('msg')
    assert res['apply2']['changed'] is False, res['apply2']['actions']
    assert res['apply2']['drift_kinds'] == []


def test_a_second_resync_cycle_repairs_no_drift(node, tmp_path):
    agent = Agent(node, tmp_path / 'agent')
    textfile = tmp_path / 'textfile'
    textfile.mkdir()
    agent.write('nonMasqueradeCIDRs: [10.0.0.0/8]\noutInterfaces: [eth0, b0, lo]\n')
    agent.run('--metrics-dir', str(textfile), check_rc=0)
    writes = agent.restores()
    assert writes == 1
    proc = agent.run('--metrics-dir', str(textfile), check_rc=0)
    assert not lines(proc, '<4>repaired drift: '), proc.stderr
    assert agent.restores() == writes, 'the second cycle rewrote the table'
    counted = Metrics(textfile).drift()
    assert counted['table_rewritten'] == 0 and set(counted.values()) == {0}
