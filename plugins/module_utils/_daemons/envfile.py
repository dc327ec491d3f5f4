# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Shell-style environment files (``KEY=value``, ``KEY="value"``, comments),
read with the raw position of every character so that a value can be edited
in place with every other byte of the file kept.

Standard library only: this file runs on managed nodes.
"""

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.words import value_words


_ASSIGN = re.compile(r'[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*')


class Assignment:
    """``KEY=value`` in an environment file, with raw positions."""

    def __init__(self, path, key, value, pos, raw_start, raw_end, quote, close):
        self.path = path
        self.key = key
        self.value = value
        self.pos = pos
        self.raw_start = raw_start   # first byte of the value (a quote if quoted)
        self.raw_end = raw_end       # after the value (after the closing quote)
        self.quote = quote           # '"' or "'" when the whole value is one quoted string
        self.close = close           # position of that closing quote

    def words(self):
        return value_words(self.value, self.pos)


def parse_env_text(text, path=None):
    """Assignments of an environment file, in order, with systemd's rules
    (which shell-style files such as /etc/default/docker also follow):
    ``#`` and ``;`` start comment lines, values may be double- or
    single-quoted (double quotes may span lines), a backslash escapes, a
    backslash-newline continues; ``export`` in front is accepted.  A ``#``
    after whitespace ends the value, as in the shell, so an edit never
    lands in a trailing comment."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        nl = text.find('\n', i)
        eol = n if nl < 0 else nl
        stripped = text[i:eol].strip()
        m = _ASSIGN.match(text, i)
        if not stripped or stripped[0] in '#;' or not m or m.end() > eol:
            i = eol + 1
            continue
        key = m.group(1)
        k = m.end()
        raw_start = k
        chars, pos, quoted = [], [], []
        state = None
        first_quote = None
        close = None
        segments = 0
        comment_at = None
        while k < n:
            c = text[k]
            if state == '"':
                if c == '"':
                    state = None
                    close = k
                    k += 1
                elif c == '\\' and k + 1 < n and text[k + 1] == '\n':
                    k += 2
                elif c == '\\' and k + 1 < n and text[k + 1] in '"\\`$':
                    chars.append(text[k + 1])
                    pos.append((k, k + 2))
                    quoted.append(True)
                    k += 2
                else:
                    chars.append(c)
                    pos.append((k, k + 1))
                    quoted.append(True)
                    k += 1
                continue
            if state == "'":
                if c == "'":
                    state = None
                    close = k
                else:
                    chars.append(c)
                    pos.append((k, k + 1))
                    quoted.append(True)
                k += 1
                continue
            if c == '\n':
                break
            if c == '#' and k > raw_start and text[k - 1] in ' \t':
                comment_at = k                  # "value  # note", as the shell reads it
                nl2 = text.find('\n', k)
                k = n if nl2 < 0 else nl2
                break
            if c == '\\' and k + 1 < n:
                if text[k + 1] != '\n':
                    chars.append(text[k + 1])
                    pos.append((k, k + 2))
                    quoted.append(False)
                k += 2
                segments += 1
                continue
            if c in '"\'':
                if first_quote is None and segments == 0:
                    first_quote = c
                segments += 1
                state = c
                k += 1
                continue
            if c not in ' \t':
                segments += 1
            chars.append(c)
            pos.append((k, k + 1))
            quoted.append(False)
            k += 1
        raw_end = k if comment_at is None else comment_at
        # Unquoted trailing whitespace is not part of the value.
        while chars and not quoted[-1] and chars[-1] in ' \t\r':
            chars.pop()
            raw_end = pos.pop()[0]
            quoted.pop()
        while raw_end > raw_start and text[raw_end - 1] in ' \t\r':
            raw_end -= 1
        whole_quote = first_quote if (first_quote and close is not None and close == raw_end - 1) else None
        out.append(Assignment(path, key, ''.join(chars), pos, raw_start, raw_end, whole_quote, close))
        i = k + 1
    return out


def env_value(text, key):
    """The value of the last assignment of ``key`` in env-file ``text``."""
    value = None
    for a in parse_env_text(text or ''):
        if a.key == key:
            value = a.value
    return value
