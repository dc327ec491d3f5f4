"""Ours under another chain name (issue 26), the pure logic: which chains an
iptables-save reading holds of ours under another name (iptables.ours_elsewhere),
the one restore that removes them beside the policy's write, the nftables
table told by our comment, and the kernel's list of tables over nfnetlink.
The behaviour on real iptables and nft: tests/integration/test_chain_rename.py."""
import errno
import struct

from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import chain as iptables, save as iptables_save
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import nfnetlink
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import table as nftables
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import parse_nft
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import COMMENTS, Policy

OLD, NEW = 'IP-MASQ-AGENT', 'MY-MASQ'
JUMP = ('-A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination '
        'traffic to our custom %s chain" -m addrtype ! --dst-type LOCAL -j %s')


def table(*chains_and_rules):
    chains = [c for c in chains_and_rules if not c.startswith('-')]
    rules = [r for r in chains_and_rules if r.startswith('-')]
    return iptables_save.parse_save('\n'.join(['*nat', ':POSTROUTING ACCEPT [0:0]'] + [':%s - [0:0]' % c for c in chains]
                                              + rules + ['COMMIT', '']))


def ours_rule(chain, fmt='docs'):
    return '-A %s -m comment --comment "%s" -j MASQUERADE' % (chain, COMMENTS[fmt]['masquerade'])


def test_ours_elsewhere_is_told_by_our_comment_in_either_format_or_the_jump():
    t = table(OLD, 'UP', 'JUMPED', 'FOREIGN', 'EMPTY', NEW,
              ours_rule(OLD), ours_rule('UP', 'upstream'), '-A JUMPED -j MASQUERADE', JUMP % ('JUMPED', 'JUMPED'),
              '-A FOREIGN -d 10.0.0.0/8 -j RETURN', '-A POSTROUTING -j FOREIGN', ours_rule(NEW))
    assert iptables.ours_elsewhere(t, NEW) == [OLD, 'UP', 'JUMPED']
    assert iptables.ours_elsewhere(t, OLD) == ['UP', NEW, 'JUMPED']     # chains with our rules first, then jump targets


def test_a_sub_chain_goes_with_its_chain_and_the_chains_own_are_never_others():
    t = table(OLD, OLD + '-REWRITE', NEW + '-POLICY', ours_rule(OLD), ours_rule(OLD + '-REWRITE'),
              ours_rule(NEW + '-POLICY'))
    assert iptables.ours_elsewhere(t, NEW) == [OLD]


def test_one_restore_writes_the_new_chain_and_removes_the_old_one_after_it():
    t = table(OLD, OLD + '-REWRITE', ours_rule(OLD), ours_rule(OLD + '-REWRITE'), JUMP % (OLD, OLD),
              '-A FOREIGN-X -j RETURN', 'FOREIGN-X')
    plan = iptables.plan_present(4, t, Policy(chain=NEW))
    assert plan.actions[-2:] == ['remove 1 POSTROUTING jump(s) to %s (ours under another chain name)' % OLD,
                                 'delete chain %s and its sub-chain %s-REWRITE (ours under another chain name)'
                                 % (OLD, OLD)]
    assert plan.kinds[-2:] == ['chain_unwanted', 'chain_unwanted']
    tail = plan.lines[-5:]
    assert tail == [(JUMP % (OLD, OLD)).replace('-A', '-D', 1), ':%s - [0:0]' % OLD, ':%s-REWRITE - [0:0]' % OLD,
                    '-X %s' % OLD, '-X %s-REWRITE' % OLD]
    assert plan.lines.index(':%s - [0:0]' % NEW) < plan.lines.index(tail[0])
    assert [o['chain'] for o in iptables.others_before(plan)] == [OLD]
    # The undo (a switch of backend) puts the old chain back with its jump.
    undo = plan.undo_lines()
    assert ':%s - [0:0]' % OLD in undo and ours_rule(OLD) in undo
    assert undo[-1] == '-I POSTROUTING 1 ' + (JUMP % (OLD, OLD))[len('-A POSTROUTING '):]


def test_absent_removes_ours_under_every_name_and_a_foreign_chain_of_the_name_is_left():
    t = table(OLD, NEW, ours_rule(NEW), '-A %s -j RETURN' % OLD)
    plan = iptables.plan_absent(4, t, OLD, strict=False)
    assert plan.note == 'chain %s exists but is not ours; left alone.' % OLD
    assert plan.actions == ['delete chain %s (ours under another chain name)' % NEW]
    assert plan.lines == [':%s - [0:0]' % NEW, '-X %s' % NEW]


NFT = {'nftables': [
    {'table': {'family': 'inet', 'name': 'old'}},
    {'chain': {'family': 'inet', 'table': 'old', 'name': 'postrouting'}},
    {'rule': {'family': 'inet', 'table': 'old', 'chain': 'postrouting', 'expr': [{'masquerade': None}],
              'comment': COMMENTS['upstream']['masquerade']}},
    {'table': {'family': 'inet', 'name': 'empty'}},
    {'chain': {'family': 'inet', 'table': 'empty', 'name': 'postrouting'}},
    {'table': {'family': 'inet', 'name': 'foreign'}},
    {'rule': {'family': 'inet', 'table': 'foreign', 'chain': 'postrouting', 'expr': [{'masquerade': None}]}},
]}


def test_an_nftables_table_under_another_name_is_ours_by_our_comment_only():
    tables = parse_nft(NFT)
    assert [name for (_f, name), t in tables.items() if nftables.carries_our_comment(t)] == ['old']
    plan = nftables.remove_others(nftables.plan_absent(None, 'my-masq'), {'old': tables[('inet', 'old')]})
    assert plan.actions == ['delete table inet old (ours under another chain name)']
    assert plan.commands == [{'delete': {'table': {'family': 'inet', 'name': 'old'}}}]


class FakeSock:
    def __init__(self, replies):
        self.replies = list(replies)

    def recv(self, _size):
        return self.replies.pop(0)


def _table_msg(seq, name):
    attr = nfnetlink._attr(nfnetlink.NFTA_TABLE_NAME, name) + struct.pack('=HH', 8, 3) + b'\0\0\0\1'
    return struct.pack('=IHHII', 20 + len(attr), (10 << 8) | 0, 2, seq, 0) + b'\1\0\0\0' + attr


def test_the_kernels_list_of_tables():
    done = struct.pack('=IHHII', 20, nfnetlink.NLMSG_DONE, 2, 1, 0) + b'\0' * 4
    assert nfnetlink._names(FakeSock([_table_msg(1, 'a') + _table_msg(1, 'ip-masq-agent'), done]), 1) == [
        'a', 'ip-masq-agent']
    error = struct.pack('=IHHII', 36, nfnetlink.NLMSG_ERROR, 0, 1, 0)
    assert nfnetlink._names(FakeSock([error + struct.pack('=i', -errno.EPERM) + b'\0' * 16]), 1) is None
    assert nfnetlink._names(FakeSock([error + struct.pack('=i', -errno.EAFNOSUPPORT) + b'\0' * 16]), 1) == []
