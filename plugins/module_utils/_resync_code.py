# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Installing the node-side core (``_core``, the resync's code) on a node.

The files are the resync's module and every module of the core package it
imports (at file level or inside a function, subpackages' with their
``__init__.py``), read through the package's own loader: the module's
payload on a node (AnsiballZ carries exactly what the imports reach), the
source tree on the controller.  :func:`package_sources` finds them by the
same walk on both sides, so :func:`version_id`, a hash of their names and
contents, is the same on both: the controller names the root in the unit
it renders (:func:`resync_root`), the node installs the code there.

Each version has a root of its own, ``<path>/v/<id>/``, holding
``ansible_collections/ipmasq/agent/plugins/module_utils/_core/``.  It is
written whole and byte-compiled in a hidden directory beside it and renamed
into place in one step; a failure removes it.  An installed root is never
changed: the unit's ``PYTHONPATH`` names it, so the switch to a new version
is the unit's rewrite and the daemon-reload that follows it, and a resync in
flight keeps the root it started from.  At the root's top: the unit's start
(``_core/agent/boot.py`` as ``START.py``, byte-compiled) and the core's
modules compiled by the node's python into one file (``boot.BUNDLE``), which
the start loads them from (a cycle's start-up: one open file, its index and
the code of each module the cycle imports read from it, instead of some forty
modules looked up and read one by one).

Old roots (and the flat ``_core`` tree of 1.0 and 1.1 with the link layout
of later development builds) are removed by :func:`sweep`, which the
callers run only when systemd no longer names them, and only when no
process runs from them: a resync holds a shared ``flock`` on the
``resync.py`` of its own root while it runs (``resync.hold_root``), the
sweep takes it exclusively without waiting; a resync of 1.0 or 1.1 holds
none, so a process whose environment has the old unit's ``PYTHONPATH``
(``path`` itself) keeps the flat tree.

The layout of the roots and what a run that installs nothing needs of it
(whether a root is in place, what a sweep would remove, the part's result)
is ``_resync_roots``, which reads no code.

Standard library only: this file runs on managed nodes.
"""

import ast
import errno
import fcntl
import hashlib
import os
import pkgutil
import re
import shutil
import time

from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import boot
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_roots import (
    PACKAGE, RELATIVE, ROOTS, TOP, code_dirs, package_dir, roots, stale,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import (
    Failed, Plan, RemoveStep, Step, dir_steps, not_removed, reason,
)

ENTRY = PACKAGE + '.agent.resync'     # the module the unit runs (plugin_utils/_units.py)
ENTRY_FILE = ENTRY[len(PACKAGE) + 1:].replace('.', '/') + '.py'
BOOT = PACKAGE + '.agent.boot'        # the unit's start (boot.py): copied to the root's top as START + '.py'
BOOT_FILE = BOOT[len(PACKAGE) + 1:].replace('.', '/') + '.py'
START = boot.BUNDLE[:-len('.bin')]    # the module the unit imports main from (its PYTHONPATH: the root)
IN_USE = ENTRY_FILE            # the file a running resync holds a shared flock on
_ID = {}                        # this process's sources and id (the code does not change while it runs)


def _read_source(relative):
    """A module's source (``relative``: ``sync.py``, ``probe/__init__.py``), or None."""
    try:
        return pkgutil.get_data(PACKAGE, relative)
    except (IOError, OSError):
        return None


def _module_file(name):
    """``(relative file, is a package, its source)`` of the core's module ``name``, or None."""
    parts = name[len(PACKAGE):].lstrip('.').split('.') if name != PACKAGE else []
    if parts:
        module = '/'.join(parts) + '.py'
        data = _read_source(module)
        if data is not None:
            return module, False, data
    package = '/'.join(parts + ['__init__.py'])
    data = _read_source(package)
    return (package, True, data) if data is not None else None


# An import statement at the start of a line (inside a function too): each
# is parsed on its own, which costs a fraction of parsing the whole module
# (the controller computes the id once per host); where one is not a
# statement on its own (a continuation, a line of a docstring), the whole
# module is parsed.
_STATEMENT = re.compile(br'^[ \t]*(from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)', re.M)


def _statements(data, relative):
    """The import statements of a module's source, as AST nodes."""
    try:
        return [node for statement in _STATEMENT.findall(data) for node in ast.parse(statement).body]
    except SyntaxError:
        return list(ast.walk(ast.parse(data, relative)))


def _imported(nodes, name, is_package):
    """The module names below the core that the import statements ``nodes`` of the module ``name`` import."""
    out = []
    base = name.split('.') if is_package else name.split('.')[:-1]
    for node in nodes:
        if isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            start = '.'.join(base[:len(base) - node.level + 1]) if node.level else ''
            module = '.'.join(p for p in (start, node.module or '') if p)
            out.append(module)
            out.extend('%s.%s' % (module, alias.name) for alias in node.names)
    return [m for m in out if m == PACKAGE or m.startswith(PACKAGE + '.')]


def package_sources():
    """``{name: bytes}`` of the resync and every module of the core it
    imports (``name`` relative to the package, ``/`` between folders:
    ``sync.py``, ``policy/__init__.py``), with the ``__init__.py`` of each
    package on the way."""
    if 'sources' in _ID:
        return dict(_ID['sources'])
    sources, seen, todo = {}, set(), [PACKAGE, ENTRY, BOOT]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found = _module_file(name)
        if found is None:
            continue            # 'from package import name' where name is not a module
        relative, is_package, data = found
        sources[relative] = data
        parent = name.rpartition('.')[0]
        if name != PACKAGE and parent:
            todo.append(parent)
        todo.extend(_imported(_statements(data, relative), name, is_package))
    if '__init__.py' not in sources or ENTRY_FILE not in sources or BOOT_FILE not in sources:
        raise MasqError('cannot read the resync from the collection: the code to install is incomplete.')
    _ID['sources'] = sources
    return dict(sources)


def version_id(sources):
    """The id of a version: a hash of its files' names and contents (the same on the controller and the node)."""
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode('utf-8') + b'\0' + sources[name] + b'\0')
    return digest.hexdigest()[:16]


def resync_root(path):
    """The root of this collection's resync code below ``path`` (``ip_masq_lib_dir``): the unit's PYTHONPATH."""
    if 'id' not in _ID:
        _ID['id'] = version_id(package_sources())
    return os.path.join(path, ROOTS, _ID['id'])


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _modules(top):
    """The ``.py`` files below ``top``, relative, ``/`` between folders (``__pycache__`` left out)."""
    out = []
    for base, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        rel = os.path.relpath(base, top)
        prefix = '' if rel == '.' else rel.replace(os.sep, '/') + '/'
        out.extend(prefix + n for n in names if n.endswith('.py'))
    return sorted(out)


def _previous(path, root):
    """The package directory of the code before this version: the newest other root, else the flat tree, or None."""
    others = [r for r in roots(path) if r != root]
    if others:
        return package_dir(max(others, key=lambda r: (os.stat(r).st_mtime, r)))
    flat = package_dir(path)
    return flat if os.path.isdir(flat) else None


def plan(path, sources):
    """``(root, write, remove)``: this version's root, and the file names that
    differ from the code before it (all of them where there was none, or
    where it is the same code in another place) and the stale ones that
    code has; both empty when the root is in place."""
    root = os.path.join(path, ROOTS, version_id(sources))
    if os.path.isdir(root):
        return root, [], []
    before = _previous(path, root)
    if before is None:
        return root, sorted(sources), []
    write = sorted(n for n, data in sources.items() if _read(os.path.join(before, *n.split('/'))) != data)
    remove = [n for n in _modules(before) if n not in sources]
    # The same files as before in a root of their own (the flat tree's): every one is written.
    return root, (write if write or remove else sorted(sources)), remove


def _sync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _mkdir(directory):
    os.mkdir(directory, 0o755)
    os.chmod(directory, 0o755)


def _compile(run, argv, python):
    rc, out, err = run(argv)
    if rc != 0:
        raise MasqError('%s could not byte-compile it (rc=%d): %s' % (python, rc, (err or out).strip()),
                        rc=rc, stdout=out, stderr=err)


def _build(root, sources, run, python):
    """The root, whole and byte-compiled: built in a hidden directory beside
    it, renamed into place in one step; on failure nothing of it is left.
    Besides the package, at the root's top: the unit's start (``boot.py`` as
    ``START.py``) and the one file it reads the core's code from
    (``boot.BUNDLE``), both made by ``python``, the interpreter the unit runs."""
    building = os.path.join(os.path.dirname(root), '.%s.new-%s' % (
        os.path.basename(root), ''.join('%02x' % b for b in bytearray(os.urandom(4)))))
    _mkdir(building)
    try:
        package = package_dir(building)
        for name in sorted(sources):
            parts = RELATIVE.split(os.sep) + name.split('/')
            for depth in range(1, len(parts)):
                folder = os.path.join(building, *parts[:depth])
                if not os.path.isdir(folder):
                    _mkdir(folder)
            boot.write_new(os.path.join(package, *name.split('/')), sources[name])
        start = os.path.join(building, START + '.py')
        boot.write_new(start, sources[BOOT_FILE])
        _compile(run, [python, '-m', 'compileall', '-q', package, start], python)
        _compile(run, boot.build_argv(python, start, building, root), python)
        for base, _dirs, _names in os.walk(building):
            _sync_dir(base)
        os.rename(building, root)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    _sync_dir(os.path.dirname(root))


def install(path, sources, run, python, check_mode=False):
    """This version's root below ``path``, written whole and byte-compiled
    with ``python`` (``transaction.py``'s plan: the directories, the root),
    unless it is in place.  Returns ``(written, removed)`` (:func:`plan`);
    raises MasqError with nothing changed."""
    root, write, remove = plan(path, sources)
    if check_mode or os.path.isdir(root):
        return write, remove
    steps = dir_steps(_above(path) + [path, os.path.join(path, ROOTS)], 0o755)
    steps.append(Step(root, ['write and byte-compile'], lambda: _build(root, sources, run, python),
                      lambda: shutil.rmtree(root)))
    try:
        Plan(steps).run()
    except Failed as f:
        left = not_removed(f.broken)
        raise MasqError('cannot install the resync code in %s: %s. %s' % (
            package_dir(root), reason(f.error).rstrip('.'),
            left.strip() if left else 'The code in place is as it was: nothing was changed.'),
            **dict(getattr(f.error, 'details', None) or {}, changed=bool(f.broken)))
    return write, remove


def _above(path):
    """The missing directories above ``path``, outermost first."""
    missing = []
    parent = os.path.dirname(os.path.normpath(path))
    while parent and not os.path.isdir(parent) and parent != os.path.dirname(parent):
        missing.insert(0, parent)
        parent = os.path.dirname(parent)
    return missing


def _legacy_in_use(path, proc='/proc'):
    """Whether a process has ``PYTHONPATH=<path>`` (a resync of 1.0 or 1.1, which holds no lock)."""
    wanted = b'PYTHONPATH=' + os.fsencode(os.path.normpath(path))
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return True         # cannot tell: keep it
    for pid in pids:
        try:
            with open(os.path.join(proc, pid, 'environ'), 'rb') as handle:
                env = handle.read().split(b'\0')
        except (IOError, OSError):
            continue        # gone, or a kernel thread
        if any(e.rstrip(b'/') == wanted for e in env):
            return True
    return False


def _take(root):
    """An exclusive lock on the root's ``resync.py`` (a descriptor), or None while a resync holds it."""
    try:
        fd = os.open(os.path.join(package_dir(root), IN_USE), os.O_RDONLY | getattr(os, 'O_CLOEXEC', 0))
    except OSError:
        return -1           # no resync.py: nothing can run from it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def sweep(path, root, check_mode=False, wait=5.0):
    """Remove the roots below ``path`` other than ``root``, and the tree of
    1.0/1.1 (``<path>/ansible_collections/ipmasq/agent``), each only when no
    process runs from it (waiting up to ``wait`` seconds for one that runs
    to end; one still running is kept for a later run).  The caller makes
    sure systemd does not name them.  Returns the paths removed (or, in
    check mode, that would be)."""
    doomed = stale(path, root)
    if check_mode or not doomed:
        return doomed
    removed, failed = [], []
    deadline = time.monotonic() + wait
    for target in doomed:
        legacy = not target.startswith(os.path.join(path, ROOTS) + os.sep)
        while True:
            fd = -1 if legacy and not _legacy_in_use(path) else (None if legacy else _take(target))
            if fd is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if fd is None:
            continue
        try:
            aside = os.path.join(os.path.dirname(target), '.%s.gone-%s' % (
                os.path.basename(target), ''.join('%02x' % b for b in bytearray(os.urandom(4)))))
            os.rename(target, aside)
            removed.append(target)
        except OSError as e:
            failed.append('%s (%s)' % (target, e.strerror or e))
            continue
        finally:
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(aside, ignore_errors=True)
    _remove_empty([os.path.join(path, TOP, 'ipmasq'), os.path.join(path, TOP)])
    for leftover in _hidden(path):
        shutil.rmtree(leftover, ignore_errors=True)
    if failed:
        raise MasqError('earlier resync code could not be removed: %s' % '; '.join(failed), changed=bool(removed))
    return removed


def _hidden(path, age=3600):
    """Removals and builds (older than ``age`` seconds: not one under way)
    that a killed run left below ``<path>/v``; never a root a process runs from."""
    top = os.path.join(path, ROOTS)
    try:
        names = [n for n in os.listdir(top) if n.startswith('.') and ('.gone-' in n or '.new-' in n)]
    except OSError:
        return []
    out = []
    for name in names:
        try:
            if '.gone-' in name or time.time() - os.lstat(os.path.join(top, name)).st_mtime > age:
                out.append(os.path.join(top, name))
        except OSError:
            pass
    return out


def _remove_empty(directories):
    """Each of ``directories`` (innermost first) removed while it is empty."""
    for directory in directories:
        try:
            os.rmdir(directory)
        except OSError as e:
            if e.errno != errno.ENOENT:
                break     # not empty (ip_masq_lib_dir may be shared)


def unit_names(unit, root):
    """Whether the unit file ``unit`` runs the resync from ``root`` (its ``PYTHONPATH``)."""
    text = _read(unit)
    return text is not None and ('PYTHONPATH=%s"' % root).encode('utf-8') in text


def loaded_names(run, systemctl, unit, root):
    """Whether systemd's loaded copy of ``unit`` (by its name) runs the resync
    from ``root``; True where systemd does not know the unit (it loads it
    from the file when it starts it)."""
    rc, out, _err = run([systemctl, 'show', '--property=Environment', '--property=LoadState', os.path.basename(unit)])
    if rc != 0 or 'LoadState=loaded' not in out:
        return rc == 0
    return ('PYTHONPATH=%s' % root) in out


def later_sweep(path, root, unit, check_mode, reloaded, written_units, run=None, systemctl=None):
    """The sweep of a run of the code's part (:func:`sweep`): only where the
    service unit ``unit`` names ``root`` and systemd has loaded that (the
    unit not written in this run, or written and reloaded; with
    ``systemctl``, what systemd has loaded, asked only where there is
    something to remove), so a timer's next start cannot run from a root
    this removes.  Returns the roots removed (would be, in check mode)."""
    if not unit or not stale(path, root) or not unit_names(unit, root):
        return []
    if unit in written_units and not reloaded:
        return []
    if systemctl and run and not check_mode and not loaded_names(run, systemctl, unit, root):
        return []
    return sweep(path, root, check_mode=check_mode)


def uninstall(path, check_mode=False):
    """Remove every root and the tree of earlier releases below ``path``,
    and ``path`` and its parents of ours when they are left empty (the
    units are stopped first).  Returns whether anything was there."""
    there = [p for p in code_dirs(path) if os.path.isdir(p)]
    if check_mode:
        return bool(there)
    if there:
        try:
            unfinished = Plan([RemoveStep(top) for top in there]).run()
        except Failed as f:
            raise MasqError('cannot remove the resync code below %s: %s. Nothing was changed.'
                            % (path, reason(f.error).rstrip('.')))
        if unfinished:
            raise MasqError('the resync code below %s is removed, but %s could not be deleted: %s.'
                            % (path, unfinished[0][0].aside, reason(unfinished[0][1])), changed=True)
    _remove_empty([os.path.join(path, TOP, 'ipmasq'), os.path.join(path, TOP), path])
    return bool(there)
