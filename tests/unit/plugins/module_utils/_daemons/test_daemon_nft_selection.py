"""Unit tests of the daemon modules' nftables side: which rules of Docker's
nftables firewall backend (tables ``ip``/``ip6 docker-bridges``) and of
flannel's nftables mode (``ip flannel-ipv4``, ``ip6 flannel-ipv6``) are
picked, the libnftables JSON commands that delete them, and the one
transaction ``base.remove_nft_rules`` runs (with a fake ``nft``).

The tables are the ones in ../snat_audit_data/: ``nft -j list ruleset``
after ``nft -f`` of the .nft file of the same name, each laid out exactly as
the daemon writes it (the .nft files name their source file and commit).
Debian's docker.io does not ship Docker's nftables backend, so no real
dockerd writes them here.  The modules on real nft, in network namespaces,
are tested in tests/integration/test_daemons_nft.py."""
import ipaddress
import json
import os

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._audit.judge import analyse
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.audit import ruleset_finding
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import sync
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import RuleMatch
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.lock import Lock
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import deletion, parse_nft
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import base, docker, flannel

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'snat_audit_data')
OUT = 'nat-postrouting-out__docker0'
MASQ = 'oifname != "docker0" ip saddr 172.17.0.0/16 counter masquerade comment "MASQUERADE"'


def tables(name):
    with open(os.path.join(DATA, name + '.json')) as f:
        return parse_nft(f.read())


def nets(*cidrs):
    return [ipaddress.ip_network(c) for c in cidrs]


def commands(picked):
    """A match's picks as the nft backend removes them: each text and its commands."""
    return [(text, deletion(what)) for text, what in picked]


def handle_of(ts, family, table, chain, comment):
    (rule,) = [r for r in ts[(family, table)].rules[chain] if r.get('comment') == comment]
    return rule['handle']


# ------------------------------------------------------------------ Docker

def test_docker_default_bridge_rule_only():
    ts = tables('docker_bridges')
    want = [('IPv4: ip docker-bridges %s: %s' % (OUT, MASQ),
             [{'delete': {'rule': {'family': 'ip', 'table': 'docker-bridges', 'chain': OUT,
                                   'handle': handle_of(ts, 'ip', 'docker-bridges', OUT, 'MASQUERADE')}}}])]
    assert commands(docker.docker_nft_rules(ts, 'docker0', None)) == want
    assert commands(docker.docker_nft_rules(ts, 'docker0', nets('172.17.0.0/16'))) == want
    # Another subnet, or only IPv6 subnets: not Docker's default-bridge rule.
    assert docker.docker_nft_rules(ts, 'docker0', nets('172.18.0.0/16')) == []
    assert docker.docker_nft_rules(ts, 'docker0', nets('fd00:17::/64')) == []
    # No table of that name, no chain of that bridge.
    assert docker.docker_nft_rules(ts, 'docker1', None) == []
    assert docker.docker_nft_rules(tables('flannel'), 'docker0', None) == []


def test_docker_hairpin_and_own_port_rules_are_never_picked():
    ts = tables('docker_bridges')
    for bridge in ('docker0', 'bridge1'):
        picked = docker.docker_nft_rules(ts, bridge, None)
        assert len(picked) == 1 and 'FROM HOST' not in picked[0][0] and 'OWN PORT' not in picked[0][0]
    # (bridge1 is selected only when asked for by name: the module asks for the default bridge.)
    assert docker.docker_nft_rules(ts, 'bridge1', None)[0][0].endswith(
        'oifname != "bridge1" ip saddr 192.0.2.0/24 counter masquerade comment "MASQUERADE"')


def test_docker_dual_stack_both_families_by_subnet():
    ts = tables('docker_bridges_ipv6')
    texts = [t for t, _c in docker.docker_nft_rules(ts, 'br-dummy', None)]
    assert texts == [
        'IPv4: ip docker-bridges nat-postrouting-out__br-dummy: oifname != "br-dummy" ip saddr 192.168.0.0/24 '
        'counter masquerade comment "MASQUERADE"',
        'IPv6: ip6 docker-bridges nat-postrouting-out__br-dummy: oifname != "br-dummy" ip6 saddr '
        'fd49:efd7:54aa::/64 counter masquerade comment "MASQUERADE"']
    both = nets('192.168.0.0/24', 'fd49:efd7:54aa::/64')
    assert [t for t, _c in docker.docker_nft_rules(ts, 'br-dummy', both)] == texts
    assert [t for t, _c in docker.docker_nft_rules(ts, 'br-dummy', nets('fd49:efd7:54aa::/64'))] == texts[1:]
    assert [t for t, _c in docker.docker_nft_rules(ts, 'br-dummy', nets('192.168.0.0/24'))] == texts[:1]
    deletes = [c for _t, cs in commands(docker.docker_nft_rules(ts, 'br-dummy', None)) for c in cs]
    assert [c['delete']['rule']['family'] for c in deletes] == ['ip', 'ip6']
    assert all(isinstance(c['delete']['rule']['handle'], int) for c in deletes)


def rule(*expr, **kw):
    out = {'family': 'ip', 'table': 'docker-bridges', 'chain': OUT, 'handle': 7, 'expr': list(expr)}
    out.update(kw)
    return out


OIF = {'match': {'op': '!=', 'left': {'meta': {'key': 'oifname'}}, 'right': 'docker0'}}
SADDR = {'match': {'op': '==', 'left': {'payload': {'protocol': 'ip', 'field': 'saddr'}},
                   'right': {'prefix': {'addr': '172.17.0.0', 'len': 16}}}}
COUNTER = {'counter': {'packets': 0, 'bytes': 0}}
MASQUERADE = {'masquerade': None}


@pytest.mark.parametrize('candidate,picked', [
    (rule(OIF, SADDR, COUNTER, MASQUERADE, comment='MASQUERADE'), True),
    (rule(OIF, SADDR, MASQUERADE), True),
    (rule(OIF, SADDR, COUNTER, MASQUERADE, comment='kept by hand'), False),
    (rule(SADDR, OIF, COUNTER, MASQUERADE, comment='MASQUERADE'), False),
    (rule(OIF, SADDR, {'match': {'op': '==', 'left': {'payload': {'protocol': 'tcp', 'field': 'dport'}},
                                 'right': 80}}, MASQUERADE), False),
    (rule(OIF, SADDR, {'masquerade': {'flags': ['fully-random']}}), False),
    (rule(OIF, SADDR, {'snat': {'addr': '192.0.2.1'}}), False),
    (rule(dict(OIF, match=dict(OIF['match'], op='==')), SADDR, MASQUERADE), False),
    (rule(dict(OIF, match=dict(OIF['match'], right='docker1')), SADDR, MASQUERADE), False),
    (rule(OIF, dict(SADDR, match=dict(SADDR['match'], op='!=')), MASQUERADE), False),
    (rule(OIF, dict(SADDR, match=dict(SADDR['match'], right='@docker-nets')), MASQUERADE), False),
    (rule(OIF, dict(SADDR, match=dict(SADDR['match'], right='172.17.0.1')), MASQUERADE), False),
])
def test_docker_rule_shape(candidate, picked):
    assert docker.is_docker_nft_masquerade(candidate, 'docker0', 'ip', nets('172.17.0.0/16')) is picked


def test_docker_rule_of_the_other_family_is_not_picked():
    # An ip6 table holding an "ip saddr" rule is not what Docker writes.
    assert not docker.is_docker_nft_masquerade(rule(OIF, SADDR, MASQUERADE), 'docker0', 'ip6', None)


# The one interface-name rule (policy.is_interface_name): no wildcard an nft or
# iptables match would read ('+', '*'), no '.' or '..', no leading '-'.
@pytest.mark.parametrize('bridge', ['', 'docker0; flush ruleset', 'a-bridge-name-too-long', 'br"0', None,
                                    'docker+', 'br*', '..', '-br0', 'br:0', 'br@0'])
def test_docker_bad_bridge_name_is_an_error_naming_it(bridge):
    with pytest.raises(MasqError) as e:
        docker.docker_nft_rules(tables('docker_bridges'), bridge, None)
    assert repr(bridge) in e.value.msg and 'Nothing was changed' in e.value.msg


def test_docker_rule_without_handle_is_an_error():
    ts = tables('docker_bridges')
    for r in ts[('ip', 'docker-bridges')].rules[OUT]:
        r['handle'] = None
    with pytest.raises(MasqError) as e:
        commands(docker.docker_nft_rules(ts, 'docker0', None))
    assert 'handle' in e.value.msg and 'no nft transaction was run' in e.value.msg


# ------------------------------------------------------------------ flannel

def test_flannel_postrtg_chains_of_both_tables():
    picked = commands(flannel.flannel_nft_chains(tables('flannel')))
    assert [t for t, _c in picked] == ['IPv4: ip flannel-ipv4: chain postrtg (6 rules, 2 masquerading)',
                                       'IPv6: ip6 flannel-ipv6: chain postrtg (6 rules, 2 masquerading)']
    ident = {'family': 'ip', 'table': 'flannel-ipv4', 'name': 'postrtg'}
    assert picked[0][1] == [{'flush': {'chain': ident}}, {'delete': {'chain': ident}}]
    # The forward chains (and the tables) are not touched.
    assert 'forward' not in json.dumps(picked)
    assert flannel.flannel_nft_chains(tables('docker_bridges')) == []


def test_flannel_chain_gone_already_or_not_flannels():
    ts = tables('flannel')
    del ts[('ip6', 'flannel-ipv6')]
    ts[('ip', 'flannel-ipv4')].chains['postrtg'].update(type='filter', hook='forward')
    notes = []
    assert flannel.flannel_nft_chains(ts, notes) == []
    assert notes == ['ip flannel-ipv4: chain postrtg is not a nat postrouting chain (type filter, hook forward), '
                     'not what flanneld writes; left alone.']


# ------------------------------------------------------------------ the audit agrees

def test_the_audit_names_exactly_what_the_modules_remove():
    """Every offender of the audit in these tables is a rule the modules
    delete (Docker: the default bridge's; flannel: its postrtg chain), and
    nothing the modules delete is allowed by the audit."""
    ts = tables('docker_bridges_ipv6')
    res = analyse([ruleset_finding('nftables', ts)], ipv6=True)
    offending = sorted((o['table'], o['handle']) for o in res['offenders'])
    picked = sorted(('%s %s' % (c['delete']['rule']['family'], c['delete']['rule']['table']),
                     c['delete']['rule']['handle'])
                    for _t, cs in commands(docker.docker_nft_rules(ts, 'br-dummy', None)) for c in cs)
    assert offending == picked and len(picked) == 2
    ts = tables('flannel')
    res = analyse([ruleset_finding('nftables', ts)], ipv6=True)
    assert sorted({(o['table'], o['chain']) for o in res['offenders']}) == sorted(
        ('%s %s' % (c['delete']['chain']['family'], c['delete']['chain']['table']), c['delete']['chain']['name'])
        for _t, cs in commands(flannel.flannel_nft_chains(ts)) for c in cs if 'delete' in c)


# ------------------------------------------------------------------ the transaction

class FakeNft:
    """``nft`` on PATH: listings answered from a data file, transactions recorded."""

    def __init__(self, name, fail_load=None, fail_list=None):
        with open(os.path.join(DATA, name + '.json')) as f:
            self.listing = f.read()
        self.loads = []
        self.fail_load = fail_load
        self.fail_list = fail_list

    def find(self, name):
        return '/usr/sbin/nft' if name == 'nft' else None

    def run(self, argv, data=None):
        assert argv == ['/usr/sbin/nft', '-j', '-f', '-'], argv
        batch = json.loads(data)['nftables']
        if all('list' in c for c in batch):
            if self.fail_list:
                return 1, '', self.fail_list
            return 0, self.listing, ''
        if self.fail_load:
            return 1, '', self.fail_load
        self.loads.append(batch)
        return 0, '', ''


@pytest.fixture
def private_lock(monkeypatch, tmp_path):
    """The writers' lock on a file of the test's own."""
    def locked(read, plan, check_mode=False):
        return sync.locked(read, plan, check_mode=check_mode, lock=Lock(str(tmp_path / 'lock')))
    monkeypatch.setattr(base, 'locked', locked)


def _pick(ts):
    return docker.docker_nft_rules(ts, 'br-dummy', None)


pick_docker = RuleMatch(nft=_pick)


def test_one_transaction_for_both_families(private_lock):
    nft = FakeNft('docker_bridges_ipv6')
    result = base.Result('present', 'docker')
    removed = base.remove_rules(nft.run, nft.find, pick_docker, False, result)
    assert len(removed) == 2 and result['removed_rules'] == removed and result['changed'] is True
    (batch,) = nft.loads
    assert [list(c['delete']) for c in batch] == [['rule'], ['rule']]


def test_check_mode_runs_no_transaction(private_lock):
    nft = FakeNft('docker_bridges_ipv6')
    result = base.Result('present', 'docker')
    removed = base.remove_rules(nft.run, nft.find, pick_docker, True, result)
    assert len(removed) == 2 and result['changed'] is True and nft.loads == []


def test_nothing_to_remove_runs_no_transaction(private_lock):
    nft = FakeNft('flannel')
    result = base.Result('present', 'docker')
    assert base.remove_rules(nft.run, nft.find, pick_docker, False, result) == []
    assert result['changed'] is False and result['removed_rules'] == [] and nft.loads == []


def test_appends_to_what_iptables_removed(private_lock):
    nft = FakeNft('docker_bridges_ipv6')
    result = base.Result('present', 'docker')
    result['removed_rules'] = ['IPv4: -A POSTROUTING -s 192.168.0.0/24 ! -o br-dummy -j MASQUERADE']
    base.remove_rules(nft.run, nft.find, pick_docker, False, result)
    assert len(result['removed_rules']) == 3 and result['removed_rules'][0].startswith('IPv4: -A POSTROUTING')


def test_failed_transaction_says_what_was_removed_before(private_lock):
    nft = FakeNft('docker_bridges_ipv6', fail_load='Error: Could not process rule: No such file or directory')
    result = base.Result('present', 'docker')
    with pytest.raises(MasqError) as e:
        base.remove_rules(nft.run, nft.find, pick_docker, False, result)
    assert 'No such file or directory' in e.value.msg and 'No part of the nft transaction was applied' in e.value.msg
    assert 'read again after a first failed write' in e.value.msg     # the registry's one retry
    assert 'Removed before it' not in e.value.msg
    result['removed_rules'] = ['IPv4: chain FLANNEL-POSTRTG']
    with pytest.raises(MasqError) as e:
        base.remove_rules(nft.run, nft.find, pick_docker, False, result)
    assert e.value.msg.endswith('Removed before it, and kept: IPv4: chain FLANNEL-POSTRTG.')
    assert e.value.details['changed'] is True


class OwnLoop(FakeNft):
    """A ``run`` with a read -> plan -> write loop of its own (``locked``, as the
    explanation's after mode has): the clean-up takes it instead of the writers' lock."""

    def __init__(self, name):
        FakeNft.__init__(self, name)
        self.loops = []

    def __call__(self, argv, data=None):
        return self.run(argv, data)

    def locked(self, read, plan, check_mode=False):
        self.loops.append(check_mode)
        reading = read()
        todo = plan(reading)
        todo.apply()
        return reading, todo


def test_a_run_with_a_loop_of_its_own_writes_through_it(monkeypatch):
    def writers_lock(*_args, **_kwargs):
        raise AssertionError('the writers\' lock was taken')
    monkeypatch.setattr(base, 'locked', writers_lock)
    for check_mode in (True, False):
        nft = OwnLoop('docker_bridges_ipv6')
        result = base.Result('present', 'docker')
        removed = base.remove_rules(nft, nft.find, pick_docker, check_mode, result)
        assert len(removed) == 2 and result['removed_rules'] == removed and result['changed'] is True
        assert nft.loops == [check_mode] and len(nft.loads) == 1      # written by its loop, check mode or not


def test_no_nft_or_an_unreadable_ruleset_removes_nothing(private_lock):
    result = base.Result('present', 'docker')
    assert base.remove_rules(None, lambda name: None, pick_docker, False, result) == []
    assert result['messages'] == ['nft not found; no nftables table checked.']
    nft = FakeNft('docker_bridges_ipv6', fail_list='Error: Operation not supported')
    result = base.Result('present', 'docker')
    assert base.remove_rules(nft.run, nft.find, pick_docker, False, result) == []
    assert nft.loads == [] and result['changed'] is False
    assert len(result.warnings) == 1 and 'Operation not supported' in result.warnings[0]
