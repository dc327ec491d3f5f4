# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The one implementation of the ip-masq-agent rules.

Everything that decides what the IP-MASQ-AGENT chain and its POSTROUTING jump
look like, reads what a node has, and changes it in one transaction lives
here.  The ``masq_chain`` module and the role's node-side resync both call
:func:`sync`; nothing else renders rules.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re
import shlex
import socket

DEFAULT_CHAIN = 'IP-MASQ-AGENT'
DEFAULT_NONMASQ_CIDRS = ('10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16')
# What upstream adds with --nomasq-all-reserved-ranges (IPv4 only).
RESERVED_RANGES = (
    '100.64.0.0/10',    # RFC 6598
    '192.0.0.0/24',     # RFC 6890
    '192.0.2.0/24',     # RFC 5737
    '192.88.99.0/24',   # RFC 7526
    '198.18.0.0/15',    # RFC 6815
    '198.51.100.0/24',  # RFC 5737
    '203.0.113.0/24',   # RFC 5737
    '240.0.0.0/4',      # RFC 5735
)
LINK_LOCAL = {4: '169.254.0.0/16', 6: 'fe80::/10'}
DEFAULT_CIDR_LIMIT = 64
RESTORE_WAIT_SECONDS = 30
MASQ_PROTOCOLS = ('tcp', 'udp', 'sctp')

# The rule comments as the Kubernetes docs (and our users' eyes) know them.
COMMENT_RETURN = 'ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE'
COMMENT_MASQ = ('ip-masq-agent: outbound traffic should be subject to MASQUERADE '
                '(this match must come after cluster-local CIDR matches)')
COMMENT_JUMP = ('ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination '
                'traffic to our custom %s chain')
NOT_LOCAL = '-m addrtype ! --dst-type LOCAL'

BUILTIN_CHAINS = frozenset(('PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'))
RESERVED_TARGETS = frozenset((
    'ACCEPT', 'DROP', 'QUEUE', 'RETURN', 'REJECT', 'LOG', 'MASQUERADE', 'SNAT',
    'DNAT', 'REDIRECT', 'NETMAP', 'MARK', 'CONNMARK', 'NFQUEUE', 'TRACE', 'CT',
    'NOTRACK', 'TPROXY',
))
CHAIN_NAME_MAX = 28  # XT_EXTENSION_MAXNAMELEN - 1
_CHAIN_RE = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.+-]*$')
_PORTS_RE = re.compile(r'^\s*(\d{1,5})\s*(?:-\s*(\d{1,5})\s*)?$')
_VERSION_RE = re.compile(r'v(\d+)\.(\d+)\.(\d+)')

FAMILIES = (4, 6)
TOOLS = {
    4: ('iptables', 'iptables-save', 'iptables-restore'),
    6: ('ip6tables', 'ip6tables-save', 'ip6tables-restore'),
}


class MasqError(Exception):
    """A failure with a sentence for the user; command details when a command failed."""

    def __init__(self, msg, **details):
        super(MasqError, self).__init__(msg)
        self.msg = msg
        self.details = details


# --------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------

def validate_chain_name(name):
    """Return ``name`` if it is a chain name iptables accepts and we may own."""
    if not isinstance(name, str) or not name:
        raise MasqError('chain: the chain name must be a non-empty string, got %r.' % (name,))
    if len(name) > CHAIN_NAME_MAX:
        raise MasqError('chain: %r is %d characters long; iptables allows at most %d.'
                        % (name, len(name), CHAIN_NAME_MAX))
    if not _CHAIN_RE.match(name):
        raise MasqError('chain: %r is not a valid chain name: use letters, digits and _ . + - '
                        'only (no whitespace, quotes or a leading "-" or "!").' % (name,))
    if name.upper() in BUILTIN_CHAINS:
        raise MasqError('chain: %r is a built-in chain; the module needs a chain of its own.' % (name,))
    if name.upper() in RESERVED_TARGETS:
        raise MasqError('chain: %r is the name of an iptables target; choose another name.' % (name,))
    return name


# Every canonical IPv4 octet text ('0' .. '255') and prefix length text
# ('0' .. '32'), for the fast path of parse_cidrs below.
_OCTETS = dict((str(i), i) for i in range(256))
_PREFIXES4 = dict((str(i), i) for i in range(33))


def _canonical_ipv4_cidr(text):
    """Return ``text`` if it is an aligned IPv4 CIDR already written the way
    ipaddress prints it ('10.0.0.0/8'), else None.

    A fast path only: ipaddress.ip_network() costs about 3 us per entry, which
    was most of the module's own work in a no-change run with a few thousand
    CIDRs.  Anything that is not in canonical form (leading zeros, signs,
    spaces, non-ASCII digits, host bits set, IPv6, errors) is not in the
    tables and returns None; the caller then asks ipaddress, so results and
    error messages stay exactly ipaddress's.
    """
    addr, _slash, prefix = text.partition('/')
    plen = _PREFIXES4.get(prefix)
    octets = addr.split('.')
    if plen is None or len(octets) != 4:
        return None
    value = 0
    for octet in octets:
        number = _OCTETS.get(octet)
        if number is None:
            return None
        value = (value << 8) | number
    if value & ((1 << (32 - plen)) - 1):
        return None
    return text


def _parse_network(raw, text, ipv6, errors):
    """One non-masquerade entry through ipaddress: the network, or None
    after appending the sentence that says what is wrong with it."""
    if '/' not in text:
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            errors.append('%r is not a CIDR' % (raw,))
        else:
            errors.append('%r is an address, not a CIDR (write %s/%d for this host alone)'
                          % (raw, addr, addr.max_prefixlen))
        return None
    try:
        net = ipaddress.ip_network(text, strict=True)
    except ValueError:
        try:
            loose = ipaddress.ip_network(text, strict=False)
        except ValueError:
            errors.append('%r is not a CIDR' % (raw,))
        else:
            errors.append('%r is not aligned to a CIDR block: it has host bits set '
                          '(did you mean %s?)' % (raw, loose))
        return None
    if net.version == 6 and not ipv6:
        errors.append('%r is an IPv6 CIDR but ipv6 is not enabled (set ipv6: true)' % (raw,))
        return None
    return net


def _canonical_text(net):
    """A network as iptables-save prints it.  For IPv6 that is the C
    library's inet_ntop form, which writes IPv4-mapped and -compatible
    addresses with a dotted quad (``::ffff:0.0.0.0/96``) where Python's
    ipaddress does not (``::ffff:0:0/96``); a different text would read as
    drift on every run."""
    if net.version == 6:
        return '%s/%d' % (socket.inet_ntop(socket.AF_INET6, net.network_address.packed), net.prefixlen)
    return str(net)


def parse_cidrs(cidrs, ipv6=False, cidr_limit=DEFAULT_CIDR_LIMIT, reserved=False):
    """Validate the non-masquerade list.

    Returns ``(by_family, warnings)`` where ``by_family`` maps 4 and 6 to the
    list of canonical CIDR strings, order kept, exact duplicates dropped (with
    a warning).  Raises MasqError naming every bad entry at once.
    """
    if cidrs is None:
        cidrs = list(DEFAULT_NONMASQ_CIDRS)
    if not isinstance(cidrs, (list, tuple)):
        raise MasqError('nonmasquerade_cidrs must be a list of CIDR strings, got %r.' % (cidrs,))
    entries = list(cidrs)
    if reserved:
        entries.extend(RESERVED_RANGES)
    errors = []
    warnings = []
    by_family = {4: [], 6: []}
    seen = set()
    for raw in entries:
        if not isinstance(raw, str):
            errors.append('%r is not a string' % (raw,))
            continue
        text = raw.strip()
        if not text:
            errors.append('an empty entry')
            continue
        canon, version = _canonical_ipv4_cidr(text), 4
        if canon is None:
            net = _parse_network(raw, text, ipv6, errors)
            if net is None:
                continue
            canon, version = _canonical_text(net), net.version
        if canon in seen:
            if not (reserved and canon in RESERVED_RANGES):
                warnings.append('nonmasquerade_cidrs lists %s more than once; one rule is written.' % canon)
            continue
        seen.add(canon)
        by_family[version].append(canon)
    if errors:
        raise MasqError('nonmasquerade_cidrs: %d bad entr%s: %s. Nothing was changed.'
                        % (len(errors), 'y' if len(errors) == 1 else 'ies', '; '.join(errors)))
    count = len(by_family[4]) + len(by_family[6])
    if cidr_limit is not None and count > cidr_limit:
        raise MasqError('nonmasquerade_cidrs: %d CIDRs (excluding link-local) is over cidr_limit %d; '
                        'aggregate the list or raise cidr_limit. Nothing was changed.'
                        % (count, cidr_limit))
    return by_family, warnings


def parse_to_ports(to_ports):
    """Parse upstream's --to-ports value: ``['1024-29999', '32768-65535']``
    (or the same as one comma-separated string).  Returns a list of
    ``(low, high)`` tuples, sorted, non-overlapping."""
    if to_ports is None or to_ports == '' or to_ports == []:
        return []
    items = to_ports.split(',') if isinstance(to_ports, str) else list(to_ports)
    ranges = []
    for item in items:
        match = _PORTS_RE.match(item) if isinstance(item, str) else None
        if not match:
            raise MasqError('to_ports: %r is not a port or a port range like 1024-29999.' % (item,))
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if not 1 <= low <= high <= 65535:
            raise MasqError('to_ports: %r is not a range inside 1-65535 with low <= high.' % (item,))
        ranges.append((low, high))
    ranges.sort()
    for (l1, h1), (l2, h2) in zip(ranges, ranges[1:]):
        if l2 <= h1:
            raise MasqError('to_ports: ranges %s and %s overlap.'
                            % (_port_text(l1, h1), _port_text(l2, h2)))
    return ranges


def _port_text(low, high):
    return str(low) if low == high else '%d-%d' % (low, high)


def _probability_text(probability):
    """Render a probability as iptables-save prints it after the kernel's
    fixed-point rounding (u32 = lround(p * 2^31), printed with 11 decimals)."""
    fixed = int(probability * 0x80000000 + 0.5)
    return '%.11f' % (fixed / 0x80000000)


def parse_version(text):
    match = _VERSION_RE.search(text or '')
    return tuple(int(x) for x in match.groups()) if match else None


# --------------------------------------------------------------------------
# The policy: what the chain should hold
# --------------------------------------------------------------------------

class Policy:
    """The desired state, validated.  Renders iptables-save lines."""

    def __init__(self, nonmasquerade_cidrs=None, nomasq_all_reserved_ranges=False,
                 masq_link_local=False, masq_link_local_ipv6=False, ipv6=False,
                 chain=DEFAULT_CHAIN, random_fully=False, to_ports=None,
                 jump_position='append', cidr_limit=DEFAULT_CIDR_LIMIT):
        self.chain = validate_chain_name(chain)
        if jump_position not in ('append', 'first'):
            raise MasqError("jump_position: %r is not one of 'append', 'first'." % (jump_position,))
        if cidr_limit is not None and (not isinstance(cidr_limit, int) or cidr_limit < 0):
            raise MasqError('cidr_limit: %r is not a non-negative integer.' % (cidr_limit,))
        self.jump_position = jump_position
        self.ipv6 = bool(ipv6)
        self.random_fully = bool(random_fully)
        self.masq_link_local = {4: bool(masq_link_local), 6: bool(masq_link_local_ipv6)}
        self.port_ranges = parse_to_ports(to_ports)
        self.cidrs, self.warnings = parse_cidrs(nonmasquerade_cidrs, ipv6=self.ipv6,
                                                cidr_limit=cidr_limit,
                                                reserved=nomasq_all_reserved_ranges)

    def families(self):
        return FAMILIES if self.ipv6 else (4,)

    def jump_spec(self):
        """The POSTROUTING jump, without the leading ``-A POSTROUTING``."""
        return '-m comment --comment "%s" %s -j %s' % (COMMENT_JUMP % self.chain, NOT_LOCAL, self.chain)

    def chain_rules(self, family):
        """The chain's rules for one family, as iptables-save prints them."""
        prefix = '-A %s ' % self.chain
        ret = ' -m comment --comment "%s" %s -j RETURN' % (COMMENT_RETURN, NOT_LOCAL)
        cidrs = list(self.cidrs[family])
        if not self.masq_link_local[family]:
            link_local = LINK_LOCAL[family]
            cidrs = [link_local] + [c for c in cidrs if c != link_local]
        rules = [prefix + '-d ' + cidr + ret for cidr in cidrs]
        rules.extend(prefix + spec for spec in self._masq_specs())
        return rules

    def _masq_specs(self):
        tail = ' --random-fully' if self.random_fully else ''
        masq = '-m comment --comment "%s" %s' % (COMMENT_MASQ, NOT_LOCAL)
        specs = []
        if self.port_ranges:
            # One rule per protocol and range; a range is picked with the
            # probability of its share of the ports still left to pick from.
            sizes = [high - low + 1 for low, high in self.port_ranges]
            for proto in MASQ_PROTOCOLS:
                remaining = sum(sizes)
                for (low, high), size in zip(self.port_ranges, sizes):
                    stat = ''
                    if size != remaining:
                        stat = ' -m statistic --mode random --probability %s' % _probability_text(size / remaining)
                    specs.append('-p %s %s%s -j MASQUERADE --to-ports %s%s'
                                 % (proto, masq, stat, _port_text(low, high), tail))
                    remaining -= size
        specs.append('%s -j MASQUERADE%s' % (masq, tail))
        return specs


# --------------------------------------------------------------------------
# Reading a node
# --------------------------------------------------------------------------

class NatState:
    """What ``iptables-save -t nat`` says about our chain and its jumps."""

    def __init__(self, chain):
        self.chain = chain
        self.version = None        # tuple, from the save header
        self.backend = None        # 'nf_tables' / 'legacy' / None (no header)
        self.chain_exists = False
        self.chain_rules = []
        self.jumps = []            # (position in POSTROUTING, full line)
        self.foreign_refs = []     # rules in other chains that jump to ours
        self.postrouting_count = 0


def _targets(line, chain):
    """True if the rule line jumps (-j) or goes (-g) to ``chain``."""
    if chain not in line:
        return False
    try:
        tokens = shlex.split(line)
    except ValueError:
        tokens = line.split()
    for flag, value in zip(tokens, tokens[1:]):
        if flag in ('-j', '--jump', '-g', '--goto') and value == chain:
            return True
    return False


def parse_save(text, chain):
    """Parse iptables-save output (any tables; only ``*nat`` is read)."""
    state = NatState(chain)
    in_nat = False
    own_prefix = '-A %s ' % chain
    own_decl = ':%s ' % chain
    for line in text.splitlines():
        if not line:
            continue
        first = line[0]
        if first == '#':
            if line.startswith('# Generated by') and state.version is None:
                state.version = parse_version(line)
                state.backend = 'nf_tables' if '(nf_tables)' in line else 'legacy'
            continue
        if first == '*':
            in_nat = line == '*nat'
            continue
        if not in_nat:
            continue
        if first == ':':
            if line.startswith(own_decl):
                state.chain_exists = True
            continue
        if line.startswith(own_prefix):
            state.chain_rules.append(line)
        elif line.startswith('-A POSTROUTING '):
            if _targets(line, chain):
                state.jumps.append((state.postrouting_count, line))
            state.postrouting_count += 1
        elif line.startswith('-A ') and _targets(line, chain):
            state.foreign_refs.append(line)
    return state


def _same_rule(current, desired):
    if current == desired:
        return True
    try:
        return shlex.split(current) == shlex.split(desired)
    except ValueError:
        return False


def _same_rules(current, desired):
    if len(current) != len(desired):
        return False
    return all(_same_rule(c, d) for c, d in zip(current, desired))


# --------------------------------------------------------------------------
# Planning one family
# --------------------------------------------------------------------------

class FamilyPlan:
    def __init__(self, family, state):
        self.family = family
        self.state = state
        self.restore_lines = []     # without *nat / COMMIT
        self.actions = []           # human-readable list of what is done
        self.after_rules = []
        self.after_jump = None

    @property
    def changed(self):
        return bool(self.restore_lines)

    def restore_input(self):
        if not self.restore_lines:
            return None
        return '*nat\n' + '\n'.join(self.restore_lines) + '\nCOMMIT\n'


def plan_present(family, state, policy):
    plan = FamilyPlan(family, state)
    chain = policy.chain
    desired = policy.chain_rules(family)
    jump = policy.jump_spec()
    jump_line = '-A POSTROUTING ' + jump
    plan.after_rules = desired
    plan.after_jump = jump_line

    chain_ok = state.chain_exists and _same_rules(state.chain_rules, desired)
    good = [(pos, line) for pos, line in state.jumps if _same_rule(line, jump_line)]
    bad = [(pos, line) for pos, line in state.jumps if not _same_rule(line, jump_line)]
    if policy.jump_position == 'first':
        jump_ok = len(state.jumps) == 1 and good and good[0][0] == 0
    else:
        jump_ok = len(state.jumps) == 1 and bool(good)

    lines = []
    if not chain_ok:
        # Under --noflush, a chain line creates the chain or flushes it, in
        # the same transaction as the rules that refill it.
        lines.append(':%s - [0:0]' % chain)
        lines.extend(desired)
        if not state.chain_exists:
            plan.actions.append('create chain %s' % chain)
        else:
            plan.actions.append('rewrite chain %s (%d rules -> %d rules)'
                                % (chain, len(state.chain_rules), len(desired)))
    if not jump_ok:
        keep_one = policy.jump_position == 'append' and good
        drop = bad + (good[:-1] if keep_one else good)
        for _pos, line in drop:
            lines.append('-D' + line[2:])
        if bad:
            plan.actions.append('remove %d wrong POSTROUTING jump(s) to %s' % (len(bad), chain))
        if keep_one and len(good) > 1:
            plan.actions.append('remove %d duplicate POSTROUTING jump(s) to %s' % (len(good) - 1, chain))
        if not keep_one:
            if policy.jump_position == 'first':
                lines.append('-I POSTROUTING 1 ' + jump)
                verb = 'move' if state.jumps else 'insert'
                plan.actions.append('%s the POSTROUTING jump to %s at position 1' % (verb, chain))
            else:
                lines.append(jump_line)
                plan.actions.append('append the POSTROUTING jump to %s' % chain)
    plan.restore_lines = lines
    return plan


def plan_absent(family, state, chain):
    plan = FamilyPlan(family, state)
    if state.foreign_refs:
        raise MasqError('cannot remove chain %s (IPv%d): rules outside POSTROUTING jump to it and '
                        'are not ours to delete: %s. Remove them first. Nothing was changed.'
                        % (chain, family, '; '.join(state.foreign_refs)))
    if state.jumps:
        plan.actions.append('remove %d POSTROUTING jump(s) to %s' % (len(state.jumps), chain))
    if state.chain_exists:
        plan.actions.append('delete chain %s' % chain)
    plan.restore_lines = removal_lines([line for _pos, line in state.jumps],
                                       [chain] if state.chain_exists else [])
    return plan


def removal_lines(rules, chains=()):
    """Restore lines (inside ``*nat`` ... ``COMMIT``, under ``--noflush``)
    that delete the given ``-A ...`` rule lines, as iptables-save printed
    them, and then flush and delete the given chains."""
    lines = ['-D' + line[2:] for line in rules]
    for chain in chains:
        lines.extend((':%s - [0:0]' % chain, '-X %s' % chain))
    return lines


# --------------------------------------------------------------------------
# Talking to a node
# --------------------------------------------------------------------------

class Iptables:
    """The node's iptables tools for one family.

    ``run(argv, data=None) -> (rc, stdout, stderr)`` runs an argv list (no
    shell); ``find(name) -> path or None`` finds a tool.
    """

    def __init__(self, family, run, find):
        self.family = family
        self._run = run
        names = TOOLS[family]
        self.iptables, self.save_bin, self.restore_bin = (find(n) for n in names)
        self.available = bool(self.save_bin and self.restore_bin)
        self.commands = []

    def _cmd(self, argv, data=None, record=True):
        if record:
            self.commands.append(' '.join(argv))
        rc, out, err = self._run(argv, data)
        if rc != 0:
            raise MasqError('%s failed (rc=%d): %s' % (' '.join(argv), rc, (err or out).strip()),
                            cmd=' '.join(argv), rc=rc, stdout=out, stderr=err)
        return out

    def save_text(self):
        """The raw ``iptables-save -t nat`` output."""
        return self._cmd([self.save_bin, '-t', 'nat'])

    def save(self, chain):
        state = parse_save(self.save_text(), chain)
        if state.backend is None and self.iptables:
            # An empty legacy nat table prints no header: ask the tool itself.
            out = self._cmd([self.iptables, '--version'])
            state.version = parse_version(out)
            state.backend = 'nf_tables' if 'nf_tables' in out else 'legacy'
        return state

    def restore_argv(self):
        return [self.restore_bin, '--wait=%d' % RESTORE_WAIT_SECONDS, '--noflush']

    def restore(self, payload):
        self._cmd(self.restore_argv(), data=payload, record=False)


def _missing_tools(family):
    return ('%s and %s were not found on the node; install the iptables package.'
            % TOOLS[family][1:])


def sync(policy, state='present', run=None, find=None, check_mode=False, chain=None):
    """Make the node match ``policy`` (or remove everything for ``absent``).

    One ``iptables-save`` per family to read, at most one
    ``iptables-restore --noflush`` per family to write.  Returns a result
    dict for ``exit_json``; raises MasqError on failure.
    """
    if state not in ('present', 'absent'):
        raise MasqError("state: %r is not one of 'present', 'absent'." % (state,))
    chain = policy.chain if policy is not None else validate_chain_name(chain or DEFAULT_CHAIN)
    result = {'changed': False, 'chain': chain, 'state': state, 'backend': None,
              'iptables_version': None, 'commands': [], 'actions': [], 'warnings': [],
              'ipv4': None, 'ipv6': None}
    if policy is not None:
        result['warnings'].extend(policy.warnings)
    managed = policy.families() if (state == 'present' and policy is not None) else ()

    plans = []
    for family in FAMILIES:
        tools = Iptables(family, run, find)
        want = family in managed
        if not tools.available:
            if want:
                raise MasqError(_missing_tools(family))
            result['ipv%d' % family] = {'managed': False, 'present': False, 'changed': False,
                                        'note': _missing_tools(family)}
            continue
        try:
            current = tools.save(chain)
        except MasqError:
            if want or family == 4:
                raise
            # IPv6 not managed and its nat table cannot be read (no IPv6 in
            # this kernel): nothing of ours can be there.
            result['ipv6'] = {'managed': False, 'present': False, 'changed': False,
                              'note': 'ip6tables-save could not read the nat table; skipped.'}
            continue
        if family == 4 or result['backend'] is None:
            result['backend'] = current.backend
            result['iptables_version'] = '.'.join(str(x) for x in current.version) if current.version else None
        if want:
            if policy.random_fully and current.version and current.version < (1, 6, 2):
                raise MasqError('random_fully: the installed %s (v%s) does not support --random-fully '
                                '(needs 1.6.2 or later). Nothing was changed.'
                                % (TOOLS[family][0], '.'.join(str(x) for x in current.version)))
            plan = plan_present(family, current, policy)
        else:
            plan = plan_absent(family, current, chain)
        plans.append((tools, plan, want))

    # Everything is read and planned before anything is written.
    for tools, plan, want in plans:
        payload = plan.restore_input()
        if payload:
            tools.commands.append(' '.join(tools.restore_argv()))
            if not check_mode:
                tools.restore(payload)
            result['changed'] = True
        result['commands'].extend(tools.commands)
        result['actions'].extend('IPv%d: %s' % (plan.family, a) for a in plan.actions)
        st = plan.state
        result['ipv%d' % plan.family] = {
            'managed': want,
            'changed': plan.changed,
            'before': {'chain_exists': st.chain_exists, 'rules': st.chain_rules,
                       'jumps': [line for _p, line in st.jumps]},
            'rules': plan.after_rules if want else [],
            'jump': plan.after_jump if want else None,
            'restore_input': payload,
        }
    return result


def diff_text(result, which):
    """Text for diff mode: the chain and its jumps per family, before or after."""
    out = []
    for family in FAMILIES:
        fam = result.get('ipv%d' % family)
        if not fam or 'before' not in fam:
            continue
        out.append('# %s nat (IPv%d)' % (TOOLS[family][0], family))
        if which == 'before':
            out.extend(fam['before']['jumps'])
            if fam['before']['chain_exists']:
                out.append(':%s - [0:0]' % result['chain'])
            out.extend(fam['before']['rules'])
        elif fam['managed']:
            out.append(fam['jump'])
            out.append(':%s - [0:0]' % result['chain'])
            out.extend(fam['rules'])
    return '\n'.join(out) + '\n'
