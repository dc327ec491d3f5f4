# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
#
# One file over 500 lines on purpose: one parser. The line scanner, the block
# and flow readers and go-yaml v2's scalar resolution share its state (line,
# depth, anchors, the alias budget); split, each part would need the others.
"""A strict reader for the YAML subset agent config files use.

Block mappings and sequences, flow ``[...]`` and ``{...}``, plain and quoted
scalars, comments, anchors (``&name``) and aliases (``*name``); plain scalars
resolved as go-yaml v2 (the upstream agent's reader) resolves them, so YAML
1.1 booleans such as ``yes``/``off`` are booleans.  Of a file with several
documents, the first is read and the rest ignored, as go-yaml's Unmarshal
does.  Anything else (tags, merge keys, block scalars, multi-line scalars) is
refused with the line and its text, so the node keeps its last good rules
instead of guessing.

Bounds, so that no file of the size the resync reads (1 MiB) can exhaust the
stack or the memory (an agent config file needs a depth of 2 and no alias):

* lists and mappings nested more than :data:`MAX_DEPTH` (32) deep are refused,
  counting what an alias brings in at the depth it is used;
* aliases that expand to more than :data:`MAX_ALIAS_NODES` (100,000) values in
  all (what a "billion laughs" bomb does, as a value or as a key) are refused;
* a key must be a scalar (an alias of a list or mapping as a key is refused);
* a value has at most one anchor.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import ConfigError, quote

# The deepest nesting of lists and mappings read (a config file needs 2), for
# YAML here and for JSON (config.py).
MAX_DEPTH = 32
# The most values that aliases may bring in, in all: a legitimate file
# repeats a list or two; a bomb (9 aliases of 9 aliases of ...) is refused.
MAX_ALIAS_NODES = 100000
DEPTH_REASON = 'lists and mappings nested more than %d deep (an agent config file needs 2)' % MAX_DEPTH


def _is_digit(char):
    return '0' <= char <= '9'


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
_DIGITS = frozenset('0123456789')
_HEX = frozenset('0123456789abcdefABCDEF')
_OCT = frozenset('01234567')
_BIN = frozenset('01')


def _digits_from(text, i):
    """The index after the run of ASCII digits that starts at ``i``."""
    n = len(text)
    while i < n and text[i] in _DIGITS:
        i += 1
    return i


def is_yaml_float(text):
    """``[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?``, go-yaml v2's
    float form (written out: this file avoids ``re``, whose import would be
    most of a resync cycle's own work)."""
    n = len(text)
    i = 1 if text[:1] in ('-', '+') else 0
    if text[i:i + 1] == '.':
        j = _digits_from(text, i + 1)
        if j == i + 1:
            return False
    else:
        j = _digits_from(text, i)
        if j == i:
            return False
        if text[j:j + 1] == '.':
            j = _digits_from(text, j + 1)
    if j < n and text[j] in 'eE':
        j += 1
        if text[j:j + 1] in ('-', '+'):
            j += 1
        k = _digits_from(text, j)
        if k == j:
            return False
        j = k
    return j == n


def int_digits(body):
    """``(digits, base)`` of Go's integer forms (0x.., 0o.., 0b.., 0.. octal,
    decimal) for an unsigned ``body``, or None."""
    head, rest = body[:2], body[2:]
    if rest and head in ('0x', '0X') and _HEX.issuperset(rest):
        return rest, 16
    if rest and head in ('0o', '0O') and _OCT.issuperset(rest):
        return rest, 8
    if rest and head in ('0b', '0B') and _BIN.issuperset(rest):
        return rest, 2
    if len(body) > 1 and body[0] == '0' and _OCT.issuperset(body[1:]):
        return body[1:], 8
    if body == '0' or (body[:1] in ('1', '2', '3', '4', '5', '6', '7', '8', '9') and _DIGITS.issuperset(body)):
        return body, 10
    return None


INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1
_DQ_ESCAPES = {
    '0': '\0', 'a': '\a', 'b': '\b', 't': '\t', '\t': '\t', 'n': '\n', 'v': '\v',
    'f': '\f', 'r': '\r', 'e': '\x1b', ' ': ' ', '"': '"', '/': '/', '\\': '\\',
    'N': u'\u0085', '_': u'\u00a0', 'L': u'\u2028', 'P': u'\u2029',
}
_HEX_ESCAPES = {'x': 2, 'u': 4, 'U': 8}
# What a "- value" line's fast path takes (_Yaml._sequence): a CIDR, an address, a number or a word.
_FAST_PLAIN = frozenset('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./:')
# go-yaml v2's anchor and alias names: letters, digits, '_' and '-'.
_ANCHOR_CHARS = frozenset('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-')
_UNSUPPORTED_START = {
    '&': 'an anchor (&name) on a key or on a mapping that starts on the same line is not supported',
    '*': 'an alias (*name) as a key is not supported',
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
    found = int_digits(body)
    if found is None:
        return None
    value = sign * int(found[0], found[1])
    if INT64_MIN <= value <= _UINT64_MAX:
        return value
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
        if is_yaml_float(text):
            return float(text)
        return text
    if first in '+-' or _is_digit(first):
        plain = text.replace('_', '')
        value = _resolve_int(plain)
        if value is not None:
            return value
        if is_yaml_float(plain):
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
        self.anchors = {}       # name -> (value, values in it, depth of it)
        self.depth = 0          # lists and mappings open
        self.deepest = 0        # the deepest nesting reached (since the innermost anchor's mark)
        self.nodes = 0          # values read, aliases expanded
        self.expanded = 0       # values brought in by aliases
        self.raw = text.split('\n')
        self._read_lines()

    # -- errors ----------------------------------------------------------

    def error(self, lineno, reason):
        shown = self.raw[lineno - 1].strip() if 0 < lineno <= len(self.raw) else ''
        if len(shown) > 80:
            shown = shown[:77] + '...'
        return ConfigError('line %d: %s: %s' % (lineno, reason, quote(shown)),
                           line=lineno)

    # -- bounds ----------------------------------------------------------

    def nest(self, lineno):
        """A list or mapping starts (MAX_DEPTH)."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(lineno, DEPTH_REASON)
        if self.depth > self.deepest:
            self.deepest = self.depth

    def unnest(self):
        self.depth -= 1

    # -- lines -----------------------------------------------------------

    def _read_lines(self):
        started = False
        append = self.lines.append
        no = 0
        for raw in self.raw:
            no += 1
            line = raw[:-1] if raw[-1:] == '\r' else raw
            stripped = line.strip(' \t')
            if not stripped or stripped[0] == '#':
                continue
            first = line[0]
            if first in '-.%':
                if first == '-' and line.startswith('---') and (len(line) == 3 or line[3] in ' \t'):
                    rest = line[3:].strip(' \t')
                    if started:
                        # A second document: upstream (go-yaml's Unmarshal) reads the first only.
                        return
                    if rest and not rest.startswith('#'):
                        raise self.error(no, 'content on the "---" line is not supported; start it on the next line')
                    started = True
                    continue
                if first == '.' and line.startswith('...') and (len(line) == 3 or line[3] in ' \t'):
                    return      # the end of the first document; what follows is not read
                if first == '%':
                    raise self.error(no, 'YAML directives ("%") are not supported')
            indent = len(line) - len(line.lstrip(' '))
            started = True
            # The text without its indentation is the stripped line (a tab after the spaces goes too).
            append(_Line(no, indent, stripped, line[indent] == '\t'))

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
        self.nest(self.lines[i].no)
        pairs, i = self._mapping(i, indent)
        self.unnest()
        return pairs, i

    def _mapping(self, i, indent):
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
            anchor, rest = self.anchor(line.no, rest.strip(' \t'))
            mark = self.mark(anchor)
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
            if key == '<<':
                raise self.error(line.no, 'merge keys ("<<") are not supported; write the keys out')
            self.define(anchor, value, mark)
            self.nodes += 1
            pairs.append((key, value, line.no))
            i = nxt
        return pairs, i

    def sequence(self, i, indent):
        self.nest(self.lines[i].no)
        items, i = self._sequence(i, indent)
        self.unnest()
        return items, i

    def _sequence(self, i, indent):
        items = []
        lines = self.lines
        count = len(lines)
        while i < count:
            line = lines[i]
            text = line.text
            if line.indent != indent or not (text == '-' or text[:2] in ('- ', '-\t')):
                break
            if line.tab:
                self._check_indent(line)
            rest = text[1:]
            stripped = rest.lstrip(' \t')
            nxt = i + 1
            # The fast path: "- 10.0.0.0/8", "- fd00::/8", "- 1024" (letters, digits, ".", "/" and ":"
            # only, not ending in ":"), with no deeper line after it: a plain scalar, which the general
            # path below would read (and refuse) exactly alike.
            if (stripped and _FAST_PLAIN.issuperset(stripped) and stripped[-1] != ':'
                    and (nxt == count or (lines[nxt].indent <= indent and not lines[nxt].tab))):
                items.append(stripped if '/' in stripped or ':' in stripped else resolve_plain(stripped))
                self.nodes += 1
                i = nxt
                continue
            anchor = None
            if stripped.startswith('&'):
                # "- &a value": the value starts where it stands (a suffix of rest).
                anchor, stripped = self.anchor(line.no, stripped)
            mark = self.mark(anchor)
            if not stripped or stripped.startswith('#'):
                if nxt < count and lines[nxt].indent > indent:
                    value, nxt = self.block(nxt, lines[nxt].indent)
                else:
                    value = None
            else:
                # "- x": x is a node that starts at its own column.
                column = indent + 1 + len(rest) - len(stripped)
                lines[i] = _Line(line.no, column, stripped)
                value, nxt = self.block(i, column)
            self.define(anchor, value, mark)
            self.nodes += 1
            items.append(value)
            i = nxt
        return items, i

    # -- anchors and aliases ----------------------------------------------

    def anchor(self, lineno, text):
        """``(name, rest)`` when ``text`` starts with ``&name``, else ``(None, text)``."""
        if not text.startswith('&'):
            return None, text
        name, rest = _name_at(text, 1)
        if not name:
            raise self.error(lineno, 'an anchor ("&") without a name')
        if rest and rest[0] not in ' \t':
            raise self.error(lineno, 'an anchor name may hold letters, digits, "_" and "-" only')
        rest = rest.strip(' \t')
        if rest.startswith('&'):
            raise self.error(lineno, 'a value with two anchors')
        return name, rest

    def mark(self, name):
        """Where the value an anchor names starts (None without an anchor):
        what :meth:`define` measures its size and depth from."""
        if name is None:
            return None
        mark = (self.nodes, self.deepest)
        self.deepest = self.depth
        return mark

    def define(self, name, value, mark):
        if name is None:
            return
        nodes, deepest = mark
        self.anchors[name] = (value, self.nodes - nodes + 1, self.deepest - self.depth)
        if deepest > self.deepest:
            self.deepest = deepest

    def alias(self, lineno, name):
        """The value an alias names, counted as if written out (MAX_ALIAS_NODES, MAX_DEPTH)."""
        if not name:
            raise self.error(lineno, 'an alias ("*") without a name')
        if name not in self.anchors:
            raise self.error(lineno, 'the alias *%s names no anchor defined before it' % name)
        value, nodes, depth = self.anchors[name]
        self.nodes += nodes
        self.expanded += nodes
        if self.expanded > MAX_ALIAS_NODES:
            raise self.error(lineno, 'aliases that expand to more than %d values (an alias bomb?); write the '
                                     'values out' % MAX_ALIAS_NODES)
        if self.depth + depth > MAX_DEPTH:
            raise self.error(lineno, DEPTH_REASON + ', counting what the alias *%s brings in' % name)
        if self.depth + depth > self.deepest:
            self.deepest = self.depth + depth
        return value

    # -- one value on a line ----------------------------------------------

    def inline(self, i, text):
        """A value that starts on line ``i``: flow collection, quoted or plain scalar."""
        line = self.lines[i]
        first = text[0]
        if first == '*':
            name, rest = _name_at(text, 1)
            rest = rest.strip(' \t')
            if rest and not rest.startswith('#'):
                raise self.error(line.no, 'unexpected text after an alias')
            return self.alias(line.no, name), i + 1
        if first == '&':
            name, rest = self.anchor(line.no, text)
            if not rest or rest.startswith('#'):
                raise self.error(line.no, 'an anchor with no value after it')
            mark = self.mark(name)
            value, nxt = self.inline(i, rest)
            self.define(name, value, mark)
            return value, nxt
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
            raise self.error(line.no, 'a plain value cannot start with %s; quote it' % quote(first))
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
        if char in '&*':
            name, _rest = _name_at(self.text, self.pos + 1)
            self.pos += 1 + len(name)
            if char == '*':
                return self.yaml.alias(self.lineno, name)
            if not name:
                raise self.error('an anchor ("&") without a name')
            if self.peek() == '&':
                raise self.error('a value with two anchors')
            mark = self.yaml.mark(name)
            value = self.node()
            self.yaml.define(name, value, mark)
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
        self.yaml.nest(self.lineno)
        self.pos += 1
        items = []
        while True:
            if self.peek() == ']':
                self.pos += 1
                self.yaml.unnest()
                return items
            items.append(self.node())
            self.yaml.nodes += 1
            char = self.peek()
            if char == ',':
                self.pos += 1
            elif char == ':':
                raise self.error('"key: value" entries inside [...] are not supported')
            elif char != ']':
                raise self.error('expected "," or "]" in a flow list')

    def mapping(self):
        self.yaml.nest(self.lineno)
        self.pos += 1
        pairs = Pairs()
        while True:
            if self.peek() == '}':
                self.pos += 1
                self.yaml.unnest()
                return pairs
            lineno = self.lineno
            if self.peek() in '[{':
                raise self.error('a list or mapping as a key is not supported')
            key = self.node()
            if isinstance(key, list):   # an alias or an anchored value: a key is a scalar
                raise self.yaml.error(lineno, 'a list or mapping as a key is not supported')
            value = None
            char = self.peek()
            if char == ':':
                self.pos += 1
                if self.peek() not in ',}':
                    value = self.node()
            pairs.append((key if isinstance(key, str) else key_text(key), value, lineno))
            self.yaml.nodes += 1
            char = self.peek()
            if char == ',':
                self.pos += 1
            elif char != '}':
                raise self.error('expected "," or "}" in a flow mapping')


def _name_at(text, start):
    """``(name, rest)``: the anchor or alias name that starts at ``start``."""
    end = start
    while end < len(text) and text[end] in _ANCHOR_CHARS:
        end += 1
    return text[start:end], text[end:]


def key_text(key):
    if key is None:
        return 'null'
    if isinstance(key, bool):
        return 'true' if key else 'false'
    return str(key)


def load_yaml(text):
    """The YAML subset -> None, str, bool, int, float, list or Pairs."""
    return _Yaml(text).document()
