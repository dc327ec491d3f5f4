"""The extensions of ipmasq.agent (exception_cidrs, masquerade_cidrs, snat_to,
snat_to_require_local, source_cidrs, out_interfaces; the config-file keys
exceptionCIDRs, sourceCIDRs, snatTo, ...) against real iptables (nf_tables
and legacy) and real nftables inside network namespaces: through the module
(ansible-playbook), the resync and the audit (snat_sources), on every policy
backend (conftest.POLICIES).

Each test is one ansible-playbook run per backend (playbooks/extensions.yml
runs a list of steps: module runs, audits and commands that read or change
the node between two runs), so the whole file costs a few runs per backend.

The expected listings are written out by hand below from the semantics of
the options (docs/docsite/rst/extensions.rst): what ``iptables-save -t nat``
prints of our chain, and what ``nft list table inet ip-masq-agent`` prints.
Nothing here calls the collection's own code."""
import os

import pytest

from ipmasq_lab import netlab
from ipmasq_lab.policy_view import CHAIN, JUMP, ours
from test_resync import Agent, lines

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)')

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, 'playbooks', 'extensions.yml')
SEP = '@@imq-dump@@'

# The node's own addresses (on a veth pair inside its namespace): snat_to
# must name one of them unless snat_to_require_local is false.
SNAT4 = '203.0.113.7'
SNAT6 = '2001:db8::7'

# --------------------------------------------------------------------------
# The comments, as the docs rule format writes them
# --------------------------------------------------------------------------

C_RET = 'ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE'
C_MASQ = ('ip-masq-agent: outbound traffic should be subject to MASQUERADE (this match must come after '
          'cluster-local CIDR matches)')
C_SNAT = ('ip-masq-agent: outbound traffic should be subject to SNAT (this match must come after '
          'cluster-local CIDR matches)')
C_EXC = 'ip-masq-agent: an exception inside the cluster-local CIDRs is subject to MASQUERADE'
C_LISTED = 'ip-masq-agent: a listed destination is subject to MASQUERADE'
C_REWRITE = 'ip-masq-agent: traffic sent to this chain is subject to MASQUERADE'
C_UNLISTED = 'ip-masq-agent: destinations not listed keep their source address'
C_SOURCES = 'ip-masq-agent: traffic from other sources keeps its source address'
C_IFACES = 'ip-masq-agent: traffic leaving by other interfaces keeps its source address'
C_LOCAL = 'ip-masq-agent: local destinations are never subject to MASQUERADE'
NOT_LOCAL = '-m addrtype ! --dst-type LOCAL'


def ipt(rule, comment, target):
    """One rule of our chain as iptables-save prints it: ``rule`` the
    address/interface/protocol matches (may be empty)."""
    return '-A %s %s-m comment --comment "%s" %s %s' % (CHAIN, rule + ' ' if rule else '', comment, NOT_LOCAL,
                                                        target)


def ipt_in(chain, rule, comment, target):
    """``ipt`` for a rule of another chain (a sub-chain of ours)."""
    return ipt(rule, comment, target).replace(CHAIN, chain, 1)


def ipt_chain(*rules):
    """Our iptables-save lines: the declaration, the POSTROUTING jump, the rules."""
    return [':%s -' % CHAIN, JUMP % (CHAIN, CHAIN)] + list(rules)


def ret(cidr):
    return ipt('-d ' + cidr, C_RET, '-j RETURN')


def nft_table(sets, rules):
    """``nft list table inet ip-masq-agent``: ``sets`` (name, type, elements) in order, the chain's rules
    (in order: the interface and source gates, LOCAL, the exceptions, the kept destinations, the rewrite)."""
    out = ['table inet ip-masq-agent {']
    for name, type_, elements in sets:
        out += ['\tset %s {' % name, '\t\ttype %s' % type_, '\t\tflags interval',
                '\t\telements = { %s }' % ', '.join(elements), '\t}', '']
    out += ['\tchain postrouting {', '\t\ttype nat hook postrouting priority srcnat + 1; policy accept;']
    out += ['\t\t' + r for r in rules]
    out += ['\t}', '}']
    return out


LOCAL = 'fib daddr type local return comment "%s"' % C_LOCAL


def nft_ret(match):
    return '%s return comment "%s"' % (match, C_RET)


def nft_with(rule, comment):
    return '%s comment "%s"' % (rule, comment)


PROTOS = ('tcp', 'udp', 'sctp')

# --------------------------------------------------------------------------
# The representative policies and their listings, by hand
# --------------------------------------------------------------------------

CASES = [
    # Exceptions inside the kept 10.0.0.0/8: rewritten before the RETURNs.
    ('exceptions', dict(nonmasquerade_cidrs=['10.0.0.0/8'], exception_cidrs=['10.96.0.0/12', '10.200.1.0/24']), {
        'ipv4': ipt_chain(
            ipt('-d 10.96.0.0/12', C_EXC, '-j MASQUERADE'),
            ipt('-d 10.200.1.0/24', C_EXC, '-j MASQUERADE'),
            ret('169.254.0.0/16'),
            ret('10.0.0.0/8'),
            ipt('', C_MASQ, '-j MASQUERADE')),
        'ipv6': [],
        'nft': nft_table(
            [('nonmasq-ipv4', 'ipv4_addr', ['10.0.0.0/8']),
             ('exceptions-ipv4', 'ipv4_addr', ['10.96.0.0/12', '10.200.1.0/24'])],
            [LOCAL,
             nft_with('ip daddr @exceptions-ipv4 masquerade', C_EXC),
             nft_ret('ip daddr 169.254.0.0/16'),
             nft_ret('ip daddr @nonmasq-ipv4'),
             nft_with('meta nfproto ipv4 masquerade', C_MASQ)]),
    }),
    # Masquerade-only, with to_ports: each listed destination goes (-g) to
    # the rewrite, written once (per protocol with the ports, then the
    # rest) in the sub-chain IP-MASQ-AGENT-REWRITE: 7 rules instead of the
    # 9 of writing it at each listed destination (issue 18 item 9); nothing
    # else is rewritten.
    ('masquerade only', dict(masquerade_cidrs=['198.51.100.0/24', '203.0.113.0/24'], to_ports=['1024-65535']), {
        'ipv4': [':%s -' % CHAIN, ':%s-REWRITE -' % CHAIN, JUMP % (CHAIN, CHAIN),
                 ret('169.254.0.0/16'),
                 ipt('-d 198.51.100.0/24', C_LISTED, '-g %s-REWRITE' % CHAIN),
                 ipt('-d 203.0.113.0/24', C_LISTED, '-g %s-REWRITE' % CHAIN),
                 *[ipt_in(CHAIN + '-REWRITE', '-p %s' % proto if proto else '', C_REWRITE,
                          '-j MASQUERADE' + (' --to-ports 1024-65535' if proto else '')) for proto in PROTOS + (None,)]],
        'ipv6': [],
        'nft': nft_table(
            [('masq-ipv4', 'ipv4_addr', ['198.51.100.0/24', '203.0.113.0/24'])],
            [LOCAL,
             nft_ret('ip daddr 169.254.0.0/16'),
             nft_with('ip daddr != @masq-ipv4 return', C_UNLISTED),
             nft_with('meta nfproto ipv4 meta l4proto { tcp, udp, sctp } masquerade to :1024-65535', C_LISTED),
             nft_with('meta nfproto ipv4 masquerade', C_LISTED)]),
    }),
    # SNAT to the node's address, with ports and random-fully.
    ('snat_to', dict(nonmasquerade_cidrs=['10.0.0.0/8'], snat_to=[SNAT4], random_fully=True, to_ports=['1024-65535']), {
        'ipv4': ipt_chain(
            ret('169.254.0.0/16'),
            ret('10.0.0.0/8'),
            *[ipt('-p ' + proto, C_SNAT, '-j SNAT --to-source 203.0.113.7:1024-65535 --random-fully')
              for proto in PROTOS],
            ipt('', C_SNAT, '-j SNAT --to-source 203.0.113.7 --random-fully')),
        'ipv6': [],
        'nft': nft_table(
            [('nonmasq-ipv4', 'ipv4_addr', ['10.0.0.0/8'])],
            [LOCAL,
             nft_ret('ip daddr 169.254.0.0/16'),
             nft_ret('ip daddr @nonmasq-ipv4'),
             nft_with('meta nfproto ipv4 meta l4proto { tcp, udp, sctp } snat ip to 203.0.113.7:1024-65535 '
                      'fully-random', C_SNAT),
             nft_with('meta nfproto ipv4 snat ip to 203.0.113.7 fully-random', C_SNAT)]),
    }),
    # Only pod traffic leaving by two interfaces: one rule per source x interface.
    ('sources and interfaces', dict(nonmasquerade_cidrs=['10.0.0.0/8'], source_cidrs=['10.244.0.0/16'],
                                    out_interfaces=['eth0', 'ens5']), {
        'ipv4': ipt_chain(
            ret('169.254.0.0/16'),
            ret('10.0.0.0/8'),
            ipt('-s 10.244.0.0/16 -o eth0', C_MASQ, '-j MASQUERADE'),
            ipt('-s 10.244.0.0/16 -o ens5', C_MASQ, '-j MASQUERADE')),
        'ipv6': [],
        'nft': nft_table(
            [('nonmasq-ipv4', 'ipv4_addr', ['10.0.0.0/8']),
             ('sources-ipv4', 'ipv4_addr', ['10.244.0.0/16'])],
            [nft_with('oifname != { "eth0", "ens5" } return', C_IFACES),
             nft_with('ip saddr != @sources-ipv4 return', C_SOURCES),
             LOCAL,
             nft_ret('ip daddr 169.254.0.0/16'),
             nft_ret('ip daddr @nonmasq-ipv4'),
             nft_with('meta nfproto ipv4 masquerade', C_MASQ)]),
    }),
    # Dual stack: SNAT per family, sources per family, one interface.
    ('dual stack', dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/64'], snat_to=[SNAT4, SNAT6],
                        source_cidrs=['10.244.0.0/16', 'fd00:244::/56'], out_interfaces=['eth0']), {
        'ipv4': ipt_chain(
            ret('169.254.0.0/16'),
            ret('10.0.0.0/8'),
            ipt('-s 10.244.0.0/16 -o eth0', C_SNAT, '-j SNAT --to-source 203.0.113.7')),
        'ipv6': ipt_chain(
            ret('fe80::/10'),
            ret('fd00:10::/64'),
            ipt('-s fd00:244::/56 -o eth0', C_SNAT, '-j SNAT --to-source 2001:db8::7')),
        'nft': nft_table(
            [('nonmasq-ipv4', 'ipv4_addr', ['10.0.0.0/8']),
             ('sources-ipv4', 'ipv4_addr', ['10.244.0.0/16']),
             ('nonmasq-ipv6', 'ipv6_addr', ['fd00:10::/64']),
             ('sources-ipv6', 'ipv6_addr', ['fd00:244::/56'])],
            [nft_with('oifname != "eth0" return', C_IFACES),
             nft_with('ip saddr != @sources-ipv4 return', C_SOURCES),
             nft_with('ip6 saddr != @sources-ipv6 return', C_SOURCES),
             LOCAL,
             nft_ret('ip daddr 169.254.0.0/16'),
             nft_ret('ip daddr @nonmasq-ipv4'),
             nft_ret('ip6 daddr fe80::/10'),
             nft_ret('ip6 daddr @nonmasq-ipv6'),
             nft_with('meta nfproto ipv4 snat ip to 203.0.113.7', C_SNAT),
             nft_with('meta nfproto ipv6 snat ip6 to 2001:db8::7', C_SNAT)]),
    }),
]
CASE = dict((name, (args, want)) for name, args, want in CASES)

# snat_to ranges the node does not hold, allowed by snat_to_require_local=false,
# both families, with ports (ip6tables and nft bracket an IPv6 address before a port).
NOT_LOCAL_SNAT = ('not local', dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/64'],
                                    snat_to=['198.51.100.9-198.51.100.10', '2001:db8::9-2001:db8::a'],
                                    to_ports=['1024-65535'], snat_to_require_local=False), {
    'ipv4': ipt_chain(
        ret('169.254.0.0/16'),
        ret('10.0.0.0/8'),
        *[ipt('-p ' + proto, C_SNAT, '-j SNAT --to-source 198.51.100.9-198.51.100.10:1024-65535')
          for proto in PROTOS],
        ipt('', C_SNAT, '-j SNAT --to-source 198.51.100.9-198.51.100.10')),
    'ipv6': ipt_chain(
        ret('fe80::/10'),
        ret('fd00:10::/64'),
        *[ipt('-p ' + proto, C_SNAT, '-j SNAT --to-source [2001:db8::9-2001:db8::a]:1024-65535')
          for proto in PROTOS],
        ipt('', C_SNAT, '-j SNAT --to-source 2001:db8::9-2001:db8::a')),
    'nft': nft_table(
        [('nonmasq-ipv4', 'ipv4_addr', ['10.0.0.0/8']),
         ('nonmasq-ipv6', 'ipv6_addr', ['fd00:10::/64'])],
        [LOCAL,
         nft_ret('ip daddr 169.254.0.0/16'),
         nft_ret('ip daddr @nonmasq-ipv4'),
         nft_ret('ip6 daddr fe80::/10'),
         nft_ret('ip6 daddr @nonmasq-ipv6'),
         nft_with('meta nfproto ipv4 meta l4proto { tcp, udp, sctp } snat ip to 198.51.100.9-198.51.100.10:1024-65535',
                  C_SNAT),
         nft_with('meta nfproto ipv4 snat ip to 198.51.100.9-198.51.100.10', C_SNAT),
         nft_with('meta nfproto ipv6 meta l4proto { tcp, udp, sctp } '
                  'snat ip6 to [2001:db8::9]-[2001:db8::a]:1024-65535', C_SNAT),
         nft_with('meta nfproto ipv6 snat ip6 to 2001:db8::9-2001:db8::a', C_SNAT)]),
})


# --------------------------------------------------------------------------
# Running steps in one play
# --------------------------------------------------------------------------

def give_addresses(node):
    """The node's uplink: a veth pair inside its namespace holding SNAT4 and SNAT6."""
    node.ns.exec(['ip', 'link', 'add', 'uplink', 'type', 'veth', 'peer', 'name', 'uplink-peer'])
    node.ns.exec(['ip', 'link', 'set', 'uplink', 'up'])
    netlab.addr(node.ns, 'uplink', SNAT4 + '/24')
    netlab.addr(node.ns, 'uplink', SNAT6 + '/64')


class Steps:
    """The steps of one play, each with a label; ``run`` returns label -> result."""

    def __init__(self, node):
        self.node = node
        self.steps = []
        self.labels = []

    def _add(self, label, step):
        assert label not in self.labels, label
        self.labels.append(label)
        self.steps.append(step)

    def masq(self, label, args, check=False):
        args = dict(args)
        if self.node.policy == 'nftables':
            args.setdefault('backend', 'nftables')
        self._add(label, {'masq': args, 'check': check})

    def audit(self, label, **args):
        self._add(label, {'audit': args})

    def cmd(self, label, *argv):
        self._add(label, {'argv': list(argv)})

    def sh(self, label, script):
        self._add(label, {'argv': ['/bin/sh', '-c', script]})

    def dump(self, label):
        """Everything: both iptables families of the node's flavour, the nft ruleset, our table."""
        b = self.node.backend
        self.sh(label, '%s -t nat; echo %s; %s -t nat; echo %s; nft list ruleset; echo %s; '
                'nft list table inet ip-masq-agent 2>/dev/null; true'
                % (b.tool('iptables-save'), SEP, b.tool('ip6tables-save'), SEP, SEP))

    def run(self):
        _rc, tasks = netlab.playbook(self.node.ns, PLAYBOOK, extra_vars={'steps': self.steps},
                                     backend=self.node.backend)
        results = [res for name, res in tasks if name.startswith('Step ') and not res.get('skipped')]
        assert len(results) == len(self.steps), [name for name, _res in tasks]
        return dict(zip(self.labels, results))


def parsed(dump):
    """A dump step's output: the saves without their date lines, the ruleset, our table's lines."""
    save4, save6, ruleset, table = (part.strip('\n') for part in dump['stdout'].split(SEP))

    def strip(text):
        return [line for line in text.splitlines() if not line.startswith('#')]
    return {'save4': strip(save4), 'save6': strip(save6), 'ruleset': ruleset,
            'table': [line.rstrip() for line in table.splitlines()]}


def listing(node, dump):
    """Our policy in a dump, in the node's backend's terms."""
    d = parsed(dump)
    return {'ipv4': ours(netlab.nat_rules('\n'.join(d['save4']))),
            'ipv6': ours(netlab.nat_rules('\n'.join(d['save6']))),
            'nft': d['table'] or None}


def expected(node, want):
    if node.policy == 'nftables':
        return {'ipv4': [], 'ipv6': [], 'nft': want['nft']}
    return {'ipv4': want['ipv4'], 'ipv6': want['ipv6'], 'nft': None}


def diff_of(res):
    diff = res['diff']
    return diff[0] if isinstance(diff, list) else diff


# --------------------------------------------------------------------------
# Listings, check mode, idempotence, diff, drift, audit
# --------------------------------------------------------------------------

# Drift after an extended policy, per backend: (case it follows, label, what
# is done, the action the repair reports). NFT_DRIFT_NAMED: what the
# repair's nftables.drift names (IPv4 iptables: the one rule deleted).
IPT_DRIFTS = [
    ('exceptions', 'exception rule deleted', ['-D', CHAIN, '1'],
     'IPv4: rewrite chain %s (4 rules -> 5 rules)' % CHAIN),
    ('sources and interfaces', 'gated rule deleted', ['-D', CHAIN, '4'],
     'IPv4: rewrite chain %s (3 rules -> 4 rules)' % CHAIN),
]
NFT_DRIFTS = [
    ('exceptions', 'exception rule deleted',
     "nft -a list chain inet ip-masq-agent postrouting | sed -n 's/.*@exceptions-ipv4 masquerade .*# handle //p' "
     '| xargs -r -n1 nft delete rule inet ip-masq-agent postrouting handle',
     'nftables: rewrite table inet ip-masq-agent (chain postrouting: 4 rule(s), 5 wanted)'),
    ('exceptions', 'exceptions set flushed', 'nft flush set inet ip-masq-agent exceptions-ipv4',
     'nftables: rewrite table inet ip-masq-agent (set exceptions-ipv4: 0 element(s), 2 wanted)'),
    ('sources and interfaces', 'sources element deleted',
     'nft delete element inet ip-masq-agent sources-ipv4 { 10.244.0.0/16 }',
     'nftables: rewrite table inet ip-masq-agent (set sources-ipv4: 0 element(s), 1 wanted)'),
]
NFT_DRIFT_NAMED = {
    'exception rule deleted': lambda d: (len(d['rules']['missing']) == 1 and '@exceptions-ipv4' in d['rules']['missing'][0]
                                         and d['rules']['extra'] == [] and d['sets'] == {}),
    'exceptions set flushed': lambda d: (d['rules']['missing'] == d['rules']['extra'] == []
                                         and len(d['sets']['exceptions-ipv4']['missing']) == 2
                                         and d['sets']['exceptions-ipv4']['extra'] == []),
    'sources element deleted': lambda d: d['sets'] == {'sources-ipv4': {'missing': ['10.244.0.0/16'], 'extra': []}},
}


# The policies the audit runs after, and how many SNAT rules of ours it lists
# (iptables, nftables): one per family without to_ports; with them, per
# family three protocols and the rest (iptables), or one rule for the three
# and the rest (nftables).
AUDITED = {'dual stack': (2, 2), 'not local': (8, 4)}


def test_listings_check_mode_idempotence_diff_drift_and_audit(pnode):
    """For each policy in turn (each replacing the one before): check mode
    reports a change and writes nothing, the run writes exactly the
    listing, the next run changes nothing.  Drift after an
    extended policy is repaired and reported.  The audit sees our SNAT
    rules as ours."""
    node = pnode
    give_addresses(node)
    s = Steps(node)
    s.dump('start')
    drifts = IPT_DRIFTS if node.policy == 'iptables' else NFT_DRIFTS
    for name, args, _want in CASES + [NOT_LOCAL_SNAT]:
        s.masq(name + ': check', args, check=True)
        s.dump(name + ': after check')
        s.masq(name + ': apply', args)
        s.dump(name + ': listing')
        s.masq(name + ': again', args)
        for case, drift, action, _said in drifts:
            if case != name:
                continue
            if node.policy == 'iptables':
                s.cmd('%s: %s' % (name, drift), node.backend.tool('iptables'), '-w', '-t', 'nat', *action)
            else:
                s.sh('%s: %s' % (name, drift), action)
            s.dump('%s: %s: drifted' % (name, drift))
            s.masq('%s: %s: repair' % (name, drift), args)
            s.dump('%s: %s: repaired' % (name, drift))
            s.masq('%s: %s: again' % (name, drift), args)
        if name in AUDITED:
            s.audit(name + ': audit', ipv6=bool(args.get('ipv6')), on_offenders='report')
    res = s.run()

    before = res['start']
    for name, args, want in CASES + [NOT_LOCAL_SNAT]:
        def step(label, name=name):
            return res['%s: %s' % (name, label)]
        for label in ('check', 'apply', 'again'):
            assert not step(label).get('failed'), (name, label, step(label).get('msg'))
        assert step('check')['changed'] is True, name
        assert parsed(step('after check')) == parsed(before), '%s: check mode changed the node' % name
        assert step('apply')['changed'] is True, name
        assert step('check')['actions'] == step('apply')['actions'], name
        assert listing(node, step('listing')) == expected(node, want), name
        assert step('again')['changed'] is False, (name, step('again').get('actions'))
        before = step('listing')
        for case, drift, _action, said in drifts:
            if case != name:
                continue
            drifted = listing(node, step(drift + ': drifted'))
            assert drifted != expected(node, want), (name, drift)
            repair = step(drift + ': repair')
            assert repair['changed'] is True and repair['actions'] == [said], (name, drift, repair.get('actions'))
            # Which rules: the one deleted is named, nothing else.
            if node.policy == 'iptables':
                named = repair['ipv4']['drift']
                assert named['extra'] == [] and len(named['missing']) == 1, (name, drift, named)
                assert named['missing'][0] in repair['ipv4']['rules'], (name, drift, named)
                assert named['missing'][0] not in listing(node, step(drift + ': drifted'))['ipv4'], (name, drift, named)
            else:
                assert NFT_DRIFT_NAMED[drift](repair['nftables']['drift']), (name, drift, repair['nftables']['drift'])
            before = step(drift + ': repaired')
            assert listing(node, before) == expected(node, want), (name, drift)
            assert step(drift + ': again')['changed'] is False, (name, drift)

    # The diff of a check run shows the new rules (and not in before).
    diff = diff_of(res['snat_to: check'])
    if node.policy == 'iptables':
        new = ipt('-p tcp', C_SNAT, '-j SNAT --to-source 203.0.113.7:1024-65535 --random-fully')
    else:
        new = ('meta nfproto ipv4 meta l4proto { tcp, udp, sctp } snat ip to 203.0.113.7:1024-65535 fully-random'
               ' comment "%s"' % C_SNAT)
    assert new in diff['after'] and new not in diff['before'], diff
    assert '203.0.113.7' not in diff['before']

    # The audit: our SNAT rules are ours, and the only SNAT source.
    label = 'nft' if node.policy == 'nftables' else ('iptables-nft' if node.backend.name == 'nft'
                                                     else 'iptables-legacy')
    for name, counts in AUDITED.items():
        count = counts[node.policy == 'nftables']
        audit = res[name + ': audit']
        assert not audit.get('failed'), audit.get('msg')
        assert audit['only_ours'] is True, (name, audit['summary'], audit['offenders'])
        assert audit['ours_by_family'] == {'ipv4': True, 'ipv6': True}, name
        assert audit['offenders'] == [], name
        sources = audit['sources']
        assert len(sources) == count, (name, sources)
        assert all(src['ours'] and src['owner'] == 'ip-masq-agent' and src['backend'] == label
                   for src in sources), (name, sources)


# --------------------------------------------------------------------------
# Bad input and combinations: a clear error, and nothing changes
# --------------------------------------------------------------------------

BAD_INPUTS = [
    (dict(masquerade_cidrs=['198.51.100.0/24'], nonmasquerade_cidrs=['10.0.0.0/8']),
     ['masquerade_cidrs cannot be combined with nonmasquerade_cidrs']),
    (dict(masquerade_cidrs=['198.51.100.0/24'], exception_cidrs=['10.1.0.0/16']),
     ['masquerade_cidrs cannot be combined with exception_cidrs']),
    (dict(masquerade_cidrs=['198.51.100.0/24'], nomasq_all_reserved_ranges=True),
     ['masquerade_cidrs cannot be combined with nomasq_all_reserved_ranges']),
    (dict(nonmasquerade_cidrs=['10.0.0.0/8'], exception_cidrs=['10.96.0.0/12', '192.168.5.0/24']),
     ['exception_cidrs: 192.168.5.0/24 is not inside nonmasquerade_cidrs']),
    (dict(masq_link_local=True, nonmasquerade_cidrs=['10.0.0.0/8'], exception_cidrs=['169.254.169.254/32']),
     ['exception_cidrs: 169.254.169.254/32 is not inside nonmasquerade_cidrs']),
    (dict(exception_cidrs=['banana']), ['exception_cidrs', "'banana' is not a CIDR"]),
    (dict(snat_to=[SNAT4, '203.0.113.8'], snat_to_require_local=False),
     ["snat_to: '203.0.113.7' and '203.0.113.8' are both IPv4"]),
    (dict(snat_to=[SNAT6]), ["snat_to: '2001:db8::7' is IPv6 but ipv6 is not enabled"]),
    (dict(snat_to=['203.0.113.0/24']), ["snat_to: '203.0.113.0/24' is not an address"]),
    (dict(snat_to=['203.0.113.9-203.0.113.7'], snat_to_require_local=False),
     ["snat_to: '203.0.113.9-203.0.113.7' is a range whose first address comes after its last"]),
    (dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8'], source_cidrs=['10.244.0.0/16']),
     ['source_cidrs lists no IPv6 source while ipv6 is enabled']),
    (dict(source_cidrs=['10.244.0.1/16']), ['source_cidrs', "'10.244.0.1/16' is not aligned"]),
    (dict(out_interfaces=['eth0', 'eth 1']), ["out_interfaces: 'eth 1' is not an interface name"]),
    (dict(out_interfaces=['eth+']), ["out_interfaces: 'eth+' is not an interface name"]),
    (dict(out_interfaces=['a' * 16]), ["out_interfaces: '%s' is not an interface name" % ('a' * 16)]),
    (dict(rule_format='upstream', out_interfaces=['eth0']),
     ['rule_format: upstream', 'no out_interfaces', 'use rule_format docs with out_interfaces']),
    (dict(rule_format='upstream', snat_to=[SNAT4], source_cidrs=['10.244.0.0/16']),
     ['rule_format: upstream', 'no snat_to and no source_cidrs', 'rule_format docs with snat_to, source_cidrs']),
    # snat_to the node does not hold (item 4): refused before anything is read or written.
    (dict(snat_to=['198.51.100.9']), ['snat_to: 198.51.100.9 is not assigned to this node',
                                      'snat_to_require_local']),
    (dict(snat_to=['203.0.113.7-203.0.113.9']), ['snat_to: 203.0.113.7-203.0.113.9 is not assigned to this node',
                                                 '(203.0.113.8-203.0.113.9 are not among its IPv4 addresses']),
    (dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/64'], snat_to=[SNAT4, '2001:db8::99']),
     ['snat_to: 2001:db8::99 is not assigned to this node', 'IPv6 addresses']),
    # Addresses that can never be a source (issue 18 item 6), in the snat_to filter's words: loopback even
    # though lo holds it, and the rest even with snat_to_require_local false.
    (dict(snat_to=['127.0.0.1']), ["snat_to: '127.0.0.1' is a loopback address, which can never be a source address"]),
    (dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/64'], snat_to=[SNAT4, '::1']),
     ["snat_to: '::1' is the loopback address, which can never be a source address"]),
    (dict(snat_to=['0.0.0.0'], snat_to_require_local=False), ["'0.0.0.0' is the unspecified address"]),
    (dict(snat_to=['255.255.255.255'], snat_to_require_local=False), ["'255.255.255.255' is the broadcast address"]),
    (dict(snat_to=['224.0.0.1'], snat_to_require_local=False), ["'224.0.0.1' is a multicast address"]),
    (dict(snat_to=['10.99.0.1-'], snat_to_require_local=False),
     ["snat_to: '10.99.0.1-': a range needs an address on both sides of the dash (first-last)"]),
]


def test_bad_input_fails_clearly_and_changes_nothing(pnode):
    node = pnode
    give_addresses(node)
    node.add_foreign(ipv6=True)
    args, want = CASE['exceptions']
    s = Steps(node)
    s.masq('good', args)
    s.dump('before')
    for n, (bad, _messages) in enumerate(BAD_INPUTS):
        s.masq('bad %d' % n, bad)
    s.dump('after')
    res = s.run()
    assert not res['good'].get('failed'), res['good'].get('msg')
    assert listing(node, res['before']) == expected(node, want)
    for n, (bad, messages) in enumerate(BAD_INPUTS):
        got = res['bad %d' % n]
        assert got.get('failed') is True, (bad, got)
        for m in messages:
            assert m in got['msg'], (bad, m, got['msg'])
        assert 'Nothing was changed.' in got['msg'], got['msg']
        assert 'Traceback' not in got.get('module_stderr', '')
    assert parsed(res['after']) == parsed(res['before'])


# --------------------------------------------------------------------------
# The resync: the config file's extension keys
# --------------------------------------------------------------------------

RESYNC_A = 'nonMasqueradeCIDRs: [10.0.0.0/8]\nexceptionCIDRs:\n  - 10.96.0.0/12\n  - 10.200.1.0/24\n'
RESYNC_B = ('{"nonMasqueradeCIDRs": ["10.0.0.0/8"], "sourceCIDRs": "10.244.0.0/16", '
            '"outInterfaces": ["eth0", "ens5"], "snatTo": null}\n')
RESYNC_SNAT = 'nonMasqueradeCIDRs: [10.0.0.0/8]\nsnatTo: [203.0.113.7]\n'
RESYNC_BAD = [
    ('outInterfaces: ["eth 1"]\n', "outInterfaces: 'eth 1' is not an interface name"),
    ('snatTo: [203.0.113.7, 203.0.113.8]\nsnatToRequireLocal: false\n', "'203.0.113.7' and '203.0.113.8'"),
    ('masqueradeCIDRs: [198.51.100.0/24]\nnonMasqueradeCIDRs: [10.0.0.0/8]\n',
     'masqueradeCIDRs cannot be combined with nonMasqueradeCIDRs'),
    ('sourceCIDRs: [1]\n', 'sourceCIDRs (line 1) must be a list of strings'),
    # Addresses that can never be a source (issue 18 item 6): lo holds 127.0.0.0/8, but it is refused.
    ('snatTo: [127.1.2.3]\n', "snatTo: '127.1.2.3' is a loopback address, which can never be a source address"),
    ('snatTo: [255.255.255.255]\nsnatToRequireLocal: false\n', "snatTo: '255.255.255.255' is the broadcast address"),
    ('snatTo: ["10.99.0.1-"]\nsnatToRequireLocal: false\n', "snatTo: '10.99.0.1-': a range needs an address on both"),
]


def test_resync_extension_keys(pnode, tmp_path):
    """A config file with the extension keys gives the module's listing; an
    invalid value is refused (exit 2) naming it, the last good config stays."""
    node = pnode
    give_addresses(node)
    agent = Agent(node, tmp_path)
    for text, (name, _args, _want) in ((RESYNC_A, CASES[0]), (RESYNC_B, CASES[3])):
        agent.write(text)
        proc = agent.run(check_rc=0)
        assert lines(proc, '<5>applied: '), proc.stderr
        got = _node_listing(node)
        assert got == expected(node, CASE[name][1]), (name, proc.stderr)
    conf = lines(proc, '<5>configuration from')
    assert conf and '"sourceCIDRs":["10.244.0.0/16"]' in conf[0] and '"outInterfaces":["eth0","ens5"]' in conf[0], conf
    assert 'snatTo' not in conf[0], 'a null key is not written back'
    good = node.snapshot()
    state = agent.state_stat()
    for text, reason in RESYNC_BAD:
        agent.write(text)
        proc = agent.run(check_rc=2)
        errors = lines(proc, '<3>')
        assert len(errors) == 1 and reason in errors[0], (text, proc.stderr)
        assert 'Enforcing the last good configuration instead' in errors[0]
        assert node.snapshot() == good and agent.state_stat() == state
    # SNAT from the file: the same rule as the module writes.
    agent.write(RESYNC_SNAT)
    agent.run(check_rc=0)
    want = {
        'ipv4': ipt_chain(ret('169.254.0.0/16'), ret('10.0.0.0/8'), ipt('', C_SNAT, '-j SNAT --to-source 203.0.113.7')),
        'ipv6': [],
        'nft': nft_table([('nonmasq-ipv4', 'ipv4_addr', ['10.0.0.0/8'])],
                         [LOCAL, nft_ret('ip daddr 169.254.0.0/16'), nft_ret('ip daddr @nonmasq-ipv4'),
                          nft_with('meta nfproto ipv4 snat ip to 203.0.113.7', C_SNAT)]),
    }
    assert _node_listing(node) == expected(node, want)


def _node_listing(node):
    """Our policy read straight from the node (outside any play)."""
    table = node.nft('list', 'table', 'inet', 'ip-masq-agent', check=False)
    return {'ipv4': ours(node.rules(4)), 'ipv6': ours(node.rules(6)),
            'nft': [line.rstrip() for line in table.stdout.splitlines()] if table.returncode == 0 else None}


def test_resync_snat_to_not_local_is_refused_and_the_last_good_config_enforced(nft_node, tmp_path):
    node = nft_node
    agent = Agent(node, tmp_path)
    agent.write(RESYNC_A)
    agent.run(check_rc=0)
    good = node.snapshot()
    agent.write('nonMasqueradeCIDRs: [10.0.0.0/8]\nsnatTo: [198.51.100.99]\n')
    node.ipt('-F', CHAIN)
    proc = agent.run()
    assert node.snapshot() == good, 'the drift is repaired with the last good configuration'
    assert proc.returncode == 2, proc.stderr
    assert '198.51.100.99 is not assigned to this node' in proc.stderr
