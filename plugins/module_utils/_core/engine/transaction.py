# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The one way every writer of ours writes, and puts back on failure.

A change is a :class:`Plan`, a list of :class:`Step`: each has a label,
what it does (its actions), the function doing it, optionally the function
that takes it back (``undo``) and the one that throws away, once every step
is written, what only the undo needed (``finish``: a file moved aside, an
earlier version).  :func:`run` writes the steps in order; when one fails,
the steps already written are undone, newest first, and :class:`Failed`
says which were undone, which were kept (no undo) and which could not be
undone.  No writer keeps an undo of its own: what it changes is a step.

Every writer uses it:

- rules (``sync.py``'s plans: one step per iptables family, one for the
  nftables table): :meth:`Plan.apply` reports a failure after earlier steps
  as what was applied, undone and kept;
- files (``_daemons/files.py``'s commit, ``_files/node_files.py``,
  ``_resync_code.py``): :meth:`Plan.run`.  The steps: a :class:`DirStep`
  makes a directory a file needs and removes it again; a :class:`StageStep`
  stages a file's new text beside it; a :class:`FileStep` moves it into
  place and puts the earlier content back; a :class:`ContentStep` writes or
  removes a small file of ours (the backup store's originals and records);
  an :class:`AttrStep` sets a mode and owner; a :class:`RemoveStep` moves a
  path aside (removed for good by its finish).  :func:`left_edited` is the
  one report of a file that could not be put back: the run fails with
  ``changed``, each such file named with a copy of its earlier content and
  the command that restores it.

Standard library only: this file runs on managed nodes.
"""

import errno
import os
import stat

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.fileio import atomic_write, remove_quietly

# What a file step's write or undo may raise (MasqError: AnsibleModule's atomic_move, through files.Writer).
FILE_ERRORS = (MasqError, IOError, OSError)


def reason(error):
    """The words of a failure: a MasqError's sentence, an OSError's strerror, else the exception."""
    return getattr(error, 'msg', None) or getattr(error, 'strerror', None) or str(error)


class Step:
    """One write: a label (``IPv4``, a path), what it does, the function doing
    it and, optionally, the function that takes it back.  ``kinds``: what each
    action repairs, one machine-readable word per action (``chain_missing``,
    ``table_rewritten``, ...: the vocabulary is in ``_core/agent/metrics.py``).
    ``finish``: what runs once every step of the plan is written (it throws
    away what only ``undo`` needed)."""

    def __init__(self, label, actions, write, undo=None, kinds=(), finish=None):
        self.label = label
        self.actions = list(actions)
        self.write = write
        self.undo = undo
        self.kinds = list(kinds)
        self.finish = finish

    def described(self):
        return ['%s: %s' % (self.label, a) for a in self.actions]


class Failed(Exception):
    """A step failed: ``error`` (what it raised), ``step``, the steps ``done``
    before it, of those the ``undone``, the ``kept`` (no undo, or the undo
    failed) and ``broken``: ``[(step, error)]`` whose undo failed, newest first."""

    def __init__(self, error, step, done, undone, kept, broken):
        super(Failed, self).__init__(reason(error))
        self.error, self.step, self.done = error, step, done
        self.undone, self.kept, self.broken = undone, kept, broken


def run(steps, errors=(MasqError,)):
    """Write ``steps`` in order; return them.  When one raises one of
    ``errors``, undo the steps written before it (newest first) and raise
    :class:`Failed`."""
    done = []
    for step in steps:
        try:
            step.write()
        except errors as e:
            failure = e
        else:
            done.append(step)
            continue
        raise _unwind(failure, step, done, errors)
    return done


def undo(done, errors=FILE_ERRORS):
    """Undo the steps ``done`` (as :func:`run` returned them), newest first;
    returns ``[(step, error)]`` of those whose undo failed (or that have none)."""
    broken = []
    for step in reversed(done):
        if step.undo is None:
            broken.append((step, None))
            continue
        try:
            step.undo()
        except errors as e:
            broken.append((step, e))
    return broken


def _unwind(error, step, done, errors):
    failed = undo(done, errors)
    left = set(id(s) for s, _e in failed)
    return Failed(error, step, done, [s for s in done if id(s) not in left], [s for s in done if id(s) in left],
                  [(s, e) for s, e in failed if e is not None])


def finish(done, errors=FILE_ERRORS):
    """Each written step's ``finish``, in order; ``[(step, error)]`` of those that failed."""
    failed = []
    for step in done:
        if step.finish is not None:
            try:
                step.finish()
            except errors as e:
                failed.append((step, e))
    return failed


# --------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------

def _labels(steps):
    return ' and '.join(s.label for s in steps)


class Plan:
    """The steps that bring a node to the wanted state (empty: nothing to do)."""

    def __init__(self, steps=()):
        self.steps = list(steps)

    def run(self):
        """Write every step (file steps: :func:`replace_all`); when all are
        written, their ``finish``.  Raises :class:`Failed` with every written
        step undone that could be; returns ``[(step, error)]`` of the
        finishes that failed (the change stands)."""
        return finish(replace_all(self.steps))

    @property
    def changed(self):
        return bool(self.steps)

    @property
    def actions(self):
        return [a for step in self.steps for a in step.described()]

    @property
    def kinds(self):
        """The steps' kinds, in the order of ``actions``."""
        return [k for step in self.steps for k in step.kinds]

    def apply(self):
        """Write every step in order.  When one fails: undo the written steps
        that can be undone (newest first), and report exactly what was
        applied, undone and kept."""
        try:
            run(self.steps)
        except Failed as f:
            if not f.done:
                raise f.error
            raise _after_failure(f)


def _after_failure(failed):
    """The error to raise when a step failed after the steps ``failed.done`` were written."""
    error, undone, kept = failed.error, failed.undone, failed.kept
    details = dict(error.details)
    first = error.msg.rstrip('.') + '.'
    if not kept:
        details.update(changed=False, undone=[a for s in undone for a in s.described()])
        return MasqError('%s What was written before it (%s) was undone: the node is as it was. Nothing was changed.'
                         % (first, _labels(undone)), **details)
    applied = [a for s in kept for a in s.described()]
    details.update(changed=True, applied=applied, undone=[a for s in undone for a in s.described()])
    text = '%s %s %s already applied and %s kept: %s.' % (
        first, _labels(kept), 'was' if len(kept) == 1 else 'were', 'is' if len(kept) == 1 else 'are',
        '; '.join(applied))
    if undone:
        text += ' %s %s undone.' % (_labels(undone), 'was' if len(undone) == 1 else 'were')
    for step, e in failed.broken:
        text += ' Undoing %s failed as well: %s' % (step.label, e.msg.rstrip('.') + '.')
    return MasqError(text + ' Fix the problem above and run again to finish.', **details)


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------

class FileStep(Step):
    """One file replaced by the text staged for it (``tmp``, a temporary file
    beside it): ``write`` moves it into place (``place``), ``undo`` puts back
    what was there (``put_back``).  ``path`` is the name a user knows,
    ``real`` where it is (below a root, in tests), ``created``: nothing was
    there before.  A subclass stages (``stage``), places, puts back and keeps
    a copy of the earlier content (``keep_before``)."""

    def __init__(self, path, real, created):
        Step.__init__(self, path, (), self.place, self.put_back)
        self.path, self.real, self.created = path, real, created
        self.tmp = None

    def stage(self):
        raise NotImplementedError

    def place(self):
        raise NotImplementedError

    def put_back(self):
        raise NotImplementedError

    def keep_before(self):
        """``(path, None)`` of a file holding what was here before the run, or ``(None, why)``."""
        raise NotImplementedError

    def discard(self):
        """Remove the staged file, if it was not moved into place."""
        if self.tmp:
            remove_quietly(self.tmp)
            self.tmp = None


def replace_all(steps):
    """Write ``steps`` in order (files: each moved into place).  On a failure
    the staged files not used are removed, the steps already written are
    undone (newest first: files put back) and :class:`Failed` says which
    could not be."""
    try:
        return run(steps, FILE_ERRORS)
    except Failed:
        for step in steps:
            if isinstance(step, FileStep):
                step.discard()
        raise


def left_edited(failed, verb, head, lead=None, also=()):
    """The failure of a run that replaced files it then could not put back
    (``failed.broken``): ``changed``, each such file named (``left_edited``,
    and under each key of ``also``) with a copy of its earlier content
    (``keep_before``) and the command that restores it (``restore``).
    ``head``: the error's first sentence, without its full stop; ``verb``:
    what the files were left (``written``, ``edited``); ``lead``: details
    before these."""
    left, restore, hints = [], [], []
    for step, error in failed.broken:
        err = reason(error)
        left.append(step.path)
        if step.created:
            restore.append({'path': step.path, 'backup': None, 'command': ['rm', '-f', step.real]})
            hints.append('%s was created by this run and could not be removed again (%s); remove it: rm -f %s'
                         % (step.path, err, step.real))
            continue
        source, nosave = step.keep_before()
        restore.append({'path': step.path, 'backup': source, 'command': ['cp', source, step.real] if source else None})
        if source:
            hints.append('%s was left %s: putting it back failed (%s); restore it from its backup %s: cp %s %s'
                         % (step.path, verb, err, source, source, step.real))
        else:
            hints.append('%s was left %s: putting it back failed (%s), and no copy of its earlier content '
                         'could be written (%s); its earlier content is the "before" of this task\'s diff'
                         % (step.path, verb, err, nosave))
    back = [s.path for s in failed.done if s.path not in left]
    details = dict(lead or {})
    details['changed'] = True
    for key in also:
        details[key] = left
    details.update(left_edited=left, restore=restore)
    return MasqError('%s. %s.%s' % (head, '. '.join(hints), ' Put back as they were: %s.' % ', '.join(back) if back else ''),
                     **details)


class DirStep(Step):
    """One directory a run makes (``path``, with ``mode``, and owner ``uid``
    and ``gid`` when given): ``write`` makes it, ``undo`` removes it again
    (``rmdir``: what the run put in it was taken back first, newest first).
    A directory another run made meanwhile is left to it (``made`` false).
    ``what``: the path it is made for, for messages."""

    def __init__(self, path, mode, uid=None, gid=None, what=None):
        Step.__init__(self, path, ['create directory'], self.make, self.remove)
        self.path, self.mode, self.uid, self.gid = path, mode, uid, gid
        self.what = what or path
        self.made = False

    def make(self):
        try:
            os.mkdir(self.path, self.mode)
        except OSError as e:
            if e.errno == errno.EEXIST and os.path.isdir(self.path) and not os.path.islink(self.path):
                return
            raise
        self.made = True
        try:
            os.chmod(self.path, self.mode)     # not narrowed by the umask
            if self.uid is not None or self.gid is not None:
                os.chown(self.path, -1 if self.uid is None else self.uid, -1 if self.gid is None else self.gid)
        except BaseException:
            os.rmdir(self.path)
            raise

    def remove(self):
        if self.made:
            os.rmdir(self.path)


def dir_steps(directories, mode, uid=None, gid=None, what=None):
    """A :class:`DirStep` for each of ``directories`` (outermost first) that does not exist yet."""
    return [DirStep(d, mode, uid, gid, what) for d in directories if not os.path.isdir(d)]


def not_removed(broken):
    """The sentence about directories (or other steps) a failed run could not
    take back (``undo``'s result), or '' when every one was."""
    if not broken:
        return ''
    return ' Left behind, could not be removed again: %s.' % '; '.join(
        '%s (%s)' % (step.label, reason(error) if error is not None else 'no undo') for step, error in broken)


class StageStep(Step):
    """The new text of a :class:`FileStep` staged beside its file (its
    ``stage``); undone, the staged file is removed (its ``discard``)."""

    def __init__(self, file_step):
        Step.__init__(self, file_step.path, ['stage'], file_step.stage, file_step.discard)
        self.path, self.file_step = file_step.path, file_step


def _read_bytes(path):
    """The bytes of the regular file ``path``, None when nothing is there."""
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError) as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise


class ContentStep(Step):
    """A small file of ours (``path``) made to hold ``data`` (bytes or text;
    None: no file), written whole beside it and renamed (``fileio.atomic_write``),
    ``mode`` 0600 unless given.  ``undo`` puts back what was there when it
    was written (or removes the file).  Its directory must exist (a
    :class:`DirStep` before it)."""

    def __init__(self, path, data, mode=0o600, label=None):
        Step.__init__(self, label or path, ['write' if data is not None else 'remove'], self.put, self.put_back)
        self.path, self.data, self.mode = path, data, mode
        self.before, self.before_mode = None, None

    def put(self):
        self.before = _read_bytes(self.path)
        if self.before is not None:
            self.before_mode = stat.S_IMODE(os.stat(self.path).st_mode)
        self._set(self.data, self.mode)

    def put_back(self):
        self._set(self.before, self.before_mode)

    def _set(self, data, mode):
        if data is None:
            if os.path.lexists(self.path):
                os.unlink(self.path)
            return
        atomic_write(self.path, data, mode)


class AttrStep(Step):
    """``path``'s mode and owner set (each None: left alone); ``undo`` sets
    back those it had."""

    def __init__(self, path, actions, mode=None, uid=None, gid=None):
        Step.__init__(self, path, actions, self.apply, self.put_back)
        self.path, self.mode, self.uid, self.gid = path, mode, uid, gid
        self.before = None

    def apply(self):
        st = os.lstat(self.path)
        self.before = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
        self._set(self.mode, self.uid, self.gid)

    def put_back(self):
        mode, uid, gid = self.before
        self._set(mode if self.mode is not None else None, uid, gid)

    def _set(self, mode, uid, gid):
        if uid is not None or gid is not None:
            os.chown(self.path, -1 if uid is None else uid, -1 if gid is None else gid)
        if mode is not None:
            os.chmod(self.path, mode)      # after chown, which may clear setuid bits


class RemoveStep(Step):
    """``path`` (a file, a link or a whole directory tree) removed: ``write``
    renames it aside in its directory (``.<name>.<12 hex digits>.ipmasq-tmp``,
    as ``fileio.write_temp`` names a staged file), ``undo`` renames it back,
    ``finish`` deletes what was moved aside."""

    def __init__(self, path, actions=('remove',)):
        Step.__init__(self, path, actions, self.move_aside, self.move_back, finish=self.delete)
        self.path, self.aside = path, None

    def move_aside(self):
        directory, name = os.path.split(self.path)
        digits = ''.join('%02x' % b for b in bytearray(os.urandom(6)))
        aside = os.path.join(directory, '.%s.%s.ipmasq-tmp' % (name, digits))
        os.rename(self.path, aside)
        self.aside = aside

    def move_back(self):
        os.rename(self.aside, self.path)
        self.aside = None

    def delete(self):
        if os.path.isdir(self.aside) and not os.path.islink(self.aside):
            # Here, not at the top: shutil imports re, which a resync cycle does not load.
            import shutil  # pylint: disable=import-outside-toplevel
            shutil.rmtree(self.aside)
        else:
            os.unlink(self.aside)
