# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The original of every file a daemon module edits, so that ``state=absent``
can put it back byte for byte.

Standard library only: this file runs on managed nodes.
"""

import json
import os
import time

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import ContentStep, DirStep
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import check_abs, sha256

DEFAULT_BACKUP_DIR = '/var/lib/ipmasq-agent/backup'
META_SUFFIX = '.ipmasq-agent.json'


class Backups:
    """The original of every file a module edits, kept below ``backup_dir``
    (``<backup_dir>/<path>``) with a small JSON record next to it
    (``<path>.ipmasq-agent.json``: owners, whether the file existed, the
    SHA-256 of what we wrote, mode and owner).

    The original is stored the first time a file is edited, and again when
    the file has changed since our last write (the user's newer version is
    then the one ``state=absent`` restores).  The store is written by steps
    of the run's transaction (:meth:`steps`, :meth:`drop_steps`): a run
    that fails leaves it exactly as it found it."""

    META_SUFFIX = META_SUFFIX

    def __init__(self, files, backup_dir, owner):
        self.files = files
        self.dir = check_abs(backup_dir, 'backup_dir')
        self.owner = owner

    def _store(self, path):
        base = os.path.join(self.files.real(self.dir), path.lstrip('/'))
        return base, base + META_SUFFIX

    def data_path(self, path):
        """Where the original of ``path`` is kept (a real path)."""
        return self._store(path)[0]

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

    def steps(self, path, before, st, after, planned):
        """The steps (``_core/engine/transaction.py``) that keep the original of ``path``
        before it is written: ``before`` is its text now (None: no file),
        ``st`` its stat, ``after`` what the run writes.  The original is kept
        unless ``before`` is our own last write; the record says what we
        wrote.  ``planned``: the store's directories other steps of the run
        already make (updated)."""
        rec = self.record(path)
        data, meta = self._store(path)
        written = sha256(after) if after is not None else None
        steps = []
        if rec is not None and before is not None and rec.get('written_sha256') == sha256(before):
            rec = dict(rec, owners=rec['owners'] + ([] if self.owner in rec['owners'] else [self.owner]))
        elif rec is not None and before is None and rec.get('existed') is False:
            rec = dict(rec)
        else:
            owners = sorted(set((rec or {}).get('owners', [])) | set([self.owner]))
            rec = {'path': path, 'owners': owners, 'existed': before is not None,
                   'saved': time.strftime('%Y-%m-%dT%H:%M:%S')}
            if before is not None:
                rec.update(mode=st.st_mode & 0o7777, uid=st.st_uid, gid=st.st_gid, original_sha256=sha256(before))
                steps.append(ContentStep(data, before.encode('utf-8', 'surrogateescape')))
            elif os.path.exists(data):
                steps.append(ContentStep(data, None))
        rec['written_sha256'] = written
        steps.append(self._save(path, rec))
        dirs = [d for d in _missing(os.path.dirname(data)) if d not in planned]
        planned.update(dirs)
        return [DirStep(d, 0o700) for d in dirs] + steps

    def _save(self, path, rec):
        _data, meta = self._store(path)
        return ContentStep(meta, json.dumps(rec, indent=2, sort_keys=True) + '\n')

    def after_write(self, path, after):
        """Record ``after`` as our last write of ``path`` (a file the run
        could not put back: ``state=absent`` may restore its original)."""
        rec = self.record(path)
        if rec is not None:
            rec['written_sha256'] = sha256(after) if after is not None else None
            self._save(path, rec).put()

    def drop_steps(self, path):
        """The steps that remove the original of ``path`` and its record."""
        return [ContentStep(p, None) for p in self._store(path) if os.path.lexists(p)]


def _missing(directory):
    """``directory`` and its parents that do not exist, outermost first."""
    missing = []
    while directory and directory != '/' and not os.path.isdir(directory):
        missing.insert(0, directory)
        directory = os.path.dirname(directory)
    return missing


def plan_restore(files, backups, result, semantic=None, check_mode=False):
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
            verb = 'would restore' if check_mode else 'restored'
            result.msg('%s: %s the original kept in %s.' % (path, verb, backups.dir))
            continue
        new = semantic(path, current, original) if (semantic and current is not None) else None
        if new is not None:
            files.write(path, new)
            restoring[path] = rec
            result.msg('%s: changed since ipmasq.agent edited it; %s only our setting.'
                       % (path, 'would revert' if check_mode else 'reverted'))
            continue
        result.warn('%s: changed since ipmasq.agent edited it, so it was left as it is; the original is kept '
                    'in %s%s.' % (path, backups.dir, path if original is not None else ' (the file did not exist)'))
    return restoring
