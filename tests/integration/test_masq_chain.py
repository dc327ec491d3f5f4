"""ipmasq.agent.masq_chain against real iptables (nf_tables and legacy) inside
network namespaces, run through ansible-playbook as a user would."""
import os
import stat
import tempfile

import pytest

import netlab

HERE = os.path.dirname(os.path.abspath(__file__))
CHAIN = 'IP-MASQ-AGENT'
RET = ('-m comment --comment "ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE"'
       ' -m addrtype ! --dst-type LOCAL -j RETURN')
MASQ = ('-m comment --comment "ip-masq-agent: outbound traffic should be subject to MASQUERADE'
        ' (this match must come after cluster-local CIDR matches)" -m addrtype ! --dst-type LOCAL -j MASQUERADE')
JUMP = ('-A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL'
        ' destination traffic to our custom %s chain" -m addrtype ! --dst-type LOCAL -j %s')

# What other tools put in the nat table: Docker, kube-proxy, a user's own rule.
FOREIGN = [
    ['-N', 'KUBE-POSTROUTING'],
    ['-A', 'KUBE-POSTROUTING', '-m', 'mark', '--mark', '0x4000/0x4000', '-j', 'MASQUERADE'],
    ['-I', 'POSTROUTING', '1', '-s', '172.17.0.0/16', '!', '-o', 'docker0', '-j', 'MASQUERADE'],
    ['-I', 'POSTROUTING', '1', '-m', 'comment', '--comment', 'kubernetes postrouting rules',
     '-j', 'KUBE-POSTROUTING'],
    ['-A', 'POSTROUTING', '-o', 'eth9', '-s', '192.0.2.0/24', '-j', 'SNAT', '--to-source', '198.51.100.7'],
]


def chain_lines(cidrs, chain=CHAIN, masq=MASQ):
    return ([':%s -' % chain] + ['-A %s -d %s %s' % (chain, c, RET) for c in cidrs]
            + ['-A %s %s' % (chain, masq)])


def ours(rules, chain=CHAIN):
    return [r for r in rules if r.startswith((':%s ' % chain, '-A %s ' % chain)) or r.endswith('-j ' + chain)]


def not_ours(rules, chain=CHAIN):
    return [r for r in rules if r not in ours(rules, chain)]


def golden(name):
    with open(os.path.join(HERE, 'golden', name)) as f:
        return [line.rstrip() for line in f.read().splitlines()]


def add_foreign(node, family=4):
    for args in FOREIGN:
        if family == 6:
            args = [a.replace('172.17.0.0/16', 'fd00:17::/64').replace('192.0.2.0/24', '2001:db8:2::/64')
                    .replace('198.51.100.7', '2001:db8:5::7') for a in args]
        node.ipt(*args, family=family)


# --------------------------------------------------------------------------
# present / absent, four steps, both backends
# --------------------------------------------------------------------------

def test_defaults_four_steps_and_exact_rules(node):
    res = node.four_steps()
    rules = node.rules()
    want = chain_lines(['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])
    # iptables-save order: chain declaration, POSTROUTING rules, our chain's rules.
    assert ours(rules) == [want[0], JUMP % (CHAIN, CHAIN)] + want[1:]
    # Exactly one jump, and the chain in this exact order.
    assert rules.count(JUMP % (CHAIN, CHAIN)) == 1
    assert [r for r in rules if r.startswith('-A %s ' % CHAIN)] == chain_lines(
        ['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])[1:]
    # The result reports rules, commands and what it did.
    assert res['apply1']['ipv4']['rules'] == chain_lines(
        ['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])[1:]
    assert any(c.endswith('iptables-restore --wait=30 --noflush') for c in res['apply1']['commands'])
    assert res['check1']['commands'] == res['apply1']['commands']
    assert not any('restore' in c for c in res['apply2']['commands'])
    # IPv6 is not managed by default and nothing was written there.
    assert ours(node.rules(6)) == []


def test_absent_four_steps_removes_everything_and_keeps_foreign_rules(node):
    add_foreign(node)
    node.module(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/64'])
    assert ours(node.rules(4)) and ours(node.rules(6))
    foreign4, foreign6 = not_ours(node.rules(4)), not_ours(node.rules(6))
    node.four_steps(state='absent')
    assert ours(node.rules(4)) == [] and ours(node.rules(6)) == []
    assert node.rules(4) == foreign4
    assert node.rules(6) == foreign6


def test_golden_default_listing(node):
    node.module()
    assert [line.rstrip() for line in node.listing().splitlines()] == golden('defaults.txt')


def test_golden_seed000_listing(node):
    node.module(nonmasquerade_cidrs=['172.16.0.0/16', '10.168.0.0/16'], masq_link_local=True)
    assert [line.rstrip() for line in node.listing().splitlines()] == golden('seed000.txt')
    post = node.ipt('-L', 'POSTROUTING').stdout
    assert ('IP-MASQ-AGENT  all  --  anywhere             anywhere             /* ip-masq-agent: ensure nat '
            'POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ-AGENT chain */ '
            'ADDRTYPE match dst-type !LOCAL') in post


# --------------------------------------------------------------------------
# Drift: each is repaired in one run, and the next run changes nothing
# --------------------------------------------------------------------------

DEFAULT_CHAIN = chain_lines(['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])


def drift_delete_rule(node):
    node.ipt('-D', CHAIN, '2')


def drift_flush_chain(node):
    node.ipt('-F', CHAIN)


def drift_remove_jump(node):
    node.ipt('-D', 'POSTROUTING', '-m', 'comment', '--comment',
             'ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our '
             'custom IP-MASQ-AGENT chain', '-m', 'addrtype', '!', '--dst-type', 'LOCAL', '-j', CHAIN)


def drift_duplicate_jump(node):
    node.ipt('-A', 'POSTROUTING', '-m', 'comment', '--comment',
             'ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our '
             'custom IP-MASQ-AGENT chain', '-m', 'addrtype', '!', '--dst-type', 'LOCAL', '-j', CHAIN)


def drift_foreign_rule_in_chain(node):
    node.ipt('-I', CHAIN, '3', '-d', '198.51.100.0/24', '-j', 'RETURN')


def drift_wrong_jump(node):
    drift_remove_jump(node)
    node.ipt('-A', 'POSTROUTING', '-o', 'eth0', '-j', CHAIN)


def drift_reordered(node):
    node.ipt('-D', CHAIN, '1')
    node.ipt('-A', CHAIN, '-d', '169.254.0.0/16', '-m', 'comment', '--comment',
             'ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE',
             '-m', 'addrtype', '!', '--dst-type', 'LOCAL', '-j', 'RETURN')


def drift_chain_deleted(node):
    drift_remove_jump(node)
    node.ipt('-F', CHAIN)
    node.ipt('-X', CHAIN)


@pytest.mark.parametrize('drift', [drift_delete_rule, drift_flush_chain, drift_remove_jump,
                                   drift_duplicate_jump, drift_foreign_rule_in_chain, drift_wrong_jump,
                                   drift_reordered, drift_chain_deleted],
                         ids=lambda f: f.__name__[len('drift_'):])
def test_drift_is_repaired(node, drift):
    add_foreign(node)
    node.module()
    good = node.rules()
    drift(node)
    assert node.rules() != good
    res = node.module(steps=['check1', 'apply1', 'check2'])
    assert res['check1']['changed'] and res['apply1']['changed'] and not res['check2']['changed']
    rules = node.rules()
    assert rules.count(JUMP % (CHAIN, CHAIN)) == 1
    assert [r for r in ours(rules) if not r.startswith('-A POSTROUTING')] == DEFAULT_CHAIN
    assert not_ours(rules) == not_ours(good)


def test_foreign_postrouting_rules_and_chains_untouched(node):
    add_foreign(node)
    before = node.rules()
    node.four_steps(nonmasquerade_cidrs=['10.0.0.0/8'])
    after = node.rules()
    assert not_ours(after) == before
    # Appended: the jump comes after the rules that were there.
    post = [r for r in after if r.startswith('-A POSTROUTING')]
    assert post[-1] == JUMP % (CHAIN, CHAIN)


def test_jump_position_first_moves_the_jump(node):
    add_foreign(node)
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


# --------------------------------------------------------------------------
# IPv6, options
# --------------------------------------------------------------------------

def test_ipv6(node):
    add_foreign(node, family=6)
    foreign6 = node.rules(6)
    res = node.four_steps(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'FD00:10:0::/64', '2001:db8:7::/48',
                                                          '::ffff:0:0/96'])
    want4 = chain_lines(['169.254.0.0/16', '10.0.0.0/8'])
    assert ours(node.rules(4)) == [want4[0], JUMP % (CHAIN, CHAIN)] + want4[1:]
    rules6 = node.rules(6)
    assert [r for r in rules6 if r.startswith(('-A IP', ':IP'))] == chain_lines(
        ['fe80::/10', 'fd00:10::/64', '2001:db8:7::/48', '::ffff:0.0.0.0/96'])
    assert rules6.count(JUMP % (CHAIN, CHAIN)) == 1
    assert not_ours(rules6) == foreign6
    assert res['apply1']['ipv6']['managed'] is True
    # masq_link_local_ipv6 drops the fe80::/10 rule only.
    node.module(ipv6=True, nonmasquerade_cidrs=['fd00:10::/64'], masq_link_local_ipv6=True)
    assert [r for r in node.rules(6) if r.startswith('-A IP')] == chain_lines(['fd00:10::/64'])[1:]
    assert [r for r in node.rules(4) if r.startswith('-A IP')][0] == '-A %s -d 169.254.0.0/16 %s' % (CHAIN, RET)
    # Switching IPv6 off removes our IPv6 chain and jump, nothing else.
    res = node.module(steps=['apply1', 'apply2'], ipv6=False)
    assert res['apply1']['changed'] and not res['apply2']['changed']
    assert ours(node.rules(6)) == [] and node.rules(6) == foreign6
    assert ours(node.rules(4))


def test_random_fully_and_to_ports(node):
    node.four_steps(random_fully=True, to_ports='1024-29999,32768-65535', nonmasquerade_cidrs=['10.0.0.0/8'])
    rules = [r for r in node.rules() if r.startswith('-A %s ' % CHAIN)]
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
    assert 'random-fully' in node.listing()


def test_custom_chain_name_and_reserved_ranges(node):
    res = node.four_steps(chain='MY-SNAT', nonmasquerade_cidrs=['10.0.0.0/8'], nomasq_all_reserved_ranges=True)
    rules = node.rules()
    assert rules.count(JUMP % ('MY-SNAT', 'MY-SNAT')) == 1
    assert [r for r in rules if r.startswith('-A MY-SNAT ')] == chain_lines(
        ['169.254.0.0/16', '10.0.0.0/8', '100.64.0.0/10', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24',
         '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4'], chain='MY-SNAT')[1:]
    assert res['apply1']['chain'] == 'MY-SNAT'
    node.module(chain='MY-SNAT', state='absent')
    assert not any('MY-SNAT' in r for r in node.rules())


def test_diff_mode_shows_before_and_after(nft_node):
    res = nft_node.module(steps=['check1'], nonmasquerade_cidrs=['10.0.0.0/8'])
    diff = res['check1']['diff']
    diff = diff[0] if isinstance(diff, list) else diff
    assert '-A IP-MASQ-AGENT -d 10.0.0.0/8' not in diff['before']
    assert '-A IP-MASQ-AGENT -d 10.0.0.0/8 ' + RET in diff['after']
    assert JUMP % (CHAIN, CHAIN) in diff['after']
    nft_node.module(nonmasquerade_cidrs=['10.0.0.0/8'])
    nft_node.ipt('-A', CHAIN, '-d', '203.0.113.0/24', '-j', 'RETURN')
    res = nft_node.module(steps=['check1'], nonmasquerade_cidrs=['10.0.0.0/8'])
    diff = res['check1']['diff']
    diff = diff[0] if isinstance(diff, list) else diff
    assert '-A IP-MASQ-AGENT -d 203.0.113.0/24 -j RETURN' in diff['before']
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
    (dict(state='gone'), ['state', 'gone']),
]


@pytest.mark.parametrize('args,messages', BAD_INPUTS, ids=[str(i) for i in range(len(BAD_INPUTS))])
def test_bad_input_fails_clearly_and_changes_nothing(nft_node, args, messages):
    add_foreign(nft_node)
    nft_node.module(nonmasquerade_cidrs=['192.168.0.0/16'])
    before = nft_node.save(4), nft_node.save(6)
    res = nft_node.module(**args)['apply1']
    assert res.get('failed') is True
    for m in messages:
        assert m in res['msg'], (m, res['msg'])
    assert (nft_node.save(4), nft_node.save(6)) == before


def _failing_restore_dir(backend):
    """A PATH dir whose iptables-restore adds one rule the kernel rejects to
    the transaction before handing it to the real tool: the real restore
    then fails midway through our transaction."""
    path = tempfile.mkdtemp(prefix='imq-failing-')
    script = os.path.join(path, 'iptables-restore')
    real = backend.tool('iptables-restore')
    with open(script, 'w') as f:
        f.write('#!/usr/bin/python3\n'
                'import os, sys\n'
                'data = sys.stdin.read().replace("\\nCOMMIT\\n", "\\n-A %s -j IMQ-NO-SUCH-TARGET\\nCOMMIT\\n")\n'
                'r, w = os.pipe()\n'
                'os.write(w, data.encode()); os.close(w)\n'
                'os.dup2(r, 0)\n'
                'os.execv(%r, [%r] + sys.argv[1:])\n' % (CHAIN, real, real))
    os.chmod(script, stat.S_IRWXU)
    return path


def test_iptables_failure_mid_apply_keeps_previous_rules(node):
    add_foreign(node)
    node.module(nonmasquerade_cidrs=['192.168.0.0/16'])
    before = node.save(4)
    assert '-A IP-MASQ-AGENT -d 192.168.0.0/16' in before
    failing = _failing_restore_dir(node.backend)
    try:
        # A change that rewrites the chain AND moves the jump, in one transaction.
        res = node.module(path_prefix=failing, nonmasquerade_cidrs=['10.0.0.0/8', '172.16.0.0/12'],
                          jump_position='first')['apply1']
    finally:
        for name in os.listdir(failing):
            os.unlink(os.path.join(failing, name))
        os.rmdir(failing)
    assert res.get('failed') is True
    assert 'iptables-restore' in res['msg'] and res['rc'] != 0
    assert 'IMQ-NO-SUCH-TARGET' in res['stderr'] or 'IMQ-NO-SUCH-TARGET' in res['msg']
    # Nothing of the half-done transaction is visible: every rule as before.
    assert node.rules(4) == netlab.nat_rules(before)


def test_absent_refuses_when_another_chain_jumps_to_ours(nft_node):
    nft_node.module()
    nft_node.ipt('-N', 'USER-CHAIN')
    nft_node.ipt('-A', 'USER-CHAIN', '-j', CHAIN)
    before = nft_node.save()
    res = nft_node.module(state='absent')['apply1']
    assert res.get('failed') and 'USER-CHAIN' in res['msg']
    assert nft_node.save() == before
