"""The daemon modules' file edits are all-or-nothing, and bad input is refused
cleanly (issue: a core that stays exact under odd nodes).  A write that fails
while staging, or while replacing the second of two files, leaves every file
as it was and names the path; a daemon.json nested too deeply or holding NaN,
and a boolean flag written as two words, are refused with a sentence, never a
traceback.  The modules run through ansible-playbook on a file tree of their
own (option root); the failures are real ones (an immutable file or
directory, chattr +i), not mocks."""
import contextlib
import subprocess

import pytest

from test_docker_flannel_kubelet import DOCKER_CE_UNIT, DOCKER_IO_UNIT, ETC_DEFAULT_DOCKER, docker_margs, run

TWO_FILES_JSON = '{\n  "ip-masq": false,\n  "log-level": "warn"\n}\n'


@contextlib.contextmanager
def immutable(path):
    """``chattr +i path`` for the block (even root cannot replace it or, for a
    directory, create a file in it)."""
    subprocess.run(['chattr', '+i', path], check=True)
    try:
        yield
    finally:
        subprocess.run(['chattr', '-i', path], check=True)


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


def test_the_second_file_failing_to_be_replaced_puts_the_first_back(nft_node, tree):
    two_file_node(tree)
    before = tree.snapshot()
    with immutable(tree.path('/etc/docker/daemon.json')):
        res = run(nft_node, 'docker', docker_margs(tree), ['apply1'])['apply1']
    assert res.get('failed') is True
    no_traceback(res)
    assert 'cannot replace /etc/docker/daemon.json' in res['msg'], res['msg']
    assert 'The files written before it (/etc/default/docker) were put back' in res['msg']
    assert 'Nothing was changed' in res['msg']
    assert tree.snapshot() == before, 'a file was left edited'
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
