"""ipmasq.agent.node_files writes its files together or not at all, and a
missing required path stops it before anything is written.  A real module
run through ansible-playbook on files below the test's own directory; the
failure is a real one (chattr +i on the second file), not a mock."""
import os
import subprocess
import time

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ipmasq_lab import netlab
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import ORPHAN_AGE
from ansible_collections.ipmasq.agent.plugins.modules import node_files
from test_daemon_files import immutable

PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'playbooks', 'node_files.yml')


def run(args):
    with netlab.Netns('nf') as ns:
        _rc, tasks = netlab.playbook(ns, PLAYBOOK, extra_vars={'nf_args': args})
    return dict(tasks)['Step apply1']


def texts(paths):
    out = {}
    for path in paths:
        with open(path) as handle:
            out[path] = handle.read()
    return out


def three_files(tmp_path):
    first, second, third = (str(tmp_path / name) for name in ('a.conf', 'b.conf', 'c.conf'))
    for path in (first, second):
        with open(path, 'w') as handle:
            handle.write('old %s\n' % os.path.basename(path))
    args = {'files': [{'path': first, 'content': 'new a\n'}, {'path': second, 'content': 'new b\n'},
                      {'path': third, 'content': 'new c\n'}], 'mode': '0644'}
    return first, second, third, args


def listing(directory):
    """Every name in ``directory`` with its content and mode."""
    out = {}
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        with open(path, 'rb') as handle:
            out[name] = (handle.read(), os.stat(path).st_mode)
    return out


def test_files_are_written_together_or_not_at_all(tmp_path):
    """An immutable file among them (issue 18 item 10): refused before anything is written."""
    first, second, third, args = three_files(tmp_path)
    before = listing(str(tmp_path))
    with immutable(second):
        res = run(args)
        assert listing(str(tmp_path)) == before
    assert res.get('failed') is True and not res.get('changed')
    assert res['msg'].startswith('%s: cannot be changed: it is immutable (chattr +i' % second), res['msg']
    assert 'chattr -i %s' % second in res['msg'] and res['msg'].endswith('Nothing was changed.')
    res = run(args)
    assert res['changed'] is True and res['changed_paths'] == [first, second, third]
    assert res['msg'] == '3 files written (%s, %s, %s)' % (first, second, third)
    assert texts([first, second, third]) == {first: 'new a\n', second: 'new b\n', third: 'new c\n'}


def test_a_missing_required_path_changes_nothing(tmp_path):
    target = str(tmp_path / 'unit.service')
    res = run({'files': [{'path': target, 'content': 'x\n'}], 'require': [str(tmp_path / 'run/systemd/system')],
               'require_msg': 'this node does not run systemd.'})
    assert res.get('failed') is True and res['msg'].startswith('this node does not run systemd.')
    assert 'run/systemd/system is missing' in res['msg']
    assert not os.path.exists(target)


# ---------------------------------------------------------------- a fault in the middle of the writes
# The module's own apply() and AnsibleModule.atomic_move in this process, so
# that a real fault (chattr +i) is set at the moment that matters.

class FaultAtMove:
    """An AnsibleModule whose atomic_move, just before the move onto ``at``,
    sets ``chattr +i`` on each of ``then``."""

    def __init__(self, at, then):
        with patch_module_args({}):
            self.module = AnsibleModule(argument_spec={}, supports_check_mode=True)
        self.at, self.then, self.set = at, then, []
        real_move = self.module.atomic_move

        def move(src, dest, *args, **kwargs):
            if dest == self.at and not self.set:
                for path in self.then:
                    subprocess.run(['chattr', '+i', path], check=True)
                    self.set.append(path)
            return real_move(src, dest, *args, **kwargs)
        self.module.atomic_move = move

    def clear(self):
        for path in self.set:
            subprocess.run(['chattr', '-i', path], check=True)
        self.set = ['cleared']


def apply_with(args, fault):
    items, _queried = node_files.plan(args['files'], [], [], {'mode': args['mode'], 'owner': None, 'group': None},
                                      '0755')
    node_files.apply(fault.module, items)


def test_a_write_that_fails_midway_puts_the_first_back(tmp_path):
    first, second, _third, args = three_files(tmp_path)
    before = listing(str(tmp_path))
    fault = FaultAtMove(second, [second])
    try:
        with pytest.raises(MasqError) as failure:
            apply_with(args, fault)
        assert listing(str(tmp_path)) == before, 'a file was left written or a staged file left behind'
    finally:
        fault.clear()
    msg = failure.value.msg
    assert msg.startswith('%s: cannot be written' % second), msg
    assert 'The files written before it (%s) were put back' % first in msg and msg.endswith('Nothing was changed.')
    assert not failure.value.details.get('changed')


def test_a_file_that_cannot_be_put_back_is_named_with_its_copy(tmp_path):
    """Issue 18 item 11: changed, the file named, and a copy that restores it."""
    first, second, third, args = three_files(tmp_path)
    fault = FaultAtMove(second, [second, first])
    try:
        with pytest.raises(MasqError) as failure:
            apply_with(args, fault)
        assert texts([first]) == {first: 'new a\n'}, 'the fault did not leave a.conf written'
    finally:
        fault.clear()
    err = failure.value
    assert err.details['changed'] is True
    assert err.details['changed_paths'] == [first] and err.details['left_edited'] == [first]
    (restore,) = err.details['restore']
    copy = restore['backup']
    assert restore['path'] == first and copy.startswith(first + '.') and copy.endswith('.before')
    assert restore['command'] == ['cp', copy, first]
    assert err.msg.startswith('%s: cannot be written' % second), err.msg
    assert '%s was left written: putting it back failed (' % first in err.msg
    assert 'restore it from its backup %s: cp %s %s' % (copy, copy, first) in err.msg
    assert 'Nothing was changed' not in err.msg
    assert texts([second]) == {second: 'old b.conf\n'} and not os.path.exists(third)
    subprocess.run(restore['command'], check=True)
    assert texts([first]) == {first: 'old a.conf\n'}
    assert [n for n in os.listdir(str(tmp_path)) if 'ipmasq-tmp' in n] == [], 'a staged file was left behind'


def test_temporary_files_a_killed_run_left_are_removed_by_the_next_run(tmp_path):
    """Issue 18 item 11: only our exact name beside a file of the run, only when older than ORPHAN_AGE."""
    target = str(tmp_path / 'unit.service')
    with open(target, 'w') as handle:
        handle.write('x\n')
    old = time.time() - ORPHAN_AGE - 60
    orphan = str(tmp_path / '.unit.service.0123456789ab.ipmasq-tmp')
    kept = [str(tmp_path / name) for name in ('.other.service.0123456789ab.ipmasq-tmp', '.unit.service.xyz.ipmasq-tmp',
                                              'unit.service.0123456789ab.ipmasq-tmp')]
    fresh = str(tmp_path / '.unit.service.abcdefabcdef.ipmasq-tmp')
    for path in [orphan] + kept + [fresh]:
        with open(path, 'w') as handle:
            handle.write('staged\n')
        if path != fresh:
            os.utime(path, (old, old))
    res = run({'files': [{'path': target, 'content': 'x\n'}]})
    assert not res.get('failed'), res.get('msg')
    assert res['changed'] is False and res['removed_temp_files'] == [orphan]
    assert not os.path.exists(orphan) and all(os.path.exists(p) for p in kept + [fresh])


# ---------------------------------------------------------------- attributes and removals are in the transaction

def apply_all(files, absent, fault):
    items, _queried = node_files.plan(files, absent, [], {'mode': None, 'owner': None, 'group': None}, '0755')
    node_files.apply(fault.module, items)


def modes(directory):
    return {name: (content, oct(mode)) for name, (content, mode) in listing(directory).items()}


@pytest.mark.parametrize('later', ['a mode', 'a removal'])
def test_a_later_step_that_fails_puts_the_written_file_back(tmp_path, later):
    """The file is written, then setting a mode (the file made immutable
    meanwhile) or removing a path (its directory made immutable) fails:
    the written file is put back and every other path is as it was."""
    first, other = tmp_path / 'one', tmp_path / 'two'
    first.mkdir()
    other.mkdir()
    written, target = str(first / 'a.conf'), str(other / 'b.conf')
    for path in (written, target):
        with open(path, 'w') as handle:
            handle.write('old\n')
        os.chmod(path, 0o600)
    before = (modes(str(first)), modes(str(other)))
    if later == 'a mode':
        files, absent, blocked = [{'path': written, 'content': 'new\n'}, {'path': target, 'mode': '0644'}], [], target
    else:
        files, absent, blocked = [{'path': written, 'content': 'new\n'}], [target], str(other)
    fault = FaultAtMove(written, [blocked])
    try:
        with pytest.raises(MasqError) as failure:
            apply_all(files, absent, fault)
        assert fault.set == [blocked], 'the fault was not set'
        assert (modes(str(first)), modes(str(other))) == before, 'a file was left written, changed or removed'
    finally:
        fault.clear()
    msg = failure.value.msg
    action = 'mode 0600 -> 0644' if later == 'a mode' else 'remove file'
    assert msg.startswith('%s: %s failed: Operation not permitted.' % (target, action)), msg
    assert 'The files written before it (%s) were put back.' % written in msg and msg.endswith('Nothing was changed.')
    assert not failure.value.details.get('changed') and 'Traceback' not in msg


def test_a_tree_to_remove_with_an_immutable_file_inside_is_refused_whole(tmp_path):
    """An immutable file deep in a directory of ``absent``: refused before
    anything is changed (rmtree used to remove the tree's other files, then fail)."""
    top = tmp_path / 'old-agent'
    (top / 'sub').mkdir(parents=True)
    for name in ('a', 'sub/b', 'sub/c'):
        (top / name).write_text(name + '\n')
    written = str(tmp_path / 'new.conf')
    before = sorted(os.path.relpath(os.path.join(b, n), str(tmp_path)) for b, d, f in os.walk(str(tmp_path))
                    for n in d + f)
    fault = FaultAtMove(None, [])
    with immutable(str(top / 'sub' / 'c')):
        with pytest.raises(MasqError) as failure:
            apply_all([{'path': written, 'content': 'x\n'}], [str(top)], fault)
        after = sorted(os.path.relpath(os.path.join(b, n), str(tmp_path)) for b, d, f in os.walk(str(tmp_path))
                       for n in d + f)
    assert after == before, 'a file of the tree was removed, or the new file written'
    msg = failure.value.msg
    assert msg.startswith('%s: cannot be changed: %s is immutable (chattr +i' % (top, top / 'sub' / 'c')), msg
    assert msg.endswith('Nothing was changed.')
