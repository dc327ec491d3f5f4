# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
# One file over 500 lines on purpose: the filters' one CIDR library. The types and
# messages every filter shares, the parser, Aggregate and overlaps use one another's
# helpers (check_*, listing, cidr_text), and every filter and test imports it by this
# name (tests/unit/plugins/filter: test_plugin_docs_match_code, test_filters_without_netaddr).
"""Shared logic of the ipmasq.agent CIDR filter and test plugins.

Parsing is strict and reports every problem of a list at once. The plugins
run on the controller only and use netaddr, imported optionally: without it
the plugins still load and every call fails with an error that names the
missing library. Values returned to the plugins are plain str, list and dict.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Mapping

from ansible.errors import AnsibleFilterError

try:
    import netaddr
    from netaddr.strategy import ipv6 as _netaddr_ipv6
except ImportError as _exc:  # the plugins must still load without netaddr
    netaddr = None
    _netaddr_ipv6 = None
    NETADDR_IMPORT_ERROR: ImportError | None = _exc
else:
    NETADDR_IMPORT_ERROR = None

COLLECTION = 'ipmasq.agent'

BARE_ADDRESS_CHOICES = ('refuse', 'host')
HOST_BITS_CHOICES = ('error', 'align')
DUPLICATES_CHOICES = ('error', 'drop', 'keep')

_BITS = {4: 32, 6: 128}
_FAMILY = {4: 'IPv4', 6: 'IPv6'}
_CATCH_ALL = {4: '0.0.0.0/0', 6: '::/0'}
_DIGITS = re.compile(r'[0-9]{1,3}\Z')
_DOTTED = re.compile(r'[0-9]+(?:\.[0-9]+){3}\Z')
_MAX_SHOWN = 60      # characters of a bad value quoted in a message
_MAX_LISTED = 8      # entries named in one sentence before "and N more"


class CidrError(AnsibleFilterError):
    """AnsibleFilterError whose message starts with the plugin name; detail is the rest."""

    def __init__(self, plugin: str, detail: str) -> None:
        super().__init__(f'{plugin}: {detail}')
        self.plugin = plugin
        self.detail = detail


class Cidr:
    """One parsed, aligned CIDR: integers for the maths, text for the output."""

    __slots__ = ('version', 'first', 'last', 'prefixlen', 'text', 'index')

    def __init__(self, version: int, first: int, prefixlen: int, index: int = 0) -> None:
        self.version = version
        self.first = first
        self.prefixlen = prefixlen
        self.last = first + (1 << (_BITS[version] - prefixlen)) - 1
        self.text = cidr_text(version, first, prefixlen)
        self.index = index

    def __repr__(self) -> str:
        return f'Cidr({self.text!r}, index={self.index})'


# ---------------------------------------------------------------- helpers

def fqcn(name: str) -> str:
    return f'{COLLECTION}.{name}'


def require_netaddr(plugin: str) -> None:
    """Raise the error every plugin gives when netaddr cannot be imported."""
    if netaddr is None:
        raise CidrError(
            plugin, 'this plugin needs the Python library netaddr on the Ansible '
            f'controller, and it cannot be imported ({NETADDR_IMPORT_ERROR}). Install '
            'netaddr into the Python environment that runs ansible (for example '
            '"python3 -m pip install netaddr", or the python3-netaddr package).'
        )


def show(value: object) -> str:
    """A short, quoted rendering of a value for an error message."""
    text = repr(str(value)) if isinstance(value, str) else repr(value)
    if len(text) > _MAX_SHOWN:
        text = text[:_MAX_SHOWN - 3] + '...'
    return text


def type_phrase(value: object) -> str:
    if value is None:
        return 'null (an empty YAML item?)'
    if isinstance(value, bool):
        return 'a boolean'
    if isinstance(value, (int, float)):
        return 'a number'
    if isinstance(value, Mapping):
        return 'a mapping'
    if isinstance(value, (list, tuple)):
        return 'a list (nested lists must be flattened first)'
    if isinstance(value, bytes):
        return 'bytes'
    return f'a {type(value).__name__}'


def listing(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'; long lists end in 'and N more'."""
    if len(items) > _MAX_LISTED:
        items = items[:_MAX_LISTED - 1] + [f'{len(items) - _MAX_LISTED + 1} more']
    if len(items) <= 1:
        return ''.join(items)
    return ', '.join(items[:-1]) + ' and ' + items[-1]


def plural(count: int, word: str, many: str | None = None) -> str:
    return f'{count} {word if count == 1 else (many or word + "s")}'


def cidr_text(version: int, first: int, prefixlen: int) -> str:
    """Canonical text: dotted quad, or RFC 5952 compressed lowercase IPv6
    (the form iptables-save and ip6tables-save print)."""
    if version == 4:
        return f'{first >> 24}.{(first >> 16) & 255}.{(first >> 8) & 255}.{first & 255}/{prefixlen}'
    return f'{_netaddr_ipv6.int_to_str(first)}/{prefixlen}'


def check_choice(plugin: str, option: str, value: object, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise CidrError(
            plugin, f'option {option} must be one of {", ".join(choices)}; got {show(value)}')
    return value


def check_bool(plugin: str, option: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise CidrError(
            plugin, f'option {option} must be a boolean (true or false); got {show(value)}')
    return value


def check_label(plugin: str, value: object, default: str = 'the list', option: str = 'label') -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise CidrError(
            plugin, f'option {option} must be a non-empty string naming the list; got {show(value)}')
    return str(value)


def as_list(plugin: str, value: object, label: str, what: str = 'CIDR') -> list:
    """The input of every list filter: a list (or tuple, or iterator), nothing else.

    what: what one entry is, in the messages (C(CIDR), C(address)).
    """
    label = 'the input' if label == 'the list' else label
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        raise CidrError(
            plugin, f'{label} must be a list of {what} strings, got the string {show(value)}; '
            f'even one {what} must be a list: [{show(value)}]')
    if isinstance(value, Iterator):
        return list(value)
    if value is None:
        raise CidrError(
            plugin, f'{label} must be a list of {what} strings, got null '
            '(is the variable set to nothing in YAML?)')
    raise CidrError(
        plugin, f'{label} must be a list of {what} strings, got {type_phrase(value)}: {show(value)}')


# ---------------------------------------------------------------- parsing

def _bad_address(addr: str, version: int) -> str:
    if version == 4 and _DOTTED.match(addr):
        octets = addr.split('.')
        if any(len(o) > 1 and o.startswith('0') for o in octets):
            return (f'{show(addr)} has a leading zero in an octet, which is ambiguous '
                    '(octal or decimal?); write each octet without leading zeros')
        if any(int(o) > 255 for o in octets):
            return f'{show(addr)} is not an IPv4 address (an octet is above 255)'
    if '%' in addr:
        return 'an IPv6 zone index (%...) has no place in a CIDR'
    return 'not an IP address or CIDR'


def parse_address(text: str) -> tuple[int | None, int | None, str | None]:
    """One bare address (no prefix length), as inet_pton reads it:
    (version, value, None) when valid, else (None, None, reason)."""
    if not text.isascii() or any(ch.isspace() for ch in text):
        return None, None, 'not an IP address (it contains spaces or non-ASCII characters)'
    version = 6 if ':' in text else 4
    try:
        number = netaddr.IPAddress(text, version, flags=netaddr.INET_PTON).value
    except (netaddr.AddrFormatError, ValueError, TypeError):
        reason = _bad_address(text, version)
        return None, None, (reason.replace('not an IP address or CIDR', f'{show(text)} is not an IP address')
                            .replace('has no place in a CIDR', 'has no place here'))
    return version, number, None


def address_text(version: int, number: int) -> str:
    """Canonical text of one address: cidr_text without the prefix length."""
    return cidr_text(version, number, _BITS[version]).rpartition('/')[0]


def parse_entry(value: object, bare_address: str = 'refuse',
                host_bits: str = 'error', index: int = 0,
                option_hints: bool = True) -> tuple[Cidr | None, str | None]:
    """Parse one list entry: (Cidr, None) when valid, else (None, reason).

    option_hints: name the filter option that would accept the entry (only where
    the caller can pass it; the ip_masq role cannot).
    """
    if not isinstance(value, str):
        return None, f'not a string but {type_phrase(value)}'
    text = value.strip()
    if not text:
        return None, 'empty' if not value else 'empty (only whitespace)'
    if not text.isascii() or any(ch.isspace() for ch in text):
        return None, 'not an IP address or CIDR (it contains spaces or non-ASCII characters)'
    addr, slash, plen_text = text.partition('/')
    version = 6 if ':' in addr else 4
    bits = _BITS[version]
    try:
        first = netaddr.IPAddress(addr, version, flags=netaddr.INET_PTON).value
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return None, _bad_address(addr, version)
    if not slash:
        if bare_address != 'host':
            if not option_hints:
                return None, (f'a bare address, not a CIDR: write {cidr_text(version, first, bits)} '
                              'for the single host')
            return None, (
                f'a bare address, not a CIDR; refused (bare_address=refuse): write '
                f'{cidr_text(version, first, bits)} for the single host, or pass '
                "bare_address='host' to take bare addresses as /32 (IPv4) and /128 (IPv6)")
        prefixlen = bits
    elif _DIGITS.match(plen_text):
        prefixlen = int(plen_text)
        if prefixlen > bits:
            return None, f'prefix length /{plen_text} is out of range for {_FAMILY[version]} (0-{bits})'
    elif not plen_text:
        return None, "missing prefix length after '/'"
    else:
        reason = f'{show("/" + plen_text)} is not a prefix length (a number 0-{bits})'
        if version == 4 and netaddr.valid_ipv4(plen_text, flags=netaddr.INET_PTON):
            mask = netaddr.IPAddress(plen_text, 4).value
            inverted = mask ^ 0xFFFFFFFF
            if inverted & (inverted + 1) == 0:
                length = 32 - inverted.bit_length()
                reason = (f'{show("/" + plen_text)} is a netmask, not a prefix length; '
                          f'write {addr}/{length}')
        return None, reason
    hostmask = (1 << (bits - prefixlen)) - 1
    if first & hostmask:
        aligned = first & ~hostmask
        if host_bits != 'align':
            return None, (
                f'host bits set: the aligned network is {cidr_text(version, aligned, prefixlen)}'
                f' (for the single host write {cidr_text(version, first, bits)})')
        first = aligned
    return Cidr(version, first, prefixlen, index), None


def parse_list(plugin: str, value: object, label: str | None = None, *,
               bare_address: str = 'refuse', host_bits: str = 'error',
               duplicates: str = 'allow', extra_check=None, option_hints: bool = True) -> list[Cidr]:
    """Parse a whole list; raise one CidrError naming every bad entry.

    duplicates: 'allow' or 'keep' keeps them, 'drop' keeps the first, 'error' reports them.
    extra_check(valid_cidrs) may return (problems, explanation) to add to the error.
    """
    require_netaddr(plugin)
    label = check_label(plugin, label)
    items = as_list(plugin, value, label)
    problems: list[str] = []
    cidrs: list[Cidr] = []
    seen: dict[tuple[int, int, int], Cidr] = {}
    for index, item in enumerate(items):
        cidr, reason = parse_entry(item, bare_address, host_bits, index, option_hints)
        if cidr is None:
            problems.append(f'[{index}] {show(item)}: {reason}')
            continue
        if duplicates not in ('allow', 'keep'):
            key = (cidr.version, cidr.first, cidr.prefixlen)
            original = seen.get(key)
            if original is None:
                seen[key] = cidr
            elif duplicates == 'drop':
                continue
            else:
                again = '' if str(items[original.index]) == str(item) else f' (both are {cidr.text})'
                way_out = "remove it, or pass duplicates='drop'" if option_hints else 'remove it'
                problems.append(
                    f'[{index}] {show(item)}: duplicate of [{original.index}] '
                    f"{show(items[original.index])}{again}; {way_out}")
                continue
        cidrs.append(cidr)
    explanation = ''
    if extra_check is not None:
        more, explanation = extra_check(cidrs)
        problems.extend(more)
    if problems:
        detail = (f'{plural(len(problems), "problem")} in {label} '
                  f'({plural(len(items), "entry", "entries")}): ' + '; '.join(problems))
        if explanation:
            detail += '. ' + explanation
        raise CidrError(plugin, detail)
    return cidrs


def is_cidr(value: object, version: int | None = None, bare_address: str = 'refuse') -> bool:
    cidr, _reason = parse_entry(value, bare_address)
    return cidr is not None and (version is None or cidr.version == version)


# ------------------------------------------------------------ aggregation

def _range_to_blocks(start: int, end: int, bits: int) -> list[tuple[int, int]]:
    """The fewest aligned blocks (first, prefixlen) that cover start..end exactly."""
    blocks = []
    while start <= end:
        size = (start & -start) if start else (1 << bits)
        while start + size - 1 > end:
            size >>= 1
        blocks.append((start, bits - size.bit_length() + 1))
        start += size
    return blocks


class Aggregate:
    """The aggregate of a list of Cidr and, for each input, how it got there.

    blocks[k]: the output CIDRs (sorted: IPv4 first, then by address).
    block_of[i]: index of the block that holds input i (position in the list).
    how[i]: 'kept' (the input is a block itself), 'joined' (with adjacent
    inputs into a larger block), 'contained' (inside another input) or
    'duplicate' (of an earlier, identical input); ref[i] names that other
    input for 'contained' and 'duplicate'.
    O(n log n): one sort, then a linear sweep with a bisect per input.
    """

    def __init__(self, cidrs: list[Cidr]) -> None:
        count = len(cidrs)
        self.cidrs = cidrs
        self.blocks: list[Cidr] = []
        self.block_of = [0] * count
        self.how = [''] * count
        self.ref: list[int | None] = [None] * count
        order = sorted(range(count), key=lambda i: (cidrs[i].version, cidrs[i].first,
                                                    cidrs[i].prefixlen, i))
        pos = 0
        while pos < count:
            head = cidrs[order[pos]]
            version, start, end = head.version, head.first, head.last
            stop = pos + 1
            while stop < count:
                nxt = cidrs[order[stop]]
                if nxt.version != version or nxt.first > end + 1:
                    break
                if nxt.last > end:
                    end = nxt.last
                stop += 1
            base = len(self.blocks)
            group_blocks = _range_to_blocks(start, end, _BITS[version])
            starts = [first for first, _plen in group_blocks]
            self.blocks.extend(Cidr(version, first, plen) for first, plen in group_blocks)
            top = same = None
            for i in order[pos:stop]:
                cidr = cidrs[i]
                k = base + bisect.bisect_right(starts, cidr.first) - 1
                self.block_of[i] = k
                if same is not None and cidrs[same].first == cidr.first \
                        and cidrs[same].prefixlen == cidr.prefixlen:
                    self.how[i], self.ref[i] = 'duplicate', same
                    continue
                same = i
                if top is not None and cidr.last <= cidrs[top].last:
                    self.how[i], self.ref[i] = 'contained', top
                    continue
                top = i
                block = self.blocks[k]
                self.how[i] = 'kept' if block.prefixlen == cidr.prefixlen else 'joined'
            pos = stop

    def texts(self) -> list[str]:
        return [block.text for block in self.blocks]

    def members(self) -> list[list[int]]:
        """Per block, the inputs it holds, in input order."""
        members: list[list[int]] = [[] for _block in self.blocks]
        for i, k in enumerate(self.block_of):
            members[k].append(i)
        return members

    def catch_all(self) -> dict[int, list[int]]:
        """Family -> the top-level inputs that together cover all of it."""
        found: dict[int, list[int]] = {}
        for k, block in enumerate(self.blocks):
            if block.prefixlen == 0:
                found[block.version] = [i for i, b in enumerate(self.block_of)
                                        if b == k and self.how[i] in ('kept', 'joined')]
        return found

    def report(self) -> dict:
        cidrs = self.cidrs
        merged = []
        counts = {'kept': 0, 'joined': 0, 'contained': 0, 'duplicate': 0}
        for how in self.how:
            counts[how] += 1
        joined_blocks = 0
        for k, members in enumerate(self.members()):
            if len(members) < 2:
                continue
            into = self.blocks[k].text
            joined = [cidrs[i].text for i in members if self.how[i] == 'joined']
            contained = [{'cidr': cidrs[i].text, 'in': cidrs[self.ref[i]].text}
                         for i in members if self.how[i] == 'contained']
            dups = [cidrs[i].text for i in members if self.how[i] == 'duplicate']
            reasons = []
            if joined:
                joined_blocks += 1
                reasons.append(f'{listing(joined)} are adjacent and together make {into}')
            if contained:
                reasons.append('; '.join(
                    f'{c["cidr"]} is inside {c["in"]}' for c in contained[:_MAX_LISTED]))
                if len(contained) > _MAX_LISTED:
                    reasons[-1] += f' (and {len(contained) - _MAX_LISTED} more inside others)'
            if dups:
                reasons.append(f'{listing(sorted(set(dups)))} listed more than once')
            merged.append({
                'into': into,
                'from': [cidrs[i].text for i in members],
                'joined': joined,
                'contained': contained,
                'duplicates': dups,
                'reason': '; '.join(reasons),
            })
        parts = []
        if counts['duplicate']:
            parts.append(f'{plural(counts["duplicate"], "duplicate")} dropped')
        if counts['contained']:
            parts.append(f'{plural(counts["contained"], "entry", "entries")} inside other entries')
        if counts['joined']:
            parts.append(f'{plural(counts["joined"], "adjacent entry", "adjacent entries")} '
                         f'joined into {plural(joined_blocks, "block")}')
        n_in, n_out = len(cidrs), len(self.blocks)
        summary = (f'{plural(n_in, "entry", "entries")} became {n_out}: ' + ', '.join(parts)
                   if parts else f'{plural(n_in, "entry", "entries")}, nothing to merge')
        return {
            'cidrs': self.texts(),
            'input_count': n_in,
            'output_count': n_out,
            'merged': merged,
            'summary': summary,
        }


def catch_all_check(allow: bool):
    """An extra_check for parse_list: the list must not cover a whole family."""

    def check(cidrs: list[Cidr]) -> tuple[list[str], str]:
        if allow or not cidrs:
            return [], ''
        found = Aggregate(cidrs).catch_all()
        problems = []
        for version in sorted(found):
            pieces = [f'[{cidrs[i].index}] {show(cidrs[i].text)}' for i in found[version]]
            if len(pieces) == 1:
                problems.append(f'{pieces[0]} covers all of {_FAMILY[version]}')
            else:
                problems.append(f'{listing(pieces)} together cover all of {_FAMILY[version]} '
                                f'({_CATCH_ALL[version]})')
        if not problems:
            return [], ''
        families = ' and '.join(_FAMILY[v] for v in sorted(found))
        explanation = (
            f'A non-masquerade list that covers all of {families} means every destination '
            'matches a RETURN rule before the final MASQUERADE: nothing is ever masqueraded, '
            'and pods lose all access to networks that do not route the pod addresses back '
            '(the internet, cloud services). To keep outside access, list only the pod and node '
            'networks (for example 10.244.0.0/16 and 192.168.1.0/24); to have no SNAT at all, '
            'use state: absent instead (ip_masq_state: absent with the ip_masq role); if every '
            'destination really must be exempt, pass allow_catch_all=true '
            '(ip_masq_allow_catch_all: true with the role)')
        return problems, explanation

    return check


# ---------------------------------------------------------------- overlaps

def overlaps(cidrs: list[Cidr], others: list[Cidr]) -> dict:
    """Pairs that overlap (nested or equal; CIDRs cannot overlap otherwise) and
    how much of each entry of cidrs the union of others covers."""
    by_key: dict[tuple[int, int, int], list[Cidr]] = {}
    sorted_others: dict[int, list[Cidr]] = {4: [], 6: []}
    lengths: dict[int, set[int]] = {4: set(), 6: set()}
    for other in others:
        by_key.setdefault((other.version, other.first, other.prefixlen), []).append(other)
        sorted_others[other.version].append(other)
        lengths[other.version].add(other.prefixlen)
    prefixlens = {version: sorted(found) for version, found in lengths.items()}
    firsts = {}
    for version, items in sorted_others.items():
        items.sort(key=lambda c: (c.first, c.prefixlen, c.index))
        firsts[version] = [c.first for c in items]
    ranges: dict[int, tuple[list[int], list[int]]] = {4: ([], []), 6: ([], [])}
    for block in Aggregate(others).blocks:
        starts, ends = ranges[block.version]
        if ends and block.first == ends[-1] + 1:
            ends[-1] = block.last
        else:
            starts.append(block.first)
            ends.append(block.last)

    pairs = []
    coverage: dict[str, list[str]] = {'covered': [], 'partly_covered': [], 'not_covered': []}
    for cidr in cidrs:
        bits = _BITS[cidr.version]
        found: list[tuple[Cidr, str]] = []
        # the others that contain (or equal) this entry: one lookup per prefix
        # length that the others use, up to this entry's own
        for plen in prefixlens[cidr.version]:
            if plen > cidr.prefixlen:
                break
            first = cidr.first & ~((1 << (bits - plen)) - 1)
            for other in by_key.get((cidr.version, first, plen), ()):
                found.append((other, 'equal' if plen == cidr.prefixlen else 'inside'))
        # the others inside this entry: a run of the sorted list
        items, keys = sorted_others[cidr.version], firsts[cidr.version]
        pos = bisect.bisect_left(keys, cidr.first)
        end = bisect.bisect_right(keys, cidr.last)
        for other in items[pos:end]:
            if other.prefixlen > cidr.prefixlen:
                found.append((other, 'contains'))
        found.sort(key=lambda pair: pair[0].index)
        pairs.extend({'cidr': cidr.text, 'other': other.text, 'relation': relation}
                     for other, relation in found)
        starts, ends = ranges[cidr.version]
        k = bisect.bisect_right(starts, cidr.last) - 1
        if k < 0 or ends[k] < cidr.first:
            coverage['not_covered'].append(cidr.text)
        elif starts[k] <= cidr.first and ends[k] >= cidr.last:
            coverage['covered'].append(cidr.text)
        else:
            coverage['partly_covered'].append(cidr.text)
    return {'overlaps': pairs, **coverage}
