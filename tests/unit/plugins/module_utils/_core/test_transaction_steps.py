"""The steps every writer's change is made of (transaction.py): a small file
of ours written or removed (ContentStep), a mode and owner (AttrStep), a
path removed (RemoveStep: moved aside, deleted by its finish), on real
files; a failing later step puts each back exactly."""
import os
import stat

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import (
    AttrStep, ContentStep, DirStep, Failed, Plan, RemoveStep, Step,
)


def listing(top):
    """Every path below ``top``: a link's target, a file's bytes and mode, a directory's mode."""
    out = {}
    for base, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(base, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[os.path.relpath(path, top)] = ('link', os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                with open(path, 'rb') as handle:
                    out[os.path.relpath(path, top)] = (handle.read(), stat.S_IMODE(st.st_mode))
            else:
                out[os.path.relpath(path, top) + '/'] = stat.S_IMODE(st.st_mode)
    return out


def fail():
    raise MasqError('the later step failed.')


@pytest.fixture
def node(tmp_path):
    (tmp_path / 'kept.json').write_text('{"old": 1}\n')
    (tmp_path / 'kept.json').chmod(0o640)
    (tmp_path / 'gone.json').write_text('old record\n')
    (tmp_path / 'unit').write_text('[Service]\n')
    (tmp_path / 'unit').chmod(0o600)
    (tmp_path / 'tree' / 'sub').mkdir(parents=True)
    (tmp_path / 'tree' / 'sub' / 'f').write_text('f\n')
    return tmp_path


def steps(node):
    return [DirStep(str(node / 'new'), 0o700), ContentStep(str(node / 'new' / 'rec.json'), '{"new": 1}\n'),
            ContentStep(str(node / 'kept.json'), b'{"new": 2}\n'), ContentStep(str(node / 'gone.json'), None),
            AttrStep(str(node / 'unit'), ['mode 0600 -> 0644'], mode=0o644), RemoveStep(str(node / 'tree'))]


def test_a_later_step_that_fails_puts_every_step_back_exactly(node):
    before = listing(str(node))
    with pytest.raises(Failed) as failure:
        Plan(steps(node) + [Step('later', ['x'], fail)]).run()
    assert listing(str(node)) == before
    assert failure.value.broken == [] and failure.value.error.msg == 'the later step failed.'


def test_written_steps_stand_and_the_removed_tree_is_deleted_by_the_finish(node):
    assert Plan(steps(node)).run() == []
    assert listing(str(node)) == {'kept.json': (b'{"new": 2}\n', 0o600), 'unit': (b'[Service]\n', 0o644),
                                  'new/': 0o700, 'new/rec.json': (b'{"new": 1}\n', 0o600)}


def test_a_directory_another_run_made_meanwhile_is_left_to_it(tmp_path):
    step = DirStep(str(tmp_path / 'd'), 0o755)
    (tmp_path / 'd').mkdir()
    with pytest.raises(Failed):
        Plan([step, Step('later', ['x'], fail)]).run()
    assert os.path.isdir(str(tmp_path / 'd')) and step.made is False
