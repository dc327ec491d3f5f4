# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Go-style flags (``-flag``, ``--flag``, ``--flag=value``, ``--flag value``)
on a daemon's command line, found where systemd reads them (the unit, a
drop-in, an environment file) and edited there, keeping every other byte.

Standard library only: this file runs on managed nodes.
"""

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.golang import parse_bool
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.words import systemd_quote


MAX_EDIT_ROUNDS = 32


class Occurrence:
    def __init__(self, arg, value_arg, dashes, name, value):
        self.next_arg = None        # the argument after a bool flag written without =value
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
                occ = Occurrence(args[i], None, m.group(1), name, None)
                occ.next_arg = args[i + 1] if i + 1 < len(args) else None
                found.append(occ)
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


def refuse_split_bool(occ):
    """``--flag true``: Go reads a boolean flag's value only as ``--flag=true``,
    so the second word is a separate argument (dockerd refuses to start with
    it; flanneld, using Go's flag package, stops reading its flags there and
    ignores every flag after it).  Editing such a line could only make it
    worse: refuse, saying how to write it."""
    nxt = occ.next_arg
    if nxt is None or parse_bool(nxt.text) is None:
        return
    text, value = occ.arg.text, nxt.text
    raise MasqError('%s: "%s %s" is written as two words, but a Go boolean flag takes its value only as %s=%s: '
                    '"%s" is a separate argument (dockerd refuses to start with it; flanneld stops reading its flags '
                    'there). Write %s=%s (or remove the flag) and run again. Nothing was changed.'
                    % (occ.arg.describe(), text, value, text, value, value, text, value))


def bool_value(value):
    """A Go bool flag's value: None (no value) is true; unparsable is None."""
    return True if value is None else parse_bool(value)


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


def fix_flags(files, load, name, want_ok, fix, result, takes_value=False):
    """Edit one bad occurrence at a time, re-reading after each edit, until
    none is left that can be edited.  Returns the final occurrences."""
    skipped = set()
    for _i in range(MAX_EDIT_ROUNDS):
        unit, commands, extra = load()
        occs = find_flag_all(commands, extra, name, takes_value)
        for occ in occs:
            refuse_split_bool(occ)
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
