# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Docker's daemon.json, edited as text: one top-level key set or removed,
every other key and the user's layout kept byte for byte.

Standard library only: this file runs on managed nodes.
"""

import json
import re
import sys

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError


MAX_EDIT_ROUNDS = 32


class JsonMember:
    __slots__ = ('key', 'key_start', 'key_end', 'value_start', 'value_end')

    def __init__(self, key, key_start, key_end, value_start, value_end):
        self.key = key
        self.key_start = key_start
        self.key_end = key_end
        self.value_start = value_start
        self.value_end = value_end


_JSON_WS = re.compile(r'[ \t\n\r]*')


class _NotJson(ValueError):
    """NaN or Infinity: Python's json reads them, Go's (Docker's) refuses them."""


def _not_json(name):
    raise _NotJson(name)


def _where(text, word):
    """Line and column of the first ``word`` outside a string (for NaN, Infinity)."""
    in_string = escaped = False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == '\\':
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif text.startswith(word, i):
            line = text.count('\n', 0, i) + 1
            return line, i - (text.rfind('\n', 0, i) + 1) + 1
    return None


def parse_daemon_json(text, path):
    """``(data, open, close, members)`` of a daemon.json text.  An empty
    file is ``{}``; anything that is not one JSON object is an error that
    names the file and the position."""
    if text is None or not text.strip() or text.strip() == '\ufeff':
        return {}, None, None, []
    offset = 1 if text.startswith('\ufeff') else 0
    try:
        data = json.loads(text[offset:], parse_constant=_not_json)
    except RecursionError:
        raise MasqError('%s nests objects or lists too deeply to be read here (more than about %d levels); '
                        'no daemon.json needs that: fix the file first. Nothing was changed.'
                        % (path, sys.getrecursionlimit()), path=path)
    except _NotJson as e:
        name = e.args[0]
        at = _where(text, name.lstrip('-'))
        raise MasqError('%s is not valid JSON%s: %s is not a JSON value (Python reads it, Docker refuses it); '
                        'fix the file first. Nothing was changed.'
                        % (path, ' at line %d, column %d' % at if at else '', name), path=path)
    except ValueError as e:
        where = ''
        if hasattr(e, 'lineno'):
            where = ' at line %d, column %d' % (e.lineno, e.colno)
            msg = e.msg
        else:
            msg = str(e)
        raise MasqError('%s is not valid JSON%s: %s. Docker refuses a daemon.json like this too (it allows '
                        'no comments or trailing commas); fix the file first. Nothing was changed.'
                        % (path, where, msg), path=path)
    if not isinstance(data, dict):
        raise MasqError('%s must hold one JSON object ({...}), not a %s. Nothing was changed.'
                        % (path, type(data).__name__), path=path)
    dec = json.JSONDecoder()
    i = _JSON_WS.match(text, offset).end()
    open_ = i
    i = _JSON_WS.match(text, i + 1).end()
    members = []
    if text[i] == '}':
        return data, open_, i, members
    while True:
        ks = i
        key, i = json.decoder.scanstring(text, i + 1)
        ke = i
        i = _JSON_WS.match(text, i).end() + 1          # the ':'
        i = _JSON_WS.match(text, i).end()
        vs = i
        _value, i = dec.raw_decode(text, i)
        members.append(JsonMember(key, ks, ke, vs, i))
        i = _JSON_WS.match(text, i).end()
        if text[i] == ',':
            i = _JSON_WS.match(text, i + 1).end()
            continue
        return data, open_, i, members


def json_set(text, path, key, raw_value):
    """``text`` with top-level ``key`` set to the JSON text ``raw_value``
    (every occurrence of a duplicated key), or the key appended after the
    last member in the file's own layout.  Every other byte is kept."""
    _data, open_, close, members = parse_daemon_json(text, path)
    if open_ is None:
        return '{\n    %s: %s\n}\n' % (json.dumps(key), raw_value)
    hits = [m for m in members if m.key == key]
    if hits:
        if all(text[m.value_start:m.value_end] == raw_value for m in hits):
            return text
        for m in reversed(hits):
            text = text[:m.value_start] + raw_value + text[m.value_end:]
        return _with_newline(text)
    if not members:
        text = text[:open_ + 1] + '\n    %s: %s\n' % (json.dumps(key), raw_value) + text[close:]
        return _with_newline(text)
    last = members[-1]
    if len(members) > 1:
        lead = text[text.rfind(',', 0, last.key_start) + 1:last.key_start]
    else:
        lead = text[open_ + 1:last.key_start]
    if not lead and len(members) == 1:
        lead = ' '
    sep = text[last.key_end:last.value_start]
    text = text[:last.value_end] + ',' + lead + json.dumps(key) + sep + raw_value + text[last.value_end:]
    return _with_newline(text)


def json_remove(text, path, key):
    """``text`` without any top-level ``key``; every other byte kept."""
    for _i in range(MAX_EDIT_ROUNDS):
        _data, open_, close, members = parse_daemon_json(text, path)
        idx = [n for n, m in enumerate(members) if m.key == key]
        if not idx:
            return text
        n = idx[0]
        m = members[n]
        if len(members) == 1:
            text = text[:open_ + 1] + text[close:]
        elif n < len(members) - 1:
            text = text[:m.key_start] + text[members[n + 1].key_start:]
        else:
            text = text[:members[n - 1].value_end] + text[m.value_end:]
        text = _with_newline(text)
    raise MasqError('%s: could not remove %r.' % (path, key))


def _with_newline(text):
    return text if text.endswith('\n') else text + '\n'


def json_raw_value(text, path, key):
    """The raw JSON text of the last top-level ``key``, or None."""
    _data, _o, _c, members = parse_daemon_json(text, path)
    hits = [m for m in members if m.key == key]
    return text[hits[-1].value_start:hits[-1].value_end] if hits else None
