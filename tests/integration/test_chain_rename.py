"""A renamed chain leaves no old policy (issue 26): a run with another chain
name removes every chain of ours under an old name (and its sub-chains and
POSTROUTING jump; for nftables our table of the old name) in the same write,
recognised by our comment; a chain or table of that name without our comment
is never touched; state=absent removes every one of ours, whatever its name.

Real namespaces, every policy backend (pnode: the iptables chain with
iptables-nft and iptables-legacy, and the nftables table).  Packets through a
renamed chain: test_packets.test_a_renamed_chain_decides_alone."""
import pytest

from ipmasq_lab.policy_view import CHAIN, MASQ, RET, golden, ipt_expect

NEW = 'MY-MASQ'
OLD = 'OLD-MASQ'        # ours under a name no run of these tests gives: written by hand
ARGS = dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'])
NOTHING = {'ipv4': [], 'ipv6': [], 'nft': None}
NFT_OURS = ('table inet %s {\n\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n'
            '\t\tip daddr 10.0.0.0/8 return comment "ip-masq-agent: cluster-local traffic should not be subject '
            'to MASQUERADE"\n\t\tmasquerade comment "ip-masq-agent: outbound traffic should be subject to '
            'MASQUERADE (this match must come after cluster-local CIDR matches)"\n\t}\n}\n')
NFT_FOREIGN = ('table inet %s {\n\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat; '
               'policy accept;\n\t\tip daddr 198.51.100.0/24 masquerade\n\t}\n}\n')


def ok(res):
    assert not res.get('failed'), res.get('msg')
    return res


def only(res):
    return res[0] if isinstance(res, list) else res


def write_old(node, chain=OLD, ours=True):
    """A chain (iptables, both families) or table (nftables) named ``chain``,
    as an earlier run of ours wrote it (``ours``), or with no comment of ours."""
    if node.policy == 'nftables':
        node.nft('-f', '-', input=(NFT_OURS if ours else NFT_FOREIGN) % chain.lower())
        return
    for family, cidr in ((4, '10.0.0.0/8'), (6, 'fd00::/8')):
        if ours:
            lines = ipt_expect([cidr], chain)
        else:
            lines = [':%s -' % chain, '-A %s -d %s -j RETURN' % (chain, cidr)]
        tool = node.backend.tool('iptables-restore' if family == 4 else 'ip6tables-restore')
        node.ns.exec([tool, '--noflush'], input='*nat\n%s\nCOMMIT\n' % '\n'.join(
            line + ' [0:0]' if line.startswith(':') else line for line in lines))


def test_a_rename_removes_the_old_chain_and_its_jump_in_the_same_run(pnode):
    pnode.add_foreign(ipv6=True)
    ok(pnode.module(**ARGS)['apply1'])
    assert pnode.state() == pnode.expect(['10.0.0.0/8'], ['fd00::/8'])
    foreign = pnode.foreign()
    res = pnode.four_steps(chain=NEW, **ARGS)
    # Check mode and diff mode show the removal (check1 ran before anything changed).
    check, diff = res['check1'], only(res['check1']['diff'])
    if pnode.policy == 'iptables':
        for family in (4, 6):
            assert 'IPv%d: remove 1 POSTROUTING jump(s) to %s (ours under another chain name)' % (family, CHAIN) \
                in check['actions'], check['actions']
            assert 'IPv%d: delete chain %s (ours under another chain name)' % (family, CHAIN) in check['actions']
            assert res['apply1']['ipv%d' % family]['others'][0]['chain'] == CHAIN
        assert '-A %s -d 10.0.0.0/8 %s' % (CHAIN, RET) in diff['before']
        assert '-A %s -d fd00::/8 %s' % (CHAIN, RET) in diff['before']
        assert '-j %s' % CHAIN not in diff['after'] and ':%s ' % CHAIN not in diff['after']
    else:
        assert 'nftables: delete table inet ip-masq-agent (ours under another chain name)' in check['actions']
        assert '# nft list table inet ip-masq-agent (ours under another chain name)\ntable inet ip-masq-agent {' \
            in diff['before']
        assert 'table inet ip-masq-agent' not in diff['after']
    # The old chain and its jump are gone (both families); the new one is exactly the policy.
    assert pnode.state() == NOTHING
    assert pnode.state(NEW) == pnode.expect(['10.0.0.0/8'], ['fd00::/8'], chain=NEW)
    assert pnode.foreign(NEW) == foreign
    # Renamed back: the same, the other way round.
    ok(pnode.module(**ARGS)['apply1'])
    assert pnode.state(NEW) == NOTHING
    assert pnode.state() == pnode.expect(['10.0.0.0/8'], ['fd00::/8'])


def test_after_a_rename_the_listing_is_the_normal_one(pnode):
    ok(pnode.module()['apply1'])
    ok(pnode.module(chain=NEW)['apply1'])
    if pnode.policy == 'iptables':
        listing = pnode.listing(NEW)
        assert [line.rstrip() for line in listing.splitlines()] == [
            line.replace(CHAIN, NEW) for line in golden('defaults.txt')]
        post = [r for r in pnode.rules() if r.startswith('-A POSTROUTING')]
        assert post == ['-A POSTROUTING ' + ipt_expect([], NEW)[1].split(' ', 2)[2]]
    else:
        assert pnode.nft('list', 'tables').stdout == 'table inet my-masq\n'
        listing = pnode.nft('list', 'table', 'inet', 'my-masq').stdout
        assert [line.rstrip() for line in listing.splitlines()] == [
            line.replace('ip-masq-agent {', 'my-masq {') for line in golden('defaults.nft')]


def test_absent_removes_ours_under_every_name(pnode):
    ok(pnode.module(**ARGS)['apply1'])
    write_old(pnode)
    assert pnode.state(OLD) != NOTHING
    res = ok(pnode.module(state='absent', chain=NEW)['apply1'])
    assert res['changed'] is True
    for chain in (CHAIN, OLD, NEW):
        assert pnode.state(chain) == NOTHING, chain
    if pnode.policy == 'nftables':
        assert pnode.nft('list', 'tables').stdout == ''


def test_a_foreign_chain_of_an_old_name_is_left_intact(pnode):
    """IP-MASQ-AGENT without a comment of ours stays as it is, through a run
    with another name and an absent run; our chain of another name goes."""
    write_old(pnode, CHAIN, ours=False)
    write_old(pnode, OLD)
    foreign = pnode.nft('list', 'table', 'inet', 'ip-masq-agent') if pnode.policy == 'nftables' else None
    ok(pnode.module(chain=NEW, **ARGS)['apply1'])
    assert pnode.state(OLD) == NOTHING
    assert pnode.state(NEW) == pnode.expect(['10.0.0.0/8'], ['fd00::/8'], chain=NEW)
    if pnode.policy == 'iptables':
        for family, cidr in ((4, '10.0.0.0/8'), (6, 'fd00::/8')):
            rules = pnode.rules(family)
            assert [r for r in rules if CHAIN in r] == [':%s -' % CHAIN, '-A %s -d %s -j RETURN' % (CHAIN, cidr)]
    ok(pnode.module(chain=NEW, state='absent')['apply1'])
    assert pnode.state(NEW) == NOTHING
    if pnode.policy == 'iptables':
        for family, cidr in ((4, '10.0.0.0/8'), (6, 'fd00::/8')):
            assert [r for r in pnode.rules(family) if CHAIN in r] == [
                ':%s -' % CHAIN, '-A %s -d %s -j RETURN' % (CHAIN, cidr)]
    else:
        assert pnode.nft('list', 'table', 'inet', 'ip-masq-agent').stdout == foreign.stdout
        assert pnode.nft('list', 'tables').stdout == 'table inet ip-masq-agent\n'


@pytest.mark.parametrize('rule_format', ['docs', 'upstream'])
def test_both_rule_formats_are_recognised(node, rule_format):
    """rule_format upstream's rules carry upstream's comments: a rename from
    a chain written in either format removes it."""
    ok(node.module(rule_format=rule_format)['apply1'])
    ok(node.module(chain=NEW)['apply1'])
    assert node.state() == NOTHING
    assert [r for r in node.rules() if r.startswith('-A %s ' % NEW)][-1] == '-A %s %s' % (NEW, MASQ)


def ours_anywhere(node):
    """Every line of ours in both iptables families, with either flavour's own tools (comment or name)."""
    found = []
    for tools in ('iptables-nft-save', 'ip6tables-nft-save', 'iptables-legacy-save', 'ip6tables-legacy-save'):
        text = node.ns.exec([tools, '-t', 'nat']).stdout
        found.extend('%s: %s' % (tools, line) for line in text.splitlines()
                     if 'ip-masq-agent' in line or CHAIN in line or NEW in line)
    return found


@pytest.mark.parametrize('state', ['present', 'absent'])
def test_a_rename_with_a_switch_to_nftables_removes_the_old_chain(node, state):
    """Issue 32 item 12: our iptables chain (either flavour on PATH), then
    one run with another chain name and backend=nftables: the old chain and
    its jump go in that run, in both families; our table of the new name is
    the policy; foreign rules stay.  state=absent with the new name removes
    the old-named chain too."""
    node.add_foreign(ipv6=True)
    ok(node.module(**ARGS)['apply1'])
    assert node.state() == node.expect(['10.0.0.0/8'], ['fd00::/8'])
    foreign = node.foreign()
    if state == 'present':
        res = ok(node.module(chain=NEW, backend='nftables', **ARGS)['apply1'])
        assert res['selected_backend'] == 'nftables'
        assert node.state(NEW)['nft'] is not None and node.state(NEW)['ipv4'] == []
        again = ok(node.module(chain=NEW, backend='nftables', **ARGS)['apply1'])
        assert again['changed'] is False, again['actions']
    else:
        ok(node.module(chain=NEW, state='absent')['apply1'])
        tables = node.nft('list', 'tables').stdout
        assert 'my-masq' not in tables and 'ip-masq-agent' not in tables, tables
    assert node.state() == NOTHING
    assert ours_anywhere(node) == []
    assert node.foreign(NEW) == foreign


@pytest.mark.parametrize('state', ['present', 'absent'])
def test_a_rename_with_a_switch_finds_the_old_chain_in_the_other_flavour(node, state):
    """The same, with our old-named chain in the iptables flavour that is not
    on PATH (written there by that flavour's own tools, as a run with those
    tools on PATH left it): the switch to nftables removes it too, and so
    does state=absent with the new name."""
    other = {'nft': 'legacy', 'legacy': 'nft'}[node.backend.name]
    for family, cidr in ((4, '10.0.0.0/8'), (6, 'fd00::/8')):
        lines = ipt_expect([cidr])
        tool = '%s-%s-restore' % ('iptables' if family == 4 else 'ip6tables', other)
        node.ns.exec([tool, '--noflush'], input='*nat\n%s\nCOMMIT\n' % '\n'.join(
            line + ' [0:0]' if line.startswith(':') else line for line in lines))
    assert len(ours_anywhere(node)) == 2 * len(ipt_expect(['10.0.0.0/8']))
    if state == 'present':
        ok(node.module(chain=NEW, backend='nftables', **ARGS)['apply1'])
        assert node.state(NEW)['nft'] is not None
    else:
        ok(node.module(chain=NEW, state='absent')['apply1'])
        assert node.state(NEW) == NOTHING
    assert ours_anywhere(node) == []
