# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What the ``node_files`` module does: several files of a node written
together or not at all, paths removed, paths looked at, in one round trip.

:func:`manage` is the one entry: the module's params (missing keys take the
module's defaults), check mode and diff mode, the command runner and tool
finder (unused here; every entry takes them), and the ``AnsibleModule``
whose ``atomic_move`` replaces the files.  It returns the module's result
dict, or raises :class:`MasqError` with nothing changed unless it says so.
Another module can call it in its own run.

Standard library (and ansible.module_utils) only: this file runs on managed nodes.
"""

import errno
import grp
import os
import pwd
import re
import stat
import time

from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.fileio import atomic_write, remove_quietly, write_temp
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import (
    AttrStep, DirStep, Failed, FileStep, Plan, RemoveStep, StageStep, dir_steps, left_edited, not_removed, reason,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._files.inode_flags import flag_words
from ansible_collections.ipmasq.agent.plugins.module_utils._files.orphans import remove_orphans
from ansible_collections.ipmasq.agent.plugins.module_utils._files.writer import Writer
from ansible_collections.ipmasq.agent.plugins.module_utils._msg import files_msg

MODE_RE = re.compile(r'^0?[0-7]{3}$|^[0-7]{4}$')
DIFF_LIMIT = 65536


class Bad(Exception):
    pass


def _mode(value, what):
    if value is None:
        return None
    if not isinstance(value, str) or not MODE_RE.match(value):
        raise Bad('%s: mode %r is not an octal string such as "0644"' % (what, value))
    return int(value, 8)


def _uid(name, what):
    if name is None:
        return None
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise Bad('%s: owner %r is not a user on this node' % (what, name))


def _gid(name, what):
    if name is None:
        return None
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise Bad('%s: group %r is not a group on this node' % (what, name))


def _kind(st):
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        return 'link'
    if stat.S_ISDIR(st.st_mode):
        return 'directory'
    if stat.S_ISREG(st.st_mode):
        return 'file'
    return 'other'


def _lstat(path):
    try:
        return os.lstat(path)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise Bad('%s: cannot be read: %s' % (path, to_native(e.strerror)))


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError) as e:
        raise Bad('%s: cannot be read: %s' % (path, to_native(e.strerror)))


def _text_for_diff(data):
    if data is None:
        return ''
    if len(data) > DIFF_LIMIT or b'\0' in data:
        return '<%d bytes, not shown>\n' % len(data)
    return to_text(data, errors='surrogate_or_replace')


def _missing_parents(path):
    """The parent directories of ``path`` that do not exist, outermost first."""
    missing = []
    parent = os.path.dirname(path)
    while parent and parent != '/' and not os.path.isdir(parent):
        if os.path.lexists(parent):
            raise Bad('%s: %s is in the way of its directory (not a directory)' % (path, parent))
        missing.append(parent)
        parent = os.path.dirname(parent)
    return list(reversed(missing))


def _path(path, seen, option):
    if not path or not os.path.isabs(path) or '\0' in path:
        raise Bad('%s: %r is not an absolute path' % (option, path))
    path = os.path.normpath(path)
    if path in seen:
        raise Bad('%s: listed more than once' % path)
    seen.add(path)
    return path


def plan(entries, absent, query, defaults, directory_mode):
    """Read every path and decide what to do; nothing is changed here.
    Returns (items, queried)."""
    seen = set()
    out = []
    dir_mode = _mode(directory_mode, 'directory_mode')
    _mode(defaults['mode'], 'mode')
    _uid(defaults['owner'], 'owner')
    _gid(defaults['group'], 'group')
    todo = [('present', entry) for entry in entries] + [('absent', {'path': path}) for path in absent]
    for state, entry in todo:
        path = _path(entry['path'], seen, 'files' if state == 'present' else 'absent')
        what = 'files[%s]' % path
        if state == 'present':
            entry = dict(entry)
            for key in ('mode', 'owner', 'group'):
                if entry.get(key) is None:
                    entry[key] = defaults[key]
        st = _lstat(path)
        item = {'path': path, 'state': state, 'existed': st is not None, 'type': _kind(st),
                'actions': [], 'before': None, 'after': None}
        if state == 'absent':
            item['exists'] = False
            if st is not None:
                item['actions'].append('remove %s' % item['type'])
                if item['type'] == 'file':
                    item['before'] = _read(path)
                else:
                    item['before'] = ('<%s>\n' % item['type']).encode()
                item['after'] = b''
        else:
            mode = _mode(entry.get('mode'), what)
            uid = _uid(entry.get('owner'), what)
            gid = _gid(entry.get('group'), what)
            if item['type'] in ('directory', 'other'):
                raise Bad('%s: a %s is at this path, not a file' % (path, item['type']))
            content = entry.get('content')
            want = None if content is None else to_bytes(content, errors='surrogate_or_strict')
            item.update(exists=True, mode=mode, uid=uid, gid=gid, content=want,
                        parents=_missing_parents(path), dir_mode=dir_mode)
            have = _read(path) if item['type'] == 'file' else None
            if item['parents']:
                item['actions'].append('create directory %s' % ', '.join(item['parents']))
            if item['type'] != 'file':
                item['write'] = True
                item['actions'].append('write content' if want is not None else 'create empty file')
                if item['type'] == 'link':
                    item['actions'][-1] += ' (replaces the link)'
                item['before'], item['after'] = b'', (want or b'')
            elif want is not None and have != want:
                item['write'] = True
                item['actions'].append('write content')
                item['before'], item['after'] = have, want
            else:
                item['write'] = False
                if mode is not None and stat.S_IMODE(st.st_mode) != mode:
                    item['actions'].append('mode %04o -> %04o' % (stat.S_IMODE(st.st_mode), mode))
                if uid is not None and st.st_uid != uid:
                    item['actions'].append('owner %s -> %s' % (st.st_uid, entry['owner']))
                if gid is not None and st.st_gid != gid:
                    item['actions'].append('group %s -> %s' % (st.st_gid, entry['group']))
        item['changed'] = bool(item['actions'])
        out.append(item)
    queried = [{'path': p, 'type': _kind(_lstat(p))} for p in [_path(p, seen, 'query') for p in query]]
    return out, queried


def _stage(item, content):
    """``content`` in a temporary file beside the item's path, with the mode and
    owner it is to have (asked for, else the present file's, else 0644)."""
    st = _lstat(item['path'])
    present = st is not None and _kind(st) == 'file'
    mode = item['mode'] if item['mode'] is not None else (stat.S_IMODE(st.st_mode) if present else 0o644)
    uid = item['uid'] if item['uid'] is not None else (st.st_uid if present else None)
    gid = item['gid'] if item['gid'] is not None else (st.st_gid if present else None)
    return write_temp(os.path.dirname(item['path']), content or b'', mode, uid, gid,
                      prefix='.%s.' % os.path.basename(item['path']))


def _attributes(item):
    """The step that sets the mode, owner and group asked for (``transaction.AttrStep``)."""
    return AttrStep(item['path'], item['actions'], item['mode'], item['uid'], item['gid'])


class _Write(FileStep):
    """One file of ``files`` whose content is written (``transaction.FileStep``)."""

    def __init__(self, writer, item):
        FileStep.__init__(self, item['path'], item['path'], not (item['existed'] and item['type'] == 'file'))
        self.writer, self.item = writer, item

    def stage(self):
        self.tmp = _stage(self.item, self.item['content'])

    def place(self):
        tmp, self.tmp = self.tmp, None
        self.writer.move(tmp, self.path)
        # atomic_move keeps the mode of a file it replaces and may apply the
        # umask to a new one: set what was asked for (again) either way.
        _attributes(self.item).apply()

    def put_back(self):
        if self.created:
            os.unlink(self.path)
            return
        tmp = _stage(self.item, self.item['before'])
        try:
            self.writer.move(tmp, self.path)
        finally:
            remove_quietly(tmp)

    def keep_before(self):
        """A copy of the earlier content beside the file (``<path>.<time>.before``, 0600)."""
        copy = '%s.%s.before' % (self.path, time.strftime('%Y-%m-%dT%H%M%S'))
        try:
            atomic_write(copy, self.item['before'], 0o600)
        except (IOError, OSError) as e:
            return None, to_native(e.strerror or e)
        return copy, None


def _check_flags(items):
    """Refuse (MasqError) a change the kernel would refuse because of an inode
    flag (chattr +i, +a) on the file, on the directory it is written in, or,
    for a directory of ``absent``, on anything in its tree (else a tree could
    be half removed)."""
    for item in items:
        if not item['changed']:
            continue
        path = item['path']
        targets = [(path, 'it')] if item['existed'] else []
        if item['state'] == 'absent' or item.get('write'):
            parent = os.path.dirname(path)
            while parent != '/' and not os.path.isdir(parent):
                parent = os.path.dirname(parent)
            targets.append((parent, 'its directory ' + parent))
        if item['state'] == 'absent' and item['type'] == 'directory':
            targets.extend((os.path.join(base, name), os.path.join(base, name))
                           for base, dirs, names in os.walk(path) for name in sorted(dirs) + sorted(names))
        for target, what in targets:
            words = flag_words(target)
            if words:
                raise MasqError('%s: cannot be changed: %s is %s (chattr +%s, lsattr shows "%s"), so even root cannot '
                                'change it; run "chattr -%s %s" if this task may change it. Nothing was changed.'
                                % (path, what, words[0], words[1], words[1], words[1], target))


def clean_orphans(items, check_mode):
    """Remove the temporary files a killed run left beside the files of
    ``files`` (``_files/orphans.py``); return their paths (in check mode:
    those it would remove)."""
    return [real for real, why in remove_orphans([i['path'] for i in items if i['state'] == 'present'], check_mode)
            if why is None]


def _dirs(writes):
    """The directories the files of ``writes`` need, made before anything is
    staged (``transaction.DirStep``): a failed run removes them again."""
    steps, seen = [], set()
    for write in writes:
        item = write.item
        for step in dir_steps([d for d in item['parents'] if d not in seen], item['dir_mode'], item['uid'],
                              item['gid'], what=item['path']):
            seen.add(step.path)
            steps.append(step)
    return steps


NOTHING = ' Nothing was changed.'


def _ending(broken):
    """The end of a failure's message and its details: "Nothing was changed"
    only when every step written was undone (``broken``: those that were not)."""
    if not broken:
        return NOTHING, {}
    dirs = [(s, e) for s, e in broken if isinstance(s, DirStep)]
    rest = [(s, e) for s, e in broken if not isinstance(s, DirStep)]
    end = not_removed(dirs)
    if rest:
        end += ' Could not be put back: %s.' % '; '.join('%s (%s)' % (s.label, reason(e)) for s, e in rest)
    return end, {'changed': True}


def _steps(module, items):
    """The plan (``_core/engine/transaction.py``): the directories the files need, the
    new contents staged, the files replaced in order, then the attributes
    set and the paths of ``absent`` removed (moved aside, deleted once
    every step is written)."""
    writer = Writer(module)
    writes = [_Write(writer, i) for i in items if i['changed'] and i['state'] == 'present' and i['write']]
    written = set(w.path for w in writes)
    later = []
    for item in items:
        if not item['changed'] or item['path'] in written:
            continue
        later.append(RemoveStep(item['path'], item['actions']) if item['state'] == 'absent' else _attributes(item))
    return writes, _dirs(writes) + [StageStep(w) for w in writes] + writes + later


def apply(module, items):
    """Write every file, set attributes, remove paths: all or nothing (``_core/engine/transaction.py``)."""
    _check_flags(items)
    writes, steps = _steps(module, items)
    try:
        unfinished = Plan(steps).run()
    except Failed as f:
        why = reason(f.error).rstrip('.')
        left = [(s, e) for s, e in f.broken if s in writes]
        if left:
            raise left_edited(Failed(f.error, f.step, [s for s in f.done if s in writes], [], [], left), 'written',
                              '%s: cannot be written (%s)' % (f.step.path, why), also=('changed_paths',))
        end, details = _ending(f.broken)
        back = [s.path for s in f.done if s in writes]
        back = ' The files written before it (%s) were put back.' % ', '.join(back) if back else ''
        if isinstance(f.step, DirStep):
            raise MasqError('%s: cannot be written (cannot create the directory %s: %s).%s'
                            % (f.step.what, f.step.path, why, end), **details)
        if isinstance(f.step, (StageStep, _Write)):
            raise MasqError('%s: cannot be written (%s).%s%s' % (f.step.path, why, back, end), **details)
        raise MasqError('%s: %s failed: %s.%s%s' % (f.step.path, ', '.join(f.step.actions), why, back, end), **details)
    if unfinished:
        raise MasqError('%s written and removed, but what was moved aside could not be deleted: %s.'
                        % (', '.join(i['path'] for i in items if i['changed']),
                           '; '.join('%s (%s)' % (s.aside, reason(e)) for s, e in unfinished)),
                        changed=True, changed_paths=[i['path'] for i in items if i['changed']])


# The defaults of the module's options, for a caller that leaves some out.
DEFAULTS = {'files': [], 'absent': [], 'query': [], 'mode': None, 'owner': None, 'group': None,
            'directory_mode': '0755', 'require': [], 'require_msg': 'A path this task needs is missing on the node.'}


def manage(params, check_mode, diff, run, find, module):  # pylint: disable=unused-argument
    """The ``node_files`` module's run: ``params`` as the module takes them,
    ``module`` the AnsibleModule whose atomic_move writes the files.  Returns
    the result dict (with ``diff`` when ``diff`` is true); raises MasqError."""
    p = dict(DEFAULTS)
    p.update(params)
    missing = [path for path in p['require'] if not os.path.lexists(path)]
    if missing:
        raise MasqError('%s (%s is missing.)' % (p['require_msg'].rstrip(), ', '.join(missing)))
    try:
        items, queried = plan(p['files'], p['absent'], p['query'], {k: p[k] for k in ('mode', 'owner', 'group')},
                              p['directory_mode'])
    except Bad as e:
        raise MasqError('%s. Nothing was changed.' % e)
    removed = clean_orphans(items, check_mode)
    if not check_mode:
        apply(module, items)
    result = {
        'removed_temp_files': removed,
        'changed': any(i['changed'] for i in items),
        'changed_paths': [i['path'] for i in items if i['changed']],
        'existing': [i['path'] for i in items if i['exists']] + [q['path'] for q in queried if q['type']],
        'queried': queried,
        'files': [{key: i[key] for key in ('path', 'state', 'existed', 'exists', 'type', 'changed', 'actions')}
                  for i in items],
    }
    result['msg'] = files_msg(result, check_mode)
    if diff:
        result['diff'] = [{'before_header': i['path'], 'after_header': i['path'],
                           'before': _text_for_diff(i['before']), 'after': _text_for_diff(i['after'])}
                          for i in items if i['changed'] and i['before'] is not None]
    return result
