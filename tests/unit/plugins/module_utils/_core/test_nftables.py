"""Unit tests of the nftables backend's pure logic (module_utils/_core/
nftables.py, backends.py, nfnetlink.py, and the undo of sync.py): address
intervals, the table a policy wants, comparing a listing with it, choosing
a backend, and the netlink messages.  What these do on a real kernel is
proven in tests/integration (test_masq_chain.py, test_backends.py,
test_packets.py)."""
import errno
import ipaddress
import json
import struct

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import intervals, policy
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import nfnetlink
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import table as nftables, rules as nftables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import transaction
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import parse_nft

RET = 'return comment "ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE"'
MASQ = ('comment "ip-masq-agent: outbound traffic should be subject to MASQUERADE (this match must come after '
        'cluster-local CIDR matches)"')
LOCAL = 'fib daddr type local return comment "ip-masq-agent: local destinations are never subject to MASQUERADE"'


# --------------------------------------------------------------------------
# Intervals
# --------------------------------------------------------------------------

def iv(cidr, family=4):
    return intervals.cidr_interval(cidr, family)


def test_merge_joins_overlapping_contained_and_adjacent_intervals():
    merged = intervals.merge([iv('172.24.0.0/13'), iv('10.1.0.0/16'), iv('10.0.0.0/8'), iv('172.16.0.0/13'),
                             iv('192.168.1.7/32'), iv('192.168.1.8/32')])
    assert [(nftables_rules.interval_element(a, b, 4)) for a, b in merged] == [
        {'prefix': {'addr': '10.0.0.0', 'len': 8}},
        {'prefix': {'addr': '172.16.0.0', 'len': 12}},
        {'range': ['192.168.1.7', '192.168.1.8']},
    ]


def test_interval_element_forms():
    assert nftables_rules.interval_element(*iv('10.0.0.0/8'), family=4) == {'prefix': {'addr': '10.0.0.0', 'len': 8}}
    assert nftables_rules.interval_element(*iv('192.0.2.7/32'), family=4) == '192.0.2.7'
    assert nftables_rules.interval_element(*iv('fd00::/8', 6), family=6) == {'prefix': {'addr': 'fd00::', 'len': 8}}
    assert nftables_rules.interval_element(*iv('2001:db8::1/128', 6), family=6) == '2001:db8::1'
    first = iv('172.16.0.0/12')[0]
    last = iv('172.32.0.0/12')[1]
    assert nftables_rules.interval_element(first, last, 4) == {'range': ['172.16.0.0', '172.47.255.255']}


@pytest.mark.parametrize('elem,family,want', [
    ('10.1.2.3', 4, '10.1.2.3/32'),
    ({'prefix': {'addr': '10.0.0.0', 'len': 8}}, 4, '10.0.0.0/8'),
    ({'range': ['10.0.0.0', '10.0.0.255']}, 4, '10.0.0.0/24'),
    ({'elem': {'val': {'prefix': {'addr': 'fd00::', 'len': 8}}, 'counter': {'packets': 1}}}, 6, 'fd00::/8'),
    ({'prefix': {'addr': 'fd00::', 'len': 32}}, 6, 'fd00::/32'),
])
def test_element_interval_reads_every_form_nft_lists(elem, family, want):
    net = ipaddress.ip_network(want)
    assert nftables_rules.element_interval(elem, family) == (int(net.network_address), int(net.broadcast_address))


@pytest.mark.parametrize('elem', [{'concat': ['a', 'b']}, 'not-an-address', {'prefix': {'addr': 'x', 'len': 8}}, 7])
def test_element_interval_of_something_else_is_none(elem):
    assert nftables_rules.element_interval(elem, 4) is None


def test_element_text_lists_a_host_prefix_bare_in_each_family():
    assert nftables_rules.element_text({'prefix': {'addr': '10.1.2.3', 'len': 32}}) == '10.1.2.3'
    assert nftables_rules.element_text({'prefix': {'addr': 'fd00::', 'len': 32}}) == 'fd00::/32'
    assert nftables_rules.element_text({'prefix': {'addr': 'fd00::1', 'len': 128}}) == 'fd00::1'
    assert nftables_rules.element_text({'range': ['10.0.0.1', '10.0.0.9']}) == '10.0.0.1-10.0.0.9'


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(8, 32)), min_size=1, max_size=20),
       st.lists(st.integers(0, 2 ** 32 - 1), min_size=1, max_size=30))
def test_merged_set_holds_exactly_the_union_of_the_cidrs(nets, probes):
    cidrs = [str(ipaddress.ip_network((addr, plen), strict=False)) for addr, plen in nets]
    elements = [nftables_rules.interval_element(a, b, 4) for a, b in intervals.merge(iv(c) for c in cidrs)]
    held = [nftables_rules.element_interval(e, 4) for e in elements]
    # disjoint, sorted, not adjacent: what auto-merge keeps
    assert all(b[0] > a[1] + 1 for a, b in zip(held, held[1:]))
    for probe in probes + [int(ipaddress.ip_network(c).network_address) for c in cidrs]:
        inside = any(ipaddress.ip_address(probe) in ipaddress.ip_network(c) for c in cidrs)
        assert inside == any(a <= probe <= b for a, b in held)


# --------------------------------------------------------------------------
# The table a policy wants
# --------------------------------------------------------------------------

def test_desired_defaults():
    desired = nftables_rules.Desired(policy.Policy())
    assert desired.name == 'ip-masq-agent' and desired.families == (4,)
    assert desired.rule_texts() == [LOCAL, 'ip daddr 169.254.0.0/16 ' + RET, 'ip daddr @nonmasq-ipv4 ' + RET,
                                    'meta nfproto ipv4 masquerade ' + MASQ]
    assert [nftables_rules.element_text(e) for e in desired.elements['nonmasq-ipv4']] == [
        '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']


def test_desired_ipv6_link_local_masqueraded_random_fully_and_ports():
    pol = policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'], ipv6=True, masq_link_local=True,
                        random_fully=True, to_ports=['1024-29999', '40000', '50000-65535'], chain='MY-SNAT')
    desired = nftables_rules.Desired(pol)
    protos = 'meta l4proto { tcp, udp, sctp }'
    assert desired.name == 'my-snat'
    assert desired.rule_texts() == [
        LOCAL, 'ip daddr @nonmasq-ipv4 ' + RET, 'ip6 daddr fe80::/10 ' + RET, 'ip6 daddr @nonmasq-ipv6 ' + RET,
        # 28976 + 1 + 15536 ports: each range with the odds of its size among those left.
        '%s numgen random mod 44513 < 28976 masquerade to :1024-29999 fully-random %s' % (protos, MASQ),
        '%s numgen random mod 15537 < 1 masquerade to :40000 fully-random %s' % (protos, MASQ),
        '%s masquerade to :50000-65535 fully-random %s' % (protos, MASQ),
        'masquerade fully-random ' + MASQ]


def test_desired_upstream_format_comments_and_fully_random_by_default():
    desired = nftables_rules.Desired(policy.Policy(rule_format='upstream'))
    texts = desired.rule_texts()
    assert texts[1] == 'ip daddr 169.254.0.0/16 return comment "ip-masq-agent: local traffic is not subject to MASQUERADE"'
    assert texts[-1] == ('meta nfproto ipv4 masquerade fully-random comment "ip-masq-agent: outbound traffic is '
                         'subject to MASQUERADE (must be last in chain)"')
    assert nftables_rules.Desired(policy.Policy(rule_format='upstream', random_fully=False)).rule_texts()[-1].startswith(
        'meta nfproto ipv4 masquerade comment')


def test_every_comment_fits_nft():
    """nft keeps at most 128 bytes of a rule comment."""
    for fmt in policy.COMMENTS.values():
        assert all(len(text.encode()) <= 128 for text in fmt.values())


def test_commands_replace_the_table_whole_in_one_transaction():
    desired = nftables_rules.Desired(policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8']))
    commands = nftables_rules.replace_commands(desired)
    ident = {'table': {'family': 'inet', 'name': 'ip-masq-agent'}}
    assert commands[:3] == [{'add': ident}, {'delete': ident}, {'add': ident}]
    kinds = [next(iter(c['add'])) for c in commands[3:]]
    assert kinds == ['set', 'chain', 'rule', 'rule', 'rule', 'rule']
    assert commands[3]['add']['set']['elem'] == [{'prefix': {'addr': '10.0.0.0', 'len': 8}}]
    assert commands[4]['add']['chain'] == {'family': 'inet', 'table': 'ip-masq-agent', 'name': 'postrouting',
                                           'type': 'nat', 'hook': 'postrouting', 'prio': 101, 'policy': 'accept'}


# --------------------------------------------------------------------------
# Comparing what nft lists with what the policy wants
# --------------------------------------------------------------------------

def listed(desired, mutate=None):
    """The JSON nft would list for the table ``desired`` loads (as nft 1.0.6 prints it), changed by ``mutate``."""
    items = [{'table': {'family': 'inet', 'name': desired.name, 'handle': 3}}]
    for command in desired.commands():
        kind, obj = next(iter(command['add'].items()))
        obj = dict(obj)
        obj.pop('auto-merge', None)
        if kind == 'rule':
            obj['expr'] = json.loads(json.dumps(obj['expr']).replace('["fully-random"]', '"fully-random"'))
        items.append({kind: obj})
    if mutate:
        mutate(items)
    return parse_nft({'nftables': items})[('inet', desired.name)]


POL = policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8', '192.168.0.0/16'], random_fully=True)


def _drop_elem(items):
    items[1]['set']['elem'] = items[1]['set']['elem'][:1]


def _split_elem(items):
    items[1]['set']['elem'] = [{'range': ['10.0.0.0', '10.127.255.255']}, {'range': ['10.128.0.0', '10.255.255.255']},
                               {'prefix': {'addr': '192.168.0.0', 'len': 16}}]


def _no_rules(items):
    items[:] = [i for i in items if 'rule' not in i]


def _foreign_rule(items):
    items.append({'rule': {'family': 'inet', 'table': POL.chain.lower(), 'chain': 'postrouting',
                           'expr': [{'accept': None}]}})


def _foreign_chain(items):
    items.append({'chain': {'family': 'inet', 'table': 'ip-masq-agent', 'name': 'x', 'type': 'nat',
                            'hook': 'postrouting', 'prio': 50, 'policy': 'accept'}})


def _dormant(items):
    items[0]['table']['flags'] = ['dormant']


def _counter(items):
    items.append({'counter': {'family': 'inet', 'table': 'ip-masq-agent', 'name': 'c', 'packets': 0}})


def _priority(items):
    [c for c in items if 'chain' in c][0]['chain']['prio'] = 0


def _srcnat(items):
    """The chain at priority srcnat (100), where every table of ours was before 2.0.0: beside
    iptables' nat POSTROUTING (100 too), so which ran first was the order the kernel made them."""
    [c for c in items if 'chain' in c][0]['chain']['prio'] = 100


@pytest.mark.parametrize('mutate,diff', [
    (None, []),
    (_split_elem, []),          # the same addresses, split otherwise: in sync
    (_drop_elem, ['set nonmasq-ipv4: 1 element(s), 2 wanted']),
    (_foreign_rule, ['chain postrouting: 5 rule(s), 4 wanted']),
    (_foreign_chain, ['foreign chain x']),
    (_dormant, ['table flags dormant']),
    (_counter, ['foreign counter c']),
    (_priority, ['chain postrouting is not a nat postrouting chain at priority srcnat + 1']),
    (_srcnat, ['chain postrouting is not a nat postrouting chain at priority srcnat + 1']),
])
def test_differences(mutate, diff):
    desired = nftables_rules.Desired(POL)
    assert nftables.differences(listed(desired, mutate), desired) == diff


@pytest.mark.parametrize('position,prio,text', [('append', 101, 'srcnat + 1'), ('first', 99, 'srcnat - 1')])
def test_the_chain_priority_follows_jump_position(position, prio, text):
    """jump_position means on nftables what it means on iptables: ``append``
    (the default) runs our chain after iptables' nat POSTROUTING (legacy and
    iptables-nft, both at srcnat) and every other srcnat chain, ``first``
    before them; never at srcnat itself, where the kernel runs the chain made
    last first."""
    pol = policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8'], jump_position=position)
    desired = nftables_rules.Desired(pol)
    chain = [c['add']['chain'] for c in desired.commands() if 'chain' in c['add']]
    assert [c['prio'] for c in chain] == [prio]
    assert nftables_rules.chain_priority(pol) == prio
    assert sorted(nftables_rules.CHAIN_PRIORITIES) == sorted(policy.JUMP_POSITIONS)     # a priority for each choice
    header = '\t\ttype nat hook postrouting priority %s; policy accept;\n' % text
    assert header in nftables_rules.render_desired(desired)
    table = listed(desired)
    assert nftables.differences(table, desired) == []
    assert nftables_rules.render_live(table) == nftables_rules.render_desired(desired)
    # The other position's table is out of place: rewritten whole, in one transaction.
    other = policy.Policy(nonmasquerade_cidrs=['10.0.0.0/8'], jump_position='first' if position == 'append' else 'append')
    plan = nftables.plan_present(table, other)
    assert plan.actions == ['rewrite table inet ip-masq-agent (chain postrouting is not a nat postrouting chain at '
                            'priority %s)' % nftables_rules.priority_text(nftables_rules.chain_priority(other))]
    assert [list(c) + list(c[list(c)[0]]) for c in plan.commands[:3]] == [
        ['add', 'table'], ['delete', 'table'], ['add', 'table']]


@pytest.mark.parametrize('prio,text', [(100, 'srcnat'), (101, 'srcnat + 1'), (99, 'srcnat - 1'), (110, 'srcnat + 10'),
                                       (90, 'srcnat - 10'), (111, '111'), (89, '89'), (-100, '-100')])
def test_priority_text_is_what_nft_lists(prio, text):
    """As nft 1.0.6 lists a nat postrouting chain's priority (seen in a namespace): srcnat and an
    offset up to 10 by name, else the number."""
    assert nftables_rules.priority_text(prio) == text


def test_the_rules_as_nft_lists_them_compare_equal_to_the_ones_sent():
    """nft lists a single flag as a string, not a list: still in sync."""
    desired = nftables_rules.Desired(POL)
    table = listed(desired)
    assert table.rules['postrouting'][-1]['expr'][-1] == {'masquerade': {'flags': 'fully-random'}}
    assert nftables.differences(table, desired) == []


IFACES = policy.Policy(out_interfaces=['eth0', 'b0', 'lo'], to_ports=['1000-1999', '3000-3999'])


def _sets_in_nft_order(items):
    """nft lists an anonymous set in its own order (``{ "b0", "lo", "eth0" }``, ``{ udp, sctp, tcp }``)."""
    for item in items:
        for match in item.get('rule', {}).get('expr', []):
            right = match.get('match', {}).get('right')
            if isinstance(right, dict) and isinstance(right.get('set'), list):
                right['set'] = sorted(right['set'], key=lambda e: (len(e), e))


def _one_interface_less(items):
    for item in items:
        for match in item.get('rule', {}).get('expr', []):
            right = match.get('match', {}).get('right')
            if isinstance(right, dict) and right.get('set') and 'lo' in right['set']:
                right['set'] = ['b0', 'lo']


def test_anonymous_sets_compare_as_sets():
    """An anonymous set is the same set in any order: a table nft lists with
    its sets in another order is in sync (it was rewritten on every run);
    a set with another member is not."""
    desired = nftables_rules.Desired(IFACES)
    assert desired.rules[0][0][0]['match']['right'] == {'set': ['eth0', 'b0', 'lo']}
    table = listed(desired, _sets_in_nft_order)
    assert table.rules['postrouting'][0]['expr'][0]['match']['right'] == {'set': ['b0', 'lo', 'eth0']}
    assert nftables.differences(table, desired) == []
    assert not nftables.plan_present(table, IFACES).changed
    assert nftables.differences(listed(desired, _one_interface_less), desired) == [
        'chain postrouting: %d rule(s), %d wanted, in another form' % ((len(desired.rules),) * 2)]


@pytest.mark.parametrize('expr,want', [
    ({'set': ['eth0', 'b0']}, {'set': ['b0', 'eth0']}),
    ({'set': ['b0', 'eth0', 'b0']}, {'set': ['b0', 'eth0']}),                   # a member once
    ({'set': ['udp', 'sctp', 'tcp']}, {'set': ['sctp', 'tcp', 'udp']}),
    ({'set': [{'prefix': {'addr': '10.0.0.0', 'len': 8}}, '192.0.2.1']},
     {'set': ['192.0.2.1', {'prefix': {'addr': '10.0.0.0', 'len': 8}}]}),        # any element form
    ([{'match': {'op': '!=', 'left': {'meta': {'key': 'oifname'}}, 'right': {'set': ['x', 'a']}}}],
     [{'match': {'op': '!=', 'left': {'meta': {'key': 'oifname'}}, 'right': {'set': ['a', 'x']}}}]),
    ({'range': ['10.0.0.9', '10.0.0.1']}, {'range': ['10.0.0.9', '10.0.0.1']}),  # a range is not a set
    ({'set': {'name': 'x', 'elem': ['b', 'a']}}, {'set': {'name': 'x', 'elem': ['b', 'a']}}),
])
def test_canonical_expr(expr, want):
    assert nftables_rules.canonical_expr(expr) == want


def test_ownership():
    desired = nftables_rules.Desired(POL)
    assert nftables.is_ours(listed(desired))
    assert nftables.is_ours(listed(desired, _no_rules)), 'ours with its rules flushed'
    foreign = parse_nft({'nftables': [{'table': {'family': 'inet', 'name': 'ip-masq-agent'}},
                                      {'chain': {'family': 'inet', 'table': 'ip-masq-agent', 'name': 'c'}},
                                      {'rule': {'family': 'inet', 'table': 'ip-masq-agent', 'chain': 'c',
                                                'expr': [{'drop': None}]}}]})[('inet', 'ip-masq-agent')]
    assert not nftables.is_ours(foreign)
    with pytest.raises(MasqError, match='table inet ip-masq-agent already exists and is not ours'):
        nftables.plan_present(foreign, POL)
    with pytest.raises(MasqError, match='is not ours'):
        nftables.plan_absent(foreign, 'ip-masq-agent')
    assert nftables.plan_absent(foreign, 'ip-masq-agent', strict=False).note.endswith('left alone.')
    assert nftables.plan_present(foreign, POL, adopt=True).changed


def test_plans():
    desired = nftables_rules.Desired(POL)
    assert not nftables.plan_present(listed(desired), POL).changed
    create = nftables.plan_present(None, POL)
    assert create.actions == ['create table inet ip-masq-agent (nonmasq-ipv4: 2 element(s))']
    rewrite = nftables.plan_present(listed(desired, _drop_elem), POL)
    assert rewrite.actions == ['rewrite table inet ip-masq-agent (set nonmasq-ipv4: 1 element(s), 2 wanted)']
    absent = nftables.plan_absent(listed(desired), 'ip-masq-agent')
    assert absent.commands == [{'delete': {'table': {'family': 'inet', 'name': 'ip-masq-agent'}}}]
    assert not nftables.plan_absent(None, 'ip-masq-agent').changed


# --------------------------------------------------------------------------
# Choosing a backend (the reads faked; what they do for real: test_backends.py)
# --------------------------------------------------------------------------

EMPTY_SAVE = '# Generated by iptables-save v1.8.9 (nf_tables) on x\n*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n'


class FakeNode:
    def __init__(self, tools=('iptables-save', 'iptables-restore', 'ip6tables-save', 'ip6tables-restore', 'nft'),
                 table=None, probe=False):
        self.tools = tools
        self.table = table
        self.ran = []
        self.answer = probe

    def find(self, name):
        return '/usr/sbin/' + name if name in self.tools else None

    def run(self, argv, data=None):
        self.ran.append(argv[0].rsplit('/', 1)[-1])
        if argv[0].endswith('nft'):
            if self.table is None:
                return 1, '', 'Error: No such file or directory'
            return 0, json.dumps({'nftables': [{'metainfo': {'version': '1.0.6'}}] + self.table}), ''
        return 0, EMPTY_SAVE, ''

    def probe(self, questions):
        return [self.answer for _q in questions]

    def backends(self, choice):
        return backends.Backends(self.run, self.find, choice=choice, proc_read=lambda path: [], probe=self.probe)


@pytest.mark.parametrize('tools,probe,selected,reason,ran', [
    (None, False, 'iptables', 'auto: a node with neither policy yet, where iptables is installed',
     ['iptables-save', 'ip6tables-save']),
    (None, None, 'iptables', 'auto: a node with neither policy yet, where iptables is installed',
     ['iptables-save', 'ip6tables-save', 'nft']),       # the kernel could not say: nft asked instead
    (('nft',), False, 'nftables', 'auto: a node with neither policy yet, where only nft is installed', ['nft']),
])
def test_auto_on_a_new_node(tools, probe, selected, reason, ran):
    node = FakeNode(probe=probe) if tools is None else FakeNode(tools=tools, probe=probe)
    b = node.backends('auto')
    reading = b.read(policy.Policy())
    assert (reading.selected, reading.reason) == (selected, reason)
    assert node.ran == ran


def test_auto_keeps_a_node_with_our_table_on_nftables():
    table = [{'table': {'family': 'inet', 'name': 'ip-masq-agent'}}]
    node = FakeNode(table=table, probe=True)
    reading = node.backends('auto').read(policy.Policy())
    assert reading.selected == 'nftables' and reading.of['nftables'].table is not None


def test_nftables_without_nft_is_a_clear_error():
    node = FakeNode(tools=('iptables-save', 'iptables-restore'))
    with pytest.raises(MasqError, match='nft was not found on the node; install the nftables package. Nothing was'):
        node.backends('nftables').read(policy.Policy())
    assert node.ran == []


def test_neither_tool_is_a_clear_error():
    node = FakeNode(tools=())
    with pytest.raises(MasqError, match='Neither iptables .* nor nft was found on the node'):
        node.backends('auto').read(policy.Policy())


def test_an_unknown_backend_is_refused():
    with pytest.raises(MasqError, match="backend: 'pf' is not one of 'auto', 'iptables', 'nftables'"):
        backends.Backends(None, lambda n: None, choice='pf')


# --------------------------------------------------------------------------
# nfnetlink
# --------------------------------------------------------------------------

def test_netlink_request_layout():
    attrs = [nfnetlink._attr(nfnetlink.NFTA_CHAIN_TABLE, 'nat'), nfnetlink._attr(nfnetlink.NFTA_CHAIN_NAME, 'IP-MASQ')]
    msg = nfnetlink._message(7, nfnetlink.NFT_MSG_GETCHAIN, 'ip6', attrs)
    length, msg_type, flags, seq, pid = struct.unpack_from('=IHHII', msg)
    assert (length, msg_type, flags, seq, pid) == (len(msg), (10 << 8) | 4, 1, 7, 0)
    assert msg[16:20] == bytes([10, 0, 0, 0])                       # nfgenmsg: NFPROTO_IPV6, v0, res_id 0
    assert msg[20:28] == struct.pack('=HH', 8, 1) + b'nat\0'        # attributes padded to 4 bytes
    assert msg[28:40] == struct.pack('=HH', 12, 3) + b'IP-MASQ\0'
    assert len(msg) % 4 == 0


class FakeSock:
    def __init__(self, replies):
        self.replies = list(replies)

    def recv(self, _size):
        return self.replies.pop(0)


def _error(seq, code):
    return struct.pack('=IHHII', 36, nfnetlink.NLMSG_ERROR, 0, seq, 0) + struct.pack('=i', -code) + b'\0' * 16


@pytest.mark.parametrize('replies,answer', [
    ([struct.pack('=IHHII', 20, (10 << 8) | 0, 0, 1, 0) + b'\2\0\0\0'], True),
    ([_error(1, errno.ENOENT)], False),
    ([_error(1, errno.EAFNOSUPPORT)], False),
    ([_error(1, errno.EPERM)], None),
    ([_error(9, errno.ENOENT) + _error(1, 0)], True),   # another request's reply first
])
def test_netlink_answers(replies, answer):
    assert nfnetlink._answer(FakeSock(replies), 1) is answer


def _rule(seq, payload):
    body = b'\2\0\0\0' + payload
    body += b'\0' * (-len(body) % 4)
    return struct.pack('=IHHII', 16 + len(body), (10 << 8) | 6, 2, seq, 0) + body


def _done(seq):
    return struct.pack('=IHHII', 20, nfnetlink.NLMSG_DONE, 2, seq, 0) + b'\0' * 4


@pytest.mark.parametrize('replies,answer', [
    ([_rule(1, b'xx'), _rule(1, b'.ip-masq-agent: ensure.') + _done(1)], True),    # in the second message
    ([_rule(1, b'kubernetes postrouting rules') + _done(1)], False),
    ([_rule(9, b'ip-masq-agent:') + _done(1)], False),                           # another request's reply
    ([_done(1)], False),                                                          # a table without rules
    ([_error(1, errno.ENOENT)], False),                                           # no such table
    ([_error(1, errno.EPERM)], None),
    ([b''], None),                                                                # the socket closed mid-dump
])
def test_netlink_rule_dump_finds_our_comment(replies, answer):
    """Ours under any chain name in iptables-nft's nat table: a rule that carries our comment."""
    assert nfnetlink._carries(FakeSock(replies), 1, b'ip-masq-agent:') is answer


def _newgen(seq, gen_id, extra=b''):
    # NFT_MSG_NEWGEN: nfgenmsg (AF_UNSPEC), NFTA_GEN_ID (be32), then what else the kernel sends.
    body = bytes(4) + extra + struct.pack('=HH', 8, nfnetlink.NFTA_GEN_ID) + struct.pack('>I', gen_id)
    return struct.pack('=IHHII', 16 + len(body), (10 << 8) | nfnetlink.NFT_MSG_NEWGEN, 0, seq, 0) + body


def test_the_generation_request_is_the_one_nft_sends():
    """NFT_MSG_GETGEN through the file's one request builder: AF_UNSPEC, no attributes."""
    msg = nfnetlink._message(1, nfnetlink.NFT_MSG_GETGEN, 'unspec', [])
    assert msg == struct.pack('=IHHII', 20, (10 << 8) | 16, 1, 1, 0) + bytes(4)


@pytest.mark.parametrize('replies,answer', [
    ([_newgen(1, 0x01020304)], 0x01020304),
    ([_newgen(1, 7, extra=struct.pack('=HH', 8, 2) + struct.pack('>I', 99))], 7),    # after NFTA_GEN_PROC_PID
    ([_newgen(9, 5) + _newgen(1, 6)], 6),                                          # another request's reply first
    ([_error(1, errno.EPERM)], None),
    ([_error(1, errno.ENOENT)], None),          # no nf_tables: no generation either
    ([struct.pack('=IHHII', 24, (10 << 8) | nfnetlink.NFT_MSG_NEWGEN, 0, 1, 0) + bytes(4) + struct.pack('=HH', 2, 1)],
     None),                                     # a malformed attribute
    ([b''], None),                              # the socket closed
])
def test_netlink_generation_answers(replies, answer):
    assert nfnetlink._generation(FakeSock(replies), 1) == answer


class NetlinkSocket(FakeSock):
    """``_socket.socket`` for :func:`nfnetlink.exist`: one per call, each request answered in turn."""
    made = []

    def __init__(self, *args):
        FakeSock.__init__(self, [])
        self.sent = []
        NetlinkSocket.made.append(self)

    def settimeout(self, _seconds):
        pass

    def bind(self, _address):
        pass

    def close(self):
        pass

    def send(self, msg):
        seq, msg_type = struct.unpack_from('=I', msg, 8)[0], struct.unpack_from('=H', msg, 4)[0] & 0xFF
        self.sent.append(msg_type)
        self.replies.append(_newgen(seq, 42) if msg_type == nfnetlink.NFT_MSG_GETGEN else _error(seq, errno.ENOENT))
        return len(msg)


def test_the_generation_is_a_question_of_exist_on_its_one_socket(monkeypatch):
    import _socket
    NetlinkSocket.made = []
    monkeypatch.setattr(_socket, 'socket', NetlinkSocket)
    assert nfnetlink.exist([('table', 'inet', 'ip-masq-agent'), ('generation',), ('chain', 'ip', 'nat', 'X')]) \
        == [False, 42, False]
    assert nfnetlink.generation() == 42
    assert [s.sent for s in NetlinkSocket.made] == [[1, 16, 4], [16]]


@pytest.mark.parametrize('code', [errno.EPROTONOSUPPORT, errno.EPERM])
def test_no_netlink_no_generation(monkeypatch, code):
    """Where the socket cannot be made there is no generation to compare (None), whatever the
    other questions answer; the watcher then reads the node at every tick."""
    import _socket

    def refused(*_args):
        raise OSError(code, 'refused')
    monkeypatch.setattr(_socket, 'socket', refused)
    absent = code == errno.EPROTONOSUPPORT
    assert nfnetlink.exist([('generation',), ('tables', 'ip'), ('table', 'ip', 'nat')]) \
        == [None, [] if absent else None, False if absent else None]
    assert nfnetlink.generation() is None


# --------------------------------------------------------------------------
# Undo (a switch of backend)
# --------------------------------------------------------------------------

def _step(log, label, fail=False, undo=True, undo_fails=False):
    def write():
        if fail:
            raise MasqError('%s broke' % label)
        log.append('write ' + label)

    def back():
        if undo_fails:
            raise MasqError('%s cannot be undone' % label)
        log.append('undo ' + label)
    return transaction.Step(label, ['do %s' % label], write, back if undo else None)


def test_a_failing_step_undoes_the_ones_written_before_it_newest_first():
    log = []
    plan = transaction.Plan([_step(log, 'A'), _step(log, 'B'), _step(log, 'C', fail=True)])
    with pytest.raises(MasqError) as e:
        plan.apply()
    assert log == ['write A', 'write B', 'undo B', 'undo A']
    assert e.value.msg == ('C broke. What was written before it (A and B) was undone: the node is as it was. '
                           'Nothing was changed.')
    assert e.value.details['changed'] is False and e.value.details['undone'] == ['A: do A', 'B: do B']


def test_steps_without_undo_are_kept_and_reported_and_a_failed_undo_is_said():
    log = []
    plan = transaction.Plan([_step(log, 'A', undo=False), _step(log, 'B', undo_fails=True), _step(log, 'C', fail=True)])
    with pytest.raises(MasqError) as e:
        plan.apply()
    assert e.value.details['changed'] is True and e.value.details['applied'] == ['A: do A', 'B: do B']
    assert 'A and B were already applied and are kept' in e.value.msg
    assert 'Undoing B failed as well: B cannot be undone.' in e.value.msg
