# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""JSON text as Go's encoding/json and libcni read it, with the place of
every value, so that an editor can change one value and keep every other
byte (the CNI network files: ``cni_network.py``).

- An object is read as its members ``[(key, start, end)]``: the key decoded
  (escapes such as ``\\u004d`` resolved), ``text[start:end]`` its value.
- A key names a Go struct field when the two are equal under Go's case
  folding (:func:`fold`): ASCII letters in any case, and the four runes Go
  folds onto ASCII letters, ``ſ`` (U+017F) to s, ``K`` (U+212A) to k, and,
  since Go 1.21 only, ``İ`` (U+0130) and ``ı`` (U+0131) to i.  Where several
  keys match, the last one decoded wins (a ``null`` leaves a string or a
  bool as it was).
- libcni passes each plugin of a network to the plugin as a Go map marshalled
  again (``ConfListFromBytes``, ``ConfListFromConf``): of keys spelled the
  same only the last stays, and the keys come sorted (:func:`go_order`); the
  plugin decodes that.

Standard library only: this file runs on managed nodes.
"""

import json
import re

_WS = re.compile(r'[ \t\n\r]*')
_DECODER = json.JSONDecoder()

# Go's foldName: ASCII letters to upper case; the runes whose simple case
# mapping reaches an ASCII letter to that letter; every other rune as it is
# (it never equals an ASCII field name).
_FOLD = dict((ord(c), c.upper()) for c in 'abcdefghijklmnopqrstuvwxyz')
_FOLD.update({0x17F: 'S', 0x212A: 'K', 0x130: 'I', 0x131: 'I'})
# Folded by Go 1.21 and later only (bytes.EqualFold of earlier Go does not).
GO_VERSION_DEPENDENT = ('\u0130', '\u0131')


def skip_ws(text, i):
    """The index of the first character at or after ``i`` that is not JSON white space."""
    return _WS.match(text, i).end()


def fold(key):
    """``key`` folded as Go's encoding/json folds an object key."""
    return key.translate(_FOLD)


def members(text, i):
    """``[(key, start, end)]`` of the object that opens at ``text[i]``."""
    out = []
    i = _WS.match(text, i + 1).end()
    if text[i] == '}':
        return out
    while True:
        key, i = json.decoder.scanstring(text, i + 1)
        i = _WS.match(text, _WS.match(text, i).end() + 1).end()     # past the ':'
        start = i
        _value, i = _DECODER.raw_decode(text, i)
        out.append((key, start, i))
        i = _WS.match(text, i).end()
        if text[i] != ',':
            return out
        i = _WS.match(text, i + 1).end()


def elements(text, i):
    """``[(start, end)]`` of the array that opens at ``text[i]``."""
    out = []
    i = _WS.match(text, i + 1).end()
    if text[i] == ']':
        return out
    while True:
        start = i
        _value, i = _DECODER.raw_decode(text, i)
        out.append((start, i))
        i = _WS.match(text, i).end()
        if text[i] != ',':
            return out
        i = _WS.match(text, i + 1).end()


def value(text, member):
    """The decoded value of a member (or element) ``(..., start, end)``."""
    return json.loads(text[member[-2]:member[-1]])


def go_order(found):
    """The members of an object as a plugin gets them from libcni: a Go map
    marshalled again (the last of keys spelled the same, sorted)."""
    last = dict((m[0], m) for m in found)
    return [last[key] for key in sorted(last)]


def matching(found, name):
    """The members of ``found`` whose key is Go's field ``name``, in their order."""
    want = fold(name)
    return [m for m in found if fold(m[0]) == want]


def exact(found, name):
    """The last member spelled ``name`` exactly (a Go map's look-up), or None."""
    hits = [m for m in found if m[0] == name]
    return hits[-1] if hits else None


def field(text, found, name):
    """The value Go decodes into a string field ``name`` from ``found`` in
    that order: the last matching key that is not null; None when there is
    none (or it is not a string: Go then refuses the file)."""
    for m in reversed(matching(found, name)):
        data = value(text, m)
        if data is not None:
            return data if isinstance(data, str) else None
    return None


def version_dependent(found, names):
    """The keys of ``found`` that only Go 1.21 and later read as one of ``names``."""
    return [m[0] for m in found if any(c in m[0] for c in GO_VERSION_DEPENDENT)
            and fold(m[0]) in set(fold(n) for n in names)]
