"""What our SNAT policy looks like on a node, in each backend, as the tests
read it and as they expect it.

* iptables: our lines of ``iptables-save -t nat`` (the chain's declaration,
  its rules, the POSTROUTING jumps to it), and the rules as the Kubernetes
  docs write them (:func:`chain_lines`);
* nftables: ``nft list table inet <name>`` as nft itself prints it, read
  into sets, the chain's header and its rules (:func:`nft_view`), and the
  table the tests expect, written out by hand (:func:`nft_expect`): nothing
  here calls the collection's own code, so a test comparing the two can fail.

Also what other tools leave in a node (foreign iptables rules, a foreign nft
table) and the drifts each backend is put through.  Everything runs inside
the test's own namespaces.
"""
import json
import os

from ipmasq_lab import INTEGRATION

GOLDEN = os.path.join(INTEGRATION, 'golden')

# --------------------------------------------------------------------------
# iptables
# --------------------------------------------------------------------------

CHAIN = 'IP-MASQ-AGENT'
RET = ('-m comment --comment "ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE"'
       ' -m addrtype ! --dst-type LOCAL -j RETURN')
MASQ = ('-m comment --comment "ip-masq-agent: outbound traffic should be subject to MASQUERADE'
        ' (this match must come after cluster-local CIDR matches)" -m addrtype ! --dst-type LOCAL -j MASQUERADE')
JUMP = ('-A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL'
        ' destination traffic to our custom %s chain" -m addrtype ! --dst-type LOCAL -j %s')
DEFAULT_CIDRS = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']

# What other tools put in the nat table: Docker, kube-proxy, a user's own rule.
FOREIGN = [
    ['-N', 'KUBE-POSTROUTING'],
    ['-A', 'KUBE-POSTROUTING', '-m', 'mark', '--mark', '0x4000/0x4000', '-j', 'MASQUERADE'],
    ['-I', 'POSTROUTING', '1', '-s', '172.17.0.0/16', '!', '-o', 'docker0', '-j', 'MASQUERADE'],
    ['-I', 'POSTROUTING', '1', '-m', 'comment', '--comment', 'kubernetes postrouting rules',
     '-j', 'KUBE-POSTROUTING'],
    ['-A', 'POSTROUTING', '-o', 'eth9', '-s', '192.0.2.0/24', '-j', 'SNAT', '--to-source', '198.51.100.7'],
]

# A table another tool keeps at the same hook (shaped like flannel's nftables mode).
FOREIGN_NFT = ('table ip foreign-snat {\n'
               '\tchain postrtg {\n'
               '\t\ttype nat hook postrouting priority srcnat; policy accept;\n'
               '\t\tip saddr 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade fully-random\n'
               '\t}\n'
               '}\n')


def chain_lines(cidrs, chain=CHAIN, masq=MASQ):
    return ([':%s -' % chain] + ['-A %s -d %s %s' % (chain, c, RET) for c in cidrs]
            + ['-A %s %s' % (chain, masq)])


# The sub-chains of the split iptables form (issue 18 item 9): the chain's
# name and these suffixes (short chain names; policy.sub_chain_names).
SUB_SUFFIXES = ('-SOURCES', '-POLICY', '-REWRITE')


def ours(rules, chain=CHAIN):
    names = [chain] + [chain + suffix for suffix in SUB_SUFFIXES]
    prefixes = tuple(':%s ' % name for name in names) + tuple('-A %s ' % name for name in names)
    return [r for r in rules if r.startswith(prefixes) or r.endswith('-j ' + chain)]


def not_ours(rules, chain=CHAIN):
    return [r for r in rules if r not in ours(rules, chain)]


def ipt_expect(cidrs, chain=CHAIN):
    """Our lines in iptables-save order: declaration, jump, chain rules."""
    rules = chain_lines(cidrs, chain=chain)
    return [rules[0], JUMP % (chain, chain)] + rules[1:]


def golden(name):
    with open(os.path.join(GOLDEN, name)) as f:
        return [line.rstrip() for line in f.read().splitlines()]


def add_foreign(node, family=4):
    for args in FOREIGN:
        if family == 6:
            args = [a.replace('172.17.0.0/16', 'fd00:17::/64').replace('192.0.2.0/24', '2001:db8:2::/64')
                    .replace('198.51.100.7', '2001:db8:5::7') for a in args]
        node.ipt(*args, family=family)


# --------------------------------------------------------------------------
# nftables
# --------------------------------------------------------------------------

TABLE = 'ip-masq-agent'
NFT_RET = 'return comment "ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE"'
NFT_MASQ_COMMENT = ('comment "ip-masq-agent: outbound traffic should be subject to MASQUERADE (this match must '
                    'come after cluster-local CIDR matches)"')
NFT_LOCAL = 'fib daddr type local return comment "ip-masq-agent: local destinations are never subject to MASQUERADE"'
NFT_HEADER = 'type nat hook postrouting priority srcnat + 1; policy accept;'   # jump_position append, the default


def nft_view(ns, table=TABLE):
    """``nft list table inet <table>`` read into ``{'sets': {name: (type,
    flags, [elements])}, 'chains': {name: (header, [rules])}}``, or None
    when there is no such table.  nft's own text, nothing of ours."""
    proc = ns.exec(['nft', 'list', 'table', 'inet', table], check=False)
    if proc.returncode != 0:
        assert 'No such file or directory' in proc.stderr, proc.stderr
        return None
    view = {'sets': {}, 'chains': {}, 'other': []}
    lines = [line.strip() for line in proc.stdout.splitlines()]
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith('set ') and line.endswith('{'):
            name = line.split()[1]
            type_, flags, elements = None, [], []
            i += 1
            while lines[i] != '}':
                if lines[i].startswith('type '):
                    type_ = lines[i][5:]
                elif lines[i].startswith('flags '):
                    flags = lines[i][6:].split(',')
                elif lines[i].startswith('elements = {'):
                    text = lines[i][len('elements = {'):]
                    while not text.rstrip().endswith('}'):
                        i += 1
                        text += ' ' + lines[i]
                    elements = [e.strip() for e in text.rstrip().rstrip('}').split(',') if e.strip()]
                elif lines[i] and lines[i] != 'auto-merge':
                    view['other'].append(lines[i])
                i += 1
            view['sets'][name] = (type_, flags, elements)
        elif line.startswith('chain ') and line.endswith('{'):
            name = line.split()[1]
            header, rules = None, []
            i += 1
            while lines[i] != '}':
                if lines[i].startswith('type ') and header is None:
                    header = lines[i]
                elif lines[i]:
                    rules.append(lines[i])
                i += 1
            view['chains'][name] = (header, rules)
        elif line and not line.startswith('table ') and line != '}':
            view['other'].append(line)
        i += 1
    return view


def nft_expect(cidrs4=tuple(DEFAULT_CIDRS), cidrs6=None, masq_link_local=False, masq_link_local_ipv6=False,
               masq_rules=None, table=TABLE):
    """The table the tests expect: ``cidrs4``/``cidrs6`` as nft lists the
    elements (sorted, merged by hand where they merge), IPv6 when ``cidrs6``
    is not None; ``masq_rules`` replaces the final masquerade rule(s)."""
    sets = {'nonmasq-ipv4': ('ipv4_addr', ['interval'], list(cidrs4))}
    rules = [NFT_LOCAL]
    if not masq_link_local:
        rules.append('ip daddr 169.254.0.0/16 ' + NFT_RET)
    rules.append('ip daddr @nonmasq-ipv4 ' + NFT_RET)
    if cidrs6 is not None:
        sets['nonmasq-ipv6'] = ('ipv6_addr', ['interval'], list(cidrs6))
        if not masq_link_local_ipv6:
            rules.append('ip6 daddr fe80::/10 ' + NFT_RET)
        rules.append('ip6 daddr @nonmasq-ipv6 ' + NFT_RET)
    if masq_rules is None:
        masq_rules = ['masquerade' if cidrs6 is not None else 'meta nfproto ipv4 masquerade']
    rules.extend('%s %s' % (r, NFT_MASQ_COMMENT) for r in masq_rules)
    return {'sets': sets, 'chains': {'postrouting': (NFT_HEADER, rules)}, 'other': []}


def nft_ruleset(ns):
    """The whole ruleset as JSON, without handles (to compare snapshots)."""
    data = json.loads(ns.exec(['nft', '-j', 'list', 'ruleset']).stdout)

    def strip(obj):
        if isinstance(obj, dict):
            return dict((k, strip(v)) for k, v in obj.items() if k != 'handle')
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj
    return [strip(item) for item in data['nftables'] if 'metainfo' not in item]


def nft_foreign(ns, table=TABLE):
    """Every nft table but ours and iptables-nft's nat tables (which the
    iptables snapshots cover)."""
    return [item for item in nft_ruleset(ns)
            if not _in_table(item, ('inet', table)) and not _in_table(item, ('ip', 'nat'))
            and not _in_table(item, ('ip6', 'nat'))]


def _in_table(item, key):
    obj = next(iter(item.values()))
    family = obj.get('family')
    name = obj.get('table', obj.get('name')) if 'table' not in item else obj.get('name')
    return (family, name) == key


def add_foreign_nft(ns):
    ns.exec(['nft', '-f', '-'], input=FOREIGN_NFT)


# --------------------------------------------------------------------------
# Drift, per backend: what a node can do to our policy
# --------------------------------------------------------------------------

def _jump_args(chain=CHAIN):
    return ['-m', 'comment', '--comment', 'ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination '
            'traffic to our custom %s chain' % chain, '-m', 'addrtype', '!', '--dst-type', 'LOCAL', '-j', chain]


def _ipt_reordered(node):
    node.ipt('-D', CHAIN, '1')
    node.ipt('-A', CHAIN, '-d', '169.254.0.0/16', '-m', 'comment', '--comment',
             'ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE',
             '-m', 'addrtype', '!', '--dst-type', 'LOCAL', '-j', 'RETURN')


def _ipt_chain_deleted(node):
    node.ipt('-D', 'POSTROUTING', *_jump_args())
    node.ipt('-F', CHAIN)
    node.ipt('-X', CHAIN)


def _ipt_wrong_jump(node):
    node.ipt('-D', 'POSTROUTING', *_jump_args())
    node.ipt('-A', 'POSTROUTING', '-o', 'eth0', '-j', CHAIN)


def _nft(*args):
    return lambda node: node.ns.exec(['nft'] + list(args))


def _nft_input(text):
    return lambda node: node.ns.exec(['nft', '-f', '-'], input=text)


def _nft_delete_rule(index):
    def drift(node):
        data = json.loads(node.ns.exec(['nft', '-j', 'list', 'chain', 'inet', TABLE, 'postrouting']).stdout)
        handles = [item['rule']['handle'] for item in data['nftables'] if 'rule' in item]
        node.ns.exec(['nft', 'delete', 'rule', 'inet', TABLE, 'postrouting', 'handle', str(handles[index])])
    return drift


DRIFTS = {
    'iptables': {
        'rule deleted': lambda node: node.ipt('-D', CHAIN, '2'),
        'chain flushed': lambda node: node.ipt('-F', CHAIN),
        'jump deleted': lambda node: node.ipt('-D', 'POSTROUTING', *_jump_args()),
        'jump duplicated': lambda node: node.ipt('-A', 'POSTROUTING', *_jump_args()),
        'foreign rule in the chain': lambda node: node.ipt('-I', CHAIN, '3', '-d', '198.51.100.0/24', '-j',
                                                           'RETURN'),
        'wrong jump': _ipt_wrong_jump,
        'rules reordered': _ipt_reordered,
        'chain deleted': _ipt_chain_deleted,
    },
    'nftables': {
        'set element deleted': _nft('delete', 'element', 'inet', TABLE, 'nonmasq-ipv4', '{', '10.0.0.0/8', '}'),
        'set element added': _nft('add', 'element', 'inet', TABLE, 'nonmasq-ipv4', '{', '203.0.113.0/24', '}'),
        'set flushed': _nft('flush', 'set', 'inet', TABLE, 'nonmasq-ipv4'),
        'rule deleted': _nft_delete_rule(2),
        'chain flushed': _nft('flush', 'chain', 'inet', TABLE, 'postrouting'),
        'table deleted': _nft('delete', 'table', 'inet', TABLE),
        'foreign rule in the chain': _nft('insert', 'rule', 'inet', TABLE, 'postrouting', 'ip', 'daddr',
                                          '198.51.100.0/24', 'return'),
        'foreign chain in the table': _nft_input(
            'table inet %s {\n\tchain sneaky {\n\t\ttype nat hook postrouting priority 50; policy accept;\n'
            '\t\tmasquerade\n\t}\n}\n' % TABLE),
        'table dormant': _nft_input('table inet %s {\n\tflags dormant\n}\n' % TABLE),
    },
}
