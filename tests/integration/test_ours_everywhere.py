"""Ours in the iptables flavour the tools on PATH do not write to (issue 18,
item 2): the kernel keeps a legacy nat table and iptables-nft's nat table
apart, and a node can hold our chain in either whatever its
``iptables`` is now (written from a container, or before the node's
alternatives moved).  Every run looks there too: a run that writes the
policy (either backend) and ``state=absent`` remove ours from it with that
flavour's own tools, or, where those are not installed, fail naming where it
is and how to remove it, with nothing changed.

Real namespaces: the chain is written by hand with the other flavour's tools
(netlab.Backend), the module runs with the node's flavour first on PATH."""
import shlex

import pytest

from ipmasq_lab import policy_view
from ipmasq_lab.policy_view import CHAIN, not_ours, ours
from ipmasq_lab import netlab

ARGS = dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'])
OTHER = {'nft': 'legacy', 'legacy': 'nft'}
TOOLS = {'legacy': 'iptables-legacy', 'nft': 'iptables-nft'}
MULTI = {'legacy': '/usr/sbin/xtables-legacy-multi', 'nft': '/usr/sbin/xtables-nft-multi'}
FOREIGN = '-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE'


def ok(res):
    assert not res.get('failed'), res.get('msg')
    return res


def write_ours(ns, backend, family):
    """Our chain and jump as an earlier run wrote them, beside a rule of someone else's, with ``backend``'s tools."""
    cidrs = ['169.254.0.0/16', '10.0.0.0/8'] if family == 4 else ['fe80::/10', 'fd00::/8']
    lines = policy_view.ipt_expect(cidrs) + ([FOREIGN] if family == 4 else [])
    tool = backend.tool('iptables-restore' if family == 4 else 'ip6tables-restore')
    ns.exec([tool, '--noflush'],
            input='*nat\n%s\nCOMMIT\n' % '\n'.join(l + ' [0:0]' if l.startswith(':') else l for l in lines))


def rules(ns, backend, family):
    return netlab.nat_rules(backend.save(ns, family))


@pytest.fixture
def nodes(make_node, backends):
    """make(flavour on PATH, policy) -> (node, the other flavour's netlab.Backend)."""
    def make(path, policy='iptables'):
        kind = 'nftables' if policy == 'nftables' and path == 'nft' else 'iptables-%s' % path
        node = make_node(kind)
        node.policy = policy
        return node, backends[OTHER[path]]
    return make


@pytest.mark.parametrize('path,backend', [('nft', 'nftables'), ('nft', 'iptables'), ('legacy', 'nftables')])
def test_a_run_that_writes_removes_ours_from_the_other_flavour(nodes, path, backend):
    node, other = nodes(path, backend)
    for family in (4, 6):
        write_ours(node.ns, other, family)
    assert ours(rules(node.ns, other, 4)) and ours(rules(node.ns, other, 6))
    res = node.module(steps=['apply1', 'apply2'], **ARGS)
    first, second = ok(res['apply1']), ok(res['apply2'])
    moved = ['IPv%d (%s): %s' % (f, TOOLS[other.name].replace('ip', 'ip6' if f == 6 else 'ip', 1), what) for f in (4, 6)
             for what in ('remove 1 POSTROUTING jump(s) to %s' % CHAIN, 'delete chain %s' % CHAIN)]
    assert first['changed'] is True and first['actions'][-4:] == moved, first['actions']
    assert first['drift_kinds'][-4:] == ['other_backend'] * 4
    assert [(e['tools'], e['chain_exists'], e['changed']) for e in first['other_iptables']] == [
        (TOOLS[other.name], True, True), (TOOLS[other.name].replace('iptables', 'ip6tables'), True, True)]
    # --diff shows ours in the other flavour before, and not after.
    diff = first['diff'][0] if isinstance(first['diff'], list) else first['diff']
    for family in (4, 6):
        head = '# %s nat (IPv%d), the iptables flavour not on PATH\n' % (
            TOOLS[other.name].replace('iptables', 'ip6tables' if family == 6 else 'iptables'), family)
        assert head in diff['before'] and head in diff['after'], diff
        assert diff['after'].split(head, 1)[1][:1] in ('', '#'), 'nothing of ours there after: %s' % diff['after']
        shown = diff['before'].split(head, 1)[1].split('\n#', 1)[0].splitlines()
        assert shown[0].startswith('-A POSTROUTING ') and shown[0].endswith('-j %s' % CHAIN), shown
        assert ':%s - [0:0]' % CHAIN in shown and any(line.startswith('-A %s -d ' % CHAIN) for line in shown), shown
    # Gone from the other flavour, someone else's rule kept; the policy where the run put it.
    assert ours(rules(node.ns, other, 4)) == ours(rules(node.ns, other, 6)) == []
    assert not_ours(rules(node.ns, other, 4)) == [':PREROUTING ACCEPT', ':INPUT ACCEPT', ':OUTPUT ACCEPT',
                                                  ':POSTROUTING ACCEPT', FOREIGN]
    state = node.state()
    if backend == 'nftables':
        assert state['nft'] and state['ipv4'] == state['ipv6'] == []
    else:
        assert state['nft'] is None and state['ipv4'] and state['ipv6']
    assert second['changed'] is False, second['actions']


@pytest.mark.parametrize('path', ['nft', 'legacy'])
def test_absent_removes_ours_from_both_flavours_and_the_table(nodes, path):
    node, other = nodes(path)
    ok(node.module(backend='nftables', **ARGS)['apply1'])      # our table
    for family in (4, 6):
        write_ours(node.ns, node.backend, family)                 # the flavour on PATH
        write_ours(node.ns, other, family)                        # the other one
    assert node.state()['nft'] and node.state()['ipv4'] and ours(rules(node.ns, other, 4))
    res = ok(node.module(state='absent')['apply1'])
    assert res['changed'] is True
    assert 'IPv4 (%s): delete chain %s' % (TOOLS[other.name], CHAIN) in res['actions']
    assert 'IPv6 (%s): delete chain %s' % (TOOLS[other.name].replace('iptables', 'ip6tables'), CHAIN) \
        in res['actions']
    assert node.state() == {'ipv4': [], 'ipv6': [], 'nft': None}
    assert ours(rules(node.ns, other, 4)) == ours(rules(node.ns, other, 6)) == []
    assert FOREIGN in rules(node.ns, other, 4) and FOREIGN in node.rules(4)


@pytest.mark.parametrize('state', ['present', 'absent'])
def test_without_the_legacy_tools_the_run_says_where_ours_is_and_how_to_remove_it(nodes, state):
    """iptables-legacy is not installed: the kernel is asked which chains its
    legacy nat table holds.  The run fails, changes nothing, and the commands
    it gives remove ours."""
    node, legacy = nodes('nft', 'nftables')
    write_ours(node.ns, legacy, 4)
    before = node.snapshot(), legacy.save(node.ns, 4)
    res = node.module(state=state, hide=[MULTI['legacy']], **(ARGS if state == 'present' else {}))['apply1']
    assert res.get('failed') is True, res
    msg = res['msg']
    assert '%s is in the iptables-legacy nat table (IPv4), and iptables-legacy-save and iptables-legacy-restore' \
        % CHAIN in msg and msg.endswith('Nothing was changed.'), msg
    assert 'Traceback' not in res.get('module_stderr', '')
    assert (node.snapshot(), legacy.save(node.ns, 4)) == before
    # The commands it names remove ours and nothing else.
    commands = msg.split('remove it yourself: ')[1]
    jump = commands.split(' (each POSTROUTING jump')[0]
    flush, delete = commands.split(', then ')[1].split(' and ')
    for command in (jump, flush, delete.rstrip('.').split('. ')[0]):
        argv = shlex.split(command)
        assert argv[0] == 'iptables-legacy'
        node.ns.exec([legacy.tool('iptables')] + argv[1:])
    assert ours(rules(node.ns, legacy, 4)) == [] and FOREIGN in rules(node.ns, legacy, 4)
    ok(node.module(state=state, hide=[MULTI['legacy']], **(ARGS if state == 'present' else {}))['apply1'])
