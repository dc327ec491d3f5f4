# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""systemd units as systemd loads them: the fragment, drop-ins (and their
priorities, masking, resets), the effective ``ExecStart=`` command lines with
``$VAR`` and ``${VAR}`` expanded from ``Environment=`` and
``EnvironmentFile=``, and the raw position of every character (``words.py``), so that a flag can be
edited where it is written.

Standard library only: this file runs on managed nodes.
"""

import os
import re

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.envfile import parse_env_text
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.words import (
    after_continuation,
    split_words,
    value_words,
)


DEFAULT_UNIT_DIRS = (
    '/etc/systemd/system',
    '/run/systemd/system',
    '/usr/local/lib/systemd/system',
    '/lib/systemd/system',
    '/usr/lib/systemd/system',
)
RUNTIME_DIRS = ('/run/', '/var/run/')
_VAR_REF = re.compile(r'^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$')


class Directive:
    __slots__ = ('path', 'section', 'key', 'start', 'end')

    def __init__(self, path, section, key, start, end):
        self.path = path
        self.section = section
        self.key = key
        self.start = start
        self.end = end


def parse_unit_text(text, path=None):
    """The directives of a unit file, with the raw span of each value
    (continued lines included)."""
    out = []
    section = None
    i = 0
    n = len(text)
    while i < n:
        nl = text.find('\n', i)
        eol = n if nl < 0 else nl
        line = text[i:eol]
        s = line.strip()
        if not s or s[0] in '#;':
            i = eol + 1
            continue
        if s.startswith('['):
            section = s[1:s.find(']')] if ']' in s else s[1:]
            i = eol + 1
            continue
        eq = line.find('=')
        if eq < 0:
            i = eol + 1
            continue
        key = line[:eq].strip()
        vstart = i + eq + 1
        while vstart < eol and text[vstart] in ' \t':
            vstart += 1
        end = eol
        # A trailing backslash continues the value on the next line; comment
        # lines in between are skipped, as systemd does.
        while end < n and end > vstart and text[end - 1] == '\\':
            k = end + 1
            while k < n:
                nl2 = text.find('\n', k)
                e2 = n if nl2 < 0 else nl2
                if text[k:e2].lstrip(' \t')[:1] not in ('#', ';'):
                    break
                k = e2 + 1
            if k >= n:
                end = n
                break
            nl2 = text.find('\n', k)
            end = n if nl2 < 0 else nl2
        out.append(Directive(path, section, key, vstart, end))
        i = end + 1
    return out


class Definition:
    """Where a variable's value comes from: an environment file assignment or
    one word of an ``Environment=`` line."""

    def __init__(self, key, path, kind, value, pos, assignment=None, word=None):
        self.key = key
        self.path = path
        self.kind = kind            # 'env_file' or 'environment'
        self.value = value
        self.pos = pos
        self.assignment = assignment
        self.word = word

    def words(self):
        return value_words(self.value, self.pos)

    def limit(self):
        """Where the value's content ends in the file (before a closing quote)."""
        if self.pos:
            return self.pos[-1][1]
        return self.assignment.raw_start if self.assignment else self.word.end


class Arg:
    """One argument of the command line and where its bytes are."""

    __slots__ = ('text', 'path', 'start', 'end', 'var', 'definition', 'limit')

    def __init__(self, text, path, start, end, var=None, definition=None, limit=None):
        self.text = text
        self.path = path
        self.start = start
        self.end = end
        self.var = var
        self.definition = definition
        self.limit = limit          # end of the value the bytes belong to (before a closing quote)

    def runtime(self):
        return self.path.startswith(RUNTIME_DIRS)

    def describe(self):
        if self.var:
            return '%s in %s' % (self.var, self.path)
        return 'ExecStart in %s' % self.path


class Command:
    def __init__(self, directive, words, args):
        self.directive = directive
        self.words = words
        self.args = args

    @property
    def argv0(self):
        return self.words[0].text.lstrip('-@:+!') if self.words else None


class Unit:
    """A service as systemd would load it: fragment, drop-ins, the effective
    ``ExecStart=`` commands, ``Environment=`` words and ``EnvironmentFile=``s."""

    def __init__(self, name):
        self.name = name
        self.fragment = None
        self.masked = False
        self.dropins = []
        self.exec_starts = []
        self.overridden_exec_starts = []   # reset by a later 'ExecStart=': not in effect
        self.env_files = []
        self.environment = []
        self.texts = {}

    @property
    def files(self):
        return ([self.fragment] if self.fragment else []) + self.dropins


def load_unit(files, name, unit_dirs):
    """Find and parse ``name`` in ``unit_dirs`` (highest priority first).
    Returns None when there is no such unit."""
    unit = Unit(name)
    for d in unit_dirs:
        path = os.path.join(d, name)
        if files.lexists(path):
            unit.fragment = files.resolve(path)
            break
    if unit.fragment is None:
        return None
    if unit.fragment == '/dev/null':
        unit.masked = True
        return unit
    seen = {}
    for d in unit_dirs:
        dropin_dir = os.path.join(d, name + '.d')
        for entry in files.listdir(dropin_dir):
            if entry.endswith('.conf') and entry not in seen:
                seen[entry] = os.path.join(dropin_dir, entry)
    for entry in sorted(seen):
        resolved = files.resolve(seen[entry])
        if resolved != '/dev/null':
            unit.dropins.append(resolved)
    for path in unit.files:
        text = files.read(path)
        if text is None:
            continue
        unit.texts[path] = text
        for d in parse_unit_text(text, path):
            if d.section != 'Service':
                continue
            if d.key == 'ExecStart':
                words = split_words(text, d.start, d.end)
                if not words:
                    unit.overridden_exec_starts.extend(unit.exec_starts)
                    unit.exec_starts = []
                else:
                    unit.exec_starts.append((d, words))
            elif d.key == 'EnvironmentFile':
                value = ''.join(w.text for w in split_words(text, d.start, d.end)[:1])
                if not value:
                    unit.env_files = []
                elif value.startswith('-'):
                    unit.env_files.append((value[1:], True))
                else:
                    unit.env_files.append((value, False))
            elif d.key == 'Environment':
                words = split_words(text, d.start, d.end)
                if not words:
                    unit.environment = []
                unit.environment.extend((path, w) for w in words if '=' in w.text)
    return unit


def unit_variables(files, unit, messages=None):
    """The variables the unit's commands see: ``Environment=`` first, then
    ``EnvironmentFile=`` in order (they override), the last definition wins."""
    defs = {}
    for path, w in unit.environment:
        key, _sep, value = w.text.partition('=')
        defs[key] = Definition(key, path, 'environment', value, w.pos[len(key) + 1:], word=w)
    for path, optional in unit.env_files:
        if '%' in path or not path.startswith('/'):
            if messages is not None:
                messages.append('%s: EnvironmentFile=%s uses a specifier or a relative path; not read.'
                                % (unit.name, path))
            continue
        text = files.read(path)
        if text is None:
            if not optional and messages is not None:
                messages.append('%s: EnvironmentFile=%s does not exist (systemd will refuse to start the unit).'
                                % (unit.name, path))
            continue
        for a in parse_env_text(text, files.resolve(path)):
            defs[a.key] = Definition(a.key, a.path, 'env_file', a.value, a.pos, assignment=a)
    return defs


def command_lines(files, unit, extra_env_files=(), messages=None, include_overridden=False):
    """``(commands, extra, defs)``: the unit's effective ExecStart commands
    with ``$VAR``/``${VAR}`` expanded (each argument knows its bytes), the
    words of every assignment in ``extra_env_files`` (files the daemon reads
    through a wrapper), and the unit's variables.  With
    ``include_overridden``, also the ExecStart lines a drop-in reset (not in
    effect now, but in effect again if that drop-in goes)."""
    defs = unit_variables(files, unit, messages) if unit else {}
    commands = []
    execs = []
    if unit:
        execs = (unit.overridden_exec_starts if include_overridden else []) + unit.exec_starts
    for directive, words in execs:
        args = []
        for w in words[1:]:
            m = _VAR_REF.match(w.text)
            raw = unit.texts[directive.path][w.start:w.end]
            if m and not raw.startswith('$$'):
                name = m.group(1) or m.group(2)
                d = defs.get(name)
                if d is not None:
                    args.extend(Arg(vw.text, d.path, vw.start, vw.end, var=name, definition=d, limit=d.limit())
                                for vw in d.words())
            else:
                args.append(Arg(w.text.replace('$$', '$'), directive.path, w.start, w.end, limit=directive.end))
        commands.append(Command(directive, words, args))
    extra = []
    for path in extra_env_files:
        text = files.read(path)
        if text is None:
            continue
        for a in parse_env_text(text, files.resolve(path)):
            d = Definition(a.key, a.path, 'env_file', a.value, a.pos, assignment=a)
            extra.append([Arg(vw.text, a.path, vw.start, vw.end, var=a.key, definition=d, limit=d.limit())
                          for vw in d.words()])
    return commands, extra, defs


def extra_definitions(files, env_files):
    """Every assignment of the extra environment files (last one wins)."""
    defs = {}
    for path in env_files:
        text = files.read(path)
        for a in parse_env_text(text or '', files.resolve(path)):
            defs[a.key] = Definition(a.key, a.path, 'env_file', a.value, a.pos, assignment=a)
    return defs


def referenced_vars(unit):
    """Names referenced as whole words ($X or ${X}) by the last ExecStart."""
    if not unit or not unit.exec_starts:
        return []
    directive, words = unit.exec_starts[-1]
    names = []
    for w in words[1:]:
        m = _VAR_REF.match(w.text)
        if m and not unit.texts[directive.path][w.start:w.end].startswith('$$'):
            names.append(m.group(1) or m.group(2))
    return names


def joined_value(text, directive):
    """A directive's value on one line (continuations joined, comments dropped)."""
    out = []
    i = directive.start
    end = directive.end
    while i < end:
        if text.startswith('\\\n', i):
            while out and out[-1] in ' \t':
                out.pop()
            out.append(' ')
            i = after_continuation(text, i, end)
            while i < end and text[i] in ' \t':
                i += 1
            continue
        out.append(text[i])
        i += 1
    return ''.join(out).strip()
