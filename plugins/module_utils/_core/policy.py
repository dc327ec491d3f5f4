# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The SNAT policy: what a node should do, validated, and nothing about how.

A :class:`Policy` is data only.  A backend (``iptables.py``) turns it into
rules; the module, the role and the node-side resync all build one here.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ipmasq.agent.plugins.module_utils._core.cidrs import (
    DEFAULT_CIDR_LIMIT,
    is_default_list,
    parse_cidrs,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.ranges import LINK_LOCAL

DEFAULT_CHAIN = 'IP-MASQ-AGENT'
FAMILIES = (4, 6)
JUMP_POSITIONS = ('append', 'first')
# docs: the rules as the Kubernetes docs (and the seed listings) show them;
# upstream: as the current upstream agent (v2.12) writes them (iptables.py).
RULE_FORMATS = ('docs', 'upstream')

CHAIN_NAME_MAX = 28  # XT_EXTENSION_MAXNAMELEN - 1
_CHAIN_FIRST = frozenset('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_')
_CHAIN_REST = _CHAIN_FIRST | frozenset('.+-')
BUILTIN_CHAINS = frozenset(('PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'))
# Names iptables refuses for a chain ("chain name may not clash with target
# name") or that crash iptables-legacy-restore ('standard'): the verdicts,
# the standard and error targets, and every target extension of iptables 1.8.
RESERVED_TARGETS = frozenset((
    'ACCEPT', 'DROP', 'QUEUE', 'RETURN', 'STANDARD', 'ERROR', 'CONTINUE', 'JUMP', 'GOTO',
    'AUDIT', 'CHECKSUM', 'CLASSIFY', 'CLUSTERIP', 'CONNMARK', 'CONNSECMARK', 'CT', 'DNAT',
    'DNPT', 'DSCP', 'ECN', 'HL', 'HMARK', 'IDLETIMER', 'LED', 'LOG', 'MARK', 'MASQUERADE',
    'NAT', 'NETMAP', 'NFLOG', 'NFQUEUE', 'NOTRACK', 'RATEEST', 'REDIRECT', 'REJECT', 'SECMARK',
    'SET', 'SNAT', 'SNPT', 'SYNPROXY', 'TCPMSS', 'TCPOPTSTRIP', 'TEE', 'TOS', 'TPROXY', 'TRACE',
    'TTL', 'ULOG',
))
_DIGITS = frozenset('0123456789')

# The words every rule of ours carries, in each rule format; a rule or table
# with a comment starting OUR_COMMENT_PREFIX is ours.
#   docs: as the Kubernetes docs (and our users' eyes) know them;
#   upstream: what kubernetes-sigs/ip-masq-agent v2.12 writes
#   (cmd/ip-masq-agent/ip-masq-agent.go: nonMasqRuleComment, masqRuleComment).
# 'local' is the nftables backend's rule for local destinations, which
# iptables expresses as the addrtype match of the jump and of each rule.
OUR_COMMENT_PREFIX = 'ip-masq-agent:'
COMMENTS = {
    'docs': {
        'return': 'ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE',
        'masquerade': ('ip-masq-agent: outbound traffic should be subject to MASQUERADE '
                       '(this match must come after cluster-local CIDR matches)'),
        'local': 'ip-masq-agent: local destinations are never subject to MASQUERADE',
    },
    'upstream': {
        'return': 'ip-masq-agent: local traffic is not subject to MASQUERADE',
        'masquerade': 'ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)',
        'local': 'ip-masq-agent: local destinations are never subject to MASQUERADE',
    },
}
# The first iptables release with MASQUERADE --random-fully.
RANDOM_FULLY_SINCE = (1, 6, 2)


def validate_chain_name(name):
    """Return ``name`` if it is a chain name iptables accepts and we may own."""
    if not isinstance(name, str) or not name:
        raise MasqError('chain: the chain name must be a non-empty string, got %r.' % (name,))
    if len(name) > CHAIN_NAME_MAX:
        raise MasqError('chain: %r is %d characters long; iptables allows at most %d.'
                        % (name, len(name), CHAIN_NAME_MAX))
    if name[0] not in _CHAIN_FIRST or not _CHAIN_REST.issuperset(name):
        raise MasqError('chain: %r is not a valid chain name: use letters, digits and _ . + - '
                        'only (no whitespace, newline, quotes or a leading "-", "." or "+").' % (name,))
    if name.upper() in BUILTIN_CHAINS:
        raise MasqError('chain: %r is a built-in chain; the module needs a chain of its own.' % (name,))
    if name.upper() in RESERVED_TARGETS:
        raise MasqError('chain: %r is the name of an iptables target; iptables refuses a chain of that '
                        'name. Choose another name.' % (name,))
    return name


def _port(text):
    text = text.strip(' \t')
    if not text or len(text) > 5 or not _DIGITS.issuperset(text):
        return None
    return int(text)


def parse_to_ports(to_ports):
    """Parse upstream's --to-ports value: ``['1024-29999', '32768-65535']``
    (or the same as one comma-separated string).  Returns a list of
    ``(low, high)`` tuples in the order given (upstream writes one rule per
    range, in that order); overlapping ranges are refused.  ``''`` (upstream's
    default, also as Ansible's ``['']``) means no port rules."""
    if to_ports is None or to_ports == '' or to_ports == [] or to_ports == ['']:
        return []
    items = to_ports.split(',') if isinstance(to_ports, str) else list(to_ports)
    ranges = []
    for item in items:
        low = high = None
        if isinstance(item, str):
            first, dash, second = item.partition('-')
            low = _port(first)
            high = _port(second) if dash else low
        if low is None or high is None:
            raise MasqError('to_ports: %r is not a port or a port range like 1024-29999.' % (item,))
        if not 1 <= low <= high <= 65535:
            raise MasqError('to_ports: %r is not a range inside 1-65535 with low <= high.' % (item,))
        ranges.append((low, high))
    ordered = sorted(ranges)
    for (l1, h1), (l2, h2) in zip(ordered, ordered[1:]):
        if l2 <= h1:
            raise MasqError('to_ports: ranges %s and %s overlap.' % (port_text(l1, h1), port_text(l2, h2)))
    return ranges


def port_text(low, high):
    return str(low) if low == high else '%d-%d' % (low, high)


class Policy:
    """The desired state, validated.

    ``cidrs``: family -> canonical CIDRs in the order given; ``kept(family)``
    adds link-local in front unless it is masqueraded.

    ``rule_format``: ``docs`` (default) drops exact duplicate CIDRs (with a
    warning) and appends the reserved ranges to any list; ``upstream`` does
    what the upstream agent does with the same input: one rule per entry,
    duplicates included, and the reserved ranges only added to the default
    list (``nonmasquerade_cidrs`` None, or the config file without
    nonMasqueradeCIDRs).  ``random_fully`` None means the format's default:
    off for docs, on for upstream where iptables supports it
    (:meth:`random_fully_for`).
    """

    def __init__(self, nonmasquerade_cidrs=None, nomasq_all_reserved_ranges=False,
                 masq_link_local=False, masq_link_local_ipv6=False, ipv6=False,
                 chain=DEFAULT_CHAIN, random_fully=None, to_ports=None,
                 jump_position='append', cidr_limit=DEFAULT_CIDR_LIMIT, rule_format='docs'):
        self.chain = validate_chain_name(chain)
        if jump_position not in JUMP_POSITIONS:
            raise MasqError("jump_position: %r is not one of 'append', 'first'." % (jump_position,))
        if rule_format not in RULE_FORMATS:
            raise MasqError("rule_format: %r is not one of 'docs', 'upstream'." % (rule_format,))
        self.rule_format = rule_format
        upstream = rule_format == 'upstream'
        if cidr_limit is not None and (not isinstance(cidr_limit, int) or isinstance(cidr_limit, bool)
                                       or cidr_limit < 0):
            raise MasqError('cidr_limit: %r is not a non-negative integer.' % (cidr_limit,))
        self.jump_position = jump_position
        self.ipv6 = bool(ipv6)
        self.random_fully = None if random_fully is None else bool(random_fully)
        self.masq_link_local = {4: bool(masq_link_local), 6: bool(masq_link_local_ipv6)}
        self.port_ranges = parse_to_ports(to_ports)
        reserved = bool(nomasq_all_reserved_ranges)
        if upstream and not is_default_list(nonmasquerade_cidrs):
            reserved = False    # upstream: the flag only changes the default list
        self.cidrs, self.warnings = parse_cidrs(nonmasquerade_cidrs, ipv6=self.ipv6,
                                                cidr_limit=cidr_limit, reserved=reserved,
                                                keep_duplicates=upstream)

    def families(self):
        return FAMILIES if self.ipv6 else (4,)

    def kept(self, family):
        """The destinations that keep their source, in order: link-local
        first (unless it is masqueraded), then the list."""
        cidrs = list(self.cidrs[family])
        if not self.masq_link_local[family]:
            link_local = LINK_LOCAL[family]
            if self.rule_format == 'upstream':
                return [link_local] + cidrs     # upstream: a listed link-local is written again
            cidrs = [link_local] + [c for c in cidrs if c != link_local]
        return cidrs

    def comments(self):
        """The rule comments of this policy's rule format (:data:`COMMENTS`)."""
        return COMMENTS[self.rule_format]

    def random_fully_for(self, version):
        """Whether MASQUERADE carries --random-fully with iptables ``version``
        (a tuple, or None when unknown): as asked, or the format's default
        (upstream: on when iptables supports it, as its --random-fully=true)."""
        if self.random_fully is not None:
            return self.random_fully
        if self.rule_format != 'upstream':
            return False
        return version is None or tuple(version) >= RANDOM_FULLY_SINCE
