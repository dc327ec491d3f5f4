# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The Kubernetes ip-masq-agent's config file, read as the upstream agent reads it.

Upstream (``cmd/ip-masq-agent``) reads ``/etc/config/ip-masq-agent``: a file
whose first non-blank character is ``{`` is JSON, anything else is YAML
(go-yaml v2, so YAML 1.1 booleans such as ``yes``/``off``), converted to JSON
and decoded into::

    nonMasqueradeCIDRs  []string   replaces the default 10/8, 172.16/12, 192.168/16
    masqLinkLocal       bool       default false
    masqLinkLocalIPv6   bool       default false
    cidrLimit           int        default 64
    resyncInterval      string     Go duration (time.ParseDuration), default 60s

Keys match case-insensitively (``NonMasqueradeCIDRs`` works), unknown keys are
ignored (here: ignored *with a warning that names them*), a wrong type is an
error, a missing file means the defaults, an empty file means the defaults.

YAML is read by a small strict parser of the subset such files use: block
mappings and sequences, flow ``[...]`` and ``{...}``, plain and quoted
scalars, comments.  Anything else (anchors, tags, block scalars, multi-line
scalars, several documents) is refused with the line and its text, so the
node keeps its last good rules instead of guessing.

Standard library only: this file runs on managed nodes (the role's resync
service) and is also imported on the controller by the ``go_duration`` filter.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.ipmasq.agent.plugins.module_utils._masq import (
    DEFAULT_CIDR_LIMIT,
    DEFAULT_NONMASQ_CIDRS,
    MasqError,
    parse_cidrs,
)

DEFAULT_CONFIG_PATH = '/etc/ip-masq-agent/config'
DEFAULT_RESYNC_INTERVAL = '1m0s'
MAX_CONFIG_BYTES = 1024 * 1024

# The upstream struct's JSON names, and our names for the settings.
FIELDS = (
    ('nonMasqueradeCIDRs', 'nonmasquerade_cidrs'),
    ('masqLinkLocal', 'masq_link_local'),
    ('masqLinkLocalIPv6', 'masq_link_local_ipv6'),
    ('cidrLimit', 'cidr_limit'),
    ('resyncInterval', 'resync_interval'),
)
_FOLDED = dict((upstream.casefold(), (upstream, ours)) for upstream, ours in FIELDS)

# Keys people put in the file that the agent does not read there.
_FLAG_HINTS = {
    'enableipv6': '--enable-ipv6',
    'ipv6': '--enable-ipv6',
    'masqchain': '--masq-chain',
    'chain': '--masq-chain',
    'nomasqallreservedranges': '--nomasq-all-reserved-ranges',
    'randomfully': '--random-fully',
    'toports': '--to-ports',
}
_KEY_HINTS = {
    'nonmasqueradecidrs': 'nonMasqueradeCIDRs',
    'nonmasqueradecidr': 'nonMasqueradeCIDRs',
    'nonmasqcidrs': 'nonMasqueradeCIDRs',
    'nonmasqcidr': 'nonMasqueradeCIDRs',
    'masqlinklocal': 'masqLinkLocal',
    'masqlinklocalipv6': 'masqLinkLocalIPv6',
    'cidrlimit': 'cidrLimit',
    'resyncinterval': 'resyncInterval',
    'resyncperiod': 'resyncInterval',
}


def _json():
    # Imported when needed: a no-drift cycle with a YAML file never needs it.
    import json  # pylint: disable=import-outside-toplevel

    return json


def _quote(text):
    """``text`` in double quotes, escaped as JSON (for messages)."""
    return _json().dumps(text, ensure_ascii=False)


class ConfigError(MasqError):
    """The config file cannot be used; ``line`` is its 1-based line or None."""

    def __init__(self, msg, line=None, **details):
        super(ConfigError, self).__init__(msg, **details)
        self.line = line


# --------------------------------------------------------------------------
# Go durations (time.ParseDuration and Duration.String, exactly)
# --------------------------------------------------------------------------

_NS = 1
_US = 1000 * _NS
_MS = 1000 * _US
_SECOND = 1000 * _MS
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_UNITS = {
    'ns': _NS,
    'us': _US,
    u'\u00b5s': _US,   # micro sign
    u'\u03bcs': _US,   # Greek small letter mu
    'ms': _MS,
    's': _SECOND,
    'm': _MINUTE,
    'h': _HOUR,
}
_MAX_U63 = 1 << 63


def _is_digit(char):
    return '0' <= char <= '9'


def parse_go_duration_ns(text):
    """Parse a Go duration (``"1h2m3.5s"``, ``"300ms"``, ``"-1.5h"``, ``"0"``)
    into integer nanoseconds, with Go's grammar, rounding and overflow
    rules.  Raises MasqError with Go's reason."""
    if not isinstance(text, str):
        raise MasqError('%r is not a Go duration: it must be a string such as "60s".' % (text,))
    orig = text
    s = text
    neg = False

    def invalid(reason='expected numbers, each followed by a unit'):
        return MasqError('%s is not a Go duration: %s (examples: "60s", "1m30s", "500ms", "1h").'
                         % (_quote(orig), reason))

    if s and s[0] in '-+':
        neg = s[0] == '-'
        s = s[1:]
    if s == '0':
        return 0
    if not s:
        raise invalid()
    total = 0
    while s:
        if not (s[0] == '.' or _is_digit(s[0])):
            raise invalid()
        # [0-9]*
        i = 0
        whole = 0
        while i < len(s) and _is_digit(s[i]):
            if whole > _MAX_U63 // 10:
                raise invalid('it overflows')
            whole = whole * 10 + ord(s[i]) - 48
            if whole > _MAX_U63:
                raise invalid('it overflows')
            i += 1
        pre = i > 0
        s = s[i:]
        # (\.[0-9]*)?
        post = False
        frac = 0
        scale = 1.0
        if s and s[0] == '.':
            s = s[1:]
            i = 0
            overflow = False
            while i < len(s) and _is_digit(s[i]):
                if not overflow:
                    if frac > (_MAX_U63 - 1) // 10:
                        overflow = True
                    else:
                        nxt = frac * 10 + ord(s[i]) - 48
                        if nxt > _MAX_U63:
                            overflow = True
                        else:
                            frac = nxt
                            scale *= 10
                i += 1
            post = i > 0
            s = s[i:]
        if not pre and not post:
            raise invalid()
        # unit: everything up to the next '.' or digit
        i = 0
        while i < len(s) and s[i] != '.' and not _is_digit(s[i]):
            i += 1
        if i == 0:
            raise invalid('missing unit (use ns, us, ms, s, m or h)')
        unit_text = s[:i]
        s = s[i:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise invalid('unknown unit %s (the units are ns, us, ms, s, m and h%s)'
                          % (_quote(unit_text),
                             '; there is no day unit, write 24h' if unit_text == 'd' else ''))
        if whole > _MAX_U63 // unit:
            raise invalid('it overflows')
        value = whole * unit
        if frac > 0:
            value += int(float(frac) * (float(unit) / scale))
            if value > _MAX_U63:
                raise invalid('it overflows')
        total += value
        if total > _MAX_U63:
            raise invalid('it overflows')
    if neg:
        return -total
    if total > _MAX_U63 - 1:
        raise invalid('it overflows')
    return total


def parse_go_duration(text):
    """Parse a Go duration into seconds (float)."""
    return parse_go_duration_ns(text) / float(_SECOND)


def _frac(value, prec):
    div = 10 ** prec
    whole, rest = divmod(value, div)
    if not rest:
        return str(whole)
    return '%d.%s' % (whole, str(rest).rjust(prec, '0').rstrip('0'))


def format_go_duration(ns):
    """Go's Duration.String(): 0s, 500ms, 1.5\u00b5s, 1m0s, 1h2m3.5s."""
    neg = ns < 0
    u = -ns if neg else ns
    if u < _SECOND:
        if u == 0:
            text = '0s'
        elif u < _US:
            text = '%dns' % u
        elif u < _MS:
            text = _frac(u, 3) + u'\u00b5s'
        else:
            text = _frac(u, 6) + 'ms'
    else:
        seconds, rest = divmod(u, _SECOND)
        minutes, sec = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        text = _frac(sec * _SECOND + rest, 9) + 's'
        if minutes or hours:
            text = '%dm' % minutes + text
        if hours:
            text = '%dh' % hours + text
    return '-' + text if neg else text


# --------------------------------------------------------------------------
# A strict reader for the YAML subset agent config files use
# --------------------------------------------------------------------------

class Pairs(list):
    """A mapping as read: a list of ``(key, value, line)``, duplicates kept."""


class _Line:
    __slots__ = ('no', 'indent', 'text', 'tab')

    def __init__(self, no, indent, text, tab=False):
        self.no = no
        self.indent = indent
        self.text = text
        self.tab = tab      # a tab in the indentation: fine inside [...] / {...} only


_BOOLS = {}
for _word in ('y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'):
    _BOOLS[_word] = True
for _word in ('n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'):
    _BOOLS[_word] = False
_NULLS = frozenset(('', '~', 'null', 'Null', 'NULL'))
_SPECIAL_FLOATS = {
    '.nan': float('nan'), '.NaN': float('nan'), '.NAN': float('nan'),
    '.inf': float('inf'), '.Inf': float('inf'), '.INF': float('inf'),
    '+.inf': float('inf'), '+.Inf': float('inf'), '+.INF': float('inf'),
    '-.inf': float('-inf'), '-.Inf': float('-inf'), '-.INF': float('-inf'),
}
_YAML_FLOAT = re.compile(r'^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$')
_DOT_FLOAT = re.compile(r'^\.[0-9]+([eE][-+]?[0-9]+)?$')
_INT_FORMS = (
    (re.compile(r'^0[xX]([0-9a-fA-F]+)$'), 16),
    (re.compile(r'^0[oO]([0-7]+)$'), 8),
    (re.compile(r'^0[bB]([01]+)$'), 2),
    (re.compile(r'^0([0-7]+)$'), 8),
    (re.compile(r'^([1-9][0-9]*|0)$'), 10),
)
_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1
_DQ_ESCAPES = {
    '0': '\0', 'a': '\a', 'b': '\b', 't': '\t', '\t': '\t', 'n': '\n', 'v': '\v',
    'f': '\f', 'r': '\r', 'e': '\x1b', ' ': ' ', '"': '"', '/': '/', '\\': '\\',
    'N': u'\u0085', '_': u'\u00a0', 'L': u'\u2028', 'P': u'\u2029',
}
_HEX_ESCAPES = {'x': 2, 'u': 4, 'U': 8}
_UNSUPPORTED_START = {
    '&': 'anchors (&name) are not supported',
    '*': 'aliases (*name) are not supported',
    '!': 'tags (!tag) are not supported',
    '|': 'block scalars (| and >) are not supported',
    '>': 'block scalars (| and >) are not supported',
    '%': 'a plain value cannot start with "%"; quote it',
    '@': 'a plain value cannot start with "@"; quote it',
    '`': 'a plain value cannot start with "`"; quote it',
}


def _resolve_int(text):
    """Go's strconv.ParseInt(text, 0, 64) after YAML dropped '_'; None if not an int."""
    sign = 1
    body = text
    if body[:1] in ('-', '+'):
        sign = -1 if body[0] == '-' else 1
        body = body[1:]
    for pattern, base in _INT_FORMS:
        match = pattern.match(body)
        if match:
            value = sign * int(match.group(1), base)
            if _INT64_MIN <= value <= _UINT64_MAX:
                return value
            return None
    return None


def resolve_plain(text):
    """The value of a plain (unquoted) scalar, as go-yaml v2 resolves it."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    first = text[0]
    if first == '.':
        if _DOT_FLOAT.match(text):
            return float(text)
        return text
    if first in '+-' or _is_digit(first):
        plain = text.replace('_', '')
        value = _resolve_int(plain)
        if value is not None:
            return value
        if _YAML_FLOAT.match(plain):
            return float(plain)
        if plain.startswith('-0b'):
            value = _resolve_int('-' + plain[1:])
            if value is not None:
                return value
    return text


class _Yaml:
    """Recursive descent over significant lines (blank and comment lines dropped)."""

    def __init__(self, text):
        self.lines = []
        self.raw = text.split('\n')
        self._read_lines()

    # -- errors ----------------------------------------------------------

    def error(self, lineno, reason):
        shown = self.raw[lineno - 1].strip() if 0 < lineno <= len(self.raw) else ''
        if len(shown) > 80:
            shown = shown[:77] + '...'
        return ConfigError('line %d: %s: %s' % (lineno, reason, _quote(shown)),
                           line=lineno)

    # -- lines -----------------------------------------------------------

    def _read_lines(self):
        started = False
        ended = False
        for index, raw in enumerate(self.raw):
            no = index + 1
            line = raw[:-1] if raw.endswith('\r') else raw
            stripped = line.strip(' \t')
            if not stripped or stripped.startswith('#'):
                continue
            if ended:
                raise self.error(no, 'content after the end-of-document marker "..."')
            if line.startswith('---') and (len(line) == 3 or line[3] in ' \t'):
                rest = line[3:].strip(' \t')
                if started:
                    raise self.error(no, 'a second YAML document ("---"); the agent reads one document')
                if rest and not rest.startswith('#'):
                    raise self.error(no, 'content on the "---" line is not supported; start it on the next line')
                started = True
                continue
            if line.startswith('...') and (len(line) == 3 or line[3] in ' \t'):
                ended = True
                continue
            if line.startswith('%'):
                raise self.error(no, 'YAML directives ("%") are not supported')
            indent = len(line) - len(line.lstrip(' '))
            tab = line[indent] == '\t'
            started = True
            self.lines.append(_Line(no, indent, line[indent:].strip(' \t'), tab))

    # -- documents -------------------------------------------------------

    def document(self):
        if not self.lines:
            return None
        first = self.lines[0]
        value, nxt = self.block(0, first.indent)
        if nxt < len(self.lines):
            line = self.lines[nxt]
            raise self.error(line.no, 'this line is indented less than the first line of the document'
                             if line.indent < first.indent else 'unexpected content')
        return value

    @staticmethod
    def _is_entry(text):
        return text == '-' or text.startswith('- ') or text.startswith('-\t')

    def _check_indent(self, line):
        if line.tab:
            raise self.error(line.no, 'a tab in the indentation (YAML allows spaces only)')

    def block(self, i, indent):
        self._check_indent(self.lines[i])
        text = self.lines[i].text
        if self._is_entry(text):
            return self.sequence(i, indent)
        if self._key(self.lines[i]) is not None:
            return self.mapping(i, indent)
        value, nxt = self.inline(i, text)
        return value, self._after_value(nxt, indent)

    def _after_value(self, nxt, indent):
        if nxt < len(self.lines) and (self.lines[nxt].indent > indent or self.lines[nxt].tab):
            self._check_indent(self.lines[nxt])
            raise self.error(self.lines[nxt].no,
                             'unexpected indentation (a value continued on the next line, or a '
                             'nested block after a value on the same line, is not supported)')
        return nxt

    def _key(self, line):
        """``(key, rest, rest_column)`` if the line is ``key: ...``, else None."""
        text = line.text
        first = text[0]
        if first in '"\'':
            key, end = self.quoted(line.no, text, 0)
            j = end
            while j < len(text) and text[j] in ' \t':
                j += 1
            if j < len(text) and text[j] == ':' and (j + 1 == len(text) or text[j + 1] in ' \t'):
                return key, text[j + 1:], j + 1
            return None
        if first == '?' and (len(text) == 1 or text[1] in ' \t'):
            raise self.error(line.no, 'complex keys ("? ") are not supported')
        if first in '[{':
            return None
        j = 0
        while j < len(text):
            char = text[j]
            if char == '#' and j > 0 and text[j - 1] in ' \t':
                return None
            if char == ':' and (j + 1 == len(text) or text[j + 1] in ' \t'):
                if j == 0:
                    raise self.error(line.no, 'a mapping entry without a key')
                key = text[:j].rstrip(' \t')
                if key[0] in _UNSUPPORTED_START:
                    raise self.error(line.no, _UNSUPPORTED_START[key[0]])
                return key, text[j + 1:], j + 1
            j += 1
        return None

    def mapping(self, i, indent):
        pairs = Pairs()
        while i < len(self.lines) and self.lines[i].indent == indent:
            line = self.lines[i]
            self._check_indent(line)
            if self._is_entry(line.text):
                raise self.error(line.no, 'a list entry where a "key: value" line was expected')
            found = self._key(line)
            if found is None:
                raise self.error(line.no, 'expected a "key: value" line')
            key, rest, _col = found
            rest = rest.strip(' \t')
            nxt = i + 1
            if not rest or rest.startswith('#'):
                if nxt < len(self.lines) and self.lines[nxt].indent > indent:
                    value, nxt = self.block(nxt, self.lines[nxt].indent)
                elif (nxt < len(self.lines) and self.lines[nxt].indent == indent
                      and self._is_entry(self.lines[nxt].text)):
                    value, nxt = self.sequence(nxt, indent)
                else:
                    value = None
            else:
                value, nxt = self.inline(i, rest)
                nxt = self._after_value(nxt, indent)
            pairs.append((key, value, line.no))
            i = nxt
        return pairs, i

    def sequence(self, i, indent):
        items = []
        while (i < len(self.lines) and self.lines[i].indent == indent
               and self._is_entry(self.lines[i].text)):
            line = self.lines[i]
            self._check_indent(line)
            rest = line.text[1:]
            stripped = rest.lstrip(' \t')
            if not stripped or stripped.startswith('#'):
                nxt = i + 1
                if nxt < len(self.lines) and self.lines[nxt].indent > indent:
                    value, nxt = self.block(nxt, self.lines[nxt].indent)
                else:
                    value = None
            else:
                # "- x": x is a node that starts at its own column.
                column = indent + 1 + len(rest) - len(stripped)
                self.lines[i] = _Line(line.no, column, stripped)
                value, nxt = self.block(i, column)
            items.append(value)
            i = nxt
        return items, i

    # -- one value on a line ----------------------------------------------

    def inline(self, i, text):
        """A value that starts on line ``i``: flow collection, quoted or plain scalar."""
        line = self.lines[i]
        first = text[0]
        if first in '[{':
            return _Flow(self, i, text).run()
        if first in _UNSUPPORTED_START:
            raise self.error(line.no, _UNSUPPORTED_START[first])
        if first in '"\'':
            value, end = self.quoted(line.no, text, 0)
            tail = text[end:].strip(' \t')
            if tail and not tail.startswith('#'):
                raise self.error(line.no, 'unexpected text after a quoted value')
            return value, i + 1
        if self._is_entry(text):
            raise self.error(line.no, 'a list entry ("- ") is not allowed here')
        cut = len(text)
        for j in range(1, len(text)):
            if text[j] == '#' and text[j - 1] in ' \t':
                cut = j
                break
        plain = text[:cut].rstrip(' \t')
        for j, char in enumerate(plain):
            if char == ':' and (j + 1 == len(plain) or plain[j + 1] in ' \t'):
                raise self.error(line.no, 'a "key: value" inside a value (quote the value if the colon belongs to it)')
        if first in ',[]{}#' or (first in '?:' and (len(plain) == 1 or plain[1] in ' \t')):
            raise self.error(line.no, 'a plain value cannot start with %s; quote it' % _quote(first))
        return resolve_plain(plain), i + 1

    def quoted(self, lineno, text, start):
        """Parse the quoted scalar starting at ``text[start]``; return (value, end)."""
        quote = text[start]
        out = []
        j = start + 1
        while j < len(text):
            char = text[j]
            if quote == "'":
                if char == "'":
                    if j + 1 < len(text) and text[j + 1] == "'":
                        out.append("'")
                        j += 2
                        continue
                    return ''.join(out), j + 1
                out.append(char)
                j += 1
                continue
            if char == '"':
                return ''.join(out), j + 1
            if char == '\\':
                if j + 1 >= len(text):
                    break
                esc = text[j + 1]
                if esc in _DQ_ESCAPES:
                    out.append(_DQ_ESCAPES[esc])
                    j += 2
                    continue
                if esc in _HEX_ESCAPES:
                    width = _HEX_ESCAPES[esc]
                    digits = text[j + 2:j + 2 + width]
                    if len(digits) != width or not all(c in '0123456789abcdefABCDEF' for c in digits):
                        raise self.error(lineno, 'a bad \\%s escape in a double-quoted value' % esc)
                    code = int(digits, 16)
                    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                        raise self.error(lineno, 'a bad \\%s escape in a double-quoted value' % esc)
                    out.append(chr(code))
                    j += 2 + width
                    continue
                raise self.error(lineno, 'an unknown escape \\%s in a double-quoted value' % esc)
            out.append(char)
            j += 1
        raise self.error(lineno, 'a quoted value that does not end on its line (multi-line values are not supported)')


class _Flow:
    """A flow collection (``[...]`` / ``{...}``), which may span lines."""

    def __init__(self, yaml, index, text):
        self.yaml = yaml
        self.index = index          # index in yaml.lines of the current segment
        self.text = text            # the current segment
        self.pos = 0

    @property
    def lineno(self):
        return self.yaml.lines[self.index].no

    def error(self, reason):
        return self.yaml.error(self.lineno, reason)

    def run(self):
        value = self.node()
        tail = self.text[self.pos:].strip(' \t')
        if tail and not tail.startswith('#'):
            raise self.error('unexpected text after the closing bracket')
        return value, self.index + 1

    def skip(self):
        """Skip spaces, comments and line ends; False at the end of the input."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in ' \t':
                self.pos += 1
            at_end = self.pos >= len(self.text)
            if not at_end and self.text[self.pos] == '#' and (self.pos == 0 or self.text[self.pos - 1] in ' \t'):
                at_end = True
            if not at_end:
                return True
            if self.index + 1 >= len(self.yaml.lines):
                return False
            self.index += 1
            self.text = self.yaml.lines[self.index].text
            self.pos = 0

    def peek(self):
        if not self.skip():
            raise self.error('a "[" or "{" that is never closed')
        return self.text[self.pos]

    def node(self):
        char = self.peek()
        if char == '[':
            return self.sequence()
        if char == '{':
            return self.mapping()
        if char in '"\'':
            value, self.pos = self.yaml.quoted(self.lineno, self.text, self.pos)
            return value
        if char in _UNSUPPORTED_START:
            raise self.error(_UNSUPPORTED_START[char])
        if char in ',]}':
            raise self.error('an empty entry in a flow collection')
        return self.plain()

    def plain(self):
        start = self.pos
        text = self.text
        j = start
        while j < len(text):
            char = text[j]
            if char in ',[]{}':
                break
            if char == ':' and (j + 1 == len(text) or text[j + 1] in ' \t,[]{}'):
                break
            if char == '#' and j > start and text[j - 1] in ' \t':
                break
            j += 1
        value = text[start:j].rstrip(' \t')
        if not value:
            raise self.error('an empty entry in a flow collection')
        self.pos = start + len(value)
        return resolve_plain(value)

    def sequence(self):
        self.pos += 1
        items = []
        while True:
            if self.peek() == ']':
                self.pos += 1
                return items
            items.append(self.node())
            char = self.peek()
            if char == ',':
                self.pos += 1
            elif char == ':':
                raise self.error('"key: value" entries inside [...] are not supported')
            elif char != ']':
                raise self.error('expected "," or "]" in a flow list')

    def mapping(self):
        self.pos += 1
        pairs = Pairs()
        while True:
            if self.peek() == '}':
                self.pos += 1
                return pairs
            lineno = self.lineno
            if self.peek() in '[{':
                raise self.error('a list or mapping as a key is not supported')
            key = self.node()
            value = None
            char = self.peek()
            if char == ':':
                self.pos += 1
                if self.peek() not in ',}':
                    value = self.node()
            pairs.append((key if isinstance(key, str) else _key_text(key), value, lineno))
            char = self.peek()
            if char == ',':
                self.pos += 1
            elif char != '}':
                raise self.error('expected "," or "}" in a flow mapping')


def _key_text(key):
    if key is None:
        return 'null'
    if isinstance(key, bool):
        return 'true' if key else 'false'
    return str(key)


def load_yaml(text):
    """The YAML subset -> None, str, bool, int, float, list or Pairs."""
    return _Yaml(text).document()


def _reject_constant(name):
    raise ValueError('%s is not valid JSON' % name)


def load_json(text):
    """Strict JSON, as Go's encoding/json reads it (no NaN, no trailing data)."""
    try:
        return _json().loads(text, object_pairs_hook=_json_pairs, parse_constant=_reject_constant)
    except ValueError as e:
        lineno = int(getattr(e, 'lineno', 0) or 0)
        colno = int(getattr(e, 'colno', 0) or 0)
        reason = getattr(e, 'msg', None) or str(e)
        if lineno > 0:
            shown = text.split('\n')[lineno - 1].strip()
            if len(shown) > 80:
                shown = shown[:77] + '...'
            raise ConfigError('line %d column %d: invalid JSON (a file that starts with "{" is read as JSON, as '
                              'upstream reads it): %s: %s'
                              % (lineno, colno, reason, _quote(shown)), line=lineno)
        raise ConfigError('invalid JSON (a file that starts with "{" is read as JSON, as upstream reads it): %s'
                          % reason)


def _json_pairs(items):
    return Pairs((key, value, None) for key, value in items)


# --------------------------------------------------------------------------
# The settings
# --------------------------------------------------------------------------

def defaults():
    """The upstream agent's settings when there is no config file."""
    return {
        'nonmasquerade_cidrs': list(DEFAULT_NONMASQ_CIDRS),
        'masq_link_local': False,
        'masq_link_local_ipv6': False,
        'cidr_limit': DEFAULT_CIDR_LIMIT,
        'resync_interval': DEFAULT_RESYNC_INTERVAL,
    }


def _describe(value):
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'the boolean %s' % ('true' if value else 'false')
    if isinstance(value, int):
        return 'the number %d' % value
    if isinstance(value, float):
        return 'the number %r' % value
    if isinstance(value, str):
        return 'the string %s' % _quote(value)
    if isinstance(value, Pairs):
        return 'a mapping'
    if isinstance(value, list):
        return 'a list'
    return repr(value)


def _json_key_line(text, key):
    """Best effort: the line of ``"key":`` in a JSON text."""
    if text is None:
        return None
    match = re.search(r'"%s"\s*:' % re.escape(key), text)
    return text.count('\n', 0, match.start()) + 1 if match else None


def normalise(document, ipv6=False, from_json=False, text=None):
    """Turn a parsed document into ``(settings, warnings)``.

    ``ipv6`` is the agent's --enable-ipv6; ``from_json`` says the file was
    JSON (Go then refuses ``64.0`` for an int, which YAML turns into 64)."""
    settings = defaults()
    warnings = []
    if document is None:
        return settings, warnings
    if not isinstance(document, Pairs):
        raise ConfigError('the file must hold a mapping of keys (nonMasqueradeCIDRs, masqLinkLocal, '
                          'masqLinkLocalIPv6, cidrLimit, resyncInterval), not %s.' % _describe(document))
    seen = {}
    unknown = []
    for key, value, line in document:
        if line is None and from_json:
            line = _json_key_line(text, key)
        where = ('%s (line %d)' % (key, line)) if line else key
        found = _FOLDED.get(key.casefold()) if isinstance(key, str) else None
        if found is None:
            unknown.append((key, line))
            continue
        upstream, ours = found
        if ours in seen:
            warnings.append('%s is given more than once (also as %s); the last one is used.'
                            % (where, seen[ours]))
        seen[ours] = where
        if ours == 'nonmasquerade_cidrs':
            settings[ours] = _cidr_list(where, value, warnings)
        elif ours in ('masq_link_local', 'masq_link_local_ipv6'):
            if value is None:   # Go: null leaves a bool as it was
                continue
            if not isinstance(value, bool):
                hint = ' (remove the quotes)' if isinstance(value, str) and value.lower() in ('true', 'false') else ''
                raise ConfigError('%s must be true or false, not %s%s.' % (where, _describe(value), hint), line=line)
            settings[ours] = value
        elif ours == 'cidr_limit':
            if value is None:
                continue
            settings[ours] = _cidr_limit(where, value, from_json, line)
        else:
            if not isinstance(value, str):
                raise ConfigError('%s must be a string holding a Go duration such as "60s", not %s.'
                                  % (where, _describe(value)), line=line)
            try:
                ns = parse_go_duration_ns(value)
            except MasqError as e:
                raise ConfigError('%s: %s' % (where, e.msg), line=line)
            if ns <= 0:
                raise ConfigError('%s: %s is not a positive duration.' % (where, _quote(value)), line=line)
            settings[ours] = format_go_duration(ns)
    warnings.extend(_check_cidrs(settings, ipv6, seen.get('nonmasquerade_cidrs')))
    for key, line in unknown:
        warnings.append(_unknown_key_warning(key, line))
    return settings, warnings


def _cidr_list(where, value, warnings):
    if value is None:
        warnings.append('%s is null: as upstream, that means no CIDR at all (everything but link-local is '
                        'masqueraded); write [] to say so, or remove the key for the defaults.' % where)
        return []
    if isinstance(value, Pairs) or not isinstance(value, list):
        raise ConfigError('%s must be a list of CIDR strings, not %s.' % (where, _describe(value)))
    bad = ['entry %d is %s' % (n + 1, _describe(item)) for n, item in enumerate(value) if not isinstance(item, str)]
    if bad:
        raise ConfigError('%s must be a list of CIDR strings: %s.' % (where, '; '.join(bad)))
    return list(value)


def _cidr_limit(where, value, from_json, line):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError('%s must be a whole number, not %s.' % (where, _describe(value)), line=line)
    if isinstance(value, float):
        if from_json or not value.is_integer():   # also NaN and infinities
            raise ConfigError('%s must be a whole number, not %s.' % (where, _describe(value)), line=line)
        value = int(value)
    if not _INT64_MIN <= value < (1 << 63):
        raise ConfigError('%s: %d is out of range.' % (where, value), line=line)
    if value < 0:
        raise ConfigError('%s must not be negative, got %d.' % (where, value), line=line)
    return value


def _unknown_key_warning(key, line):
    name = key if isinstance(key, str) else _key_text(key)
    where = '%s (line %d)' % (_quote(name), line) if line else _quote(name)
    folded = re.sub(r'[^a-z0-9]', '', name.casefold())
    if folded in _FLAG_HINTS:
        return ('unknown key %s is ignored (as upstream ignores it): this is the agent flag %s, set on the '
                'command line (the role sets it from its variables), not in the config file.'
                % (where, _FLAG_HINTS[folded]))
    if folded in _KEY_HINTS:
        return 'unknown key %s is ignored (as upstream ignores it); did you mean %s?' % (where, _KEY_HINTS[folded])
    return ('unknown key %s is ignored (as upstream ignores it); the keys are nonMasqueradeCIDRs, masqLinkLocal, '
            'masqLinkLocalIPv6, cidrLimit and resyncInterval.' % where)


def _check_cidrs(settings, ipv6, where):
    """Validate the CIDRs with the core's parser; canonical, duplicates dropped."""
    where = where or 'nonMasqueradeCIDRs'
    cidrs = settings['nonmasquerade_cidrs']
    try:
        by_family, _dups = parse_cidrs(cidrs, ipv6=True, cidr_limit=None)
    except MasqError as e:
        raise ConfigError('%s: %s' % (where, _core_reason(e.msg)))
    canon = []
    counts = {}
    for raw in cidrs:
        text = str(ipaddress.ip_network(raw.strip()))
        if text not in counts:
            counts[text] = 0
            canon.append(text)
        counts[text] += 1
    if by_family[6] and not ipv6:
        one = len(by_family[6]) == 1
        raise ConfigError('%s: %s %s IPv6 but IPv6 is not enabled: start the agent with --enable-ipv6 '
                          '(role variable ip_masq_enable_ipv6: true), or remove %s.'
                          % (where, ', '.join(by_family[6]), 'is' if one else 'are', 'it' if one else 'them'))
    limit = settings['cidr_limit']
    if len(canon) > limit:
        raise ConfigError('%s: %d CIDRs (link-local not counted) is over cidrLimit %d; aggregate the list or '
                          'raise cidrLimit.' % (where, len(canon), limit))
    settings['nonmasquerade_cidrs'] = canon
    return ['%s lists %s %d times; one rule is written.' % (where, cidr, counts[cidr])
            for cidr in canon if counts[cidr] > 1]


def _core_reason(msg):
    """The core's message without its module-specific wrapping."""
    for prefix in ('nonmasquerade_cidrs: ',):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    suffix = ' Nothing was changed.'
    if msg.endswith(suffix):
        msg = msg[:-len(suffix)]
    return msg


def parse_config(text, ipv6=False):
    """Parse the text of an agent config file into ``(settings, warnings)``.

    Raises ConfigError (a MasqError) naming the line and the reason."""
    if text.startswith(u'\ufeff'):
        text = text[1:]
    # Upstream (k8s.io/apimachinery util/yaml.ToJSON): JSON if the first
    # non-space character is "{", YAML otherwise.
    from_json = text.lstrip().startswith('{')
    document = load_json(text) if from_json else load_yaml(text)
    return normalise(document, ipv6=ipv6, from_json=from_json, text=text)


def read_config(path):
    """The file's text, or None when it does not exist (upstream: defaults)."""
    try:
        with open(path, 'rb') as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except (IOError, OSError) as e:
        if getattr(e, 'errno', None) == 2:   # ENOENT, also a dangling symlink
            return None
        raise ConfigError('%s cannot be read: %s.' % (path, getattr(e, 'strerror', None) or e))
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError('%s is larger than %d bytes; that is not an agent config file.' % (path, MAX_CONFIG_BYTES))
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b'\n') + 1
        raise ConfigError('line %d: the file is not UTF-8 text (byte 0x%02x at offset %d).'
                          % (line, data[e.start], e.start), line=line)


def load_config(path=DEFAULT_CONFIG_PATH, ipv6=False):
    """``(settings, warnings, text)``: text is None when the file is missing."""
    text = read_config(path)
    if text is None:
        return defaults(), [], None
    settings, warnings = parse_config(text, ipv6=ipv6)
    return settings, warnings, text


def to_upstream(settings):
    """The settings as the upstream JSON object (upstream key names)."""
    return dict((upstream, settings[ours]) for upstream, ours in FIELDS)


def render_config(settings, compact=False):
    """The settings as an upstream config file: JSON, which this agent and
    the upstream agent both read."""
    if compact:
        return _json().dumps(to_upstream(settings), separators=(',', ':'), ensure_ascii=False)
    return _json().dumps(to_upstream(settings), indent=2, ensure_ascii=False) + '\n'
