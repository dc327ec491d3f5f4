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
nothing.  :func:`commit` then writes the changes as one plan of
``_core/engine/transaction.py`` (the one the rules, ``node_files`` and the resync
code use too), whose steps are, in order:

1. every new text staged in a temporary file beside its target;
2. the originals kept: the backup store's original and record
   (``backups.Backups.steps``) and the timestamped copy
   ``AnsibleModule.backup_local`` makes beside the file;
3. the targets replaced in order with ``AnsibleModule.atomic_move``,
   which keeps each file's SELinux context, owner and mode;
4. on ``absent``, the records of the originals put back dropped.

Before step 1 every target and its directory is checked for the inode flags
that stop even root from replacing a file (immutable, append-only: ``chattr
+i``/``+a``, ``_files/inode_flags.py``): such a file is refused
before anything is staged or copied.  A failure at any step undoes the
steps before it, newest first: the files replaced are put back, the copies
of this run (``~`` and the backup store's originals and records) go again,
so that the tree is exactly as it was, and the error names the path and
says that nothing was changed: never a traceback, never half an edit.  When
a file cannot be put back, the failure says ``changed``, names every file
left edited and the copy of its earlier content to restore it from (kept,
with its record in the store).

Every run also removes the temporary files (``.<name>.<12 hex
digits>.ipmasq-tmp``, as ``fileio.write_temp`` names them) that a run killed
between staging and renaming left beside the files this run reads or writes
and beside their records in the backup store, once they are older than
``ORPHAN_AGE`` seconds (``_files/orphans.py``).

How the files reach the disk (``AnsibleModule.atomic_move`` and
``backup_local``) is ``_files/writer.py``'s ``Writer``.

Standard library only: this file runs on managed nodes.
"""

import errno
import hashlib
import os
import time

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.fileio import atomic_write, remove_quietly, write_temp
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import (
    Failed, FileStep, Plan, StageStep, Step, left_edited, reason,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._files.inode_flags import flag_words
from ansible_collections.ipmasq.agent.plugins.module_utils._files.orphans import remove_orphans
# Imported from here by earlier callers (and tests): the orphans' age and the Writer.
from ansible_collections.ipmasq.agent.plugins.module_utils._files.orphans import ORPHAN_AGE  # noqa: F401 pylint: disable=unused-import
from ansible_collections.ipmasq.agent.plugins.module_utils._files.writer import Writer  # noqa: F401 pylint: disable=unused-import


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
        self.seen = set()

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
        self.seen.add(path)
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

    def touched(self):
        """Every path this run read or changes (resolved)."""
        return self.seen | set(self._overlay)

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
# The transaction
# --------------------------------------------------------------------------

class _Change(FileStep):
    """One file of the transaction (``transaction.FileStep``): its new text
    staged beside it, moved into place, and put back on a failure.  ``left``:
    it could not be put back (its copies and kept original then stay)."""

    def __init__(self, files, path, before, after, restoring, writer, backups, copies):
        FileStep.__init__(self, path, files.real(path), before is None)
        self.writer, self.backups, self.copies = writer, backups, copies
        self.before = before
        self.after = after
        self.left = False
        self.st = os.stat(self.real) if before is not None else None
        self.rec = restoring.get(path) if restoring else None
        if self.rec is not None and self.rec.get('mode') is not None:
            self.mode, self.uid, self.gid = self.rec['mode'], self.rec.get('uid'), self.rec.get('gid')
        elif self.st is not None:
            self.mode, self.uid, self.gid = self.st.st_mode & 0o7777, self.st.st_uid, self.st.st_gid
        else:
            self.mode, self.uid, self.gid = 0o644, None, None

    def stage(self):
        if self.after is not None:
            self.tmp = _stage(self.real, self.after, self.mode, self.uid, self.gid)

    def place(self):
        tmp, self.tmp = self.tmp, None
        _place(self.writer, self, self.after, tmp)

    def put_back(self):
        try:
            _place(self.writer, self, self.before)
        except BaseException:
            self.left = True
            raise

    def keep_before(self):
        return _restore_source(self.backups, self.copies, self)


class _Keep(Step):
    """A step that keeps the original of ``change`` (a copy of it, its record
    in the backup store): not undone when the file itself could not be put
    back (``change.left``), since the copy is then what restores it."""

    def __init__(self, change, step):
        Step.__init__(self, step.label, step.actions, step.write, self.undo_unless_left)
        self.change, self.step = change, step

    def undo_unless_left(self):
        if not self.change.left:
            self.step.undo()


class _Copy(Step):
    """The timestamped copy ``AnsibleModule.backup_local`` makes beside the
    file of ``change`` (``copies``: path -> copy); undone, it is removed.  A
    copy name already there (a run of this process in the same second) is
    not this run's to remove."""

    def __init__(self, change, copies):
        Step.__init__(self, change.path, ['copy'], self.make, self.remove)
        self.change, self.copies, self.copy, self.existed = change, copies, None, False

    def make(self):
        there = set(os.listdir(os.path.dirname(self.change.real)))
        self.copy = self.change.writer.backup(self.change.real)
        if self.copy:
            self.copies[self.change.path] = self.copy
            self.existed = os.path.basename(self.copy) in there

    def remove(self):
        if self.copy and not self.existed:
            self.copies.pop(self.change.path, None)
            _unlink(self.copy)


def _unlink(path):
    """Remove ``path``; one already gone is fine."""
    try:
        os.unlink(path)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise


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


def _check_writable(files, change):
    """Refuse (MasqError) a change the kernel would refuse because of an inode
    flag on the file or on the directory it is written in (the nearest
    existing one for a file in a new directory)."""
    if change.before is not None:
        words = flag_words(change.real)
        if words:
            raise MasqError('it is %s (chattr +%s, lsattr shows "%s"), so even root cannot replace it; '
                            'run "chattr -%s %s" if ipmasq.agent may edit it'
                            % (words[0], words[1], words[1], words[1], change.real))
    node_dir = os.path.dirname(change.path)
    while node_dir != '/' and not os.path.isdir(files.real(node_dir)):
        node_dir = os.path.dirname(node_dir)
    words = flag_words(files.real(node_dir))
    if words:
        raise MasqError('its directory %s is %s (chattr +%s), so even root cannot %s a file in it; '
                        'run "chattr -%s %s" if ipmasq.agent may edit it'
                        % (node_dir, words[0], words[1], 'create' if words[1] == 'i' else 'replace',
                           words[1], files.real(node_dir)))


def _restore_source(backups, copies, change):
    """A file holding exactly what ``change.real`` held before this run:
    the timestamped copy of this run, else the backup store's original
    when it is that text, else a copy written now beside it.  ``(path,
    None)`` or ``(None, why)``."""
    if change.path in copies:
        return copies[change.path], None
    data = backups.data_path(change.path)
    try:
        with open(data, 'rb') as f:
            if f.read() == change.before.encode('utf-8', 'surrogateescape'):
                return data, None
    except (IOError, OSError):
        pass
    copy = '%s.%s.before' % (data, time.strftime('%Y-%m-%dT%H%M%S'))
    try:
        atomic_write(copy, change.before, 0o600)
    except (IOError, OSError) as e:
        return None, str(e.strerror or e)
    return copy, None


def clean_orphans(files, backups, result, check_mode):
    """Remove (in check mode: name) the temporary files of ours a killed run
    left beside the files this run read or writes and beside their records
    in the backup store (``_files/orphans.py``)."""
    reals = []
    for path in files.touched():
        if path == '/dev/null':
            continue
        data = backups.data_path(path)
        reals.extend([files.real(path), data, data + backups.META_SUFFIX])
    for real, why in remove_orphans(reals, check_mode):
        if check_mode:
            result.msg('%s: a temporary file left by an earlier run that was stopped; a run not in check mode '
                       'removes it.' % real)
        elif why:
            result.warn('%s: a temporary file left by an earlier run that was stopped could not be removed '
                        '(%s).' % (real, why))
        else:
            result.msg('%s: removed a temporary file left by an earlier run that was stopped.' % real)


def _steps(files, backups, changes, copies, backup, restoring):
    """The run's plan (``_core/engine/transaction.py``): the new texts staged; the
    originals kept (the backup store, the timestamped copies); the files
    replaced in order; the records of originals put back dropped."""
    keep, planned = [], set()
    for change in changes:
        if change.rec is None:
            keep.extend(_Keep(change, step) for step in backups.steps(change.path, change.before, change.st,
                                                                      change.after, planned))
        # No copy of a file of our own that is deleted exactly as we wrote it.
        ours = change.rec is not None and change.after is None and change.rec.get('existed') is False
        if change.before is not None and backup and not ours:
            keep.append(_Keep(change, _Copy(change, copies)))
    drops = [step for path in sorted(restoring or ()) for step in backups.drop_steps(path)]
    return [StageStep(c) for c in changes] + keep + changes + drops


def _not_removed(broken):
    """The sentence about the copies of this run that could not be removed again."""
    kept = ['%s (%s)' % (getattr(step, 'path', step.label), reason(e)) for step, e in broken]
    return ' These copies it made could not be removed: %s.' % ', '.join(kept) if kept else ''


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
    clean_orphans(files, backups, result, check_mode)
    if check_mode or not pending:
        return
    copies = {}     # path -> the timestamped copy of this run
    changes = [_Change(files, path, before, after, restoring, writer, backups, copies) for path, before, after in pending]
    for change in changes:
        try:
            _check_writable(files, change)
        except MasqError as e:
            raise MasqError('cannot write %s: %s. Nothing was changed.' % (change.path, e.msg), path=change.path)
    plan = Plan(_steps(files, backups, changes, copies, backup, restoring))
    try:
        plan.run()
    except Failed as f:
        _failed(f, backups, changes)
    for path in sorted(copies):
        result['backups'].append(path + copies[path][len(files.real(path)):])


def _failed(f, backups, changes):
    """Raise the error of a run whose step ``f.step`` failed (every step
    before it undone that could be)."""
    placed = [s for s in f.done if s in changes]
    left = [(s, e) for s, e in f.broken if s in changes]
    others = [(s, e) for s, e in f.broken if s not in changes]
    path = f.step.change.path if isinstance(f.step, _Keep) else f.step.path
    why = reason(f.error).rstrip('.')
    if isinstance(f.step, _Keep) and not left:
        # The copy of the original failed (its disk full, read-only): name
        # the copy, whose disk it is, not the file it keeps.
        copy = getattr(f.step.step, 'path', None)
        where = copy or 'its copy beside it'
        raise MasqError('cannot keep the original of %s: cannot write %s: %s. Nothing was changed.%s'
                        % (path, where, why, _not_removed(others)), path=copy or path)
    if left:
        for change, _e in left:
            try:
                # Our text is on disk: state=absent may restore its original.
                backups.after_write(change.path, change.after)
            except (IOError, OSError):
                pass
        raise left_edited(Failed(f.error, f.step, placed, [], [], left), 'edited', 'cannot replace %s: %s' % (path, why),
                          lead={'path': path}, also=('edited',))
    verb = 'replace' if f.step in changes else 'write'
    raise MasqError('cannot %s %s: %s.%s Nothing was changed.%s'
                    % (verb, path, why, ' The files written before it (%s) were put back as they were.'
                       % ', '.join(c.path for c in placed) if placed else '', _not_removed(others)), path=path)
