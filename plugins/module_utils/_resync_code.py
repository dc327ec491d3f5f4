# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Installing the node-side core (``_core``, the resync's code) on a node.

The files (the package's modules and its subpackages', each a folder with
an ``__init__.py``, at any depth) come from wherever the running code was
imported from: the ``resync_code`` module's own payload on a node (so the
copy is always the
code this very collection version runs, and no list of files is kept
anywhere), or the source tree (benchmarks, tests).

The code is installed as a unit.  Below ``<path>/ansible_collections/ipmasq/
agent/plugins/module_utils/``, ``_core`` is a symlink to a version directory
``_core.versions/<id>`` (never importable: its name has a dot).  A change
writes a new version directory whole, byte-compiles it, and only then
renames a new symlink over ``_core``: one rename(2), so the resync sees the
old code or the new, never a mix.  ``_core/__init__.py`` pins the package's
path to the version directory it resolved at import, so a resync that is
running during the switch goes on with its own version; the version before
the new one is therefore kept, older ones are removed.  A failure before the
switch removes the new directory (and the directories the run made): the
code in place is left exactly as it was.  The steps (the directories, the
version directory, the switch) are a plan of ``_core/transaction.py``.  The flat layout of earlier releases
(``_core`` a directory) is switched the same way, with renameat2's
RENAME_EXCHANGE where the kernel has it.

Standard library only: this file runs on managed nodes.
"""

import errno
import hashlib
import os
import pkgutil
import shutil

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._msg import code_msg
from ansible_collections.ipmasq.agent.plugins.module_utils._core.transaction import (
    Failed, Plan, RemoveStep, Step, dir_steps, not_removed, reason,
)

PACKAGE = 'ansible_collections.ipmasq.agent.plugins.module_utils._core'
RELATIVE = PACKAGE.replace('.', os.sep)
TOP = 'ansible_collections'
VERSIONS = '.versions'      # beside the link: _core.versions/<id>
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0)


def package_sources():
    """``{name: bytes}`` of every module of the core package and of its
    subpackages (``name`` relative to the package, ``/`` between folders:
    ``sync.py``, ``policy/__init__.py``), read through the package's own
    loader (a zip or a directory)."""
    import importlib  # pylint: disable=import-outside-toplevel

    sources = {}
    todo = [(PACKAGE, '')]
    while todo:
        package_name, folder = todo.pop()
        package = importlib.import_module(package_name)
        names = ['__init__']
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.ispkg:
                todo.append(('%s.%s' % (package_name, info.name), folder + info.name + '/'))
            else:
                names.append(info.name)
        for name in names:
            data = pkgutil.get_data(PACKAGE, folder + name + '.py')
            if data is None:
                raise MasqError('cannot read %s.%s from the collection: the code to install is incomplete.'
                                % (package_name, name))
            sources[folder + name + '.py'] = data
    return sources


def package_dir(path):
    """The package's path below ``path`` (the symlink the resync imports through)."""
    return os.path.join(path, RELATIVE)


def versions_dir(path):
    return package_dir(path) + VERSIONS


def current(path):
    """The directory holding the code in place (the link's target, or the
    flat layout's directory), or None; and whether it is the flat layout."""
    link = package_dir(path)
    if os.path.islink(link):
        target = os.path.join(os.path.dirname(link), os.readlink(link))
        return (target if os.path.isdir(target) else None), False
    return (link if os.path.isdir(link) else None), os.path.isdir(link)


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def plan(path, sources):
    """``(write, remove)``: the file names that differ from the code in place
    (all of them where it is missing or in the flat layout) and the stale
    ones it has (subpackages' files named ``folder/name.py``)."""
    target, flat = current(path)
    if target is None or flat:
        write = sorted(sources)
    else:
        write = sorted(name for name, data in sources.items()
                       if _read(os.path.join(target, *name.split('/'))) != data)
    remove = sorted(n for n in _modules(target) if n not in sources) if target else []
    return write, remove


def _modules(top):
    """The ``.py`` files below ``top``, relative, ``/`` between folders
    (the byte-compiled ``__pycache__`` left out)."""
    out = []
    for base, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        rel = os.path.relpath(base, top)
        prefix = '' if rel == '.' else rel.replace(os.sep, '/') + '/'
        out.extend(prefix + n for n in names if n.endswith('.py'))
    return out


def _version_id(sources):
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode('utf-8') + b'\0' + sources[name] + b'\0')
    return '%s-%s' % (digest.hexdigest()[:12], ''.join('%02x' % b for b in bytearray(os.urandom(3))))


def _write_file(path, data):
    """``data`` in the new file ``path`` (0644), on disk before it returns."""
    fd = os.open(path, _WRITE_FLAGS, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)


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


def _build(directory, sources, run, python):
    """The new version directory, whole and byte-compiled; on failure it is removed."""
    os.mkdir(directory, 0o755)
    try:
        os.chmod(directory, 0o755)
        for name in sorted(sources):
            parts = name.split('/')
            for depth in range(1, len(parts)):
                folder = os.path.join(directory, *parts[:depth])
                if not os.path.isdir(folder):
                    os.mkdir(folder, 0o755)
                    os.chmod(folder, 0o755)
            _write_file(os.path.join(directory, *parts), sources[name])
        rc, out, err = run([python, '-m', 'compileall', '-q', directory])
        if rc != 0:
            raise MasqError('%s could not byte-compile it (rc=%d): %s' % (python, rc, (err or out).strip()),
                            rc=rc, stdout=out, stderr=err)
        _sync_dir(directory)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _exchange(one, other):
    """Swap ``one`` and ``other`` in one step (renameat2 RENAME_EXCHANGE);
    False where this kernel, C library or file system cannot."""
    try:
        import ctypes  # pylint: disable=import-outside-toplevel
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (ImportError, OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(one), at_fdcwd, os.fsencode(other), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), other)


class _Switch(Step):
    """``_core`` made a link to the new version directory: one rename of a
    new link over the old one.  ``aside``: the flat layout's directory,
    moved away by the switch.  ``undo`` switches back; ``finish`` removes
    the version directories other than the new one and the one before it
    (``before``: a resync running during the switch uses it), and the flat
    directory."""

    def __init__(self, link, version, before):
        Step.__init__(self, link, ['switch to %s' % os.path.basename(version)], self.switch, self.switch_back,
                      finish=self.sweep)
        self.link, self.version, self.before, self.aside = link, version, before, None
        self.exchanged = False

    def _new_link(self, target):
        new = '%s.switch-%s' % (self.link, ''.join('%02x' % b for b in bytearray(os.urandom(4))))
        os.symlink(os.path.relpath(target, os.path.dirname(self.link)), new)
        return new

    def switch(self):
        new = self._new_link(self.version)
        try:
            if os.path.islink(self.link) or not os.path.lexists(self.link):
                os.rename(new, self.link)
            elif _exchange(new, self.link):
                self.aside, self.exchanged = new, True    # the flat directory, now under the link's temporary name
            else:
                # No RENAME_EXCHANGE: two renames (a moment without _core), put back on failure.
                aside = new + '.flat'
                os.rename(self.link, aside)
                try:
                    os.rename(new, self.link)
                except BaseException:
                    os.rename(aside, self.link)
                    raise
                self.aside = aside
        except BaseException:
            if os.path.islink(new):
                os.unlink(new)
            raise
        _sync_dir(os.path.dirname(self.link))

    def switch_back(self):
        if self.exchanged:
            _exchange(self.aside, self.link)
            os.unlink(self.aside)
        elif self.aside:
            os.unlink(self.link)
            os.rename(self.aside, self.link)
        elif self.before:
            os.rename(self._new_link(self.before), self.link)
        else:
            os.unlink(self.link)
        self.aside = None
        _sync_dir(os.path.dirname(self.link))

    def sweep(self):
        versions = os.path.dirname(self.version)
        doomed = [os.path.join(versions, n) for n in os.listdir(versions)
                  if os.path.join(versions, n) not in (self.version, self.before)]
        if self.aside:
            doomed.append(self.aside)
        failed = []
        for path in doomed:
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError as e:
                failed.append('%s (%s)' % (path, e.strerror or e))
        if failed:
            raise MasqError('earlier code could not be removed: %s' % '; '.join(failed))


def install(path, sources, run, python, check_mode=False):
    """Bring ``<path>/ansible_collections/.../_core`` to ``sources``,
    byte-compiled with ``python``, as a unit (``transaction.py``'s plan: the
    directories, the version directory, the switch).  Returns ``(written,
    removed)`` (:func:`plan`); raises MasqError with the code in place as it
    was, or, after the switch, with ``changed``."""
    write, remove = plan(path, sources)
    if check_mode or not (write or remove):
        return write, remove
    link, versions = package_dir(path), versions_dir(path)
    before, _flat = current(path)
    version = os.path.join(versions, _version_id(sources))
    steps = dir_steps(_above(path) + _dirs(path)[:-1] + [versions], 0o755)
    steps += [Step(version, ['write and byte-compile'], lambda: _build(version, sources, run, python),
                   lambda: shutil.rmtree(version)), _Switch(link, version, before)]
    try:
        unfinished = Plan(steps).run()
    except Failed as f:
        left = not_removed(f.broken)
        raise MasqError('cannot install the resync code in %s: %s. %s' % (
            link, reason(f.error).rstrip('.'),
            left.strip() if left else 'The code in place is as it was: nothing was changed.'),
            **dict(getattr(f.error, 'details', None) or {}, changed=bool(f.broken)))
    if unfinished:
        raise MasqError('the resync code in %s is installed, but %s.' % (link, reason(unfinished[0][1])), changed=True)
    return write, remove


def _above(path):
    """The missing directories above ``path``, outermost first."""
    missing = []
    parent = os.path.dirname(os.path.normpath(path))
    while parent and not os.path.isdir(parent) and parent != os.path.dirname(parent):
        missing.insert(0, parent)
        parent = os.path.dirname(parent)
    return missing


def _dirs(path):
    """The directories from ``path`` down to the package (its link)."""
    out = [path]
    current_dir = path
    for part in RELATIVE.split(os.sep):
        current_dir = os.path.join(current_dir, part)
        out.append(current_dir)
    return out


def outcome(path, written, removed, check_mode):
    """``(result, diff)`` of a run of the resync code's part (the
    ``resync_code`` module, the node run's part): the files written and
    removed (``removed``: the tree itself for ``state: absent``), and its
    one-line ``msg``."""
    result = {'changed': bool(written or removed), 'path': package_dir(path), 'written': written, 'removed': removed}
    result['msg'] = code_msg(result, check_mode)
    diff = {'before_header': result['path'], 'after_header': result['path'], 'before': '',
            'after': ''.join('write %s\n' % n for n in written) + ''.join('remove %s\n' % n for n in removed)}
    return result, diff


def uninstall(path, check_mode=False):
    """Remove our tree below ``path`` (every version, the link: moved aside,
    then deleted), and ``path`` and its parents of ours when they are left
    empty.  Returns whether anything was there."""
    top = os.path.join(path, TOP, 'ipmasq', 'agent')
    present = os.path.isdir(top)
    if check_mode:
        return present
    if present:
        try:
            unfinished = Plan([RemoveStep(top)]).run()
        except Failed as f:
            raise MasqError('cannot remove the resync code below %s: %s. Nothing was changed.'
                            % (path, reason(f.error).rstrip('.')))
        if unfinished:
            raise MasqError('the resync code below %s is removed, but %s could not be deleted: %s.'
                            % (path, unfinished[0][0].aside, reason(unfinished[0][1])), changed=True)
    for directory in (os.path.join(path, TOP, 'ipmasq'), os.path.join(path, TOP), path):
        try:
            os.rmdir(directory)
        except OSError:
            break         # not empty (ip_masq_lib_dir may be shared) or not there
    return present
