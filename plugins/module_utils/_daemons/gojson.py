# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""JSON text as Go's encoding/json and libcni read it (the CNI network
files: ``cni_network.py``).

- :func:`loads` decodes a file once, every object as an :class:`Obj`: its
  members ``[(key, value)]`` in order, duplicates kept, keys decoded
  (escapes such as ``\\u004d`` resolved).  A value is found again in the text
  by its path (:func:`locate`: the member and element indexes from the top),
  so that an editor changes that value alone and keeps every other byte; only
  a run that edits pays for that.
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


class Obj(list):
    """A JSON object: its members ``(key, value)`` in order, duplicates kept."""

    folded = None

    def keys_folded(self):
        """Its keys folded (:func:`fold`), in order; worked out once."""
        if self.folded is None:
            self.folded = [key.translate(_FOLD) for key, _v in self]
        return self.folded


_PAIRS = json.JSONDecoder(object_pairs_hook=Obj)


def loads(text):
    """``text`` decoded, every object an :class:`Obj` (ValueError, RecursionError as json.loads)."""
    return _PAIRS.decode(text)


def fold(key):
    """``key`` folded as Go's encoding/json folds an object key."""
    return key.translate(_FOLD)


def matching(obj, name):
    """The indexes of the members of ``obj`` whose key is Go's field ``name``, in their order."""
    want = fold(name)
    return [i for i, key in enumerate(obj.keys_folded()) if key == want]


def exact(obj, name):
    """The index of the last member spelled ``name`` exactly (a Go map's look-up), or None."""
    for i in range(len(obj) - 1, -1, -1):
        if obj[i][0] == name:
            return i
    return None


def go_order(obj):
    """The member indexes of an object as a plugin gets it from libcni: a Go
    map marshalled again (the last of keys spelled the same, sorted)."""
    last = dict((key, i) for i, (key, _v) in enumerate(obj))
    return [last[key] for key in sorted(last)]


def field(obj, name, order=None):
    """The value Go decodes into a string field ``name`` from the members
    ``order`` (indexes; all, in order, by default): the last matching key that
    is not null; None when there is none (or it is not a string: Go then
    refuses the file)."""
    hits = matching(obj, name)
    if order is not None:
        hits = [i for i in order if i in hits]
    for i in reversed(hits):
        data = obj[i][1]
        if data is not None:
            return data if isinstance(data, str) else None
    return None


def version_dependent(obj, names):
    """The keys of ``obj`` that only Go 1.21 and later read as one of ``names``."""
    folded = set(fold(n) for n in names)
    return [key for key, _v in obj if any(c in key for c in GO_VERSION_DEPENDENT) and fold(key) in folded]


# --------------------------------------------------------------------------
# Positions in the text
# --------------------------------------------------------------------------

def skip_ws(text, i):
    """The index of the first character at or after ``i`` that is not JSON white space."""
    return _WS.match(text, i).end()


def members(text, i):
    """``[(start, end)]`` of the member values of the object that opens at ``text[i]``."""
    out = []
    i = _WS.match(text, i + 1).end()
    if text[i] == '}':
        return out
    while True:
        _key, i = json.decoder.scanstring(text, i + 1)
        i = _WS.match(text, _WS.match(text, i).end() + 1).end()     # past the ':'
        start = i
        _value, i = _DECODER.raw_decode(text, i)
        out.append((start, i))
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


def locate(text, start, path):
    """``(start, end)`` in ``text`` of the value at ``path`` (member and
    element indexes) below the value that starts at ``text[start]``."""
    end = None
    for index in path:
        start, end = (members if text[start] == '{' else elements)(text, start)[index]
    if end is None:
        end = _DECODER.raw_decode(text, start)[1]
    return start, end
