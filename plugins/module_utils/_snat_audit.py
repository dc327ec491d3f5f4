# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Read-only audit of every source of SNAT on a node.

Lists each MASQUERADE and SNAT rule in the nat tables (iptables, nf_tables
and legacy backends) and in nftables tables with a ``type nat hook
postrouting`` chain, follows jumps and gotos from the postrouting hook to
tell which rules can act on traffic, says who wrote each one (the
ip-masq-agent chain, Docker, flannel, kube-proxy, a CNI plugin, netavark,
libvirt, or unknown) and whether it is allowed next to ours.

Reading only: ``iptables-save -t nat`` (read by the core's
``iptables_save`` reader), ``nft -j list ruleset`` (read by ``nft_json``),
and ``iptables --version``.  A legacy nat table that
the kernel has not instantiated (not listed in /proc/net/ip_tables_names) is
not read, because reading it would create it.

Standard library only: this file runs on managed nodes.
"""

import collections
import ipaddress
import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.xtables_kernel import chains as kernel_chains
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_tools import PROC_TABLES, Tools, read_proc
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_save import parse_save
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nft_json import (
    involves,
    parse_nft,
    render_expr,
    render_rule,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import (
    DEFAULT_CHAIN,
    sub_chain_names,
    validate_chain_name,
)

OWNERS = ('ip-masq-agent', 'docker', 'flannel', 'kube-proxy', 'cni', 'netavark', 'libvirt', 'unknown')
# Owners whose mark- or DNAT-gated masquerade only rewrites service or
# port-forwarded connections (kube-proxy's 0x4000, CNI portmap's and
# netavark's 0x2000 hostport marks).
SERVICE_OWNERS = frozenset(('kube-proxy', 'cni', 'netavark'))
SNAT_TARGETS = ('MASQUERADE', 'SNAT')
REACHABLE_ONLY_TARGETS = ('NETMAP',)   # NETMAP rewrites the source only when reached from POSTROUTING
NFT_FAMILIES = {'ip': 'ipv4', 'ip6': 'ipv6', 'inet': 'inet'}
FAMILY_NAMES = {4: 'ipv4', 6: 'ipv6'}
ALLOW_KEYS = ('owner', 'chain', 'table', 'regex', 'reason')

HINTS = {
    'ip-masq-agent': ('a second ip-masq-agent chain (left by an earlier run under another chain name?): '
                      'remove it with ipmasq.agent.masq_chain state=absent chain=%(chain)s'),
    'docker': ('Docker masquerades this bridge network: set "ip-masq": false in /etc/docker/daemon.json '
               'and restart Docker (default bridge); a user-defined network needs '
               'com.docker.network.bridge.enable_ip_masquerade=false (recreate the network)'),
    'flannel': ('flanneld runs with --ip-masq: remove the flag (FLANNEL_OPTIONS, the unit, or '
                'FLANNEL_IPMASQ) and delete the stale FLANNEL-POSTRTG chain, or in nftables mode the postrtg '
                'chain of the flannel-ipv4/flannel-ipv6 tables: switching the flag off does not remove them '
                '(ipmasq.agent.flannel_ip_masq does all of it)'),
    'kube-proxy': ('a kube-proxy rule that is not limited to marked service traffic: check kube-proxy\'s '
                   '--masquerade-all and --cluster-cidr settings'),
    'cni': ('a CNI network with "ipMasq": true: set "ipMasq": false in its file under /etc/cni/net.d '
            '(new containers get no rule; remove the rules of running ones)'),
    'netavark': ('podman (netavark) masquerades this network: allow owner netavark if its containers '
                 'may be masqueraded, or run them on a network without outbound NAT'),
    'libvirt': ('a libvirt NAT network: use <forward mode="route"/> or mode="open" in its XML '
                '(virsh net-edit), or allow owner libvirt'),
    'unknown': ('find the tool that writes this rule and switch its masquerading off, or allow it '
                '(allow: [{chain: %(chain)s}] or a regex on the rule)'),
}

_DOCKER_IFACE_RE = re.compile(r'^(docker0|docker_gwbridge|br-[0-9a-f]{12})$')
_CHAIN_OWNERS = (
    ('KUBE-', 'kube-proxy'),
    ('FLANNEL', 'flannel'),
    ('DOCKER', 'docker'),
    ('CNI-', 'cni'),
    ('NETAVARK', 'netavark'),
    ('LIBVIRT', 'libvirt'),
    ('IP-MASQ', 'ip-masq-agent'),
)
_TABLE_OWNERS = (
    ('docker', 'docker'),
    ('flannel', 'flannel'),
    ('netavark', 'netavark'),
    ('kube-proxy', 'kube-proxy'),
    ('libvirt', 'libvirt'),
    ('cni', 'cni'),
    ('ip-masq-agent', 'ip-masq-agent'),
)
_IFACE_OWNERS = (
    ('cni', 'cni'),
    ('podman', 'netavark'),
    ('virbr', 'libvirt'),
    ('flannel', 'flannel'),
)
# Well-known default subnets: libvirt's default network and Docker's default bridge.
DEFAULT_SUBNETS = ((ipaddress.ip_network('192.168.122.0/24'), 'libvirt'),
                   (ipaddress.ip_network('172.17.0.0/16'), 'docker'))


# --------------------------------------------------------------------------
# The allow list
# --------------------------------------------------------------------------

class AllowEntry:
    def __init__(self, index, owner=None, chain=None, table=None, regex=None, reason=None):
        self.index = index
        self.owner = owner
        self.chain = chain
        self.table = table
        self.pattern = regex
        self.regex = re.compile(regex) if regex is not None else None
        self.reason = reason

    def label(self):
        keys = (('owner', self.owner), ('chain', self.chain), ('table', self.table), ('regex', self.pattern))
        parts = ['%s=%s' % (k, v) for k, v in keys if v is not None]
        text = 'allow[%d] (%s)' % (self.index, ', '.join(parts))
        return text + (': ' + self.reason if self.reason else '')

    def matches(self, src):
        if self.owner is not None and src['owner'] != self.owner:
            return False
        if self.chain is not None and self.chain != src['chain'] and self.chain not in src['path'][1:]:
            return False
        if self.table is not None and self.table not in (src['table'], src['table'].split(' ', 1)[-1]):
            return False
        if self.regex is not None and not self.regex.search(src['rule']):
            return False
        return True


def parse_allow(entries):
    """Validate the ``allow`` option.  Each entry is an owner name, a chain
    name, or a dict with any of ``owner``, ``chain``, ``table``, ``regex``
    (all given keys must match) and an optional ``reason``."""
    if entries is None:
        return []
    if not isinstance(entries, (list, tuple)):
        raise MasqError('allow: must be a list of owner names, chain names or dicts, got %r.' % (entries,))
    parsed = []
    errors = []
    for index, entry in enumerate(entries):
        if isinstance(entry, str):
            text = entry.strip()
            if not text:
                errors.append('allow[%d] is empty' % index)
            elif text.lower() in OWNERS:
                parsed.append(AllowEntry(index, owner=text.lower()))
            else:
                parsed.append(AllowEntry(index, chain=text))
            continue
        if not isinstance(entry, dict):
            errors.append('allow[%d] is %r: use a string or a dict' % (index, entry))
            continue
        unknown = sorted(str(k) for k in entry if k not in ALLOW_KEYS)
        if unknown:
            errors.append('allow[%d] has unknown key(s) %s (known: %s)'
                          % (index, ', '.join(unknown), ', '.join(ALLOW_KEYS)))
            continue
        values = {}
        for key in ALLOW_KEYS:
            value = entry.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or not value.strip():
                errors.append('allow[%d].%s must be a non-empty string, got %r' % (index, key, value))
                value = None
            values[key] = value
        if any(v is None for v in values.values()):
            continue
        if not any(k in values for k in ('owner', 'chain', 'table', 'regex')):
            errors.append('allow[%d] needs at least one of owner, chain, table, regex' % index)
            continue
        if 'owner' in values:
            values['owner'] = values['owner'].strip().lower()
            if values['owner'] not in OWNERS:
                errors.append('allow[%d].owner %r is not one of %s' % (index, entry['owner'], ', '.join(OWNERS)))
                continue
        if 'regex' in values:
            try:
                re.compile(values['regex'])
            except re.error as e:
                errors.append('allow[%d].regex %r does not compile: %s' % (index, values['regex'], e))
                continue
        parsed.append(AllowEntry(index, **values))
    if errors:
        raise MasqError('allow: %s.' % '; '.join(errors))
    return parsed


# --------------------------------------------------------------------------
# Conditions shared by both parsers: what a rule (and the jumps that lead to
# it) require of a packet.
# --------------------------------------------------------------------------

class Cond:
    """The matches of one rule that the audit looks at."""

    def __init__(self):
        self.comments = []
        self.ifaces = []
        self.sources = []        # (negated, text)
        self.dests = []          # (negated, text)
        self.mark = False        # needs a mark set
        self.dnat = False        # needs DNAT conntrack state
        self.local_src = False   # needs a local source address
        self.hairpin_set = False

    def scope(self):
        if self.local_src or any(not neg and _is_loopback(s) for neg, s in self.sources):
            return 'host'
        if self.hairpin_set:
            return 'hairpin'
        pos_src = [s for neg, s in self.sources if not neg]
        pos_dst = [d for neg, d in self.dests if not neg]
        if any(_single_host(s) and _single_host(s) == _single_host(d) for s in pos_src for d in pos_dst):
            return 'hairpin'
        if self.mark or self.dnat:
            return 'service'
        return 'egress'


def _net(text):
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _single_host(text):
    net = _net(text)
    if net is not None and net.num_addresses == 1:
        return net.network_address
    return None


def _is_loopback(text):
    net = _net(text)
    return net is not None and net.is_loopback


def _combine(conds):
    out = Cond()
    for c in conds:
        out.comments.extend(c.comments)
        out.ifaces.extend(c.ifaces)
        out.sources.extend(c.sources)
        out.dests.extend(c.dests)
        out.mark = out.mark or c.mark
        out.dnat = out.dnat or c.dnat
        out.local_src = out.local_src or c.local_src
        out.hairpin_set = out.hairpin_set or c.hairpin_set
    return out


# --------------------------------------------------------------------------
# iptables-save
# --------------------------------------------------------------------------

class IptRule:
    """One rule of the one reader (``iptables_save.Rule``), with what the audit looks at."""

    def __init__(self, rule):
        self.chain = rule.chain
        self.index = rule.index
        self.line = rule.line
        self.target = None
        self.goto = False
        self.cond = Cond()
        self.gate_return = False   # "-m mark ! --mark X -j RETURN" and nothing else
        self._parse(list(rule.words))

    def _parse(self, tokens):
        cond = self.cond
        other = 0
        neg_mark_only = False
        i = 0
        neg = False
        while i < len(tokens):
            tok = tokens[i]
            if tok == '!':
                neg = True
                i += 1
                continue
            if tok in ('-j', '--jump', '-g', '--goto'):
                self.target = tokens[i + 1] if i + 1 < len(tokens) else None
                self.goto = tok in ('-g', '--goto')
                break
            values = []
            j = i + 1
            if tok == '--comment':
                values = tokens[j:j + 1]
                j += 1
            else:
                while j < len(tokens) and tokens[j] != '!' and not tokens[j].startswith('-'):
                    values.append(tokens[j])
                    j += 1
            value = values[0] if values else ''
            if tok == '--comment':
                cond.comments.append(value)
            elif tok in ('-s', '--source'):
                cond.sources.append((neg, value))
                other += 1
            elif tok in ('-d', '--destination'):
                cond.dests.append((neg, value))
                other += 1
            elif tok in ('-i', '--in-interface', '-o', '--out-interface'):
                cond.ifaces.append(value)
                other += 1
            elif tok == '--mark':
                if neg:
                    neg_mark_only = True
                else:
                    cond.mark = True
            elif tok == '--ctstate' and not neg and 'DNAT' in value.split(','):
                cond.dnat = True
                other += 1
            elif tok == '--src-type' and not neg and 'LOCAL' in value.split(','):
                cond.local_src = True
                other += 1
            elif tok == '--match-set' and not neg and re.search(r'LOOP-?BACK|HAIRPIN', value, re.I):
                cond.hairpin_set = True
                other += 1
            elif tok not in ('-m', '--match'):
                other += 1
            neg = False
            i = j
        self.gate_return = self.target == 'RETURN' and neg_mark_only and other == 0 and not cond.mark


class IptTable:
    """The nat table of one ``iptables-save`` output, as the audit walks it."""

    def __init__(self, text):
        table = parse_save(text)
        self.version = table.version
        self.backend = table.backend
        self.incompatible = bool(table.incomplete)
        self.builtin = set(name for name in table.chains if table.builtin(name))
        self.chains = collections.OrderedDict(
            (name, [IptRule(rule) for rule in rules]) for name, rules in table.chains.items())


def _bfs(starts, edges):
    """Breadth-first walk.  ``edges(node)`` yields ``(via, next_node)``.
    Returns {node: [(node0, via0), ..., (node, None)]}, shortest path first
    found; safe against cycles."""
    paths = {}
    queue = collections.deque()
    for start in starts:
        if start not in paths:
            paths[start] = [(start, None)]
            queue.append(start)
    while queue:
        node = queue.popleft()
        for via, nxt in edges(node):
            if nxt in paths:
                continue
            paths[nxt] = paths[node][:-1] + [(node, via), (nxt, None)]
            queue.append(nxt)
    return paths


def _gated_before(rules, index, is_gate):
    return any(is_gate(r) for r in rules[:index])


def audit_iptables(text, family, backend, chain):
    """The SNAT sources in one ``iptables-save -t nat`` output."""
    table = IptTable(text)

    def edges(name):
        for rule in table.chains.get(name, []):
            if rule.target in table.chains and rule.target not in table.builtin:
                yield rule, rule.target

    paths = _bfs(['POSTROUTING'] if 'POSTROUTING' in table.chains else [], edges)
    # Our chain, and the sub-chains it goes to (the split form of iptables.chains).
    ours = set([chain]) | set(name for name in sub_chain_names(chain).values()
                              if chain in [hop for hop, _via in paths.get(name, ())])
    sources = []
    for name, rules in table.chains.items():
        path = paths.get(name)
        for rule in rules:
            if rule.target not in SNAT_TARGETS and not (path and rule.target in REACHABLE_ONLY_TARGETS):
                continue
            hops = path or [(name, None)]
            via = [r for _n, r in hops if r is not None]
            cond = _combine([r.cond for r in via] + [rule.cond])
            gate = any(_gated_before(table.chains[r.chain], r.index, lambda x: x.gate_return)
                       for r in via + [rule])
            src = _source(family=FAMILY_NAMES[family], backend=backend, table='nat', chain=name,
                          rule=rule.line, target=rule.target, path=[n for n, _r in hops],
                          reachable=path is not None, cond=cond, gated=gate, our_chain=chain)
            src['ours'] = name in ours
            sources.append(src)
    return sources


# --------------------------------------------------------------------------
# nft -j list ruleset
# --------------------------------------------------------------------------

def _nft_targets(rule_expr, maps):
    """Chains a rule jumps or goes to, also through anonymous and named verdict maps."""
    found = []

    def walk(e, in_vmap_data=False):
        if isinstance(e, dict):
            for k, v in e.items():
                if k in ('jump', 'goto') and isinstance(v, dict) and 'target' in v:
                    found.append(v['target'])
                elif k == 'vmap' and isinstance(v, dict):
                    walk(v.get('data'), True)
                else:
                    walk(v, in_vmap_data)
        elif isinstance(e, list):
            for x in e:
                walk(x, in_vmap_data)
        elif isinstance(e, str) and in_vmap_data and e.startswith('@'):
            walk(maps.get(e[1:], []))
    walk(rule_expr)
    return found


def _nft_snat_kind(rule_expr):
    for s in rule_expr:
        if not isinstance(s, dict):
            continue
        if 'masquerade' in s:
            return 'MASQUERADE'
        if 'snat' in s:
            return 'SNAT'
        xt = s.get('xt')
        if isinstance(xt, dict) and xt.get('type') == 'target' and xt.get('name') in SNAT_TARGETS:
            return xt['name']
    return None


def _nft_cond(rule_expr, comment):
    cond = Cond()
    if comment:
        cond.comments.append(comment)
    for s in rule_expr:
        if not isinstance(s, dict):
            continue
        m = s.get('match')
        if isinstance(m, dict):
            left, right, op = m.get('left'), m.get('right'), m.get('op', '==')
            neg = op == '!='
            if involves(left, 'meta', 'iifname') or involves(left, 'meta', 'oifname'):
                if isinstance(right, str):
                    cond.ifaces.append(right)
            elif isinstance(left, dict) and 'payload' in left and isinstance(left['payload'], dict):
                field = left['payload'].get('field')
                if isinstance(right, (str, dict)) and not (isinstance(right, str) and right.startswith('@')):
                    text = render_expr(right)
                    if field == 'saddr':
                        cond.sources.append((neg, text))
                    elif field == 'daddr':
                        cond.dests.append((neg, text))
            elif involves(left, 'meta', 'mark'):
                if (op == '==' and right != 0) or (op == '!=' and right == 0):
                    cond.mark = True
            elif involves(left, 'ct', 'status'):
                if op in ('==', 'in') and 'dnat' in (right if isinstance(right, list) else [right]):
                    cond.dnat = True
            elif involves(left, 'fib') and op == '==' and right == 'local':
                fib = left.get('fib', {}) if isinstance(left, dict) else {}
                if 'saddr' in (fib.get('flags') or []):
                    cond.local_src = True
            if isinstance(right, str) and right.startswith('@') and re.search(r'hairpin|loop-?back', right, re.I) \
                    and not neg:
                cond.hairpin_set = True
        v = s.get('vmap')
        if isinstance(v, dict) and (involves(v.get('key'), 'meta', 'iifname') or
                                    involves(v.get('key'), 'meta', 'oifname')):
            data = v.get('data')
            if isinstance(data, dict) and isinstance(data.get('set'), list):
                cond.ifaces.extend(i[0] for i in data['set'] if isinstance(i, list) and isinstance(i[0], str))
    return cond


def _nft_gate_return(rule):
    """``meta mark & X == 0 return`` (and nothing but counters): what follows sees only marked packets."""
    expr = [s for s in rule.get('expr', []) if not (isinstance(s, dict) and 'counter' in s)]
    if len(expr) != 2 or not isinstance(expr[1], dict) or 'return' not in expr[1]:
        return False
    m = expr[0].get('match') if isinstance(expr[0], dict) else None
    return isinstance(m, dict) and involves(m.get('left'), 'meta', 'mark') and m.get('op') == '==' \
        and m.get('right') == 0


def audit_nft_table(t, chain):
    """The SNAT sources of one nft table."""
    starts = [n for n, c in t.chains.items() if c.get('type') == 'nat' and c.get('hook') == 'postrouting']

    def edges(name):
        for index, rule in enumerate(t.rules.get(name, [])):
            for target in _nft_targets(rule.get('expr', []), t.maps):
                if target in t.rules:
                    yield (name, index), target

    paths = _bfs(starts, edges)
    family = NFT_FAMILIES.get(t.family, t.family)
    table_name = '%s %s' % (t.family, t.name)
    ours_table = t.name.lower() == chain.lower()
    sources = []
    for name, rules in t.rules.items():
        path = paths.get(name)
        for index, rule in enumerate(rules):
            expr = rule.get('expr', [])
            target = _nft_snat_kind(expr)
            if target is None:
                continue
            hops = path or [(name, None)]
            via = [(n, v) for n, v in hops if v is not None]
            conds = [_nft_cond(t.rules[n][v[1]].get('expr', []), t.rules[n][v[1]].get('comment'))
                     for n, v in via]
            cond = _combine(conds + [_nft_cond(expr, rule.get('comment'))])
            gate = any(_gated_before(t.rules[c], i, _nft_gate_return)
                       for c, i in [v for _n, v in via] + [(name, index)])
            src = _source(family=family, backend='nft', table=table_name, chain=name,
                          rule=render_rule(rule), target=target, path=[n for n, _v in hops],
                          reachable=path is not None, cond=cond, gated=gate, our_chain=chain,
                          nft_table=t.name)
            src['handle'] = rule.get('handle')
            src['ours'] = ours_table
            if ours_table:
                src['owner'] = 'ip-masq-agent'
            sources.append(src)
    return sources


# --------------------------------------------------------------------------
# Attribution
# --------------------------------------------------------------------------

def _owner_from_chain(name, our_chain):
    if name == our_chain:
        return 'ip-masq-agent'
    upper = name.upper()
    for prefix, owner in _CHAIN_OWNERS:
        if upper.startswith(prefix):
            return owner
    return None


def _owner_from_comment(comment):
    c = comment.strip()
    low = c.lower()
    if low.startswith('ip-masq-agent:'):
        return 'ip-masq-agent'
    if low.startswith('flanneld'):
        return 'flannel'
    if low.startswith('kubernetes ') or low.startswith('kube '):
        return 'kube-proxy'
    if 'netavark' in low:
        return 'netavark'
    if low.startswith('cni ') or re.match(r'^name: ".*" id: ".*"$', c) or re.search(r', net: .*, if: .*, id: ', c):
        return 'cni'
    return None


def _owner_from_iface(iface):
    name = iface.rstrip('+')
    if _DOCKER_IFACE_RE.match(name):
        return 'docker'
    for prefix, owner in _IFACE_OWNERS:
        if name.startswith(prefix):
            return owner
    return None


def attribute(path, cond, our_chain, nft_table=None):
    """Who wrote a rule: by nft table name, then chain names (innermost
    first), comments, interfaces, and well-known default subnets."""
    if nft_table is not None:
        low = nft_table.lower()
        for fragment, owner in _TABLE_OWNERS:
            if fragment in low:
                return owner
    for name in reversed(path):
        owner = _owner_from_chain(name, our_chain)
        if owner:
            return owner
    for comment in reversed(cond.comments):
        owner = _owner_from_comment(comment)
        if owner:
            return owner
    for iface in cond.ifaces:
        owner = _owner_from_iface(iface)
        if owner:
            return owner
    for neg, text in cond.sources:
        net = _net(text)
        for subnet, owner in DEFAULT_SUBNETS:
            if not neg and net is not None and net.version == 4 and net.subnet_of(subnet):
                return owner
    return 'unknown'


def _source(family, backend, table, chain, rule, target, path, reachable, cond, gated, our_chain,
            nft_table=None):
    scope = cond.scope()
    if scope == 'egress' and gated:
        scope = 'service'
    owner = attribute(path, cond, our_chain, nft_table)
    return {
        'family': family,
        'backend': backend,
        'table': table,
        'chain': chain,
        'rule': rule,
        'target': target,
        'owner': owner,
        'path': path,
        'reachable': reachable,
        'scope': scope,
        'ours': False,
        'allowed': False,
        'allowed_by': None,
        'hint': None,
        'handle': None,
    }


def judge(sources, allow):
    """Set ``allowed``, ``allowed_by`` and ``hint`` on every source."""
    for src in sources:
        by = None
        if src['ours']:
            by = 'ours'
        elif src['scope'] == 'host':
            by = 'host: matches only packets with a local source address'
        elif src['scope'] == 'hairpin':
            by = 'hairpin: a connection back to its own source'
        elif src['scope'] == 'service' and src['owner'] in SERVICE_OWNERS:
            by = '%s service or port-forward traffic (packet mark or DNAT state)' % src['owner']
        else:
            for entry in allow:
                if entry.matches(src):
                    by = entry.label()
                    break
        src['allowed'] = by is not None
        src['allowed_by'] = by
        if by is None:
            src['hint'] = HINTS[src['owner']] % {'chain': src['chain']}
    return sources


# --------------------------------------------------------------------------
# Reading the node
# --------------------------------------------------------------------------

def _variant_find(find, variant):
    def finder(name):
        return find(name.replace('tables', 'tables-%s' % variant, 1))
    return finder


def _backend_of(tools, run):
    """'nf_tables' or 'legacy' from ``iptables --version``, without touching any table."""
    if not tools.iptables:
        return None
    rc, out, err = run([tools.iptables, '--version'])
    if rc != 0:
        return None
    text = out or err or ''
    return 'nf_tables' if 'nf_tables' in text else 'legacy'


def _read_one(tools, family, run, expect, notes, proc_read, commands):
    """Save the nat table of ``tools`` (one backend) when it can hold rules.
    Returns ``(backend, text)``; ``text`` is None when the table was not read."""
    backend = expect
    if backend is None and tools.iptables:
        commands.append('%s --version' % tools.iptables)
        backend = _backend_of(tools, run)
    if backend == 'legacy' and 'nat' not in proc_read(PROC_TABLES[family]):
        notes.append('IPv%d: the legacy nat table is not loaded in the kernel (%s does not list it): '
                     'it holds no rules, and reading it would create it; skipped.' % (family, PROC_TABLES[family]))
        return backend, None
    commands.append('%s -t nat' % tools.save_bin)
    text = tools.save_text()
    return IptTable(text).backend or backend or 'legacy', text


def collect(run, find, ipv6=False, include_nft='auto', proc_read=None):
    """Read every nat table the node has.

    Returns ``(snapshots, nft_tables, notes, commands, tools_found)``;
    ``snapshots`` is a list of ``(family, backend, text)``, ``nft_tables``
    None when nft was not read."""
    proc_read = proc_read or read_proc
    notes = []
    commands = []
    snapshots = []
    tools_found = False
    families = (4, 6) if ipv6 else (4,)
    for family in families:
        considered = set()
        candidates = [(Tools(family, run, find), None)]
        for variant, backend in (('nft', 'nf_tables'), ('legacy', 'legacy')):
            candidates.append((Tools(family, run, _variant_find(find, variant)), backend))
        for tools, expect in candidates:
            if not tools.save_bin or (expect is not None and expect in considered):
                continue
            tools_found = True
            try:
                backend, text = _read_one(tools, family, run, expect, notes, proc_read, commands)
            except MasqError as e:
                if family == 4 and expect is None:
                    raise
                notes.append('IPv%d: %s; skipped.' % (family, e.msg))
                if expect is None:
                    break   # no usable ip6tables (no IPv6 in this kernel?)
                continue
            considered.add(backend)
            if text is not None:
                snapshots.append((family, backend, text))
        if not considered and family == 4:
            notes.append('IPv4: iptables-save not found; only nft tables were audited.')
    nft_tables = None
    if include_nft != 'never':
        nft = find('nft')
        if not nft:
            if include_nft == 'always':
                raise MasqError('include_nft=always but the nft command was not found on the node; '
                                'install the nftables package or set include_nft=auto.')
            notes.append('nft not found: tables created with nft directly were not audited.')
        else:
            tools_found = True
            argv = [nft, '-j', 'list', 'ruleset']
            commands.append(' '.join(argv))
            rc, out, err = run(argv)
            if rc != 0:
                msg = '%s failed (rc=%d): %s' % (' '.join(argv), rc, (err or out).strip())
                if include_nft == 'always':
                    raise MasqError(msg, cmd=' '.join(argv), rc=rc, stdout=out, stderr=err)
                notes.append(msg + '; nft tables were not audited.')
            else:
                nft_tables = parse_nft(out or '{}')
    return snapshots, nft_tables, notes, commands, tools_found


def analyse(snapshots, nft_tables, chain=DEFAULT_CHAIN, ipv6=False, allow=None, notes=None):
    """Turn what was read into the module's result (pure; tested directly)."""
    chain = validate_chain_name(chain)
    allow_entries = parse_allow(allow)
    notes = list(notes or [])
    families = (4, 6) if ipv6 else (4,)
    sources = []
    compat = set()
    audited = []
    for family, backend, text in snapshots:
        table = IptTable(text)
        label = 'iptables-nft' if backend == 'nf_tables' else 'iptables-legacy'
        if backend == 'nf_tables':
            if table.incompatible:
                notes.append('IPv%d: iptables-nft cannot show every chain of its nat table (incompatible '
                             'nft chains): that table is read from nft instead.' % family)
            else:
                compat.add(('ip' if family == 4 else 'ip6', 'nat'))
        audited.append('IPv%d nat table (%s)' % (family, label))
        sources.extend(audit_iptables(text, family, label, chain))
    if nft_tables is not None:
        names = []
        for (fam, name), t in nft_tables.items():
            if fam not in NFT_FAMILIES:
                continue
            if fam == 'ip6' and 6 not in families:
                continue
            if (fam, name) in compat:
                continue   # the same rules iptables-nft-save showed
            found = audit_nft_table(t, chain)
            has_nat = any(c.get('type') == 'nat' for c in t.chains.values())
            if found or has_nat:
                names.append('%s %s' % (fam, name))
            sources.extend(found)
        audited.append('nft ruleset (%s)' % (', '.join(names) if names else 'no other nat tables'))
    judge(sources, allow_entries)
    return _result(sources, chain, families, audited, notes)


def _result(sources, chain, families, audited, notes):
    offenders = [s for s in sources if s['reachable'] and not s['allowed']]
    ours_by_family = {}
    for family in families:
        name = FAMILY_NAMES[family]
        ours_by_family[name] = any(s['ours'] and s['reachable'] and s['family'] in (name, 'inet')
                                   for s in sources)
    ours_present = all(ours_by_family.values())
    # Our policy lives in one backend: an iptables chain of ours and an nft
    # table of ours at the same time is a switch left half done (or a
    # DaemonSet still writing its chain beside our table).
    ours_backends = sorted(set('nftables' if s['backend'] == 'nft' else 'iptables'
                               for s in sources if s['ours'] and s['reachable']))
    # The legacy nat table and iptables-nft's are both traversed: ours in each
    # is two policies too (a chain left behind when the node's iptables moved).
    ours_in = _ours_in(sources)
    only_ours = ours_present and not offenders and len(ours_backends) < 2 and len(ours_in) < 2
    return {
        'changed': False,
        'chain': chain,
        'sources': sources,
        'offenders': offenders,
        'ours_present': ours_present,
        'ours_by_family': ours_by_family,
        'ours_backends': ours_backends,
        'ours_in': ours_in,
        'only_ours': only_ours,
        'summary': summary(sources, offenders, ours_by_family, chain, ours_backends),
        'audited': audited,
        'notes': notes,
    }


def _ours_in(sources):
    """Where ours is reachable: V(iptables-legacy), V(iptables-nft) and/or V(nftables)."""
    return sorted(set('nftables' if s['backend'] == 'nft' else s['backend']
                      for s in sources if s['ours'] and s['reachable']))


def summary(sources, offenders, ours_by_family, chain, ours_backends=()):
    parts = []
    missing = [f for f, present in sorted(ours_by_family.items()) if not present]
    if missing:
        parts.append('%s masquerades nothing in %s (chain missing, empty, or not reached from POSTROUTING)'
                     % (chain, ' and '.join(m.replace('ip', 'IP') for m in missing)))
    if len(ours_backends) > 1:
        parts.append('our policy is in both iptables and nftables')
    elif len(_ours_in(sources)) > 1:
        parts.append('our chain is in both the iptables-legacy and the iptables-nft nat table')
    if offenders:
        counts = collections.Counter(s['owner'] for s in offenders)
        parts.append('%d other SNAT rule%s would act on pod traffic: %s'
                     % (len(offenders), '' if len(offenders) == 1 else 's',
                        ', '.join('%s (%d)' % (o, n) for o, n in sorted(counts.items()))))
    allowed = [s for s in sources if s['reachable'] and s['allowed'] and not s['ours']]
    if not parts:
        parts.append('%s is the only SNAT source for pod traffic' % chain)
    if allowed:
        counts = collections.Counter(s['owner'] for s in allowed)
        parts.append('%d other rule%s allowed: %s' % (len(allowed), '' if len(allowed) == 1 else 's',
                                                      ', '.join('%s (%d)' % (o, n) for o, n in sorted(counts.items()))))
    unreachable = [s for s in sources if not s['reachable']]
    if unreachable:
        parts.append('%d not reached from the postrouting hook' % len(unreachable))
    return '; '.join(parts) + '.'


def offender_lines(result):
    """One line per problem, for warnings and the failure message."""
    lines = []
    for family, present in sorted(result['ours_by_family'].items()):
        if not present:
            lines.append('%s: no MASQUERADE of %s is reached from POSTROUTING; run ipmasq.agent.masq_chain.'
                         % (family.replace('ip', 'IP'), result['chain']))
    if len(result.get('ours_backends') or ()) > 1:
        lines.append('our policy is in both iptables (chain %s) and nftables (table inet %s): run '
                     'ipmasq.agent.masq_chain with the backend it belongs in (backend=iptables or nftables); '
                     'it removes ours from the other one.' % (result['chain'], result['chain'].lower()))
    elif len(_ours_in(result['sources'])) > 1:
        lines.append('our chain %s is in both the iptables-legacy and the iptables-nft nat table, and packets pass '
                     'both: run ipmasq.agent.masq_chain, which removes ours from the iptables flavour not on PATH '
                     '(or remove it yourself: iptables-legacy -t nat -D POSTROUTING -j %s; iptables-legacy -t nat '
                     '-F %s; iptables-legacy -t nat -X %s).' % ((result['chain'],) * 4))
    lines.extend(n for n in result.get('notes') or [] if ' is in the legacy nat table, which packets pass too' in n)
    for s in result['offenders']:
        lines.append('[%s %s %s: %s] %s: %s -- %s'
                     % (s['family'].replace('ip', 'IP'), s['backend'], s['table'], ' > '.join(s['path']),
                        s['owner'], s['rule'], s['hint']))
    return lines


def _is_read_only(argv):
    """The only commands the audit may run: a nat table save, a version
    query, and the nft ruleset listing."""
    if not argv:
        return False
    tool = argv[0].rsplit('/', 1)[-1]
    args = list(argv[1:])
    if re.match(r'^ip6?tables(-nft|-legacy)?-save$', tool):
        return args == ['-t', 'nat']
    if re.match(r'^ip6?tables(-nft|-legacy)?$', tool):
        return args == ['--version']
    if tool == 'nft':
        return args == ['-j', 'list', 'ruleset']
    return False


def read_only(run):
    """Wrap ``run`` so that anything but a listing is refused before it runs."""
    def guarded(argv, data=None):
        if data is not None or not _is_read_only(argv):
            raise MasqError('internal error: the SNAT audit refused to run %r (it only reads).' % (argv,))
        return run(argv)
    return guarded


def audit(run, find, chain=DEFAULT_CHAIN, ipv6=False, include_nft='auto', allow=None, proc_read=None,
          legacy_chains=None):
    """Read the node and judge every SNAT source.  Never changes anything:
    every command goes through :func:`read_only`.  ``legacy_chains(family)``:
    the chains of a legacy nat table no tool read (default: asked of the
    kernel, ``xtables_kernel.chains``)."""
    chain = validate_chain_name(chain)
    run = read_only(run)
    if include_nft not in ('auto', 'always', 'never'):
        raise MasqError("include_nft: %r is not one of 'auto', 'always', 'never'." % (include_nft,))
    parse_allow(allow)   # bad input fails before anything runs
    snapshots, nft_tables, notes, commands, tools_found = collect(
        run, find, ipv6=ipv6, include_nft=include_nft, proc_read=proc_read)
    if not tools_found:
        raise MasqError('Neither iptables-save nor nft was found on the node: nothing to audit. '
                        'Install iptables (or nftables).')
    result = analyse(snapshots, nft_tables, chain=chain, ipv6=ipv6, allow=allow, notes=notes)
    result['commands'] = commands
    _unread_legacy(result, snapshots, chain, (4, 6) if ipv6 else (4,), proc_read or read_proc,
                   legacy_chains or kernel_chains)
    return result


def _unread_legacy(result, snapshots, chain, families, proc_read, chains):
    """Ours in a legacy nat table this audit could not read (no
    iptables-legacy-save): the kernel lists the table's chains
    (``xtables_kernel``, a read); packets pass that table too, so ours there
    is not only ours."""
    for family in families:
        if any(f == family and backend == 'legacy' for f, backend, _text in snapshots):
            continue
        if 'nat' not in proc_read(PROC_TABLES[family]):
            continue        # not loaded: it holds nothing
        names = chains(family)
        if not names or chain not in names:
            continue
        tool = 'iptables-legacy' if family == 4 else 'ip6tables-legacy'
        result['only_ours'] = False
        line = ('%s: our chain %s is in the legacy nat table, which packets pass too, and %s-save is not installed, '
                'so its rules were not audited: run ipmasq.agent.masq_chain, which fails naming the commands that '
                'remove it, or install the iptables-legacy tools and audit again.'
                % (FAMILY_NAMES[family].replace('ip', 'IP'), chain, tool))
        result['notes'].append(line)
        result['summary'] = '%s; our chain is also in the IPv%d legacy nat table, which was not audited.' % (
            result['summary'].rstrip('.'), family)
