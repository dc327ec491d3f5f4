"""Where the policy lives (masq_chain's backend: auto, iptables, nftables)
and the switch from one backend to the other, on real iptables (nf_tables
and legacy) and real nftables in network namespaces, through
ansible-playbook.

A switch writes the policy in the new backend and removes ours from the old
one in the same run; when a step fails, the steps before it are undone: the
node is never left with neither policy, nor with both.  ``auto`` never moves
a node by itself.  "Not installed" is a tool hidden by a bind mount inside
the run's own mount namespace (private_mounts.py)."""
import os

import pytest

from ipmasq_lab import netlab, policy_view
from ipmasq_lab.policy_view import CHAIN

SNAT_PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'playbooks', 'snat_sources.yml')
IPTABLES_BINARIES = ['/usr/sbin/xtables-nft-multi', '/usr/sbin/xtables-legacy-multi']
NFT_BINARY = ['/usr/sbin/nft']
FLAVOURS = ['iptables-nft', 'iptables-legacy']
ARGS = dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'])
NFT_ONLY = {'ipv4': [], 'ipv6': [], 'nft': policy_view.nft_expect(['10.0.0.0/8'], ['fd00::/8'])}
IPT_ONLY = {'ipv4': policy_view.ipt_expect(['169.254.0.0/16', '10.0.0.0/8']),
            'ipv6': policy_view.ipt_expect(['fe80::/10', 'fd00::/8']), 'nft': None}
REMOVE_CHAIN = ['IPv%d: remove 1 POSTROUTING jump(s) to %s' % (f, CHAIN) for f in (4, 6)]


def ok(res):
    assert not res.get('failed'), res.get('msg')
    return res


FAIL = 'import sys\nsys.stdin.read()\nsys.stderr.write("%s: refused by the test\\n")\nsys.exit(1)\n'
# nft that lists as the real one does but fails every transaction that deletes something.
NFT_FAILING_DELETE = (
    'import os, sys\n'
    'data = sys.stdin.read()\n'
    'if \'"delete"\' in data:\n'
    '    sys.stderr.write("nft: refused by the test\\n")\n'
    '    sys.exit(1)\n'
    'r, w = os.pipe()\n'
    'os.write(w, data.encode()); os.close(w)\n'
    'os.dup2(r, 0)\n'
    'os.execv("/usr/sbin/nft", ["/usr/sbin/nft"] + sys.argv[1:])\n')


# --------------------------------------------------------------------------
# The switch, both ways
# --------------------------------------------------------------------------

@pytest.mark.parametrize('flavour', FLAVOURS)
def test_switching_backend_moves_the_policy_in_one_run_both_ways(make_node, flavour):
    node = make_node(flavour)
    node.add_foreign(ipv6=True)
    foreign = node.foreign()
    ok(node.module(backend='iptables', **ARGS)['apply1'])
    assert node.state() == IPT_ONLY

    # Check mode reports the whole switch and writes nothing.
    before = node.snapshot()
    res = ok(node.module(steps=['check1'], backend='nftables', **ARGS)['check1'])
    assert res['changed'] is True and node.snapshot() == before
    assert res['actions'] == [
        'nftables: create table inet ip-masq-agent (nonmasq-ipv4: 1 element(s), nonmasq-ipv6: 1 element(s))',
        REMOVE_CHAIN[0], 'IPv4: delete chain %s' % CHAIN, REMOVE_CHAIN[1], 'IPv6: delete chain %s' % CHAIN]

    # iptables -> nftables: one run; the next changes nothing; auto keeps it there.
    res = node.module(steps=['apply1', 'apply2'], backend='nftables', **ARGS)
    assert ok(res['apply1'])['changed'] is True and ok(res['apply2'])['changed'] is False
    assert res['apply1']['selected_backend'] == 'nftables'
    assert node.state() == NFT_ONLY and node.foreign() == foreign
    res = ok(node.module(backend='auto', **ARGS)['apply1'])
    assert res['changed'] is False and res['selected_backend'] == 'nftables'
    assert res['selected_backend_reason'] == 'auto: the node has our nftables table inet ip-masq-agent'

    # nftables -> iptables: the same, the other way.
    res = node.module(steps=['apply1', 'apply2'], backend='iptables', **ARGS)
    assert ok(res['apply1'])['changed'] is True and ok(res['apply2'])['changed'] is False
    assert res['apply1']['actions'][-1] == 'nftables: delete table inet ip-masq-agent'
    assert node.state() == IPT_ONLY and node.foreign() == foreign
    res = ok(node.module(backend='auto', **ARGS)['apply1'])
    assert res['changed'] is False and res['selected_backend'] == 'iptables'
    assert res['selected_backend_reason'] == 'auto: the node has our iptables chain %s (IPv4, IPv6)' % CHAIN


# --------------------------------------------------------------------------
# A switch that fails midway is undone
# --------------------------------------------------------------------------

SWITCH_FAILURES = {
    # from, to, the tool that fails, what the error names
    'to nftables, removing the IPv6 chain fails': ('iptables', 'nftables', {'ip6tables-restore': FAIL % 'ip6tables-restore'},
                                                   'ip6tables-restore'),
    'to iptables, writing the IPv6 chain fails': ('nftables', 'iptables', {'ip6tables-restore': FAIL % 'ip6tables-restore'},
                                                  'ip6tables-restore'),
    'to iptables, deleting the table fails': ('nftables', 'iptables', {'nft': NFT_FAILING_DELETE}, 'nft'),
}


@pytest.mark.parametrize('flavour', FLAVOURS)
@pytest.mark.parametrize('case', sorted(SWITCH_FAILURES))
def test_a_switch_that_fails_midway_is_undone(make_node, flavour, case):
    old, new, tools, culprit = SWITCH_FAILURES[case]
    node = make_node(flavour)
    node.add_foreign(ipv6=True)
    ok(node.module(backend=old, **ARGS)['apply1'])
    before = node.snapshot()
    assert node.state() == (IPT_ONLY if old == 'iptables' else NFT_ONLY)
    with netlab.tool_dir(tools) as path:
        res = node.module(backend=new, path_prefix=path, **ARGS)['apply1']
    assert res.get('failed') is True
    assert 'refused by the test' in res['msg'] and culprit in res['msg'], res['msg']
    assert 'was undone: the node is as it was. Nothing was changed.' in res['msg'], res['msg']
    assert res['changed'] is False and res['undone']
    # Exactly as before: the old policy, every rule (and the jumps' places), the foreign table.
    assert node.snapshot() == before
    # And the switch goes through once the fault is gone.
    ok(node.module(backend=new, **ARGS)['apply1'])
    assert node.state() == (IPT_ONLY if new == 'iptables' else NFT_ONLY)


# --------------------------------------------------------------------------
# auto
# --------------------------------------------------------------------------

def test_auto_gives_a_new_node_iptables_where_it_is_installed(make_node):
    node = make_node('iptables-nft')
    res = ok(node.module(backend='auto')['apply1'])
    assert res['selected_backend'] == 'iptables'
    assert res['selected_backend_reason'] == 'auto: a node with neither policy yet, where iptables is installed'
    assert node.state() == node.expect()


def test_auto_gives_a_node_without_iptables_nftables_and_keeps_it_there(make_node):
    node = make_node('nftables')
    res = ok(node.module(backend='auto', hide=IPTABLES_BINARIES)['apply1'])
    assert res['selected_backend'] == 'nftables'
    assert res['selected_backend_reason'] == 'auto: a node with neither policy yet, where only nft is installed'
    assert node.state()['nft'] == policy_view.nft_expect()
    # iptables installed later: the node stays where it is.
    res = ok(node.module(backend='auto')['apply1'])
    assert res['changed'] is False and res['selected_backend'] == 'nftables'
    assert node.state() == node.expect()


def test_auto_keeps_an_iptables_node_on_iptables_without_nft(make_node):
    node = make_node('iptables-legacy')
    ok(node.module(backend='iptables')['apply1'])
    res = ok(node.module(backend='auto', hide=NFT_BINARY)['apply1'])
    assert res['changed'] is False and res['selected_backend'] == 'iptables'
    assert res['nft_version'] is None


@pytest.mark.parametrize('backend,hide,message', [
    ('auto', IPTABLES_BINARIES + NFT_BINARY, 'Neither iptables (iptables-save and iptables-restore) nor nft was '
                                             'found on the node; install iptables or nftables. Nothing was changed.'),
    ('nftables', NFT_BINARY, 'nft was not found on the node; install the nftables package. Nothing was changed.'),
    ('iptables', IPTABLES_BINARIES, 'iptables-save and iptables-restore were not found on the node'),
])
def test_a_missing_tool_is_a_clear_error_that_changes_nothing(make_node, backend, hide, message):
    node = make_node('iptables-nft')
    node.add_foreign()
    before = node.snapshot()
    res = node.module(backend=backend, hide=hide)['apply1']
    assert res.get('failed') is True and message in res['msg'], res['msg']
    assert 'Traceback' not in res.get('module_stderr', '')
    assert node.snapshot() == before


# --------------------------------------------------------------------------
# Ours in both backends (written by someone else): a run that writes, and
# state=absent, leave it in one (or none)
# --------------------------------------------------------------------------

def _write_chain_by_hand(node, cidrs=('10.0.0.0/8',)):
    """Our chain and jump as the upstream DaemonSet would write them, beside our table."""
    lines = policy_view.ipt_expect(['169.254.0.0/16'] + list(cidrs))
    node.ns.exec([node.backend.tool('iptables-restore'), '--noflush'],
                 input='*nat\n%s\nCOMMIT\n' % '\n'.join(l + ' [0:0]' if l.startswith(':') else l for l in lines))


@pytest.mark.parametrize('flavour', FLAVOURS)
def test_an_nftables_run_removes_our_iptables_chain_beside_a_table_in_sync(make_node, flavour):
    """iptables-nft's chain is an nf_tables chain (the kernel is asked); a
    legacy chain is looked for where /proc lists a legacy nat table: either
    way the run that finds it removes it."""
    node = make_node(flavour)
    ok(node.module(backend='nftables')['apply1'])
    _write_chain_by_hand(node)
    res = ok(node.module(backend='nftables')['apply1'])
    assert res['changed'] is True
    assert res['actions'] == ['IPv4: remove 1 POSTROUTING jump(s) to %s' % CHAIN, 'IPv4: delete chain %s' % CHAIN]
    assert node.state() == {'ipv4': [], 'ipv6': [], 'nft': policy_view.nft_expect()}


def test_absent_removes_ours_from_both_backends(make_node):
    node = make_node('iptables-nft')
    node.add_foreign()
    foreign = node.foreign()
    ok(node.module(backend='nftables')['apply1'])
    _write_chain_by_hand(node)
    assert node.state()['nft'] and node.state()['ipv4']
    res = node.four_steps(state='absent')
    assert res['apply1']['actions'] == ['IPv4: remove 1 POSTROUTING jump(s) to %s' % CHAIN,
                                        'IPv4: delete chain %s' % CHAIN, 'nftables: delete table inet ip-masq-agent']
    assert node.state() == {'ipv4': [], 'ipv6': [], 'nft': None}
    assert node.foreign() == foreign


def _audit(node):
    rc, tasks = netlab.playbook(node.ns, SNAT_PLAYBOOK, extra_vars={'audit_args': {}}, backend=node.backend)
    ((_name, result),) = [(n, r) for n, r in tasks if not r.get('skipped')]
    return result


def test_an_iptables_run_in_sync_removes_our_table_beside_it_and_the_audit_sees_both_before(make_node):
    """The kernel is asked whether our table exists: an iptables run that
    changes nothing in iptables still removes it.  Before that run, the
    audit (the role's last step) reports ours in both backends."""
    node = make_node('iptables-nft')
    ok(node.module(backend='nftables')['apply1'])
    _write_chain_by_hand(node, policy_view.DEFAULT_CIDRS)
    audit = _audit(node)
    assert audit['only_ours'] is False and audit['ours_backends'] == ['iptables', 'nftables']
    assert 'our policy is in both iptables and nftables' in audit['summary']
    res = ok(node.module(backend='iptables')['apply1'])
    assert res['changed'] is True and res['actions'] == ['nftables: delete table inet ip-masq-agent']
    assert node.state() == node.expect()
    audit = _audit(node)
    assert audit['only_ours'] is True and audit['ours_backends'] == ['iptables']
    # In sync in both senses now: no nft run at all.
    res = ok(node.module(backend='iptables')['apply1'])
    assert res['changed'] is False and not any(c.split()[0].endswith('/nft') for c in res['commands'])


@pytest.mark.parametrize('backend', ['auto', 'nftables'])
def test_our_iptables_nft_chain_without_the_iptables_tools_is_refused(make_node, backend):
    """The kernel holds our chain (written with iptables-nft) but iptables is
    no longer installed: neither auto nor nftables can leave the node with one
    policy, so the run says so and changes nothing."""
    node = make_node('iptables-nft')
    ok(node.module(backend='iptables')['apply1'])
    before = node.snapshot()
    res = node.module(backend=backend, hide=IPTABLES_BINARIES)['apply1']
    assert res.get('failed') is True, res
    assert 'the kernel ' in res['msg'] and 'holds our iptables chain %s (ip nat, written with iptables-nft)' % CHAIN \
        in res['msg'] and 'Nothing was changed.' in res['msg'], res['msg']
    assert node.snapshot() == before
