# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Files of a node, read below a root and changed all at once or not at all.

:class:`Files` reads from a root directory (``/`` on a node, a temporary
tree in tests) and collects every change in memory: everything is read,
planned and checked before the first byte is written, and check mode writes
nothing.  :func:`commit` then writes the changes as one transaction:

1. every new text is staged in a temporary file beside its target;
2. the originals are kept (``backups.Backups`` under the backup directory,
   and the timestamped copy ``AnsibleModule.backup_local`` makes beside the
   file);
3. the targets are replaced in order with ``AnsibleModule.atomic_move``,
   which keeps each file's SELinux context, owner and mode.

A failure in steps 1 or 2 leaves every file as it was; a failure in step 3
puts back the files already replaced.  Either way the error names the path
and says that nothing was changed: never a traceback, never half an edit.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import os

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.fileio import remove_quietly, write_temp


def check_abs(path, what):
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
        self.root = check_abs(root or '/', 'root')
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
# Writing through AnsibleModule
# --------------------------------------------------------------------------

class _Refused(Exception):
    pass


def _reason(exc):
    """The words of an exception and of what caused it."""
    text = str(exc) or exc.__class__.__name__
    cause = getattr(exc, '__cause__', None)
    if cause is not None:
        text = '%s (%s)' % (text.rstrip('.'), getattr(cause, 'strerror', None) or cause)
    return text


class Writer:
    """How edited files reach the disk: ``AnsibleModule.atomic_move`` (keeps
    the SELinux context, owner and mode of the file it replaces) and
    ``AnsibleModule.backup_local`` (the timestamped copy beside the file).

    Depending on the ansible-core version these report a failure by raising
    or through ``fail_json``; both become a MasqError here, so that the
    transaction can put back what it already wrote before it fails."""

    def __init__(self, module):
        self.module = module

    def _call(self, fn, *args):
        module = self.module
        saved = module.fail_json

        def refuse(msg='', **_kwargs):
            raise _Refused(msg)

        module.fail_json = refuse
        try:
            return fn(*args)
        except _Refused as e:
            raise MasqError(str(e))
        except (IOError, OSError) as e:
            raise MasqError(e.strerror or str(e))
        except Exception as e:  # pylint: disable=broad-except
            raise MasqError(_reason(e))
        finally:
            module.fail_json = saved

    def backup(self, real):
        return self._call(self.module.backup_local, real)

    def move(self, tmp, real):
        self._call(self.module.atomic_move, tmp, real)


# --------------------------------------------------------------------------
# The transaction
# --------------------------------------------------------------------------

class _Change:
    __slots__ = ('path', 'real', 'before', 'after', 'st', 'rec', 'tmp', 'mode', 'uid', 'gid')

    def __init__(self, files, path, before, after, restoring):
        self.path = path
        self.real = files.real(path)
        self.before = before
        self.after = after
        self.st = os.stat(self.real) if before is not None else None
        self.rec = restoring.get(path) if restoring else None
        self.tmp = None
        if self.rec is not None and self.rec.get('mode') is not None:
            self.mode, self.uid, self.gid = self.rec['mode'], self.rec.get('uid'), self.rec.get('gid')
        elif self.st is not None:
            self.mode, self.uid, self.gid = self.st.st_mode & 0o7777, self.st.st_uid, self.st.st_gid
        else:
            self.mode, self.uid, self.gid = 0o644, None, None


def _stage(real, text, mode, uid, gid):
    """``text`` in a temporary file beside ``real``, with its final mode and owner."""
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    return write_temp(directory, text, mode, uid, gid, prefix='.%s.' % os.path.basename(real))


def _place(writer, change, text, tmp=None):
    """Make ``text`` (None: no file) the content of ``change.real``; ``tmp``
    is the file it was staged in, if it was."""
    if text is None:
        os.unlink(change.real)
        parent = os.path.dirname(change.real)
        if parent.endswith('.d') and not os.listdir(parent):
            os.rmdir(parent)
        return
    if tmp is None:
        tmp = _stage(change.real, text, change.mode, change.uid, change.gid)
    try:
        writer.move(tmp, change.real)
    except MasqError:
        remove_quietly(tmp)
        raise
    os.chmod(change.real, change.mode)
    if change.uid is not None and os.geteuid() == 0:
        os.chown(change.real, change.uid, change.gid)


def _put_back(writer, done):
    """Undo the replacements in ``done``; return the paths that could not be put back."""
    failed = []
    for change in reversed(done):
        try:
            _place(writer, change, change.before)
        except (MasqError, IOError, OSError):
            failed.append(change.path)
    return failed


def commit(files, backups, result, check_mode, writer, backup=True, restoring=None):
    """Write every change collected in ``files`` as one transaction (nothing
    in check mode): see the module docstring.

    Each existing file is first copied beside itself with a timestamp
    (``backup``); on ``present`` its original goes to ``backups``; on
    ``absent`` (``restoring``: path -> record) the record is dropped once
    the original is back."""
    pending = files.changes()
    for path, before, after in pending:
        result['edited'].append(path)
        result.diff.append({'before_header': path, 'after_header': path,
                            'before': before if before is not None else '',
                            'after': after if after is not None else ''})
        result['changed'] = True
    if check_mode or not pending:
        return
    changes = [_Change(files, path, before, after, restoring) for path, before, after in pending]
    current = None
    try:
        # 1. stage every new text; 2. keep every original
        for current in changes:
            if current.after is not None:
                current.tmp = _stage(current.real, current.after, current.mode, current.uid, current.gid)
        for current in changes:
            if current.rec is None:
                backups.before_write(current.path, current.before, current.st)
            # No copy of a file of our own that is deleted exactly as we wrote it.
            ours = current.rec is not None and current.after is None and current.rec.get('existed') is False
            if current.before is not None and backup and not ours:
                copy = writer.backup(current.real)
                if copy:
                    result['backups'].append(current.path + copy[len(current.real):])
    except (MasqError, IOError, OSError) as e:
        for change in changes:
            if change.tmp:
                remove_quietly(change.tmp)
        raise MasqError('cannot write %s: %s. Nothing was changed.'
                        % (current.path, getattr(e, 'msg', None) or getattr(e, 'strerror', None) or e),
                        path=current.path)
    # 3. replace, in order; on a failure put back what was replaced
    done = []
    for current in changes:
        tmp, current.tmp = current.tmp, None
        try:
            _place(writer, current, current.after, tmp)
        except (MasqError, IOError, OSError) as e:
            for change in changes:
                if change.tmp:
                    remove_quietly(change.tmp)
            failed = _put_back(writer, done)
            why = getattr(e, 'msg', None) or getattr(e, 'strerror', None) or str(e)
            if failed:
                raise MasqError('cannot replace %s: %s. The files written before it could not all be put back: '
                                '%s; their originals are kept in %s.'
                                % (current.path, why, ', '.join(failed), backups.dir), path=current.path)
            raise MasqError('cannot replace %s: %s.%s Nothing was changed.'
                            % (current.path, why, ' The files written before it (%s) were put back as they were.'
                               % ', '.join(c.path for c in done) if done else ''), path=current.path)
        done.append(current)
    try:
        for change in changes:
            if change.rec is None:
                backups.after_write(change.path, change.after)
        if restoring:
            for path in restoring:
                backups.drop(path)
    except (IOError, OSError) as e:
        raise MasqError('%s %s written, but the record of the originals under %s could not be updated (%s); '
                        'run again to repair it.' % (', '.join(c.path for c in changes),
                                                     'was' if len(changes) == 1 else 'were', backups.dir,
                                                     e.strerror or e), changed=True)
