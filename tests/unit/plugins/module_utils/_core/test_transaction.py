"""The one transaction (transaction.py): steps written in order, the written
ones undone newest first on a failure, and the two reports built from it
(rules: applied/undone/kept; files: left edited with a restore command),
and the directories a run makes (DirStep), removed again by undo."""
import os

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import (
    DirStep, Failed, FileStep, Plan, Step, dir_steps, left_edited, not_removed, replace_all, run, undo,
)


def recorder():
    log = []

    def act(name, fail=False):
        def do():
            log.append(name)
            if fail:
                raise MasqError('%s failed.' % name)
        return do
    return log, act


def test_steps_run_in_order_and_are_undone_newest_first():
    log, act = recorder()
    steps = [Step('a', ['x'], act('a'), act('undo a')), Step('b', ['y'], act('b')),
             Step('c', ['z'], act('c'), act('undo c')), Step('d', ['w'], act('d', fail=True))]
    with pytest.raises(Failed) as failure:
        run(steps)
    assert log == ['a', 'b', 'c', 'd', 'undo c', 'undo a']
    f = failure.value
    assert f.step is steps[3] and f.done == steps[:3]
    assert f.undone == [steps[0], steps[2]] and f.kept == [steps[1]] and f.broken == []


def test_an_undo_that_fails_is_kept_and_named():
    log, act = recorder()
    steps = [Step('a', ['x'], act('a'), act('undo a', fail=True)), Step('b', ['y'], act('b', fail=True))]
    with pytest.raises(Failed) as failure:
        run(steps)
    f = failure.value
    assert log == ['a', 'b', 'undo a'] and f.kept == [steps[0]] and f.undone == []
    assert [(s, e.msg) for s, e in f.broken] == [(steps[0], 'undo a failed.')]


def test_a_plan_whose_first_step_fails_raises_that_error():
    _log, act = recorder()
    with pytest.raises(MasqError) as failure:
        Plan([Step('IPv4', ['x'], act('a', fail=True))]).apply()
    assert failure.value.msg == 'a failed.'


def test_a_plan_reports_what_was_applied_undone_and_kept():
    _log, act = recorder()
    with pytest.raises(MasqError) as failure:
        Plan([Step('IPv4', ['add'], act('a')), Step('IPv6', ['add'], act('b'), act('undo b')),
              Step('nftables', ['drop'], act('c', fail=True))]).apply()
    err = failure.value
    assert err.msg == ('c failed. IPv4 was already applied and is kept: IPv4: add. IPv6 was undone. '
                       'Fix the problem above and run again to finish.')
    assert err.details == {'changed': True, 'applied': ['IPv4: add'], 'undone': ['IPv6: add']}


class Fake(FileStep):
    def __init__(self, path, created, fail_back=False, copy=None):
        FileStep.__init__(self, path, '/root' + path, created)
        self.fail_back, self.copy = fail_back, copy

    def place(self):
        if self.path == '/c':
            raise OSError(1, 'Operation not permitted')

    def put_back(self):
        if self.fail_back:
            raise OSError(30, 'Read-only file system')

    def keep_before(self):
        return (self.copy, None) if self.copy else (None, 'No space left on device')


def test_files_left_edited_are_named_with_how_to_restore_them():
    steps = [Fake('/a', False, copy='/keep/a'), Fake('/b', True, fail_back=True), Fake('/d', False),
             Fake('/e', False, fail_back=True, copy='/keep/e'), Fake('/c', False)]
    with pytest.raises(Failed) as failure:
        replace_all(steps)
    f = failure.value
    assert [s.path for s, _e in f.broken] == ['/e', '/b']
    err = left_edited(f, 'edited', 'cannot replace /c: Operation not permitted', lead={'path': '/c'}, also=('edited',))
    assert list(err.details) == ['path', 'changed', 'edited', 'left_edited', 'restore']
    assert err.details['changed'] is True and err.details['edited'] == err.details['left_edited'] == ['/e', '/b']
    assert err.details['restore'] == [{'path': '/e', 'backup': '/keep/e', 'command': ['cp', '/keep/e', '/root/e']},
                                      {'path': '/b', 'backup': None, 'command': ['rm', '-f', '/root/b']}]
    assert err.msg == ('cannot replace /c: Operation not permitted. /e was left edited: putting it back failed '
                       '(Read-only file system); restore it from its backup /keep/e: cp /keep/e /root/e. /b was '
                       'created by this run and could not be removed again (Read-only file system); remove it: '
                       'rm -f /root/b. Put back as they were: /a, /d.')


def test_a_file_without_a_copy_points_at_the_diff():
    steps = [Fake('/a', False, fail_back=True), Fake('/c', False)]
    with pytest.raises(Failed) as failure:
        replace_all(steps)
    err = left_edited(failure.value, 'written', '/c: cannot be written (x)', also=('changed_paths',))
    assert list(err.details) == ['changed', 'changed_paths', 'left_edited', 'restore']
    assert err.details['restore'] == [{'path': '/a', 'backup': None, 'command': None}]
    assert err.msg == ('/c: cannot be written (x). /a was left written: putting it back failed (Read-only file '
                       'system), and no copy of its earlier content could be written (No space left on device); its '
                       'earlier content is the "before" of this task\'s diff.')


def test_directories_a_run_made_are_removed_again_newest_first(tmp_path):
    top = tmp_path / 'a'
    steps = dir_steps([str(top), str(top / 'b'), str(tmp_path)], 0o750)
    assert [s.path for s in steps] == [str(top), str(top / 'b')]      # tmp_path exists: no step
    done = run(steps)
    assert oct(os.stat(str(top / 'b')).st_mode & 0o777) == '0o750'
    assert undo(done) == [] and os.listdir(str(tmp_path)) == []


def test_a_directory_that_is_not_empty_is_named_by_undo(tmp_path):
    done = run([DirStep(str(tmp_path / 'a'), 0o755)])
    (tmp_path / 'a' / 'f').write_text('x')
    broken = undo(done)
    assert [step.path for step, _e in broken] == [str(tmp_path / 'a')]
    assert not_removed(broken) == ' Left behind, could not be removed again: %s (Directory not empty).' % (
        tmp_path / 'a')
    assert not_removed([]) == ''
