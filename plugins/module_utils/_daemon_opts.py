# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Switching off the other sources of SNAT on a node: Docker, flannel, kubelet.

One implementation for the ``docker_ip_masq``, ``flannel_ip_masq`` and
``kubelet_nonmasq`` modules:

* finding a daemon's systemd unit and drop-ins, the command line systemd
  builds from ``ExecStart=`` (systemd quoting, continuation lines, ``$VAR``
  and ``${VAR}`` from ``Environment=`` and ``EnvironmentFile=``);
* finding a Go-style flag (``-flag``, ``--flag``, ``--flag=value``,
  ``--flag value``) in that command line and editing it where it lives,
  keeping every other byte of the file;
* shell-style environment files (``KEY="value"``, quotes, comments,
  continuation lines);
* daemon.json edited as text (every other key and the user's layout kept);
* backups: the original of each file is kept the first time it is edited, so
  ``state=absent`` can put it back byte for byte;
* removal of the nat rules Docker and flannel leave behind, through
  ``_masq.Iptables`` (one ``iptables-restore --noflush`` per family).

All file access goes through :class:`Files`, which reads from a root
directory (``/`` on a node, a temporary tree in tests) and collects every
change in memory first: everything is read, planned and checked before the
first byte is written, and check mode writes nothing.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import tempfile
import time

from ansible_collections.ipmasq.agent.plugins.module_utils._masq import (
    Iptables,
    MasqError,
    removal_lines,
)

DEFAULT_UNIT_DIRS = (
    '/etc/systemd/system',
    '/run/systemd/system',
    '/usr/local/lib/systemd/system',
    '/lib/systemd/system',
    '/usr/lib/systemd/system',
)
DEFAULT_BACKUP_DIR = '/var/lib/ipmasq-agent/backup'
RUNTIME_DIRS = ('/run/', '/var/run/')
META_SUFFIX = '.ipmasq-agent.json'
DROPIN_NAME = '90-ipmasq-agent.conf'
MAX_EDIT_ROUNDS = 32
CLI_TIMEOUT = 60

_TRUE = ('1', 't', 'T', 'TRUE', 'true', 'True')
_FALSE = ('0', 'f', 'F', 'FALSE', 'false', 'False')
_VAR_REF = re.compile(r'^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$')
_ASSIGN = re.compile(r'[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*')
_IFNAME = re.compile(r'^[A-Za-z0-9_.:@+-]{1,15}$')
_KUBE_VERSION = re.compile(r'v?(\d+)\.(\d+)(?:\.(\d+))?')


# --------------------------------------------------------------------------
# Files under a root, with every change kept in memory until commit
# --------------------------------------------------------------------------

def _check_abs(path, what):
    if not isinstance(path, str) or not path.startswith('/'):
        raise MasqError('%s: %r is not an absolute path.' % (what, path))
    return os.path.normpath(path)


def sha256(text):
    return hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()


class Files:
    """Read files below ``root``; collect writes and deletions in memory.

    Paths are the node's paths (``/etc/docker/daemon.json``); with ``root``
    other than ``/`` they are looked up below it, as ``systemctl --root``
    does.  Text is decoded as UTF-8 with ``surrogateescape`` so that any
    byte is written back unchanged.
    """

    def __init__(self, root='/'):
        self.root = _check_abs(root or '/', 'root')
        self._overlay = {}

    def real(self, path):
        if self.root == '/':
            return path
        return os.path.join(self.root, path.lstrip('/'))

    def resolve(self, path):
        """Follow symlinks (inside the root); ``/dev/null`` means masked."""
        path = os.path.normpath(path)
        for _i in range(40):
            if path in self._overlay:
                return path
            real = self.real(path)
            if not os.path.islink(real):
                return path
            target = os.readlink(real)
            path = os.path.normpath(target if target.startswith('/')
                                    else os.path.join(os.path.dirname(path), target))
            if path == '/dev/null':
                return path
        raise MasqError('%s: too many levels of symbolic links.' % path)

    def _disk(self, path):
        try:
            with open(self.real(path), 'rb') as f:
                return f.read().decode('utf-8', 'surrogateescape')
        except (IOError, OSError) as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise MasqError('cannot read %s: %s' % (path, e.strerror or e))

    def read(self, path):
        path = self.resolve(path)
        if path == '/dev/null':
            return ''
        if path in self._overlay:
            return self._overlay[path]
        return self._disk(path)

    def exists(self, path):
        return self.read(path) is not None

    def lexists(self, path):
        if path in self._overlay:
            return self._overlay[path] is not None
        return os.path.lexists(self.real(path))

    def listdir(self, directory):
        names = set()
        real = self.real(directory)
        if os.path.isdir(real):
            names.update(os.listdir(real))
        prefix = directory.rstrip('/') + '/'
        for path, text in self._overlay.items():
            if path.startswith(prefix) and '/' not in path[len(prefix):]:
                name = path[len(prefix):]
                if text is None:
                    names.discard(name)
                else:
                    names.add(name)
        return sorted(names)

    def write(self, path, text):
        self._overlay[self.resolve(path)] = text

    def delete(self, path):
        self._overlay[self.resolve(path)] = None

    def replace(self, path, start, end, new):
        text = self.read(path)
        self.write(path, text[:start] + new + text[end:])

    def changes(self):
        """``[(path, before, after)]`` for every file that differs from disk."""
        out = []
        for path in sorted(self._overlay):
            before = self._disk(path)
            after = self._overlay[path]
            if before != after:
                out.append((path, before, after))
        return out


# --------------------------------------------------------------------------
# Words: systemd command-line quoting with raw positions
# --------------------------------------------------------------------------

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


def _after_continuation(text, i, end):
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
            i = _after_continuation(text, i, end)
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
                    nxt = _after_continuation(text, i, end)
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


# --------------------------------------------------------------------------
# Environment files (KEY=value, KEY="value", KEY='value', comments)
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# systemd units: fragment, drop-ins, ExecStart, environment
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Go-style flags
# --------------------------------------------------------------------------

class Occurrence:
    def __init__(self, arg, value_arg, dashes, name, value):
        self.arg = arg
        self.value_arg = value_arg
        self.dashes = dashes
        self.name = name
        self.value = value

    def key(self):
        return (self.arg.path, self.arg.start)

    def span(self):
        end = self.value_arg.end if self.value_arg is not None else self.arg.end
        return self.arg.start, end

    def text(self):
        if self.value_arg is not None:
            return '%s %s' % (self.arg.text, self.value_arg.text)
        return self.arg.text

    def as_dict(self):
        return {'path': self.arg.path, 'variable': self.arg.var, 'text': self.text(),
                'runtime': self.arg.runtime()}


def find_flag(args, name, takes_value=False):
    """Occurrences of a Go flag (``flag`` or ``pflag``) in one argument list.
    Bool flags never take a separate value; ``--`` ends the flags."""
    pattern = re.compile(r'^(--?)' + re.escape(name) + r'(?:=(.*))?$', re.S)
    found = []
    i = 0
    while i < len(args):
        text = args[i].text
        if text == '--':
            break
        m = pattern.match(text)
        if m:
            if m.group(2) is not None:
                found.append(Occurrence(args[i], None, m.group(1), name, m.group(2)))
            elif takes_value and i + 1 < len(args):
                found.append(Occurrence(args[i], args[i + 1], m.group(1), name, args[i + 1].text))
                i += 1
            else:
                found.append(Occurrence(args[i], None, m.group(1), name, None))
        i += 1
    return found


def find_flag_all(commands, extra, name, takes_value=False):
    """Occurrences in every command and extra file, each place once."""
    found = []
    seen = set()
    for args in [c.args for c in commands] + list(extra):
        for occ in find_flag(args, name, takes_value):
            if occ.key() not in seen:
                seen.add(occ.key())
                found.append(occ)
    return found


def bool_value(value):
    """A Go bool flag's value: None (no value) is true; unparsable is None."""
    if value is None or value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


# --------------------------------------------------------------------------
# Byte-preserving edits
# --------------------------------------------------------------------------

def removal_span(text, start, end, limit=None):
    """The span to delete to remove the word ``text[start:end]`` with the
    whitespace that belongs to it, keeping the lines around it tidy.
    ``limit`` is where the value holding the word ends (before its closing
    quote), so that whitespace before a closing quote is not mistaken for a
    gap before another word."""
    limit = len(text) if limit is None else limit
    ls = start
    while ls > 0 and text[ls - 1] in ' \t':
        ls -= 1
    rs = end
    while rs < len(text) and text[rs] in ' \t':
        rs += 1
    line_start = text.rfind('\n', 0, ls) + 1
    at_line_start = ls == line_start
    nxt = text[rs:rs + 1]
    continued = text.startswith('\\\n', rs)
    more_on_line = rs < limit and nxt not in ('', '\n', '\r') and not continued
    if not at_line_start:
        if ls < start:
            return ls, end                      # "a --x b" -> "a b", "a --x" -> "a"
        if rs > end and more_on_line:
            return start, rs                    # '"--x b"' -> '"b"'
        return start, end                       # '"--x"' -> '""'
    if rs > end and more_on_line:
        return start, rs                        # "  --x b" -> "  b"
    if continued:
        return line_start, rs + 2               # a whole continued line
    if line_start >= 2 and text[line_start - 2:line_start] == '\\\n':
        p = line_start - 2
        while p > 0 and text[p - 1] in ' \t':
            p -= 1
        return p, rs                            # last continued line: "a \\\n  --x" -> "a"
    return start, rs


def remove_arg(files, occ):
    """Remove a flag (and its separate value) from the file it lives in."""
    if occ.value_arg is not None and occ.value_arg.path != occ.arg.path:
        raise MasqError('%s: the flag %s and its value come from different files (%s, %s); '
                        'edit them by hand. Nothing was changed.'
                        % (occ.arg.describe(), occ.arg.text, occ.arg.path, occ.value_arg.path))
    text = files.read(occ.arg.path)
    s, e = occ.span()
    last = occ.value_arg or occ.arg
    s, e = removal_span(text, s, e, last.limit)
    files.replace(occ.arg.path, s, e, '')


def set_arg(files, occ, value):
    """Replace a flag (and its separate value) by ``<dashes>name=value``."""
    if occ.value_arg is not None and occ.value_arg.path != occ.arg.path:
        raise MasqError('%s: the flag %s and its value come from different files (%s, %s); '
                        'edit them by hand. Nothing was changed.'
                        % (occ.arg.describe(), occ.arg.text, occ.arg.path, occ.value_arg.path))
    s, e = occ.span()
    files.replace(occ.arg.path, s, e, '%s%s=%s' % (occ.dashes, occ.name, value))


def set_definition(files, d, new_value):
    """Give a variable a new value where it is defined."""
    if d.kind == 'env_file':
        a = d.assignment
        text = files.read(a.path)
        if a.quote and '\n' not in new_value:
            files.replace(a.path, a.raw_start + 1, a.close, _escape_in(new_value, a.quote))
        elif not re.search(r'[\s"\'\\$`#;]', new_value):
            files.replace(a.path, a.raw_start, a.raw_end, new_value)
        else:
            files.replace(a.path, a.raw_start, a.raw_end, '"%s"' % _escape_in(new_value, '"'))
        return text
    w = d.word
    files.replace(d.path, w.start, w.end, systemd_quote('%s=%s' % (d.key, new_value)))
    return None


def _escape_in(value, quote):
    if quote == "'":
        if "'" in value:
            raise MasqError('cannot put %r inside single quotes.' % value)
        return value
    return re.sub(r'(["\\`$])', r'\\\1', value)


def append_word(files, d, word):
    """Append a word to a variable's value where it is defined, keeping the
    rest of the value byte for byte."""
    if d.kind == 'env_file':
        a = d.assignment
        if a.quote and a.close is not None:
            sep = ' ' if a.value.strip() else ''
            files.replace(a.path, a.close, a.close, sep + _escape_in(word, a.quote))
            return
        if not a.value:
            files.replace(a.path, a.raw_start, a.raw_end, word)
            return
    value = (d.value.strip() + ' ' + word) if d.value.strip() else word
    set_definition(files, d, value)


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
            i = _after_continuation(text, i, end)
            while i < end and text[i] in ' \t':
                i += 1
            continue
        out.append(text[i])
        i += 1
    return ''.join(out).strip()


# --------------------------------------------------------------------------
# Backups and writing
# --------------------------------------------------------------------------

def timestamp_suffix():
    return '.%d.%s~' % (os.getpid(), time.strftime('%Y-%m-%d@%H:%M:%S'))


class Backups:
    """The original of every file a module edits, kept below ``backup_dir``
    (``<backup_dir>/<path>``) with a small JSON record next to it
    (``<path>.ipmasq-agent.json``: owners, whether the file existed, the
    SHA-256 of what we wrote, mode and owner).

    The original is stored the first time a file is edited, and again when
    the file has changed since our last write (the user's newer version is
    then the one ``state=absent`` restores)."""

    def __init__(self, files, backup_dir, owner):
        self.files = files
        self.dir = _check_abs(backup_dir, 'backup_dir')
        self.owner = owner

    def _store(self, path):
        base = os.path.join(self.files.real(self.dir), path.lstrip('/'))
        return base, base + META_SUFFIX

    def record(self, path):
        _data, meta = self._store(path)
        try:
            with open(meta) as f:
                rec = json.load(f)
        except (IOError, OSError, ValueError):
            return None
        return rec if isinstance(rec, dict) and rec.get('path') == path else None

    def original(self, path):
        data, _meta = self._store(path)
        with open(data, 'rb') as f:
            return f.read().decode('utf-8', 'surrogateescape')

    def records(self):
        """Every record that lists this owner."""
        top = self.files.real(self.dir)
        out = []
        if not os.path.isdir(top):
            return out
        for dirpath, _dirs, names in os.walk(top):
            for name in sorted(names):
                if not name.endswith(META_SUFFIX):
                    continue
                try:
                    with open(os.path.join(dirpath, name)) as f:
                        rec = json.load(f)
                except (IOError, OSError, ValueError):
                    continue
                if isinstance(rec, dict) and self.owner in rec.get('owners', []) and rec.get('path'):
                    out.append(rec)
        return sorted(out, key=lambda r: r['path'])

    def before_write(self, path, before, st):
        """Keep ``before`` as the original unless it is our own last write."""
        rec = self.record(path)
        if rec is not None and before is not None and rec.get('written_sha256') == sha256(before):
            if self.owner not in rec['owners']:
                rec['owners'].append(self.owner)
                self._save(path, rec)
            return
        if rec is not None and before is None and rec.get('existed') is False:
            return
        data, _meta = self._store(path)
        _makedirs(os.path.dirname(data), 0o700)
        owners = sorted(set((rec or {}).get('owners', [])) | set([self.owner]))
        rec = {'path': path, 'owners': owners, 'existed': before is not None,
               'saved': time.strftime('%Y-%m-%dT%H:%M:%S'), 'written_sha256': None}
        if before is not None:
            rec.update(mode=st.st_mode & 0o7777, uid=st.st_uid, gid=st.st_gid, original_sha256=sha256(before))
            _atomic_write(data, before, 0o600)
        elif os.path.exists(data):
            os.unlink(data)
        self._save(path, rec)

    def after_write(self, path, after):
        rec = self.record(path)
        if rec is not None:
            rec['written_sha256'] = sha256(after) if after is not None else None
            self._save(path, rec)

    def _save(self, path, rec):
        _data, meta = self._store(path)
        _makedirs(os.path.dirname(meta), 0o700)
        _atomic_write(meta, json.dumps(rec, indent=2, sort_keys=True) + '\n', 0o600)

    def drop(self, path):
        data, meta = self._store(path)
        for p in (data, meta):
            if os.path.exists(p):
                os.unlink(p)


def _makedirs(real_dir, mode=0o755):
    if not os.path.isdir(real_dir):
        os.makedirs(real_dir, mode)


def _atomic_write(real_path, text, mode, uid=None, gid=None):
    directory = os.path.dirname(real_path)
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(real_path), suffix='.ipmasq-tmp', dir=directory)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(text.encode('utf-8', 'surrogateescape'))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if uid is not None and os.geteuid() == 0:
            os.chown(tmp, uid, gid)
        os.rename(tmp, real_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class Result:
    """What the three modules return."""

    def __init__(self, state):
        self.data = {'changed': False, 'installed': False, 'state': state, 'restart_required': False,
                     'edited': [], 'backups': [], 'messages': []}
        self.warnings = []
        self.diff = []

    def __getitem__(self, key):
        return self.data[key]

    def __setitem__(self, key, value):
        self.data[key] = value

    def msg(self, text):
        self.data['messages'].append(text)

    def warn(self, text):
        self.warnings.append(text)
        self.data['messages'].append(text)


def commit(files, backups, result, check_mode, backup=True, restoring=()):
    """Write every change collected in ``files`` (nothing in check mode).

    Each existing file is first copied next to itself with a timestamp
    (``backup``); on ``present`` its original goes to ``backups``; on
    ``absent`` (``restoring``: path -> record) the record is dropped once
    the original is back."""
    for path, before, after in files.changes():
        result['edited'].append(path)
        result.diff.append({'before_header': path, 'after_header': path,
                            'before': before if before is not None else '',
                            'after': after if after is not None else ''})
        result['changed'] = True
        if check_mode:
            continue
        real = files.real(path)
        st = os.stat(real) if before is not None else None
        rec = restoring.get(path) if restoring else None
        # No copy of a file of our own that is deleted exactly as we wrote it.
        ours = rec is not None and after is None and rec.get('existed') is False
        if before is not None and backup and not ours:
            copy = real + timestamp_suffix()
            shutil.copy2(real, copy)
            result['backups'].append(path + copy[len(real):])
        if rec is None:
            backups.before_write(path, before, st)
        if after is None:
            os.unlink(real)
            parent = os.path.dirname(real)
            if parent.endswith('.d') and not os.listdir(parent):
                os.rmdir(parent)
        else:
            if rec is not None and rec.get('mode') is not None:
                mode, uid, gid = rec['mode'], rec.get('uid'), rec.get('gid')
            elif st is not None:
                mode, uid, gid = st.st_mode & 0o7777, st.st_uid, st.st_gid
            else:
                mode, uid, gid = 0o644, None, None
            _makedirs(os.path.dirname(real))
            _atomic_write(real, after, mode, uid, gid)
        if rec is None:
            backups.after_write(path, after)
    if restoring and not check_mode:
        for path in restoring:
            backups.drop(path)


def plan_restore(files, backups, result, semantic=None):
    """Put back the original of every file this owner edited.

    A file still exactly as we wrote it gets its original back byte for
    byte (or is deleted if we created it).  A file changed since is left
    alone with a warning, unless ``semantic(path, current, original)``
    returns the text to write instead (daemon.json: only our key is
    reverted).  Returns the records to drop after the commit."""
    restoring = {}
    for rec in backups.records():
        path = rec['path']
        current = files.read(path)
        try:
            original = backups.original(path) if rec.get('existed') else None
        except (IOError, OSError) as e:
            result.warn('%s: the kept original cannot be read (%s); left as it is.' % (path, e))
            continue
        if current == original:
            restoring[path] = rec
            continue
        if current is not None and rec.get('written_sha256') == sha256(current):
            if original is None:
                files.delete(path)
            else:
                files.write(path, original)
            restoring[path] = rec
            result.msg('%s: restored the original kept in %s.' % (path, backups.dir))
            continue
        new = semantic(path, current, original) if (semantic and current is not None) else None
        if new is not None:
            files.write(path, new)
            restoring[path] = rec
            result.msg('%s: changed since ipmasq.agent edited it; reverted only our setting.' % path)
            continue
        result.warn('%s: changed since ipmasq.agent edited it, so it was left as it is; the original is kept '
                    'in %s%s.' % (path, backups.dir, path if original is not None else ' (the file did not exist)'))
    return restoring


# --------------------------------------------------------------------------
# daemon.json, edited as text
# --------------------------------------------------------------------------

class JsonMember:
    __slots__ = ('key', 'key_start', 'key_end', 'value_start', 'value_end')

    def __init__(self, key, key_start, key_end, value_start, value_end):
        self.key = key
        self.key_start = key_start
        self.key_end = key_end
        self.value_start = value_start
        self.value_end = value_end


_JSON_WS = re.compile(r'[ \t\n\r]*')


def parse_daemon_json(text, path):
    """``(data, open, close, members)`` of a daemon.json text.  An empty
    file is ``{}``; anything that is not one JSON object is an error that
    names the file and the position."""
    if text is None or not text.strip() or text.strip() == '\ufeff':
        return {}, None, None, []
    offset = 1 if text.startswith('\ufeff') else 0
    try:
        data = json.loads(text[offset:])
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


# --------------------------------------------------------------------------
# nat rules Docker and flannel leave behind
# --------------------------------------------------------------------------

def _tokens(line):
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def nat_table(text):
    """``(chains, rules)`` of the ``*nat`` table in iptables-save text."""
    chains, rules = [], []
    in_nat = False
    for line in text.splitlines():
        if line.startswith('*'):
            in_nat = line == '*nat'
        elif in_nat and line.startswith(':'):
            chains.append(line[1:].split()[0])
        elif in_nat and line.startswith('-A '):
            rules.append(line)
    return chains, rules


def _target(tokens):
    for flag, value in zip(tokens, tokens[1:]):
        if flag in ('-j', '--jump', '-g', '--goto'):
            return value
    return None


def _comment(tokens):
    for flag, value in zip(tokens, tokens[1:]):
        if flag == '--comment':
            return value
    return None


def _same_net(a, nets):
    try:
        net = ipaddress.ip_network(a, strict=False)
    except ValueError:
        return False
    return any(net == n for n in nets)


def docker_bridge_rules(rules, bridge, subnets):
    """Docker's default-bridge MASQUERADE rules among POSTROUTING rules:
    ``-s <subnet> ! -o <bridge> -j MASQUERADE`` (any subnet when ``subnets``
    is None) and the hairpin ``-o <bridge> -m addrtype --src-type LOCAL -j
    MASQUERADE``, exactly as iptables-save prints them."""
    out = []
    for line in rules:
        t = _tokens(line)
        if t[:2] != ['-A', 'POSTROUTING']:
            continue
        rest = t[2:]
        if (len(rest) == 7 and rest[0] == '-s' and rest[2:] == ['!', '-o', bridge, '-j', 'MASQUERADE']
                and (subnets is None or _same_net(rest[1], subnets))):
            out.append(line)
        elif rest == ['-o', bridge, '-m', 'addrtype', '--src-type', 'LOCAL', '-j', 'MASQUERADE']:
            out.append(line)
    return out


FLANNEL_CHAIN = 'FLANNEL-POSTRTG'
FLANNEL_COMMENT = 'flanneld masq'


def flannel_rules(chains, rules, family):
    """``(rules, chains)`` to remove: every jump to FLANNEL-POSTRTG from
    POSTROUTING or carrying flannel's comment, POSTROUTING rules with
    flannel's comment (older flannel put them there), and the chain.
    A jump from elsewhere without flannel's comment is not ours to delete:
    error, nothing changed."""
    remove, foreign = [], []
    for line in rules:
        t = _tokens(line)
        chain = t[1] if len(t) > 1 else ''
        if chain == FLANNEL_CHAIN:
            continue
        flannels = _comment(t) == FLANNEL_COMMENT
        if _target(t) == FLANNEL_CHAIN:
            (remove if chain == 'POSTROUTING' or flannels else foreign).append(line)
        elif chain == 'POSTROUTING' and flannels:
            remove.append(line)
    drop = [FLANNEL_CHAIN] if FLANNEL_CHAIN in chains else []
    if foreign and drop:
        raise MasqError('cannot delete %s (IPv%d): rules that are not flannel\'s jump to it: %s. Remove them '
                        'first. Nothing was changed.' % (FLANNEL_CHAIN, family, '; '.join(foreign)))
    return remove, drop


def remove_nat_rules(run, find, select, check_mode, result):
    """Read each family's nat table, let ``select(family, chains, rules)``
    pick ``(rules, chains)`` to delete, and delete them in one
    ``iptables-restore --noflush`` transaction per family.  Everything is
    read and checked before the first write."""
    plans = []
    for family in (4, 6):
        tools = Iptables(family, run, find)
        if not tools.available:
            if family == 4:
                result.msg('iptables-save/iptables-restore not found; no rules checked.')
            continue
        try:
            text = tools.save_text()
        except MasqError:
            if family == 4:
                raise
            continue
        chains, rules = nat_table(text)
        drop_rules, drop_chains = select(family, chains, rules)
        if drop_rules or drop_chains:
            payload = '*nat\n' + '\n'.join(removal_lines(drop_rules, drop_chains)) + '\nCOMMIT\n'
            plans.append((family, tools, payload, drop_rules, drop_chains))
    removed = []
    for family, tools, payload, drop_rules, drop_chains in plans:
        if not check_mode:
            tools.restore(payload)
        removed.extend('IPv%d: %s' % (family, r) for r in drop_rules)
        removed.extend('IPv%d: chain %s' % (family, c) for c in drop_chains)
        result['changed'] = True
    result['removed_rules'] = removed
    return removed


# --------------------------------------------------------------------------
# Running helper commands (docker CLI, kubelet --version), bounded in time
# --------------------------------------------------------------------------

def bounded(find, argv, seconds=CLI_TIMEOUT):
    timeout = find('timeout')
    if timeout:
        return [timeout, '--kill-after=5', str(seconds)] + list(argv)
    return list(argv)


def _common(params, owner):
    files = Files(params.get('root') or '/')
    unit_dirs = [_check_abs(d, 'unit_dirs') for d in params['unit_dirs']]
    if not unit_dirs:
        raise MasqError('unit_dirs: give at least one directory.')
    env_files = [_check_abs(p, 'env_files') for p in params.get('env_files') or []]
    backups = Backups(files, params['backup_dir'], owner)
    result = Result(params['state'])
    return files, unit_dirs, env_files, backups, result


def _fix_flags(files, load, name, want_ok, fix, result, takes_value=False):
    """Edit one bad occurrence at a time, re-reading after each edit, until
    none is left that can be edited.  Returns the final occurrences."""
    skipped = set()
    for _i in range(MAX_EDIT_ROUNDS):
        unit, commands, extra = load()
        occs = find_flag_all(commands, extra, name, takes_value)
        bad = [o for o in occs if not want_ok(o) and o.key() not in skipped]
        if not bad:
            return unit, commands, extra, occs
        occ = bad[0]
        if occ.arg.runtime():
            skipped.add(occ.key())
            result.msg('%s comes from %s, a file generated at run time; it is not edited here.'
                       % (occ.text(), occ.arg.describe()))
            continue
        result.msg('%s: %s' % (occ.arg.describe(), fix(occ)))
    raise MasqError('the %s flag could not be fixed after %d edits; the unit files are too unusual. '
                    'Nothing was changed.' % (name, MAX_EDIT_ROUNDS))


# --------------------------------------------------------------------------
# Docker
# --------------------------------------------------------------------------

def docker_sync(params, run, find, check_mode=False):
    """``ip-masq: false`` for Docker's default bridge (or undo it)."""
    p = params
    files, unit_dirs, env_files, backups, result = _common(p, 'docker')
    result['where'] = None
    result['flag_sources'] = []
    result['removed_rules'] = []
    result['masquerading_networks'] = []
    unit = load_unit(files, p['unit_name'], unit_dirs)
    if unit is not None and unit.masked:
        result.msg('%s is masked; Docker is not managed.' % p['unit_name'])
        return result
    if unit is None and not (files.root == '/' and find('dockerd')):
        result.msg('Docker is not installed (no %s, no dockerd); nothing to do.' % p['unit_name'])
        return result
    result['installed'] = True
    result['unit'] = unit.fragment if unit else None
    result['unit_files'] = unit.files if unit else []

    if p['state'] == 'absent':
        restoring = plan_restore(files, backups, result, semantic=_docker_semantic_restore)
        commit(files, backups, result, check_mode, p['backup'], restoring)
        result['restart_required'] = bool(result['edited'])
        return result

    messages = []

    def load():
        u = load_unit(files, p['unit_name'], unit_dirs)
        commands, extra, _defs = command_lines(files, u, env_files, messages)
        return u, commands, extra

    def is_false(occ):
        return bool_value(occ.value) is False

    def to_false(occ):
        set_arg(files, occ, 'false')
        return '%s set to %sip-masq=false' % (occ.text(), occ.dashes)

    unit, commands, extra, occs = _fix_flags(files, load, 'ip-masq', is_false, to_false, result)
    for m in sorted(set(messages)):
        result.msg(m)
    result['flag_sources'] = [o.as_dict() for o in occs]

    config = p['daemon_json']
    for occ in find_flag_all(commands, extra, 'config-file', takes_value=True):
        if occ.value and occ.value.startswith('/'):
            config = occ.value
            result.msg('dockerd reads its configuration from %s (--config-file).' % config)
    result['daemon_json'] = config
    text = files.read(config)
    data, _o, _c, _m = parse_daemon_json(text, config)

    if occs:
        # The trap: a setting both on the command line and in daemon.json
        # makes dockerd refuse to start.
        result['where'] = 'command line'
        if 'ip-masq' in data:
            files.write(config, json_remove(text, config, 'ip-masq'))
            result.msg('%s: removed "ip-masq" because --ip-masq is on the dockerd command line (%s); Docker '
                       'refuses to start with both.' % (config, ', '.join(o.arg.describe() for o in occs)))
        left = [o for o in occs if not is_false(o)]
        result['default_bridge_masquerade'] = bool(left)
        if left:
            where = ', '.join('%s (%s)' % (o.text(), o.arg.describe()) for o in left)
            result.warn('Docker still masquerades its default bridge: %s. If it is flannel\'s '
                        'mk-docker-opts.sh output, set ipmasq=false there (ipmasq.agent.flannel_ip_masq does) '
                        'and restart flanneld, then Docker.' % where)
    else:
        result['where'] = 'daemon.json'
        result['default_bridge_masquerade'] = False
        new = json_set(text, config, 'ip-masq', 'false')
        if new != text:
            files.write(config, new)
    no_iptables = [o for o in find_flag_all(commands, extra, 'iptables') if bool_value(o.value) is False]
    if data.get('iptables') is False or no_iptables:
        result.msg('Docker runs with iptables disabled, so it adds no MASQUERADE rule at all.')
    if data.get('bridge') == 'none':
        result.msg('Docker has no default bridge ("bridge": "none").')

    commit(files, backups, result, check_mode, p['backup'])
    result['restart_required'] = bool(result['edited'])
    pending = result['restart_required']

    if p['remove_stale_rules'] or p['report_networks']:
        docker = p.get('docker_bin') or find('docker')
        if p['remove_stale_rules']:
            _docker_stale_rules(p, run, find, docker, data, pending, check_mode, result)
        if p['report_networks']:
            _docker_networks(run, find, docker, result)
    return result


def _docker_semantic_restore(path, current, original):
    """daemon.json changed since we wrote it: revert only "ip-masq"."""
    if not path.endswith('.json'):
        return None
    try:
        raw = json_raw_value(original, path, 'ip-masq') if original is not None else None
        if raw is None:
            return json_remove(current, path, 'ip-masq')
        return json_set(current, path, 'ip-masq', raw)
    except MasqError:
        return None


def _docker_cli(run, find, docker, args):
    if not docker or not os.path.exists(docker):
        return None
    rc, out, err = run(bounded(find, [docker] + list(args)))
    if rc != 0:
        return None
    try:
        return json.loads(out)
    except ValueError:
        return None


def _docker_stale_rules(p, run, find, docker, data, pending, check_mode, result):
    bridge = p.get('bridge_name')
    subnets = None
    if p.get('bridge_cidrs'):
        try:
            subnets = [ipaddress.ip_network(c, strict=False) for c in p['bridge_cidrs']]
        except ValueError as e:
            raise MasqError('bridge_cidrs: %s. Nothing was changed.' % e)
    running = None
    info = _docker_cli(run, find, docker, ['network', 'inspect', 'bridge'])
    if isinstance(info, list) and info and isinstance(info[0], dict):
        net = info[0]
        opts = net.get('Options') or {}
        bridge = bridge or opts.get('com.docker.network.bridge.name')
        if subnets is None:
            subnets = []
            for cfg in (net.get('IPAM') or {}).get('Config') or []:
                try:
                    subnets.append(ipaddress.ip_network(cfg.get('Subnet'), strict=False))
                except (TypeError, ValueError):
                    pass
            subnets = subnets or None
        running = opts.get('com.docker.network.bridge.enable_ip_masquerade')
    bridge = bridge or data.get('bridge') or 'docker0'
    if bridge == 'none':
        return
    if not _IFNAME.match(bridge):
        raise MasqError('bridge_name: %r is not an interface name. Nothing was changed.' % (bridge,))
    result['bridge'] = {'name': bridge, 'subnets': [str(s) for s in subnets] if subnets else None}
    if running == 'true':
        result.msg('The running Docker still masquerades its default bridge (restart pending); '
                   'its MASQUERADE rule is left alone.')
        return
    if result['default_bridge_masquerade'] or (pending and running is None):
        result.msg('Docker has not been restarted with ip-masq off yet; its MASQUERADE rule is left alone.')
        return

    def select(family, chains, rules):
        fam = [s for s in subnets if s.version == family] if subnets else None
        if subnets and not fam:
            return [], []
        return docker_bridge_rules(rules, bridge, fam), []

    removed = remove_nat_rules(run, find, select, check_mode, result)
    if removed:
        result.msg('Removed Docker\'s stale default-bridge MASQUERADE rule(s): %s' % '; '.join(removed))


def _docker_networks(run, find, docker, result):
    if not docker or not os.path.exists(docker):
        result.msg('docker CLI not found; user-defined networks not checked.')
        return
    ids = None
    rc, out, _err = run(bounded(find, [docker, 'network', 'ls', '-q', '--no-trunc', '--filter', 'driver=bridge']))
    if rc == 0:
        ids = out.split()
    if ids is None:
        result.msg('docker network ls failed (is Docker running?); user-defined networks not checked.')
        return
    nets = _docker_cli(run, find, docker, ['network', 'inspect'] + ids) if ids else []
    if nets is None:
        result.msg('docker network inspect failed; user-defined networks not checked.')
        return
    for net in nets:
        if not isinstance(net, dict) or net.get('Name') == 'bridge':
            continue
        opts = net.get('Options') or {}
        if str(opts.get('com.docker.network.bridge.enable_ip_masquerade', 'true')).lower() == 'false':
            continue
        net_id = net.get('Id') or ''
        subnets = [c.get('Subnet') for c in (net.get('IPAM') or {}).get('Config') or [] if c.get('Subnet')]
        name = net.get('Name')
        entry = {
            'name': name,
            'id': net_id[:12],
            'bridge': opts.get('com.docker.network.bridge.name') or 'br-' + net_id[:12],
            'subnets': subnets,
            'advice': ('Docker cannot change masquerading of an existing network. Recreate it: disconnect its '
                       'containers, "docker network rm %s", then "docker network create --driver bridge '
                       '-o com.docker.network.bridge.enable_ip_masquerade=false%s %s" (compose: driver_opts '
                       'com.docker.network.bridge.enable_ip_masquerade: "false") and reconnect.'
                       % (name, ''.join(' --subnet %s' % s for s in subnets), name)),
        }
        result['masquerading_networks'].append(entry)
        result.warn('Docker network %s (%s, %s) still masquerades. %s'
                    % (name, entry['bridge'], ', '.join(subnets) or 'no subnet', entry['advice']))


# --------------------------------------------------------------------------
# flannel
# --------------------------------------------------------------------------

_MK_IPMASQ = re.compile(r'^ipmasq=(["\']?)(true|false)\1[ \t]*(?:#.*)?$', re.M)


def flannel_sync(params, run, find, check_mode=False):
    """flanneld without --ip-masq, mk-docker-opts.sh with ipmasq=false, and
    FLANNEL-POSTRTG removed once flanneld no longer masquerades (or undo)."""
    p = params
    files, unit_dirs, env_files, backups, result = _common(p, 'flannel')
    result['flag_sources'] = []
    result['removed_rules'] = []
    result['stale_rules'] = []
    unit = load_unit(files, p['unit_name'], unit_dirs)
    if unit is None or unit.masked:
        result.msg('%s is %s; flannel is not managed.' % (p['unit_name'], 'masked' if unit else 'not installed'))
        return result
    result['installed'] = True
    result['unit'] = unit.fragment
    result['unit_files'] = unit.files

    if p['state'] == 'absent':
        restoring = plan_restore(files, backups, result)
        commit(files, backups, result, check_mode, p['backup'], restoring)
        result['restart_required'] = bool(result['edited'])
        if result['edited']:
            result.msg('flanneld re-creates its own rules when it restarts with --ip-masq.')
        return result

    messages = []

    def load():
        # Also the ExecStart lines a drop-in overrides: --ip-masq goes from
        # every place it is written, so removing a drop-in cannot bring it back.
        u = load_unit(files, p['unit_name'], unit_dirs)
        commands, extra, _defs = command_lines(files, u, env_files, messages, include_overridden=True)
        return u, commands, extra

    def is_off(occ):
        return bool_value(occ.value) is False

    def drop(occ):
        remove_arg(files, occ)
        return 'removed %s' % occ.text()

    unit, commands, extra, occs = _fix_flags(files, load, 'ip-masq', is_off, drop, result)
    for m in sorted(set(messages)):
        result.msg(m)
    result['flag_sources'] = [o.as_dict() for o in occs]
    masq_on = any(not is_off(o) for o in occs)
    if masq_on:
        result.warn('flanneld would still masquerade: %s cannot be edited here.'
                    % ', '.join('%s (%s)' % (o.text(), o.arg.describe()) for o in occs if not is_off(o)))

    # flanneld also reads FLANNELD_IP_MASQ when the flag is not on the command line.
    if not occs:
        defs = unit_variables(files, unit)
        defs.update(extra_definitions(files, env_files))
        d = defs.get('FLANNELD_IP_MASQ')
        if d is not None and d.value.strip() and bool_value(d.value.strip()) is not False:
            if d.path.startswith(RUNTIME_DIRS):
                result.warn('FLANNELD_IP_MASQ=%s comes from %s, a file generated at run time; not edited.'
                            % (d.value, d.path))
                masq_on = True
            else:
                set_definition(files, d, 'false')
                result.msg('%s: FLANNELD_IP_MASQ=%s set to false.' % (d.path, d.value))

    for path in p['mk_docker_opts']:
        path = _check_abs(path, 'mk_docker_opts')
        text = files.read(path)
        if text is None:
            continue
        m = _MK_IPMASQ.search(text)
        if m is None:
            result.msg('%s has no top-level "ipmasq=" line; left as it is.' % path)
            continue
        if m.group(2) == 'true':
            files.replace(path, m.start(2), m.end(2), 'false')
            result.msg('%s: ipmasq=true set to false, so Docker gets no --ip-masq from flannel.' % path)
    result['ip_masq'] = masq_on

    commit(files, backups, result, check_mode, p['backup'])
    result['restart_required'] = bool(result['edited'])

    if p['remove_stale_rules']:
        subnet_env = _check_abs(p['subnet_env'], 'subnet_env')
        running = env_value(files.read(subnet_env), 'FLANNEL_IPMASQ')
        found = []

        def select(family, chains, rules):
            drop_rules, drop_chains = flannel_rules(chains, rules, family)
            found.extend('IPv%d: %s' % (family, r) for r in drop_rules)
            found.extend('IPv%d: chain %s' % (family, c) for c in drop_chains)
            if masq_on or result['restart_required'] or running == 'true':
                return [], []
            return drop_rules, drop_chains

        remove_nat_rules(run, find, select, check_mode, result)
        result['stale_rules'] = found
        if found and not result['removed_rules']:
            why = ('flanneld still runs with --ip-masq (%s says FLANNEL_IPMASQ=true); restart it first'
                   % subnet_env) if running == 'true' else 'flanneld must restart without --ip-masq first'
            result.msg('flannel\'s rules are left in place: %s, or it re-creates them.' % why)
    return result


# --------------------------------------------------------------------------
# kubelet
# --------------------------------------------------------------------------

NONMASQ_FLAG = 'non-masquerade-cidr'
NONMASQ_VALUE = '0.0.0.0/0'


def kubelet_version(run, find, argv0):
    rc, out, err = run(bounded(find, [argv0, '--version']))
    if rc != 0:
        return None, (err or out).strip()
    m = _KUBE_VERSION.search(out)
    if not m:
        return None, out.strip()
    return (int(m.group(1)), int(m.group(2))), out.strip()


def kubelet_sync(params, run, find, check_mode=False):
    """``--non-masquerade-cidr=0.0.0.0/0`` for kubelets older than 1.24."""
    p = params
    files, unit_dirs, env_files, backups, result = _common(p, 'kubelet')
    result['mode'] = p['mode']
    result['version'] = None
    result['flag_sources'] = []
    result['would_change'] = False
    unit = load_unit(files, p['unit_name'], unit_dirs)
    if unit is None or unit.masked:
        result.msg('%s is %s; kubelet is not managed.' % (p['unit_name'], 'masked' if unit else 'not installed'))
        return result
    result['installed'] = True
    result['unit'] = unit.fragment
    result['unit_files'] = unit.files

    if p['state'] == 'absent':
        restoring = plan_restore(files, backups, result)
        commit(files, backups, result, check_mode, p['backup'], restoring)
        result['restart_required'] = bool(result['edited'])
        return result

    messages = []
    commands, extra, defs = command_lines(files, unit, env_files, messages)
    for m in sorted(set(messages)):
        result.msg(m)
    binary = p.get('kubelet_bin')
    if not binary:
        argv0 = commands[-1].argv0 if commands else None
        if argv0 and argv0.startswith('/') and os.path.exists(files.real(argv0)):
            binary = files.real(argv0)
        elif files.root == '/':
            binary = find('kubelet')
    if binary and os.path.exists(binary):
        version, text = kubelet_version(run, find, binary)
    else:
        version, text = None, 'no kubelet binary found%s' % (' at %s' % binary if binary else '')
    result['version'] = text if version else None
    if version is None:
        result.warn('Could not tell the kubelet version (%s); --non-masquerade-cidr left alone.' % text)
        return result
    occs = find_flag_all(commands, extra, NONMASQ_FLAG, takes_value=True)
    result['flag_sources'] = [o.as_dict() for o in occs]
    if version >= (1, 24):
        if occs:
            result.warn('kubelet %d.%d no longer knows --%s (removed in 1.24) and refuses to start with it: %s.'
                        % (version[0], version[1], NONMASQ_FLAG, ', '.join(o.arg.describe() for o in occs)))
        else:
            result.msg('kubelet %d.%d adds no masquerade rule of its own (--%s was removed in 1.24); nothing to do.'
                       % (version[0], version[1], NONMASQ_FLAG))
        return result
    current = occs[-1].value if occs else None
    result['current'] = current
    if current == NONMASQ_VALUE and all(o.value == NONMASQ_VALUE for o in occs):
        result.msg('kubelet already runs with --%s=%s.' % (NONMASQ_FLAG, NONMASQ_VALUE))
        return result
    result['would_change'] = True
    if p['mode'] == 'report':
        result.warn('kubelet %d.%d runs with %s: it adds a MASQUERADE rule of its own. Set --%s=%s '
                    '(mode=set does it).' % (version[0], version[1],
                                             '--%s=%s' % (NONMASQ_FLAG, current) if current else
                                             'no --%s (default 10.0.0.0/8)' % NONMASQ_FLAG,
                                             NONMASQ_FLAG, NONMASQ_VALUE))
        return result

    def load():
        u = load_unit(files, p['unit_name'], unit_dirs)
        c, e, _d = command_lines(files, u, env_files)
        return u, c, e

    def to_any(occ):
        set_arg(files, occ, NONMASQ_VALUE)
        return '%s set to --%s=%s' % (occ.text(), NONMASQ_FLAG, NONMASQ_VALUE)

    if occs:
        _fix_flags(files, load, NONMASQ_FLAG, lambda o: o.value == NONMASQ_VALUE, to_any, result,
                   takes_value=True)
    else:
        _kubelet_add(files, unit, defs, unit_dirs, p, result)
    _unit, commands, extra = load()
    after = find_flag_all(commands, extra, NONMASQ_FLAG, takes_value=True)
    if not after or after[-1].value != NONMASQ_VALUE or after[-1].arg.runtime():
        raise MasqError('--%s=%s would not take effect with the planned edit (another drop-in overrides it?). '
                        'Nothing was changed.' % (NONMASQ_FLAG, NONMASQ_VALUE))
    commit(files, backups, result, check_mode, p['backup'])
    result['restart_required'] = bool(result['edited'])
    return result


def _kubelet_add(files, unit, defs, unit_dirs, p, result):
    word = '--%s=%s' % (NONMASQ_FLAG, NONMASQ_VALUE)
    var = p['extra_args_var']
    dropin = os.path.join(unit_dirs[0], p['unit_name'] + '.d', DROPIN_NAME)
    header = ('# Written by ipmasq.agent (kubelet_nonmasq): kubelet older than 1.24 adds no masquerade rule\n'
              '# of its own with --%s=%s. state=absent removes this file.\n[Service]\n'
              % (NONMASQ_FLAG, NONMASQ_VALUE))
    if var in referenced_vars(unit):
        d = defs.get(var)
        if d is not None and not d.path.startswith(RUNTIME_DIRS) and d.path != dropin:
            append_word(files, d, word)
            result.msg('%s: added %s to %s.' % (d.path, word, var))
            return
        files.write(dropin, header + 'Environment=%s\n' % systemd_quote('%s=%s' % (var, word)))
        result.msg('%s: %s=%s (the unit passes $%s and nothing defines it).' % (dropin, var, word, var))
        return
    if not unit.exec_starts:
        raise MasqError('%s has no ExecStart=; cannot add %s. Nothing was changed.' % (p['unit_name'], word))
    directive, _words = unit.exec_starts[-1]
    command = joined_value(unit.texts[directive.path], directive)
    files.write(dropin, header + 'ExecStart=\nExecStart=%s %s\n' % (command, word))
    result.msg('%s: ExecStart repeated with %s (the unit has no $%s).' % (dropin, word, var))


def run_module(module, sync):
    """The tail of each daemon module's main(): run ``sync`` with Ansible's
    command runner, turn MasqError into fail_json (the one place), pass the
    warnings on and exit with the result (and the diff in diff mode)."""
    env = {'LC_ALL': 'C', 'LANG': 'C'}

    def run(argv, data=None):
        return module.run_command(argv, data=data, binary_data=False, environ_update=env)

    try:
        result = sync(module.params, run, module.get_bin_path, check_mode=module.check_mode)
    except MasqError as e:
        module.fail_json(msg=e.msg, **e.details)

    for warning in result.warnings:
        module.warn(warning)
    out = dict(result.data)
    if module._diff:
        out['diff'] = result.diff
    module.exit_json(**out)
