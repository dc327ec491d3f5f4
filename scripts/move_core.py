# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Move the node-side core (plugins/module_utils/_core) into folders, one
package per floor and one per backend, in one step (issue 34, item 2).

Table-driven: ``MOVES`` maps every module of ``_core`` and ``_audit`` (a
path below plugins/module_utils) to its new path, or to itself when it
stays.  The script

1. checks the table against the tree and stops, changing nothing, when a
   module of ``_core`` or ``_audit`` has no row, when a row has neither its
   old nor its new file, or when both exist;
2. ``git mv``s every file still at its old path and writes each new
   package's ``__init__.py`` (the collection's licence header and what the
   folder holds);
3. rewrites every reference in the tracked files (imports, ``from _core
   import a, b`` split by new package, dotted names in strings, file paths
   in comments and docs, bare file names inside the core) and the README's
   layout block of the core;
4. prints what it did.

Re-runnable: on a tree that is already moved it moves nothing and only
rewrites references that still use an old name (say, after merging a branch
written against the flat layout).  Historic records (bench/results/, the
released changelog) keep the names they were written with.  A line that
carries ``move_core: keep`` is never rewritten (bench's fallback to the
flat layout of a --baseline).

    python3 scripts/move_core.py [--dry-run]
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UTILS = 'plugins/module_utils'
PREFIX = 'ansible_collections.ipmasq.agent.plugins.module_utils.'
KEEP = 'move_core: keep'

# Old path below plugins/module_utils -> new path.  Every module of _core and
# _audit has a row; a module that stays maps to itself.
MOVES = {
    # model/: what a node should do, validated, and the one exception
    '_core/addresses.py': '_core/model/addresses.py',
    '_core/cidrs.py': '_core/model/cidrs.py',
    '_core/errors.py': '_core/model/errors.py',
    '_core/intervals.py': '_core/model/intervals.py',
    '_core/options.py': '_core/model/options.py',
    '_core/policy.py': '_core/model/policy.py',
    '_core/policy_findings.py': '_core/model/policy_findings.py',
    '_core/ranges.py': '_core/model/ranges.py',
    # node/: the node's own services (commands, lock, files, the kernel's netlink)
    '_core/fileio.py': '_core/node/fileio.py',
    '_core/lock.py': '_core/node/lock.py',
    '_core/nfnetlink.py': '_core/node/nfnetlink.py',
    '_core/proc.py': '_core/node/proc.py',
    '_core/runner.py': '_core/node/runner.py',
    # upstream_config/: the upstream agent's config file
    '_core/config.py': '_core/upstream_config/config.py',
    '_core/golang.py': '_core/upstream_config/golang.py',
    '_core/yamlsubset.py': '_core/upstream_config/yamlsubset.py',
    # engine/: what every backend is built on
    '_core/backend.py': '_core/engine/backend.py',
    '_core/drift.py': '_core/engine/drift.py',
    '_core/result_words.py': '_core/engine/result_words.py',
    '_core/sync.py': '_core/engine/sync.py',
    '_core/transaction.py': '_core/engine/transaction.py',
    '_audit/conds.py': '_core/engine/conds.py',      # what a rule requires of a packet, for every backend's reader
    '_audit/walk.py': '_core/engine/walk.py',        # which rules the postrouting hook reaches, likewise
    # iptables_backend/: everything iptables
    '_core/backend_iptables.py': '_core/iptables_backend/backend.py',
    '_core/backend_flavours.py': '_core/iptables_backend/flavours.py',
    '_core/iptables.py': '_core/iptables_backend/chain.py',
    '_core/iptables_layout.py': '_core/iptables_backend/layout.py',
    '_core/iptables_rules.py': '_core/iptables_backend/rules.py',
    '_core/iptables_save.py': '_core/iptables_backend/save.py',
    '_core/iptables_tools.py': '_core/iptables_backend/tools.py',
    '_core/xtables_kernel.py': '_core/iptables_backend/xtables_kernel.py',
    '_audit/iptables.py': '_core/iptables_backend/audit.py',
    # nftables_backend/: everything nftables
    '_core/backend_nftables.py': '_core/nftables_backend/backend.py',
    '_core/nft_json.py': '_core/nftables_backend/nft_json.py',
    '_core/nftables.py': '_core/nftables_backend/table.py',
    '_core/nftables_rules.py': '_core/nftables_backend/rules.py',
    '_core/nft_tools.py': '_core/nftables_backend/tools.py',
    '_audit/nftables.py': '_core/nftables_backend/audit.py',
    # registry/: the registered backends and the one loop over them
    '_core/backends.py': '_core/registry/backends.py',
    # agent/: the resync and its metrics
    '_core/metrics.py': '_core/agent/metrics.py',
    '_core/resync.py': '_core/agent/resync.py',
    # staying where they are
    '_core/__init__.py': '_core/__init__.py',
    '_audit/__init__.py': '_audit/__init__.py',
    '_audit/allow.py': '_audit/allow.py',
    '_audit/judge.py': '_audit/judge.py',
    '_audit/node.py': '_audit/node.py',
    '_audit/owners.py': '_audit/owners.py',
    '_audit/report.py': '_audit/report.py',
}

# The new packages, in the order of their floors (lowest first): what each
# holds, for its __init__.py and the README's layout.
PACKAGES = (
    ('model', 'the policy (data only) and its validation: every option declared once (options.py), '
              'CIDRs, ranges, intervals, addresses; errors.py: MasqError, the one exception'),
    ('node', 'the node itself: the command runner, the writers\' lock, atomic file writes, '
             'netlink questions to the kernel (read only)'),
    ('upstream_config', 'the upstream agent\'s config file: its YAML subset, Go\'s durations and booleans'),
    ('engine', 'what every backend is built on: the Backend interface (backend.py), drift, the msg\'s words, '
               'the read -> plan -> write loop (sync.py), the steps with an undo (transaction.py), and what every '
               'backend\'s audit reader shares: a rule\'s conditions (conds.py), the walk from the hook (walk.py)'),
    ('iptables_backend', 'the iptables backends (on PATH, -legacy, -nft: backend.py, flavours.py): the policy\'s '
                         'spelling, the chain layout, iptables-save reader, tools, plan and verified write, '
                         'the kernel\'s xtables, the audit\'s reader'),
    ('nftables_backend', 'the nftables backend: the table\'s spelling, the nft -j reader, tools, '
                         'compare and plan, the audit\'s reader'),
    ('registry', 'the registered backends and the one loop (auto, the switch, ours elsewhere, the daemons\' '
                 'removals) every consumer goes through'),
    ('agent', 'the resync\'s entry point (the unit runs agent/resync.py) and its metrics'),
)

HEADER = ('# -*- coding: utf-8 -*-\n'
          '# Copyright (c) 2026, ipmasq.agent contributors\n'
          '# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)\n'
          '# SPDX-License-Identifier: GPL-3.0-or-later\n'
          '#\n'
          '# NOTE: private to the ipmasq.agent collection; not a public API.\n')

# Tracked files that are records of what was, not descriptions of what is.
HISTORIC = ('bench/results/', 'changelogs/changelog.yaml', 'CHANGELOG.rst', 'scripts/move_core.py',
            'changelogs/fragments/core-in-folders.yml')     # the move's own record: says where files were
TEXT_EXT = ('.py', '.md', '.rst', '.yml', '.yaml', '.j2', '.txt', '.cfg', '.ini', '.toml', '.sh', '.json', '')


class Refused(Exception):
    pass


def dotted(rel):
    """'_core/model/policy.py' -> '_core.model.policy' ('_core/__init__.py' -> '_core')."""
    mod = rel[:-3].replace('/', '.')
    return mod[:-len('.__init__')] if mod.endswith('.__init__') else mod


def module_map():
    """Old dotted name -> new dotted name, for the rows that move."""
    return {dotted(old): dotted(new) for old, new in MOVES.items() if old != new}


def git(*argv, check=True):
    return subprocess.run(['git', *argv], cwd=ROOT, check=check, text=True, capture_output=True).stdout


def check_tree():
    """(to_move, already) or Refused naming every problem; reads only."""
    problems = []
    for top in ('_core', '_audit'):
        base = os.path.join(ROOT, UTILS, top)
        for dirpath, dirs, names in os.walk(base):
            dirs[:] = [d for d in dirs if d != '__pycache__']
            for name in names:
                if not name.endswith('.py'):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), os.path.join(ROOT, UTILS))
                if rel in MOVES or rel in MOVES.values():
                    continue
                new_init = rel.endswith('/__init__.py') and rel.split('/')[1] in dict(PACKAGES)
                if not new_init:
                    problems.append('%s/%s has no row in MOVES (add old -> new, or old -> old to keep it)'
                                    % (UTILS, rel))
    to_move, already = [], []
    for old, new in MOVES.items():
        has_old = os.path.exists(os.path.join(ROOT, UTILS, old))
        has_new = os.path.exists(os.path.join(ROOT, UTILS, new))
        if old == new:
            if not has_old:
                problems.append('%s/%s (a row that stays) does not exist' % (UTILS, old))
        elif has_old and has_new:
            problems.append('both %s/%s and %s/%s exist: which one is current?' % (UTILS, old, UTILS, new))
        elif has_old:
            to_move.append((old, new))
        elif has_new:
            already.append((old, new))
        else:
            problems.append('the row %s -> %s has no file (neither exists)' % (old, new))
    if problems:
        raise Refused('\n'.join(problems))
    return to_move, already


# ---------------------------------------------------------------------------
# Rewriting references
# ---------------------------------------------------------------------------

def _regroup(top, items, mapping):
    """``{package: [names]}``: each imported name of ``from <top> import
    items`` under the package it now lives in (alias kept); a name that is
    not a moved module stays under ``top``."""
    groups = {}
    for item in items:
        name, _sep, alias = item.partition(' as ')
        name, alias = name.strip(), alias.strip()
        new = mapping.get('%s.%s' % (top, name))
        if new is None:
            groups.setdefault(top, []).append(item)
            continue
        new_pkg, _sep, new_name = new.rpartition('.')
        local = alias or name
        groups.setdefault(new_pkg, []).append(new_name if new_name == local else '%s as %s' % (new_name, local))
    return groups


def _from_import(mapping):
    """``from <..>(_core|_audit) import a, b as c``: each name that is a moved
    module goes to its new package (one line per package, alias kept)."""
    pattern = re.compile(r'^(?P<indent>[ \t]*)from (?P<pkg>(?:[\w.]*\.)?(?:_core|_audit)) import '
                         r'(?P<names>\([^)]*\)|[^\n]*)', re.M)

    def one(match):
        if KEEP in match.group(0):
            return match.group(0)
        pkg = match.group('pkg')
        head = pkg[:-len(pkg.split('.')[-1])]          # 'ansible_collections....module_utils.' or ''
        top = pkg.split('.')[-1]
        names = match.group('names')
        comment = ''
        if not names.startswith('('):
            names, _sep, comment = names.partition('#')
            comment = ('  #' + comment.rstrip()) if comment else ''
        items = [n.strip() for n in re.sub(r'#[^\n]*', '', names.strip('()')).replace('\n', ' ').split(',')]
        items = [n for n in items if n]
        groups = _regroup(top, items, mapping)
        if list(groups) == [top]:
            return match.group(0)
        indent = match.group('indent')
        lines = []
        for new_pkg, members in groups.items():
            line = '%sfrom %s%s import %s' % (indent, head, new_pkg, ', '.join(members))
            if len(line) + len(comment) > 150:
                line = '%sfrom %s%s import (\n%s\n%s)' % (indent, head, new_pkg, ''.join(
                    '%s    %s,\n' % (indent, m) for m in members).rstrip('\n'), indent)
            lines.append(line)
        lines[0] += comment
        return '\n'.join(lines)

    return pattern, one


def rewrite_text(text, path, mapping, bare_names=True):
    """The text with every old name of a moved module replaced; with
    ``bare_names``, also a sibling's bare file name in the core's own files."""
    # 1. from <pkg> import <modules>
    pattern, one = _from_import(mapping)
    text = pattern.sub(one, text)
    # ... also in a string of code ('from <..>._core import a, b\n'): joined by '; '
    in_string = re.compile(r'(?:(?<=[\'"])|(?<=; ))from (?P<pkg>(?:[\w.]*\.)?(?:_core|_audit)) import '
                           r'(?P<names>\w+(?: as \w+)?(?:, \w+(?: as \w+)?)*)')

    def inline(match):
        if KEEP in match.group(0):
            return match.group(0)
        pkg = match.group('pkg')
        head, top = pkg[:-len(pkg.split('.')[-1])], pkg.split('.')[-1]
        groups = _regroup(top, match.group('names').split(', '), mapping)
        if list(groups) == [top]:
            return match.group(0)
        return '; '.join('from %s%s import %s' % (head, p, ', '.join(m)) for p, m in groups.items())

    def in_strings(line):
        new = in_string.sub(inline, line)
        if len(new) <= LIMIT or new == line:
            return new
        # too long: a newline escape between the imports, the literal split there
        quote = line[line.index('from ') - 1]
        indent = re.match(r'[ \t]*', line).group(0)
        return in_string.sub(lambda m: inline(m).replace('; ', '\\n%s\n%s%s' % (quote, indent, quote)), line)
    text = '\n'.join(in_strings(line) for line in text.split('\n'))

    def per_line(sub):
        return '\n'.join(line if KEEP in line else sub(line) for line in text.split('\n'))

    # 2. dotted names: _core.iptables_tools, module_utils._audit.iptables, ...
    dotted_re = re.compile(r'(?<![\w])(_core|_audit)\.(\w+)(?![\w])')

    def dot(match):
        new = mapping.get('%s.%s' % match.groups())
        return new if new else match.group(0)
    text = per_line(lambda line: dotted_re.sub(dot, line))

    # 3. paths: _core/iptables_tools.py, _audit/iptables.py (any prefix)
    paths = {old: new for old, new in MOVES.items() if old != new}
    path_re = re.compile(r'(?<![\w])(_core|_audit)/(\w+)\.py\b')

    def slash(match):
        return paths.get(match.group(0), match.group(0))
    text = per_line(lambda line: path_re.sub(slash, line))

    # 4. a core module's file name in quotes outside the core: the installer's
    #    names, relative to _core ('resync.py' -> 'agent/resync.py')
    here_rel = os.path.relpath(path, os.path.join(ROOT, UTILS))
    if not here_rel.startswith(('_core/', '_audit/')):
        quoted = {old.split('/')[1]: new.split('/', 1)[1] for old, new in paths.items() if old.startswith('_core/')}
        quoted_re = re.compile(r'(?<=[\'"])(\w+\.py)(?=[\'"])')

        def relative(match):
            return quoted.get(match.group(1), match.group(1))
        text = per_line(lambda line: quoted_re.sub(relative, line))

    # 5. bare file names inside the core and the audit (their comments name
    #    siblings: "iptables_tools.py"); iptables.py and nftables.py are the
    #    audit's readers in _audit/ and the backends' chain/table in _core/.
    now = os.path.relpath(path, os.path.join(ROOT, UTILS))
    rel = {n: o for o, n in MOVES.items()}.get(now, now)      # where the file came from
    if bare_names and rel.startswith(('_core/', '_audit/')):
        here = rel.split('/')[0]
        bare = {}
        for old, new in paths.items():
            top, name = old.split('/')
            if top == here or name not in {o.split('/')[1] for o in paths if o.startswith(here + '/')}:
                # a sibling in the new folder by its name, anything else by its path
                bare.setdefault(name, os.path.basename(new) if os.path.dirname(new) == os.path.dirname(now) else new)
        bare_re = re.compile(r'(?<![\w/.-])(\w+\.py)\b')

        def plain(match):
            new = bare.get(match.group(1))
            return new if new else match.group(0)
        text = per_line(lambda line: bare_re.sub(plain, line))
    return wrap_long_imports(text) if path.endswith('.py') else text


LIMIT = 159
_LONG_IMPORT = re.compile(r'^(?P<indent>[ \t]*)from (?P<pkg>\S+) import (?P<names>[^(#\n]+?)(?P<comment>[ \t]*#.*)?$')


def wrap_long_imports(text):
    """A rewritten import line longer than the collection's limit: its
    comment closer, else its names in parentheses, one a line."""
    out = []
    for line in text.split('\n'):
        match = _LONG_IMPORT.match(line)
        if len(line) <= LIMIT or not match or KEEP in line:
            out.append(line)
            continue
        comment = (match.group('comment') or '').strip()
        head = '%sfrom %s import ' % (match.group('indent'), match.group('pkg'))
        short = head + match.group('names').rstrip() + ('  ' + comment if comment else '')
        if len(short) <= LIMIT:
            out.append(short)
            continue
        out.append(head + '(' + ('  ' + comment if comment else ''))
        out.extend('%s    %s,' % (match.group('indent'), n.strip()) for n in match.group('names').split(',') if n.strip())
        out.append(match.group('indent') + ')')
    return '\n'.join(out)


def readme_layout(text):
    """README.md's lines for _core (from its line to the next plugins/ line
    at the left margin), generated from PACKAGES."""
    lines = text.split('\n')
    starts = [i for i, line in enumerate(lines) if line.startswith('plugins/module_utils/_core/ ')]
    if len(starts) != 1:
        return text, False
    start = starts[0]
    end = start + 1
    while end < len(lines) and not lines[end].startswith('plugins/'):
        end += 1
    block = textwrap.wrap('the node-side core (standard library only; installed whole on a node, the resync '
                          'runs it): one folder per floor, lowest first; each imports only the floors below it '
                          '(the rule: tests/unit/test_import_rule.py)', 80)
    block = ['plugins/module_utils/_core/        ' + block[0]] + ['%35s%s' % ('', line) for line in block[1:]]
    for name, what in PACKAGES:
        lines_of = textwrap.wrap(what, 82)
        block.append('  %-19s%s' % (name + '/', lines_of[0]))
        block.extend('%21s%s' % ('', line) for line in lines_of[1:])
    new = lines[:start] + block + lines[end:]
    return '\n'.join(new), new != lines


def tracked_files():
    for rel in git('ls-files', '-z').split('\0'):
        if not rel or rel.startswith(HISTORIC) or not os.path.isfile(os.path.join(ROOT, rel)):
            continue
        if os.path.splitext(rel)[1] not in TEXT_EXT:
            continue
        yield rel


def init_text(name, what):
    doc = textwrap.fill('%s/: %s.' % (name, what), 79)
    return '%s"""%s\n"""\n' % (HEADER, doc)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--dry-run', action='store_true', help='say what would change, change nothing')
    args = parser.parse_args(argv)
    try:
        to_move, already = check_tree()
    except Refused as exc:
        print('move_core: refused, nothing changed:\n' + str(exc), file=sys.stderr)
        return 2
    mapping = module_map()
    print('move_core: %d files to move, %d already moved' % (len(to_move), len(already)))
    # Every new text first, from the files where they are now; nothing is
    # written (or moved) unless every Python file still compiles.
    moved_to = {'%s/%s' % (UTILS, old): '%s/%s' % (UTILS, new) for old, new in to_move}
    results, broken = [], []
    for rel in sorted(tracked_files()):
        path = os.path.join(ROOT, rel)
        with open(path, encoding='utf-8') as handle:
            try:
                text = handle.read()
            except UnicodeDecodeError:
                continue
        result = rewrite_text(text, os.path.join(ROOT, moved_to.get(rel, rel)), mapping, bare_names=bool(to_move))
        if rel == 'README.md':
            result, _changed = readme_layout(result)
        if result == text:
            continue
        if rel.endswith('.py'):
            try:
                compile(result, rel, 'exec')
            except SyntaxError as exc:
                broken.append('%s: %s' % (rel, exc))
        results.append((moved_to.get(rel, rel), text, result))
    if broken:
        print('move_core: refused, nothing changed: the rewrite would break\n' + '\n'.join(broken), file=sys.stderr)
        return 2
    for old, new in to_move:
        print('  git mv %s/%s %s/%s' % (UTILS, old, UTILS, new))
        if not args.dry_run:
            os.makedirs(os.path.dirname(os.path.join(ROOT, UTILS, new)), exist_ok=True)
            git('mv', '%s/%s' % (UTILS, old), '%s/%s' % (UTILS, new))
    for rel, text, result in results:
        count = sum(1 for line in difflib.ndiff(text.split('\n'), result.split('\n')) if line.startswith('+ '))
        print('  rewrite %s (%d lines)' % (rel, count))
        if not args.dry_run:
            with open(os.path.join(ROOT, rel), 'w', encoding='utf-8') as handle:
                handle.write(result)
    rewritten = len(results)
    for name, what in PACKAGES:
        init = os.path.join(ROOT, UTILS, '_core', name, '__init__.py')
        if not os.path.exists(init):
            print('  create %s' % os.path.relpath(init, ROOT))
            if not args.dry_run:
                os.makedirs(os.path.dirname(init), exist_ok=True)
                with open(init, 'w', encoding='utf-8') as handle:
                    handle.write(init_text(name, what))
                git('add', os.path.relpath(init, ROOT))
    print('move_core: %s %d files, rewrote references in %d files%s' % (
        'would move' if args.dry_run else 'moved', len(to_move), rewritten, ' (dry run)' if args.dry_run else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
