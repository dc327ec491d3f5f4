"""The iptables rule count grows by a sum (issue 18 item 9), on real
iptables in network namespaces made here, through the node-side resync as
the role installs it (test_resync.Agent).

* Real packets: a policy with 2 sources x 2 interfaces x 2 exceptions makes
  the same NAT decisions in the split form (the chain going with -g to
  IP-MASQ-AGENT-SOURCES and IP-MASQ-AGENT-POLICY) as in the one-chain form
  written before, which is restored here by hand, rule for rule, first.
* The shape of the issue's 15 KB config (20 sources x 20 interfaces x 699
  exceptions: 280,002 rules before, whose iptables-save took longer than the
  resync's 90 s) is now 742 rules, applied in one run, and the next run
  writes nothing.
* A file whose iptables form is over the limit is refused before anything
  is written, naming the count and the keys, and the last good
  configuration stays enforced.

iptables-nft only (the backend whose iptables-save slows down fastest);
test_extensions.py moves between the one-chain and the split form on both
iptables backends.  Nothing happens in the root network namespace."""
import contextlib
import os
import types

import pytest

from ipmasq_lab import netlab
from ipmasq_lab.policy_view import CHAIN, JUMP, ours
from ipmasq_lab.topology import NODE_EXT4, NODE_LL4, NO_REPLY, POD4
# autouse: the root namespace stays as it was.
from test_packets import root_namespace_untouched  # noqa: F401 pylint: disable=unused-import
from test_packets_extensions import NONE2, POD2, ExtTopology
from test_resync import Agent

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)')

NOT_LOCAL = '-m addrtype ! --dst-type LOCAL'
C_RET = 'ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE'
C_MASQ = ('ip-masq-agent: outbound traffic should be subject to MASQUERADE (this match must come after '
          'cluster-local CIDR matches)')
C_EXC = 'ip-masq-agent: an exception inside the cluster-local CIDRs is subject to MASQUERADE'
SUBS = [CHAIN + '-SOURCES', CHAIN + '-POLICY', CHAIN + '-REWRITE']
EXIT_CONFIG = 2

# pod (10.244.1.2) is in the second source; pod2 (10.244.2.2) in none.  The
# exceptions: 10.20.0.0/24 (cluster-local2, out by to-cluster, not listed)
# and 169.254.10.0/24 (link-local, out by to-ll, listed).
SOURCES = ['10.244.3.0/24', '10.244.1.0/24']
INTERFACES = ['to-ll', 'to-ext']
EXCEPTIONS = ['10.20.0.0/24', '169.254.10.0/24']
CONFIG = ('nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n'
          'exceptionCIDRs:\n' + ''.join('  - %s\n' % c for c in EXCEPTIONS)
          + 'sourceCIDRs:\n' + ''.join('  - %s\n' % c for c in SOURCES)
          + 'outInterfaces:\n' + ''.join('  - %s\n' % c for c in INTERFACES))

# What each receiver sees, by hand.  From pod: external (out by to-ext) is
# masqueraded by the final rule; link-local (out by to-ll) by its exception;
# cluster-local2 is an exception too, but leaves by to-cluster, which is not
# listed; cluster-local is kept (10.0.0.0/8); other leaves by to-other, not
# listed.  pod2 is no listed source: it keeps its address everywhere.
WANT = {'external': NODE_EXT4, 'cluster-local': POD4, 'cluster-local2': POD4, 'link-local': NODE_LL4,
        'other': POD4}
WANT2 = NONE2


def rule(chain, matches, comment, target):
    return '-A %s %s-m comment --comment "%s" %s %s' % (chain, matches + ' ' if matches else '', comment, NOT_LOCAL,
                                                        target)


def flat_rules():
    """The one chain as the collection wrote it before (and as its old unit
    test listed it): each rewriting rule for every source and interface pair,
    sources outer, interfaces inner."""
    pairs = [(s, i) for s in SOURCES for i in INTERFACES]
    out = [rule(CHAIN, '-s %s -d %s -o %s' % (s, e, i), C_EXC, '-j MASQUERADE') for e in EXCEPTIONS for s, i in pairs]
    out += [rule(CHAIN, '-d ' + c, C_RET, '-j RETURN') for c in ('169.254.0.0/16', '10.0.0.0/8')]
    out += [rule(CHAIN, '-s %s -o %s' % (s, i), C_MASQ, '-j MASQUERADE') for s, i in pairs]
    return out


def our_lines(node_ns, backend):
    return ours(netlab.nat_rules(backend.save(node_ns)))


def agent_for(ns, backend, base):
    return Agent(types.SimpleNamespace(ns=ns, backend=backend, policy='iptables'), base)


@contextlib.contextmanager
def node_agent(backends, tmp_path, config):
    """A node (iptables-nft tools) whose resync has applied ``config``: ``(ns, backend, agent)``."""
    backend = backends['nft']
    with netlab.Netns('node') as ns:
        agent = agent_for(ns, backend, tmp_path)
        agent.write(config)
        agent.run(check_rc=0)
        yield ns, backend, agent


def test_the_split_form_makes_the_same_nat_decisions_as_the_one_chain(tmp_path):
    with ExtTopology.with_tools('nft', ipv6=False) as topo:
        node, backend = topo.node, topo.backend
        # The one-chain form, as written before: (2 exceptions + 1) x 2 sources x 2 interfaces + 2 RETURN.
        flat = flat_rules()
        assert len(flat) == 14
        node.exec([backend.tool('iptables-restore'), '-w', '--noflush'],
                  input='*nat\n:%s - [0:0]\n%s\n%s\nCOMMIT\n' % (CHAIN, '\n'.join(flat), JUMP % (CHAIN, CHAIN)))
        before = (topo.probe_from('pod'), topo.probe_from('pod2'))
        assert before == (WANT, WANT2)
        assert WANT['external'] != NO_REPLY and WANT2['other'] == POD2     # the gates made a difference

        agent = agent_for(node, backend, tmp_path)
        agent.write(CONFIG)
        agent.run(check_rc=0)
        lines = our_lines(node, backend)
        rules = [line for line in lines if line.startswith('-A %s' % CHAIN)]
        # 2 interfaces + 2 sources + (2 exceptions + 2 RETURN + the final rule): a sum.
        assert len(rules) == 9, lines
        assert sorted(line for line in lines if line.startswith(':')) == sorted(':%s -' % c for c in [CHAIN] + SUBS[:2])
        assert rules[:2] == [rule(CHAIN, '-o %s' % i, 'ip-masq-agent: traffic leaving by a listed interface goes '
                                  'on to the source check', '-g %s' % SUBS[0]) for i in INTERFACES]
        assert (topo.probe_from('pod'), topo.probe_from('pod2')) == before

        # In sync: the next cycle reads and writes nothing.
        writes = agent.restores()
        agent.run(check_rc=0)
        assert agent.restores() == writes


def big_config():
    """The issue's shape: 20 sources x 20 interfaces x 699 exceptions, about 15 KB."""
    exceptions = ['10.30.%d.%d/30' % (i // 64, (i % 64) * 4) for i in range(699)]
    text = ('nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n'
            'exceptionCIDRs:\n' + ''.join('  - %s\n' % c for c in exceptions)
            + 'sourceCIDRs:\n' + ''.join('  - 10.%d.0.0/16\n' % (100 + i) for i in range(20))
            + 'outInterfaces:\n' + ''.join('  - uplink%d\n' % i for i in range(20)))
    return text


def test_the_former_280000_rule_config_is_a_sum_and_applies_at_once(backends, tmp_path):
    text = big_config()
    assert 13000 < len(text) < 16000
    with node_agent(backends, tmp_path, text) as (ns, backend, agent):
        lines = our_lines(ns, backend)
        rules = [line for line in lines if line.startswith('-A ')]
        # Before: (699 + 1) x 20 x 20 + 2 = 280,002 rules.  Now: 20 + 20 + 699 + 1 + 2, and the jump.
        assert len(rules) == 742 + 1, len(rules)
        assert sum(1 for line in rules if line.startswith('-A %s -o uplink' % CHAIN)) == 20
        assert sum(1 for line in rules if line.startswith('-A %s -s ' % SUBS[0])) == 20
        writes = agent.restores()
        agent.run(check_rc=0)
        assert agent.restores() == writes


def test_over_the_limit_is_refused_and_the_last_good_configuration_stays(backends, tmp_path):
    with node_agent(backends, tmp_path, CONFIG) as (ns, backend, agent):
        good = backend.save(ns)
        writes = agent.restores()
        # 25,001 exceptions inside 10.0.0.0/8 (about 400 KB, under the file's 1 MB): 25,004 rules.
        exceptions = ['10.%d.%d.%d/32' % (i // 65536, i // 256 % 256, i % 256) for i in range(25001)]
        agent.write('{"nonMasqueradeCIDRs": ["10.0.0.0/8"], "exceptionCIDRs": [%s]}\n'
                    % ', '.join('"%s"' % c for c in exceptions))
        proc = agent.run(check_rc=EXIT_CONFIG)
        said = proc.stdout + proc.stderr
        for fragment in ('this policy takes 25004 iptables rules for IPv4, over the limit of 25000 per family',
                         '(exceptionCIDRs 25001 + 1): 25002', 'Enforcing the last good configuration'):
            assert fragment in said, (fragment, said)
        assert agent.restores() == writes
        assert backend.save(ns) == good


def test_a_switch_of_backend_takes_the_sub_chains_with_the_chain(backends, tmp_path):
    with node_agent(backends, tmp_path, CONFIG) as (ns, backend, agent):
        assert sorted(line for line in our_lines(ns, backend) if line.startswith(':')) == sorted(
            ':%s -' % c for c in [CHAIN] + SUBS[:2])
        agent.run(check_rc=0, backend='nftables')
        assert our_lines(ns, backend) == []
        assert not [line for line in netlab.nat_rules(backend.save(ns)) if CHAIN in line]
        assert 'ip-masq-agent' in ns.exec(['nft', 'list', 'tables']).stdout
        # And back: the chain and its sub-chains again, the table gone.
        agent.run(check_rc=0, backend='iptables')
        assert len([line for line in our_lines(ns, backend) if line.startswith('-A %s' % CHAIN)]) == 9
        assert 'ip-masq-agent' not in ns.exec(['nft', 'list', 'tables']).stdout
