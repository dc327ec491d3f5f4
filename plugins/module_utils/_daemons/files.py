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

Before step 1 every target and its directory is checked for the inode flags
that stop even root from replacing a file (immutable, append-only: ``chattr
+i``/``+a``, read with the ``FS_IOC_GETFLAGS`` ioctl): such a file is refused
before anything is staged or copied.  A failure in steps 1 or 2 leaves every
file as it was; a failure in step 3 puts back the files already replaced.
Either way the copies of this run (``~`` and the backup store's originals
and records) are removed again, so that the tree is exactly as it was, and
the error names the path and says that nothing was changed: never a
traceback, never half an edit.  When a file cannot be put back, the failure
says ``changed``, names every file left edited and the copy of its earlier
content to restore it from.

Every run also removes the temporary files (``.<name>.<12 hex
digits>.ipmasq-tmp``, as ``fileio.write_temp`` names them) that a run killed
between staging and renaming left beside the files this run reads or writes
and beside their records in the backup store, once they are older than
``ORPHAN_AGE`` seconds: no run keeps a staged file that long, so a file
that old belongs to no live run.

Standard library only: this file runs on managed nodes.
"""

import errno
import fcntl
import hashlib
import os
import re
import stat
import struct
import time

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.fileio import atomic_write, remove_quietly, write_temp

# The inode flags of chattr +i and +a (linux/fs.h), and the ioctl that reads
# them: _IOR('f', 1, long); powerpc, mips, sparc and alpha put the read bit
# one place lower.  The kernel writes an int at the buffer's start.
FS_IMMUTABLE_FL = 0x10
FS_APPEND_FL = 0x20
_IOC_READ = 0x40000000 if os.uname()[4].startswith(('ppc', 'mips', 'sparc', 'alpha')) else 0x80000000
FS_IOC_GETFLAGS = _IOC_READ | (struct.calcsize('l') << 16) | (ord('f') << 8) | 1

# A temporary file of ours (fileio.write_temp with the prefix ".<name>."), and
# how old it must be before a later run removes it as left by a killed run.
TEMP_NAME = re.compile(r'^\.(?P<name>.+)\.[0-9a-f]{12}\.ipmasq-tmp$')
ORPHAN_AGE = 600


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


def inode_flags(real):
    """The inode flags (what ``lsattr`` shows) of the regular file or
    directory ``real``; None for anything else, or when the file system does
    not have them.  Opened without blocking and without following a link."""
    try:
        st = os.lstat(real)
    except OSError:
        return None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return None
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0))
    except OSError:
        return None
    try:
        buf = bytearray(struct.calcsize('l'))
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf, True)
        return struct.unpack('=i', bytes(buf[:4]))[0] & 0xffffffff
    except (IOError, OSError, ValueError):
        return None
    finally:
        os.close(fd)


def flag_words(real):
    """``(adjective, chattr letter)`` when ``real`` cannot be replaced or
    removed even by root (immutable, append-only), else None."""
    flags = inode_flags(real)
    if flags is None:
        return None
    if flags & FS_IMMUTABLE_FL:
        return 'immutable', 'i'
    if flags & FS_APPEND_FL:
        return 'append-only', 'a'
    return None


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


def _put_back(writer, done):
    """Undo the replacements in ``done``; return ``[(change, why)]`` for those that could not be put back."""
    failed = []
    for change in reversed(done):
        try:
            _place(writer, change, change.before)
        except (MasqError, IOError, OSError) as e:
            failed.append((change, getattr(e, 'msg', None) or getattr(e, 'strerror', None) or str(e)))
    return failed


def _drop_copies(copies, existed):
    """Remove the timestamped copies this run made (but those of a name that
    ``existed`` before); the paths that stay."""
    kept = []
    for copy in copies.values():
        if copy in existed:
            continue
        try:
            os.unlink(copy)
        except OSError as e:
            if e.errno != errno.ENOENT:
                kept.append(copy)
    return kept


def _undo_copies(backups, copies, existed):
    """A refused or undone run: its copies and backup store changes go
    again.  Returns a sentence for what could not be removed ('' if none)."""
    kept = _drop_copies(copies, existed)
    try:
        kept.extend(backups.rollback())
    except (IOError, OSError) as e:
        kept.append('%s (%s)' % (backups.dir, e.strerror or e))
    if not kept:
        return ''
    return ' These copies it made could not be removed: %s.' % ', '.join(kept)


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


def _left_edited(backups, copies, current, why, failed, done):
    """The failure of a run that replaced files it then could not put back."""
    left, restore, hints = [], [], []
    for change, err in failed:
        left.append(change.path)
        try:
            # Our text is on disk: state=absent may restore its original.
            backups.after_write(change.path, change.after)
        except (IOError, OSError):
            pass
        if change.before is None:
            restore.append({'path': change.path, 'backup': None, 'command': ['rm', '-f', change.real]})
            hints.append('%s was created by this run and could not be removed again (%s); remove it: rm -f %s'
                         % (change.path, err, change.real))
            continue
        source, nosave = _restore_source(backups, copies, change)
        restore.append({'path': change.path, 'backup': source,
                        'command': ['cp', source, change.real] if source else None})
        if source:
            hints.append('%s was left edited: putting it back failed (%s); restore it from its backup %s: '
                         'cp %s %s' % (change.path, err, source, source, change.real))
        else:
            hints.append('%s was left edited: putting it back failed (%s), and no copy of its earlier content '
                         'could be written (%s); its earlier content is the "before" of this task\'s diff'
                         % (change.path, err, nosave))
    back = [c.path for c in done if c.path not in left]
    return MasqError('cannot replace %s: %s. %s.%s'
                     % (current.path, why, '. '.join(hints),
                        ' Put back as they were: %s.' % ', '.join(back) if back else ''),
                     path=current.path, changed=True, edited=left, left_edited=left, restore=restore)


def orphans(files, backups):
    """The temporary files of ours left by a killed run beside the files this
    run read or writes and beside their records in the backup store."""
    reals = []
    for path in files.touched():
        if path == '/dev/null':
            continue
        data = backups.data_path(path)
        reals.extend([files.real(path), data, data + backups.META_SUFFIX])
    return orphans_of(reals)


def orphans_of(reals):
    """The temporary files a killed run left for the files ``reals``: in a
    file's directory, a name ``.<name>.<12 hex>.ipmasq-tmp`` (as
    ``fileio.write_temp`` makes it) whose ``<name>`` is the file's, a regular
    file older than ``ORPHAN_AGE`` seconds."""
    names = {}
    for real in reals:
        names.setdefault(os.path.dirname(real), set()).add(os.path.basename(real))
    now = time.time()
    found = []
    for directory in sorted(names):
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        for entry in sorted(entries):
            m = TEMP_NAME.match(entry)
            if not m or m.group('name') not in names[directory]:
                continue
            real = os.path.join(directory, entry)
            try:
                st = os.lstat(real)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > ORPHAN_AGE:
                found.append(real)
    return found


def clean_orphans(files, backups, result, check_mode):
    """Remove (in check mode: name) what :func:`orphans` finds."""
    for real in orphans(files, backups):
        if check_mode:
            result.msg('%s: a temporary file left by an earlier run that was stopped; a run not in check mode '
                       'removes it.' % real)
            continue
        try:
            os.unlink(real)
        except OSError as e:
            if e.errno != errno.ENOENT:
                result.warn('%s: a temporary file left by an earlier run that was stopped could not be removed '
                            '(%s).' % (real, e.strerror or e))
            continue
        result.msg('%s: removed a temporary file left by an earlier run that was stopped.' % real)


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
    changes = [_Change(files, path, before, after, restoring) for path, before, after in pending]
    current = None
    copies = {}     # path -> the timestamped copy of this run
    kept_copies = set()
    backups.begin()
    try:
        # 0. nothing the kernel would refuse; 1. stage every new text; 2. keep every original
        for current in changes:
            _check_writable(files, current)
        for current in changes:
            if current.after is not None:
                current.tmp = _stage(current.real, current.after, current.mode, current.uid, current.gid)
        for current in changes:
            if current.rec is None:
                backups.before_write(current.path, current.before, current.st)
            # No copy of a file of our own that is deleted exactly as we wrote it.
            ours = current.rec is not None and current.after is None and current.rec.get('existed') is False
            if current.before is not None and backup and not ours:
                # backup_local names its copy after the pid and the second: a
                # name already there (a run of this process in the same second)
                # is not this run's to remove again.
                directory = os.path.dirname(current.real)
                there = set(os.listdir(directory))
                copy = writer.backup(current.real)
                if copy:
                    copies[current.path] = copy
                    if os.path.basename(copy) in there:
                        kept_copies.add(copy)
    except (MasqError, IOError, OSError) as e:
        for change in changes:
            if change.tmp:
                remove_quietly(change.tmp)
        kept = _undo_copies(backups, copies, kept_copies)
        raise MasqError('cannot write %s: %s. Nothing was changed.%s'
                        % (current.path, getattr(e, 'msg', None) or getattr(e, 'strerror', None) or e, kept),
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
            why = (getattr(e, 'msg', None) or getattr(e, 'strerror', None) or str(e)).rstrip('.')
            if failed:
                backups.end()
                raise _left_edited(backups, copies, current, why, failed, done)
            kept = _undo_copies(backups, copies, kept_copies)
            raise MasqError('cannot replace %s: %s.%s Nothing was changed.%s'
                            % (current.path, why, ' The files written before it (%s) were put back as they were.'
                               % ', '.join(c.path for c in done) if done else '', kept), path=current.path)
        done.append(current)
    backups.end()
    for path in sorted(copies):
        result['backups'].append(path + copies[path][len(files.real(path)):])
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
