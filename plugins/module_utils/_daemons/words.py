# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""systemd's word splitting, as it splits ``ExecStart=`` and ``Environment=``
lines and the value of a ``$VAR``: whitespace separates words, quotes group,
a backslash escapes, a backslash-newline continues the line.  Each word
keeps, per character, the raw span in the file it came from, so that an edit
can land on exactly those bytes.

Standard library only: this file runs on managed nodes.
"""

import re


_CESCAPES = {'n': '\n', 't': '\t', 'r': '\r', 'a': '\a', 'b': '\b', 'f': '\f', 'v': '\v'}


class Word:
    """A word of a command line or a variable's value: its text (unquoted)
    and, per character, the raw span in the file it came from."""

    __slots__ = ('text', 'start', 'end', 'pos')

    def __init__(self, text, start, end, pos):
        self.text = text
        self.start = start
        self.end = end
        self.pos = pos

    def sub(self, i, j):
        """The raw span of ``text[i:j]``."""
        return self.pos[i][0], self.pos[j - 1][1]

    def __repr__(self):
        return 'Word(%r, %d, %d)' % (self.text, self.start, self.end)


def after_continuation(text, i, end):
    """``text[i:i+2]`` is a backslash-newline: skip it and any comment lines
    that follow (systemd ignores comment lines inside continued lines)."""
    i += 2
    while i < end:
        j = i
        while j < end and text[j] in ' \t':
            j += 1
        if j < end and text[j] in '#;':
            nl = text.find('\n', j, end)
            i = end if nl < 0 else nl + 1
            continue
        break
    return i


def split_words(text, start, end):
    """Split ``text[start:end]`` as systemd splits ``ExecStart=`` and
    ``Environment=``: whitespace separates words, double and single quotes
    group, backslash escapes, backslash-newline continues the line."""
    words = []
    i = start
    while i < end:
        c = text[i]
        if c in ' \t\r\n':
            i += 1
            continue
        if text.startswith('\\\n', i):
            i = after_continuation(text, i, end)
            continue
        w_start = i
        chars = []
        pos = []
        quote = None
        while i < end:
            c = text[i]
            if quote:
                if c == quote:
                    quote = None
                    i += 1
                elif c == '\\' and text.startswith('\\\n', i):
                    chars.append(' ')
                    nxt = after_continuation(text, i, end)
                    pos.append((i, nxt))
                    i = nxt
                elif c == '\\' and i + 1 < end:
                    chars.append(_CESCAPES.get(text[i + 1], text[i + 1]))
                    pos.append((i, i + 2))
                    i += 2
                else:
                    chars.append(c)
                    pos.append((i, i + 1))
                    i += 1
                continue
            if c in ' \t\r\n' or text.startswith('\\\n', i):
                break
            if c == '\\' and i + 1 < end:
                chars.append(_CESCAPES.get(text[i + 1], text[i + 1]))
                pos.append((i, i + 2))
                i += 2
            elif c in '"\'':
                quote = c
                i += 1
            else:
                chars.append(c)
                pos.append((i, i + 1))
                i += 1
        words.append(Word(''.join(chars), w_start, i, pos))
    return words


def value_words(value, pos):
    """Split a variable's value at whitespace, as systemd does for ``$VAR``."""
    words = []
    i = 0
    n = len(value)
    while i < n:
        if value[i] in ' \t\r\n':
            i += 1
            continue
        j = i
        while j < n and value[j] not in ' \t\r\n':
            j += 1
        words.append(Word(value[i:j], pos[i][0], pos[j - 1][1], pos[i:j]))
        i = j
    return words


def systemd_quote(text):
    if text and not re.search(r'[\s"\'\\;$%]', text):
        return text
    return '"' + text.replace('\\', '\\\\').replace('"', '\\"') + '"'
