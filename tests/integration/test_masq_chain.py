"""ipmasq.agent.masq_chain against real iptables (nf_tables and legacy) and
real nftables inside network namespaces, run through ansible-playbook as a
user would.

The backend-neutral tests take the ``pnode`` fixture and run once per policy
backend (conftest.POLICIES: the iptables chain with either iptables backend,
and the nftables table): one suite, the same checks, each backend read back
in its own terms (policy_view).  The tests of what only one backend has (the
seed listings, the POSTROUTING jump's position, a chain another chain jumps
to) take ``node`` (both iptables backends) or run on nftables alone."""
import json

import pytest

from ipmasq_lab import netlab, policy_view
from ipmasq_lab.policy_view import CHAIN, DEFAULT_CIDRS, JUMP, MASQ, RET, chain_lines, golden

DEFAULT_CHAIN = chain_lines(['169.254.0.0/16'] + DEFAULT_CIDRS)


# --------------------------------------------------------------------------
# present / absent, four steps, every backend
# --------------------------------------------------------------------------

def test_defaults_four_steps_and_exact_rules(pnode):
    res = pnode.four_steps()
    assert pnode.state() == pnode.expect()
    apply1, apply2 = res['apply1'], res['apply2']
    assert res['check1']['commands'] == apply1['commands']
    # One line per run: what changed (check mode: what would), then "no change".
    n = len(DEFAULT_CHAIN) - 1
    if pnode.policy == 'iptables':
        wrote, kept = 'IPv4 %d rules written (was 0), IPv6 not managed' % n, '(IPv4 %d rules, IPv6 not managed)' % n
        would = 'would write IPv4 %d rules (was 0), IPv6 not managed' % n
    else:
        wrote, would = 'nftables table inet ip-masq-agent written', 'would write nftables table inet ip-masq-agent'
        kept = '(nftables table inet ip-masq-agent in place)'
    # A run that changes (or would) ends with the backend and why that one; no change stays short.
    why = '; backend %s, %s' % (pnode.policy, apply1['selected_backend_reason'])
    assert [res[step]['msg'] for step in ('check1', 'apply1', 'check2', 'apply2')] == [
        'IP-MASQ-AGENT: ' + would + why, 'IP-MASQ-AGENT: ' + wrote + why,
        'IP-MASQ-AGENT: no change ' + kept, 'IP-MASQ-AGENT: no change ' + kept]
    assert apply1['selected_backend_reason'] == apply1['backend_reason'] and apply1['selected_backend_reason']
    assert res['check1']['selected_backend_reason'] == apply1['selected_backend_reason']
    if pnode.policy == 'iptables':
        rules = pnode.rules()
        # iptables-save order: chain declaration, POSTROUTING rules, our chain's rules.
        assert rules.count(JUMP % (CHAIN, CHAIN)) == 1
        assert apply1['ipv4']['rules'] == DEFAULT_CHAIN[1:]
        assert any(c.endswith('iptables-restore --wait=30 --noflush') for c in apply1['commands'])
        assert not any('restore' in c for c in apply2['commands'])
        assert apply1['nftables']['managed'] is False
    else:
        assert apply1['nftables']['managed'] is True and apply1['nftables']['changed'] is True
        assert json.loads(apply1['nftables']['transaction'])['nftables'][0] == {
            'add': {'table': {'family': 'inet', 'name': 'ip-masq-agent'}}}
        assert any(c.endswith('# the transaction') for c in apply1['commands'])
        # No change: one nft run that lists the table, nothing else (iptables was asked of the kernel).
        assert apply2['commands'] == ['/usr/sbin/nft -j -f -  # list table inet ip-masq-agent']
        assert apply2['nftables']['transaction'] is None
        assert apply1['ipv4']['managed'] is False


def test_absent_four_steps_removes_everything_and_keeps_foreign_rules(pnode):
    pnode.add_foreign(ipv6=True)
    pnode.module(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/64'])
    assert pnode.state() == pnode.expect(['10.0.0.0/8'], ['fd00:10::/64'])
    foreign = pnode.foreign()
    res = pnode.four_steps(state='absent')
    assert pnode.state() == {'ipv4': [], 'ipv6': [], 'nft': None}
    gone = ('IPv4 chain', 'IPv6 chain') if pnode.policy == 'iptables' else ('nftables table inet ip-masq-agent',)
    assert res['check1']['msg'] == 'IP-MASQ-AGENT: ' + ', '.join('would remove ' + g for g in gone), res['check1']
    assert res['apply1']['msg'] == 'IP-MASQ-AGENT: ' + ', '.join(g + ' removed' for g in gone), res['apply1']
    assert res['apply2']['msg'] == 'IP-MASQ-AGENT: no change (IPv4 absent, IPv6 absent)', res['apply2']
    assert pnode.foreign() == foreign


@pytest.mark.parametrize('config', ['defaults', 'seed000'])
def test_golden_listing(pnode, config):
    """What a user reads on the node after a run: for iptables the seed
    documents' `iptables -t nat -L IP-MASQ-AGENT`, for nftables its
    counterpart `nft list table inet ip-masq-agent` (golden/*.nft)."""
    args = {}
    if config == 'seed000':
        args = dict(nonmasquerade_cidrs=['172.16.0.0/16', '10.168.0.0/16'], masq_link_local=True)
    pnode.module(**args)
    if pnode.policy == 'iptables':
        assert [line.rstrip() for line in pnode.listing().splitlines()] == golden(config + '.txt')
        if config == 'seed000':
            post = pnode.ipt('-L', 'POSTROUTING').stdout
            assert ('IP-MASQ-AGENT  all  --  anywhere             anywhere             /* ip-masq-agent: ensure nat '
                    'POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ-AGENT chain */ '
                    'ADDRTYPE match dst-type !LOCAL') in post
    else:
        listing = pnode.nft('list', 'table', 'inet', 'ip-masq-agent').stdout
        assert [line.rstrip() for line in listing.splitlines()] == golden(config + '.nft')


# --------------------------------------------------------------------------
# Drift: each is repaired in one run, and the next run changes nothing
# --------------------------------------------------------------------------

DRIFT_CASES = [(kind, name) for kind in ('iptables-nft', 'iptables-legacy', 'nftables')
               for name in sorted(policy_view.DRIFTS[kind.split('-', maxsplit=1)[0]])]


@pytest.mark.parametrize('kind,drift', DRIFT_CASES, ids=['%s:%s' % c for c in DRIFT_CASES])
def test_drift_is_repaired(make_node, kind, drift):
    node = make_node(kind)
    node.add_foreign()
    node.module()
    good = node.state()
    assert good == node.expect()
    foreign = node.foreign()
    node.drift(drift)
    assert node.state() != good
    res = node.module(steps=['check1', 'apply1', 'check2'])
    assert res['check1']['changed'] and res['apply1']['changed'] and not res['check2']['changed'], res
    assert node.state() == good
    assert node.foreign() == foreign


def test_foreign_rules_chains_and_tables_untouched(pnode):
    pnode.add_foreign()
    before = pnode.foreign()
    pnode.four_steps(nonmasquerade_cidrs=['10.0.0.0/8'])
    assert pnode.foreign() == before
    assert pnode.state() == pnode.expect(['10.0.0.0/8'])
    if pnode.policy == 'iptables':
        # Appended: the jump comes after the rules that were there.
        post = [r for r in pnode.rules() if r.startswith('-A POSTROUTING')]
        assert post[-1] == JUMP % (CHAIN, CHAIN)


# --------------------------------------------------------------------------
# IPv6, options
# --------------------------------------------------------------------------

def test_ipv6(pnode):
    pnode.add_foreign(ipv6=True)
    foreign = pnode.foreign()
    res = pnode.four_steps(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'FD00:10:0::/64', '2001:db8:7::/48',
                                                           '::ffff:0:0/96'])
    six = ['fd00:10::/64', '2001:db8:7::/48', '::ffff:0.0.0.0/96']
    assert pnode.state() == pnode.expect(['10.0.0.0/8'], six,
                                         nft_cidrs6=['::ffff:0.0.0.0/96', '2001:db8:7::/48', 'fd00:10::/64'])
    assert pnode.foreign() == foreign
    assert res['apply1']['ipv6']['managed'] is (pnode.policy == 'iptables')
    # masq_link_local_ipv6 drops the fe80::/10 rule only.
    pnode.module(ipv6=True, nonmasquerade_cidrs=['fd00:10::/64'], masq_link_local_ipv6=True)
    assert pnode.state() == pnode.expect([], ['fd00:10::/64'], masq_link_local_ipv6=True)
    # Switching IPv6 off removes our IPv6 side, nothing else.
    res = pnode.module(steps=['apply1', 'apply2'], ipv6=False)
    assert res['apply1']['changed'] and not res['apply2']['changed']
    assert pnode.state() == pnode.expect()
    assert pnode.foreign() == foreign


def test_random_fully_and_to_ports(pnode):
    pnode.four_steps(random_fully=True, to_ports='1024-29999,32768-65535', nonmasquerade_cidrs=['10.0.0.0/8'])
    if pnode.policy == 'nftables':
        protos = 'meta nfproto ipv4 meta l4proto { tcp, udp, sctp }'
        # 28976 of the 61744 ports are in the first range: numgen picks it with exactly those odds.
        assert pnode.state()['nft'] == policy_view.nft_expect(['10.0.0.0/8'], masq_rules=[
            '%s numgen random mod 61744 < 28976 masquerade to :1024-29999 fully-random' % protos,
            '%s masquerade to :32768-65535 fully-random' % protos,
            'meta nfproto ipv4 masquerade fully-random'])
        return
    rules = [r for r in pnode.rules() if r.startswith('-A %s ' % CHAIN)]
    assert rules[:2] == chain_lines(['169.254.0.0/16', '10.0.0.0/8'])[1:3]
    masq = rules[2:]
    # tcp, udp, sctp x two ranges, then the plain final rule.
    assert len(masq) == 7
    for i, proto in enumerate(('tcp', 'udp', 'sctp')):
        first, second = masq[2 * i], masq[2 * i + 1]
        assert first.startswith('-A %s -p %s ' % (CHAIN, proto))
        # 28976 of the 61744 ports are in the first range; the kernel keeps
        # the probability as a 31-bit fixed-point number, printed with 11 decimals.
        fixed = int(28976 / 61744 * 2 ** 31 + 0.5)
        assert '-m statistic --mode random --probability %.11f ' % (fixed / 2 ** 31) in first
        assert '--probability 0.46929' in first
        assert first.endswith('-j MASQUERADE --to-ports 1024-29999 --random-fully')
        assert 'statistic' not in second
        assert second.endswith('-j MASQUERADE --to-ports 32768-65535 --random-fully')
    assert masq[-1] == '-A %s %s --random-fully' % (CHAIN, MASQ)
    assert 'random-fully' in pnode.listing()


def test_custom_chain_name_and_reserved_ranges(pnode):
    res = pnode.four_steps(chain='MY-SNAT', nonmasquerade_cidrs=['10.0.0.0/8'], nomasq_all_reserved_ranges=True)
    reserved = ['100.64.0.0/10', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24', '198.18.0.0/15',
                '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4']
    assert pnode.state('MY-SNAT') == pnode.expect(['10.0.0.0/8'] + reserved, chain='MY-SNAT', nft_cidrs4=[
        '10.0.0.0/8', '100.64.0.0/10', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24', '198.18.0.0/15',
        '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4'])
    assert res['apply1']['chain'] == 'MY-SNAT'
    if pnode.policy == 'nftables':
        assert res['apply1']['nftables']['table'] == 'table inet my-snat'
    pnode.module(chain='MY-SNAT', state='absent')
    assert pnode.state('MY-SNAT') == {'ipv4': [], 'ipv6': [], 'nft': None}


def test_overlapping_and_adjacent_cidrs_load_as_merged_intervals(pnode):
    """nft keeps the union: overlapping and adjacent entries never fail the load."""
    cidrs = ['10.0.0.0/8', '10.1.0.0/16', '172.16.0.0/13', '172.24.0.0/13', '192.168.1.7/32']
    pnode.four_steps(nonmasquerade_cidrs=cidrs)
    assert pnode.state() == pnode.expect(cidrs, nft_cidrs4=['10.0.0.0/8', '172.16.0.0/12', '192.168.1.7'])


def test_diff_mode_shows_before_and_after(pnode):
    res = pnode.module(steps=['check1'], nonmasquerade_cidrs=['10.0.0.0/8'])
    diff = res['check1']['diff']
    diff = diff[0] if isinstance(diff, list) else diff
    if pnode.policy == 'iptables':
        assert '-A IP-MASQ-AGENT -d 10.0.0.0/8' not in diff['before']
        assert '-A IP-MASQ-AGENT -d 10.0.0.0/8 ' + RET in diff['after']
        assert JUMP % (CHAIN, CHAIN) in diff['after']
    else:
        assert 'table inet ip-masq-agent {' not in diff['before']
        assert '# nft list table inet ip-masq-agent\ntable inet ip-masq-agent {' in diff['after']
        assert 'elements = { 10.0.0.0/8 }' in diff['after']
    pnode.module(nonmasquerade_cidrs=['10.0.0.0/8'])
    if pnode.policy == 'iptables':
        pnode.ipt('-A', CHAIN, '-d', '203.0.113.0/24', '-j', 'RETURN')
    else:
        pnode.nft('add', 'rule', 'inet', 'ip-masq-agent', 'postrouting', 'ip', 'daddr', '203.0.113.0/24', 'return')
    res = pnode.module(steps=['check1'], nonmasquerade_cidrs=['10.0.0.0/8'])
    diff = res['check1']['diff']
    diff = diff[0] if isinstance(diff, list) else diff
    if pnode.policy == 'iptables':
        assert '-A IP-MASQ-AGENT -d 203.0.113.0/24 -j RETURN' in diff['before']
    else:
        assert '\t\tip daddr 203.0.113.0/24 return\n' in diff['before']
    assert '203.0.113.0/24' not in diff['after']


# --------------------------------------------------------------------------
# Bad input: a clear error naming the value, and nothing changes
# --------------------------------------------------------------------------

BAD_INPUTS = [
    (dict(nonmasquerade_cidrs=['10.0.0.0/8', 'banana']), ["'banana' is not a CIDR"]),
    (dict(nonmasquerade_cidrs=['10.0.0.1/8']), ["'10.0.0.1/8' is not aligned", 'did you mean 10.0.0.0/8?']),
    (dict(nonmasquerade_cidrs=['10.0.0.1/8', '300.1.1.0/24', '']),
     ['3 bad entries', "'10.0.0.1/8'", "'300.1.1.0/24' is not a CIDR", 'an empty entry']),
    (dict(nonmasquerade_cidrs=['10.1.2.3']), ["'10.1.2.3' is an address, not a CIDR", '10.1.2.3/32']),
    (dict(nonmasquerade_cidrs=['fd00::/64']), ["'fd00::/64' is an IPv6 CIDR but ipv6 is not enabled"]),
    (dict(nonmasquerade_cidrs=['10.%d.0.0/16' % i for i in range(65)]), ['65 CIDRs', 'cidr_limit 64']),
    (dict(nonmasquerade_cidrs=['10.0.0.0/8', '172.16.0.0/12'], cidr_limit=1), ['2 CIDRs', 'cidr_limit 1']),
    (dict(chain='POSTROUTING'), ["'POSTROUTING' is a built-in chain"]),
    (dict(chain='A' * 29), ['29 characters', 'at most 28']),
    (dict(chain='MY CHAIN'), ["'MY CHAIN' is not a valid chain name"]),
    (dict(chain='-X'), ["'-X' is not a valid chain name"]),
    (dict(chain='MASQUERADE'), ["'MASQUERADE' is the name of an iptables target"]),
    (dict(to_ports=['1024-99999']), ["'1024-99999' is not a range inside 1-65535"]),
    (dict(to_ports=['3000-2000']), ["'3000-2000'"]),
    (dict(to_ports=['http']), ["'http' is not a port or a port range"]),
    (dict(to_ports=['1000-2000', '1500-2500']), ['ranges 1000-2000 and 1500-2500 overlap']),
    (dict(jump_position='last'), ['jump_position', 'last']),
    (dict(backend='pf'), ['backend', 'pf']),
    (dict(state='gone'), ['state', 'gone']),
]


def test_bad_input_fails_clearly_and_changes_nothing(pnode):
    pnode.add_foreign()
    pnode.module(nonmasquerade_cidrs=['192.168.0.0/16'])
    before = pnode.snapshot()
    results = pnode.each([args for args, _messages in BAD_INPUTS])
    assert len(results) == len(BAD_INPUTS)
    for (args, messages), res in zip(BAD_INPUTS, results):
        assert res.get('failed') is True, (args, res)
        for m in messages:
            assert m in res['msg'], (args, m, res['msg'])
        assert 'Traceback' not in res.get('module_stderr', '')
    assert pnode.snapshot() == before


# --------------------------------------------------------------------------
# A write that fails midway leaves what was there
# --------------------------------------------------------------------------

def _failing_write(node):
    """The tools of a PATH dir whose writer adds one thing the kernel rejects
    to our transaction before handing it to the real tool: the real tool then
    fails midway through it."""
    if node.policy == 'iptables':
        real = node.backend.tool('iptables-restore')
        return {'iptables-restore': (
            'import os, sys\n'
            'data = sys.stdin.read().replace("\\nCOMMIT\\n", "\\n-A %s -j IMQ-NO-SUCH-TARGET\\nCOMMIT\\n")\n'
            'r, w = os.pipe()\n'
            'os.write(w, data.encode()); os.close(w)\n'
            'os.dup2(r, 0)\n'
            'os.execv(%r, [%r] + sys.argv[1:])\n' % (CHAIN, real, real))}
    # nft: the transaction gets a last rule that jumps to a chain that does not exist.
    return {'nft': (
        'import json, os, sys\n'
        'data = sys.stdin.read()\n'
        'doc = json.loads(data)\n'
        'if any("add" in c and "rule" in c["add"] for c in doc["nftables"]):\n'
        '    doc["nftables"].append({"add": {"rule": {"family": "inet", "table": "ip-masq-agent",\n'
        '        "chain": "postrouting", "expr": [{"jump": {"target": "imq-no-such-chain"}}]}}})\n'
        '    data = json.dumps(doc)\n'
        'r, w = os.pipe()\n'
        'os.write(w, data.encode()); os.close(w)\n'
        'os.dup2(r, 0)\n'
        'os.execv("/usr/sbin/nft", ["/usr/sbin/nft"] + sys.argv[1:])\n')}


def test_a_failure_mid_apply_keeps_the_previous_policy(pnode):
    pnode.add_foreign()
    pnode.module(nonmasquerade_cidrs=['192.168.0.0/16'])
    before = pnode.snapshot()
    assert pnode.state() == pnode.expect(['192.168.0.0/16'])
    with netlab.tool_dir(_failing_write(pnode)) as failing:
        # A change that rewrites the policy (and, for iptables, moves the jump), in one transaction.
        res = pnode.module(path_prefix=failing, nonmasquerade_cidrs=['10.0.0.0/8', '172.16.0.0/12'],
                           jump_position='first')['apply1']
    assert res.get('failed') is True and res['rc'] != 0
    if pnode.policy == 'iptables':
        assert 'iptables-restore' in res['msg']
        assert 'IMQ-NO-SUCH-TARGET' in res['stderr'] or 'IMQ-NO-SUCH-TARGET' in res['msg']
    else:
        assert 'nft -j -f - (the transaction) failed' in res['msg'], res['msg']
    # Nothing of the half-done transaction is visible: everything as before.
    assert pnode.snapshot() == before


# --------------------------------------------------------------------------
# What only the iptables chain has
# --------------------------------------------------------------------------

def test_jump_position_first_moves_the_jump(node):
    policy_view.add_foreign(node)
    node.module()
    post = [r for r in node.rules() if r.startswith('-A POSTROUTING')]
    assert post.index(JUMP % (CHAIN, CHAIN)) == len(post) - 1
    res = node.module(steps=['apply1', 'apply2'], jump_position='first')
    assert res['apply1']['changed'] and not res['apply2']['changed']
    assert any('position 1' in a for a in res['apply1']['actions'])
    post = [r for r in node.rules() if r.startswith('-A POSTROUTING')]
    assert post[0] == JUMP % (CHAIN, CHAIN) and post.count(JUMP % (CHAIN, CHAIN)) == 1
    # Back to append: a correct jump stays where it is (as upstream).
    res = node.module(jump_position='append')
    assert res['apply1']['changed'] is False


def test_absent_refuses_when_another_chain_jumps_to_ours(nft_node):
    nft_node.module()
    nft_node.ipt('-N', 'USER-CHAIN')
    nft_node.ipt('-A', 'USER-CHAIN', '-j', CHAIN)
    before = nft_node.save()
    res = nft_node.module(state='absent')['apply1']
    assert res.get('failed') and 'USER-CHAIN' in res['msg']
    assert nft_node.save() == before


# --------------------------------------------------------------------------
# What only the nftables table has
# --------------------------------------------------------------------------

def test_a_table_that_was_never_ours_is_not_taken_over(make_node):
    node = make_node('nftables')
    foreign = ('table inet ip-masq-agent {\n\tchain c {\n\t\ttype filter hook forward priority 0;\n'
               '\t\tip daddr 192.0.2.1 drop\n\t}\n}\n')
    node.nft('-f', '-', input=foreign)
    before = node.snapshot()
    for state in ('present', 'absent'):
        res = node.module(state=state)['apply1']
        assert res.get('failed') is True, state
        assert 'table inet ip-masq-agent already exists and is not ours' in res['msg'], res['msg']
        assert 'adopt_chain' in res['msg']
        assert node.snapshot() == before
    res = node.module(adopt_chain=True)['apply1']
    assert res['changed'] is True and node.state() == node.expect()
