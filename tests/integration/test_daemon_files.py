"""The daemon modules' file edits are all-or-nothing, and bad input is refused
cleanly (issue: a core that stays exact under odd nodes).  A write that fails
while staging, or while replacing the second of two files, leaves every file
as it was and names the path; a daemon.json nested too deeply or holding NaN,
and a boolean flag written as two words, are refused with a sentence, never a
traceback.  The modules run through ansible-playbook on a file tree of their
own (option root); the failures are real ones (an immutable file or
directory, chattr +i), not mocks."""
import contextlib
import os
import stat
import subprocess

import time

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.backups import DEFAULT_BACKUP_DIR
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.docker import docker_sync
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import ORPHAN_AGE, Writer
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.systemd import DEFAULT_UNIT_DIRS
from test_docker_flannel_kubelet import DOCKER_CE_UNIT, DOCKER_IO_UNIT, ETC_DEFAULT_DOCKER, docker_margs, run

TWO_FILES_JSON = '{\n  "ip-masq": false,\n  "log-level": "warn"\n}\n'


@contextlib.contextmanager
def immutable(path, flag='+i'):
    """``chattr +i path`` for the block (even root cannot replace it or, for a
    directory, create a file in it); ``+a`` (append-only) the same way."""
    subprocess.run(['chattr', flag, path], check=True)
    try:
        yield
    finally:
        subprocess.run(['chattr', '-' + flag[1:], path], check=True)


def two_file_node(tree):
    """--ip-masq=true in /etc/default/docker and "ip-masq" in daemon.json: a run
    edits both (the flag set to false, the key removed), in path order."""
    tree.put('/lib/systemd/system/docker.service', DOCKER_IO_UNIT)
    tree.put('/etc/default/docker', ETC_DEFAULT_DOCKER)
    tree.put('/etc/docker/daemon.json', TWO_FILES_JSON)


def no_traceback(res):
    """A refusal is a sentence from the module, not a crash (MODULE FAILURE and a traceback)."""
    assert 'MODULE FAILURE' not in res.get('msg', '') and 'module_stderr' not in res, res
    assert 'Traceback (most recent call last)' not in str(res), res
    assert res.get('msg'), res


def listing(tree):
    """Every path below the root (files and directories, the backup store and
    the timestamped copies included), with content and mode."""
    out = {}
    for dirpath, dirs, names in os.walk(tree.root):
        for name in dirs + names:
            real = os.path.join(dirpath, name)
            st = os.lstat(real)
            content = None
            if stat.S_ISREG(st.st_mode):
                with open(real, 'rb') as f:
                    content = f.read()
            out['/' + os.path.relpath(real, tree.root)] = (content, stat.S_IMODE(st.st_mode))
    return out


@pytest.mark.parametrize('flag,word', [('+i', 'immutable'), ('+a', 'append-only')])
def test_an_immutable_file_is_refused_and_the_tree_is_exactly_as_it_was(nft_node, tree, flag, word):
    """Issue 18 item 10: no timestamped copy, no backup record, no staged
    file: the listing of the whole tree is the same after the refusal."""
    two_file_node(tree)
    before = listing(tree)
    with immutable(tree.path('/etc/docker/daemon.json'), flag):
        res = run(nft_node, 'docker', docker_margs(tree), ['apply1'])['apply1']
        assert listing(tree) == before, 'the refused run left something behind'
    assert res.get('failed') is True and not res.get('changed')
    no_traceback(res)
    assert res['msg'].startswith('cannot write /etc/docker/daemon.json: it is %s (chattr %s' % (word, flag)), res['msg']
    assert 'chattr -%s %s' % (flag[1], tree.path('/etc/docker/daemon.json')) in res['msg']
    assert res['msg'].endswith('Nothing was changed.')
    # And with the fault gone the same run succeeds.
    res = run(nft_node, 'docker', docker_margs(tree), ['apply1'])['apply1']
    assert res['changed'] is True and sorted(res['edited']) == ['/etc/default/docker', '/etc/docker/daemon.json']


def test_a_file_that_cannot_be_staged_changes_nothing(nft_node, tree):
    two_file_node(tree)
    before = tree.snapshot()
    with immutable(tree.path('/etc/docker')):
        res = run(nft_node, 'docker', docker_margs(tree), ['apply1'])['apply1']
    assert res.get('failed') is True
    no_traceback(res)
    assert res['msg'].startswith('cannot write /etc/docker/daemon.json: ') and 'Nothing was changed' in res['msg']
    assert tree.snapshot() == before
    assert [p for p in tree.all_files() if p.endswith('~') or 'ipmasq-tmp' in p] == []


@pytest.mark.parametrize('text,fragment', [
    ('{"a": ' + '[' * 3000 + ']' * 3000 + '}\n', 'nests objects or lists too deeply'),
    ('{"mtu": NaN}\n', 'at line 1, column 9: NaN is not a JSON value'),
    ('{"log-opts": {"max-file": Infinity}}\n', 'Infinity is not a JSON value'),
])
def test_daemon_json_docker_would_refuse_is_refused_cleanly(nft_node, tree, text, fragment):
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', text)
    before = tree.snapshot()
    res = run(nft_node, 'docker', docker_margs(tree), ['apply1'])['apply1']
    assert res.get('failed') is True
    no_traceback(res)
    assert '/etc/docker/daemon.json' in res['msg'] and fragment in res['msg'], res['msg']
    assert tree.snapshot() == before


@pytest.mark.parametrize('module,unit_path,unit,value', [
    ('docker', '/lib/systemd/system/docker.service', '[Service]\nExecStart=/usr/bin/dockerd --ip-masq true -H fd://\n',
     'true'),
    ('docker', '/lib/systemd/system/docker.service', '[Service]\nExecStart=/usr/bin/dockerd --ip-masq false\n',
     'false'),
    ('flannel', '/etc/systemd/system/flanneld.service',
     '[Service]\nExecStart=/opt/bin/flanneld --ip-masq true --kube-subnet-mgr\n', 'true'),
])
def test_a_boolean_flag_written_as_two_words_is_refused(nft_node, tree, module, unit_path, unit, value):
    tree.put(unit_path, unit)
    before = tree.snapshot()
    margs = docker_margs(tree) if module == 'docker' else {'root': tree.root, 'remove_stale_rules': False}
    res = run(nft_node, module, margs, ['apply1'])['apply1']
    assert res.get('failed') is True
    no_traceback(res)
    assert '"--ip-masq %s" is written as two words' % value in res['msg'], res['msg']
    assert 'Write --ip-masq=%s' % value in res['msg'] and 'Nothing was changed' in res['msg']
    assert tree.snapshot() == before


# ---------------------------------------------------------------- a fault in the middle of a replacement
# The module's own code and Writer (AnsibleModule.atomic_move and
# backup_local), called in this process so that a real fault (chattr +i) can
# be set at the one moment that matters: after the first file was replaced.

UNIT = '/etc/systemd/system/docker.service'
JSON = '/etc/docker/daemon.json'
UNIT_TEXT = '[Service]\nExecStart=/usr/bin/dockerd -H fd:// --ip-masq=true\n'


class FaultAtMove:
    """The modules' Writer; just before the move onto ``at``, ``chattr +i`` on
    each of ``then``: the kernel refuses that move and, for a file already
    replaced, its put-back."""

    def __init__(self, at, then):
        with patch_module_args({}):
            self.writer = Writer(AnsibleModule(argument_spec={}, supports_check_mode=True))
        self.at, self.then, self.set = at, then, []

    def backup(self, real):
        return self.writer.backup(real)

    def move(self, tmp, real):
        if real == self.at and not self.set:
            for path in self.then:
                subprocess.run(['chattr', '+i', path], check=True)
                self.set.append(path)
        return self.writer.move(tmp, real)

    def clear(self):
        for path in self.set:
            subprocess.run(['chattr', '-i', path], check=True)
        self.set = ['cleared']


def unit_and_json(tree):
    """--ip-masq=true on the command line and "ip-masq" in daemon.json: a run
    replaces daemon.json (the key removed), then the unit (the flag set to false)."""
    tree.put(UNIT, UNIT_TEXT)
    tree.put(JSON, TWO_FILES_JSON, mode=0o640)


def sync(tree, writer, backup=True):
    params = {'state': 'present', 'root': tree.root, 'unit_dirs': list(DEFAULT_UNIT_DIRS), 'env_files': [],
              'backup_dir': DEFAULT_BACKUP_DIR, 'backup': backup, 'unit_name': 'docker.service',
              'daemon_json': JSON, 'remove_stale_rules': False, 'report_networks': False, 'docker_bin': None,
              'bridge_name': None, 'bridge_cidrs': None}

    def no_run(argv, data=None):
        raise AssertionError('nothing should be run: %r' % (argv,))

    return docker_sync(params, no_run, lambda _name: None, writer)


@pytest.mark.parametrize('store', ['no store yet', 'a store of an earlier run'])
def test_a_replacement_undone_midway_leaves_the_tree_exactly_as_it_was(tree, store):
    """Issue 18 item 10: the put-back worked, so the copies of the run (the
    timestamped ones, the backup store's original and record) go too."""
    unit_and_json(tree)
    if store != 'no store yet':
        sync(tree, FaultAtMove(None, []))        # a run that goes through,
        unit_and_json(tree)                     # then the user puts both back
    before = listing(tree)
    writer = FaultAtMove(tree.path(UNIT), [tree.path(UNIT)])
    try:
        with pytest.raises(MasqError) as failure:
            sync(tree, writer)
        assert listing(tree) == before, 'the undone run left something behind'
    finally:
        writer.clear()
    msg = failure.value.msg
    assert msg.startswith('cannot replace %s: ' % UNIT), msg
    assert 'The files written before it (%s) were put back as they were.' % JSON in msg
    assert msg.endswith('Nothing was changed.') and not failure.value.details.get('changed')


@pytest.mark.parametrize('backup', [True, False])
def test_a_file_that_cannot_be_put_back_is_named_with_its_backup(tree, backup):
    """Issue 18 item 11: changed, the file left edited named, and the copy to
    restore it from (which does restore it, byte for byte)."""
    unit_and_json(tree)
    writer = FaultAtMove(tree.path(UNIT), [tree.path(UNIT), tree.path(JSON)])
    try:
        with pytest.raises(MasqError) as failure:
            sync(tree, writer, backup=backup)
        assert tree.read(JSON) != TWO_FILES_JSON, 'the fault did not leave daemon.json edited'
    finally:
        writer.clear()
    err = failure.value
    assert err.details['changed'] is True
    assert err.details['left_edited'] == [JSON] and err.details['edited'] == [JSON]
    (restore,) = err.details['restore']
    source = restore['backup']
    assert restore['path'] == JSON and source.startswith(tree.root + '/') and os.path.isfile(source)
    assert restore['command'] == ['cp', source, tree.path(JSON)]
    assert err.msg.startswith('cannot replace %s: ' % UNIT), err.msg
    assert '%s was left edited: putting it back failed (' % JSON in err.msg
    assert 'restore it from its backup %s: cp %s %s' % (source, source, tree.path(JSON)) in err.msg
    assert 'Nothing was changed' not in err.msg
    # The unit was never replaced; the command restores daemon.json, mode included.
    assert tree.read(UNIT) == UNIT_TEXT
    subprocess.run(restore['command'], check=True)
    assert tree.read(JSON) == TWO_FILES_JSON and stat.S_IMODE(os.stat(tree.path(JSON)).st_mode) == 0o640


# ---------------------------------------------------------------- temporary files of a killed run

def test_temporary_files_a_killed_run_left_are_removed_by_the_next_run(nft_node, tree):
    """Issue 18 item 11: ours only (the exact name fileio.write_temp gives,
    beside a file the run reads or writes), and only when older than
    files.ORPHAN_AGE (no live run keeps a staged file that long)."""
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put(JSON, '{"ip-masq": false}\n')
    old = time.time() - ORPHAN_AGE - 60
    store = '/var/lib/ipmasq-agent/backup/etc/docker/'
    orphans = ['/etc/docker/.daemon.json.0123456789ab.ipmasq-tmp', store + '.daemon.json.00ff00ff00ff.ipmasq-tmp',
               store + '.daemon.json.ipmasq-agent.json.a1b2c3d4e5f6.ipmasq-tmp']
    kept = ['/etc/docker/.other.json.0123456789ab.ipmasq-tmp',     # not a file of the run
            '/etc/docker/.daemon.json.xyz.ipmasq-tmp',             # not our name
            '/etc/docker/daemon.json.0123456789ab.ipmasq-tmp',     # not our name
            '/etc/docker/.daemon.json.0123456789ab.ipmasq-tmp~']   # not our name
    for path in orphans + kept:
        tree.put(path, 'staged\n')
        os.utime(tree.path(path), (old, old))
    fresh = '/etc/docker/.daemon.json.abcdefabcdef.ipmasq-tmp'     # a live run's, perhaps
    tree.put(fresh, 'staged\n')
    res = run(nft_node, 'docker', docker_margs(tree), ['check1', 'apply1'])
    check, apply = res['check1'], res['apply1']
    assert not check.get('failed') and not apply.get('failed'), (check.get('msg'), apply.get('msg'))
    assert check['changed'] is False and apply['changed'] is False and apply['edited'] == []
    for path in orphans:
        assert '%s: a temporary file left by an earlier run that was stopped; a run not in check mode removes it.' \
            % tree.path(path) in check['messages'], check['messages']
        assert '%s: removed a temporary file left by an earlier run that was stopped.' % tree.path(path) \
            in apply['messages'], apply['messages']
        assert not os.path.exists(tree.path(path))
    for path in kept + [fresh]:
        assert os.path.exists(tree.path(path)), path
        assert not [m for m in apply['messages'] if tree.path(path) + ':' in m]


def test_absent_whose_record_cannot_be_dropped_puts_every_file_back(tree):
    """One transaction with the backup store: state=absent puts both originals
    back, then cannot drop their records (the store's directory made
    immutable at the last replacement): the originals' put-back is undone
    too, so the tree (store, records and copies included) is exactly as it
    was before the run, and the run says so."""
    unit_and_json(tree)
    sync(tree, FaultAtMove(None, []))
    before = listing(tree)
    store = tree.path(DEFAULT_BACKUP_DIR + '/etc/docker')
    writer = FaultAtMove(tree.path(UNIT), [store])
    params = {'state': 'absent', 'root': tree.root, 'unit_dirs': list(DEFAULT_UNIT_DIRS), 'env_files': [],
              'backup_dir': DEFAULT_BACKUP_DIR, 'backup': False, 'unit_name': 'docker.service',
              'daemon_json': JSON, 'remove_stale_rules': False, 'report_networks': False, 'docker_bin': None,
              'bridge_name': None, 'bridge_cidrs': None}
    try:
        with pytest.raises(MasqError) as failure:
            docker_sync(params, None, lambda _name: None, writer)
        assert writer.set == [store], 'the fault was not set'
        assert listing(tree) == before, 'the undone run left something changed'
    finally:
        writer.clear()
    err = failure.value
    assert err.msg.startswith('cannot write %s/daemon.json' % store), err.msg
    assert 'Operation not permitted' in err.msg and 'Traceback' not in err.msg
    assert 'The files written before it (%s, %s) were put back as they were.' % (JSON, UNIT) in err.msg, err.msg
    assert err.msg.endswith('Nothing was changed.') and not err.details.get('changed')
