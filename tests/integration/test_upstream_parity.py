"""rule_format: upstream against real iptables in network namespaces: the module,
the node-side resync and the role write byte for byte what the upstream agent
writes, read a chain the upstream DaemonSet wrote as "no change", and the
migration guide (docs/docsite/rst/migration.rst) walked step by step.

The upstream text below is written out by hand from kubernetes-sigs/ip-masq-agent
(v2.12, cmd/ip-masq-agent/ip-masq-agent.go: nonMasqRuleComment, masqRuleComment,
postroutingJumpComment, writeNonMasqRule, writeMasqRule, ensurePostroutingJump,
syncMasqRules; the expected restore inputs of TestSyncMasqRules and
TestSyncMasqRulesIPv6 in ip-masq-agent_test.go), never from the code under test.
"""
import os

from ipmasq_lab import netlab
from test_resync import Agent
from test_role_sandbox import run as run_role, role_vars

CHAIN = 'IP-MASQ-AGENT'
LINK_LOCAL = '169.254.0.0/16'
RFC1918 = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']
# NewMasqConfig(true): what --nomasq-all-reserved-ranges adds to the default list.
RESERVED = ['100.64.0.0/10', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24', '198.18.0.0/15',
            '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4']

# ip-masq-agent.go, as upstream passes them to iptables.
UP_RETURN_COMMENT = '-m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE"'
UP_MASQ_COMMENT = ('-m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE'
                   ' (must be last in chain)"')
UP_JUMP_ARGS = ['-m', 'comment', '--comment', 'ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL '
                'destination traffic to our custom IP-MASQ-AGENT chain', '-m', 'addrtype', '!', '--dst-type',
                'LOCAL', '-j', CHAIN]

# What iptables-save -t nat then prints (a namespace of its own: nothing else in the table).
SAVE_HEAD = ('*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n'
             ':POSTROUTING ACCEPT [0:0]\n:IP-MASQ-AGENT - [0:0]\n'
             '-A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL '
             'destination traffic to our custom IP-MASQ-AGENT chain" -m addrtype ! --dst-type LOCAL'
             ' -j IP-MASQ-AGENT\n')


def upstream_save(cidrs, random_fully=True):
    """The golden ``iptables-save -t nat`` after the upstream agent's cycle."""
    lines = ['-A IP-MASQ-AGENT -d %s -m comment --comment "ip-masq-agent: local traffic is not subject to '
             'MASQUERADE" -j RETURN' % cidr for cidr in cidrs]
    lines.append('-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to '
                 'MASQUERADE (must be last in chain)" -j MASQUERADE' + (' --random-fully' if random_fully else ''))
    return SAVE_HEAD + '\n'.join(lines) + '\nCOMMIT\n'


def upstream_listing(cidrs, random_fully=True):
    """The golden ``iptables -t nat -S`` (what the migration guide shows)."""
    lines = ['-P PREROUTING ACCEPT', '-P INPUT ACCEPT', '-P OUTPUT ACCEPT', '-P POSTROUTING ACCEPT',
             '-N IP-MASQ-AGENT']
    lines += [line for line in upstream_save(cidrs, random_fully).splitlines() if line.startswith('-A ')]
    return '\n'.join(lines) + '\n'


EMPTY_LISTING = '-P PREROUTING ACCEPT\n-P INPUT ACCEPT\n-P OUTPUT ACCEPT\n-P POSTROUTING ACCEPT\n'


def daemonset_cycle(node, cidrs, random_fully=True):
    """One syncMasqRules cycle of the upstream agent, with its own calls:
    EnsureChain, EnsureRule (-C, then -A POSTROUTING), then RestoreAll
    (iptables-restore --noflush) of the lines writeLine joins with spaces."""
    if node.ipt('-L', CHAIN, '-n', check=False).returncode != 0:
        node.ipt('-N', CHAIN)
    if node.ipt('-C', 'POSTROUTING', *UP_JUMP_ARGS, check=False).returncode != 0:
        node.ipt('-A', 'POSTROUTING', *UP_JUMP_ARGS)
    lines = ['*nat', ':%s - [0:0]' % CHAIN]
    lines += ['-A %s %s -d %s -j RETURN' % (CHAIN, UP_RETURN_COMMENT, cidr) for cidr in cidrs]
    lines.append('-A %s %s -j MASQUERADE%s' % (CHAIN, UP_MASQ_COMMENT, ' --random-fully' if random_fully else ''))
    lines.append('COMMIT')
    node.ns.exec([node.backend.tool('iptables-restore'), '--noflush'], input='\n'.join(lines) + '\n')


def listing(node):
    return node.ipt('-S').stdout


def one(node, **args):
    res = node.module(**args)['apply1']
    assert not res.get('failed'), res.get('msg')
    return res


# --------------------------------------------------------------------------
# the module
# --------------------------------------------------------------------------

def test_defaults_byte_for_byte_and_a_daemonset_chain_is_no_change(node):
    # Ours, in a fresh namespace: exactly upstream's text.
    res = one(node, rule_format='upstream')
    assert res['changed'] is True
    assert node.save() == upstream_save([LINK_LOCAL] + RFC1918)
    # The DaemonSet's own cycle, in another namespace: the same bytes.
    with netlab.Netns('daemonset') as ns:
        other = type(node)(ns, node.backend)
        daemonset_cycle(other, [LINK_LOCAL] + RFC1918)
        written = other.save()
        assert written == upstream_save([LINK_LOCAL] + RFC1918)
        # Taken over: no change, nothing written.
        res = one(other, rule_format='upstream', steps=['check1', 'apply1'])
        assert res['changed'] is False and res['actions'] == []
        assert not any('restore' in c for c in res['commands'])
        assert other.save() == written
        # The docs format would rewrite the chain (one transaction).
        res = other.module(steps=['check1'])['check1']
        assert res['changed'] is True and res['actions'] == ['IPv4: rewrite chain IP-MASQ-AGENT (5 rules -> 5 rules)']


def test_duplicates_reserved_ranges_and_random_fully_as_upstream(nft_node):
    node = nft_node
    # A list of one's own: duplicates and a listed link-local are written as
    # given; --nomasq-all-reserved-ranges does not touch it (upstream: default list only).
    res = one(node, rule_format='upstream', random_fully=False, nomasq_all_reserved_ranges=True,
              nonmasquerade_cidrs=['10.0.0.0/8', '10.0.0.0/8', LINK_LOCAL])
    assert not res.get('warnings')
    assert node.save() == upstream_save([LINK_LOCAL, '10.0.0.0/8', '10.0.0.0/8', LINK_LOCAL], random_fully=False)
    # The default list: the reserved ranges are added to it.
    one(node, rule_format='upstream', nomasq_all_reserved_ranges=True)
    assert node.save() == upstream_save([LINK_LOCAL] + RFC1918 + RESERVED)
    # The same input in the docs format: one rule per CIDR, reserved ranges appended to any list.
    one(node, nomasq_all_reserved_ranges=True, nonmasquerade_cidrs=['10.0.0.0/8', '10.0.0.0/8'])
    rules = [r for r in node.rules() if r.startswith('-A %s -d' % CHAIN)]
    assert [r.split()[3] for r in rules] == [LINK_LOCAL, '10.0.0.0/8'] + RESERVED


def test_to_ports_kept_in_order_and_empty_means_none(nft_node):
    node = nft_node
    one(node, nonmasquerade_cidrs=[], to_ports='32768-65535,1024-29999')
    ports = [r.split('--to-ports ')[1] for r in node.rules() if '-p tcp' in r]
    assert ports == ['32768-65535', '1024-29999']
    res = one(node, nonmasquerade_cidrs=[], to_ports='')
    assert res['changed'] is True
    assert not any('--to-ports' in r for r in node.rules())


# --------------------------------------------------------------------------
# the node-side resync
# --------------------------------------------------------------------------

def test_resync_reads_the_file_as_upstream_and_writes_its_text(nft_node, tmp_path):
    agent = Agent(nft_node, tmp_path)
    # Anchors and aliases resolved, a duplicate kept, the second document ignored.
    agent.write('---\nnets: &pods [10.244.0.0/16, 10.244.0.0/16]\nnonMasqueradeCIDRs: *pods\n'
                'masqLinkLocal: &yes true\nmasqLinkLocalIPv6: *yes\n---\nnonMasqueradeCIDRs: [not a cidr]\n')
    proc = agent.run('--rule-format', 'upstream', '--random-fully=false', check_rc=0)
    assert 'unknown key "nets"' in proc.stderr
    assert nft_node.save() == upstream_save(['10.244.0.0/16', '10.244.0.0/16'], random_fully=False)
    # A second cycle: no change, nothing written.
    before = agent.restores()
    agent.run('--rule-format', 'upstream', '--random-fully=false', check_rc=0)
    assert agent.restores() == before
    # A JSON entry with spaces inside the quotes is refused, naming it; the
    # last good configuration stays enforced.
    agent.write('{"nonMasqueradeCIDRs": ["10.0.0.0/8", " 192.168.0.0/16"]}\n')
    proc = agent.run('--rule-format', 'upstream', '--random-fully=false', check_rc=2)
    assert 'entry 2 " 192.168.0.0/16" has spaces inside the quotes' in proc.stderr
    assert nft_node.save() == upstream_save(['10.244.0.0/16', '10.244.0.0/16'], random_fully=False)


# --------------------------------------------------------------------------
# the migration guide, walked
# --------------------------------------------------------------------------

def test_migration_from_the_daemonset_and_back(nft_node, tmp_path):
    node = nft_node
    cidrs = [LINK_LOCAL] + RFC1918
    # Step 0: the node as the DaemonSet left it.
    daemonset_cycle(node, cidrs)
    daemonset_text = node.save()
    assert daemonset_text == upstream_save(cidrs)
    assert listing(node) == upstream_listing(cidrs)

    # Step 1: apply the role with rule_format upstream while the DaemonSet still runs:
    # the chain and the jump are left exactly as they are.
    values = role_vars(tmp_path, ip_masq_rule_format='upstream', ip_masq_nonmasquerade_cidrs=RFC1918)
    changed = run_role(node, values)
    # (the role's one task by the parts of its node run that changed: the chain is not one of them)
    assert 'Apply the SNAT policy' not in ' '.join(changed) and "Write the agent's files" in ' '.join(changed), changed
    assert node.save() == daemonset_text
    # Step 2: the DaemonSet leaves the node (its last cycle wrote the same bytes);
    # the collection's resync keeps the chain: run its unit's command line.
    daemonset_cycle(node, cidrs)
    from test_role_sandbox import service_command  # pylint: disable=import-outside-toplevel
    argv, env = service_command(values['ip_masq_unit_dir'])
    env['PATH'] = os.pathsep.join([node.backend.path_dir, '/usr/sbin', '/usr/bin', '/sbin', '/bin'])
    proc = node.ns.exec(argv + ['--log-format', 'plain', '-v'], check=False, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert 'nothing written' in proc.stderr
    assert listing(node) == upstream_listing(cidrs)

    # Hand back, step 1: switch the collection's resync off; the rules stay as they are.
    values['ip_masq_resync_enabled'] = False
    run_role(node, values)
    assert node.save() == daemonset_text
    assert not os.path.exists(os.path.join(values['ip_masq_unit_dir'], 'ip-masq-agent.service'))
    # Hand back, step 2: the DaemonSet is scheduled on the node again; its cycle changes nothing.
    daemonset_cycle(node, cidrs)
    assert node.save() == daemonset_text
    assert listing(node) == upstream_listing(cidrs)
    # (ip_masq_state: absent instead would remove the chain and the jump: a gap
    # until the DaemonSet's next cycle, which the guide avoids.)
    values['ip_masq_state'] = 'absent'
    run_role(node, values)
    assert listing(node) == EMPTY_LISTING
    daemonset_cycle(node, cidrs)
    assert node.save() == daemonset_text
