"""ipmasq.agent.node_files writes its files together or not at all, and a
missing required path stops it before anything is written.  A real module
run through ansible-playbook on files below the test's own directory; the
failure is a real one (chattr +i on the second file), not a mock."""
import os

import netlab
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


def test_files_are_written_together_or_not_at_all(tmp_path):
    first, second, third = (str(tmp_path / name) for name in ('a.conf', 'b.conf', 'c.conf'))
    for path in (first, second):
        with open(path, 'w') as handle:
            handle.write('old %s\n' % os.path.basename(path))
    before = texts([first, second])
    args = {'files': [{'path': first, 'content': 'new a\n'}, {'path': second, 'content': 'new b\n'},
                      {'path': third, 'content': 'new c\n'}], 'mode': '0644'}
    with immutable(second):
        res = run(args)
    assert res.get('failed') is True
    assert res['msg'].startswith('%s: cannot be written' % second), res['msg']
    assert 'The files written before it (%s) were put back' % first in res['msg'] and 'Nothing was changed' in res['msg']
    assert texts([first, second]) == before and not os.path.exists(third)
    assert [n for n in os.listdir(str(tmp_path)) if n.startswith('.')] == [], 'a staged file was left behind'
    res = run(args)
    assert res['changed'] is True and res['changed_paths'] == [first, second, third]
    assert texts([first, second, third]) == {first: 'new a\n', second: 'new b\n', third: 'new c\n'}


def test_a_missing_required_path_changes_nothing(tmp_path):
    target = str(tmp_path / 'unit.service')
    res = run({'files': [{'path': target, 'content': 'x\n'}], 'require': [str(tmp_path / 'run/systemd/system')],
               'require_msg': 'this node does not run systemd.'})
    assert res.get('failed') is True and res['msg'].startswith('this node does not run systemd.')
    assert 'run/systemd/system is missing' in res['msg']
    assert not os.path.exists(target)
