"""The resync code's installer (_resync_code.py) on a temporary directory:
check mode writes nothing, a failed byte-compile leaves the code in place
as it was (nothing staged left), and absent removes every version."""
import os
import sys

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.runner import make_run


def listing(top):
    out = {}
    for base, dirs, files in os.walk(top):
        for name in dirs:
            out[os.path.relpath(os.path.join(base, name), top)] = 'link' if os.path.islink(
                os.path.join(base, name)) else 'dir'
        for name in files:
            with open(os.path.join(base, name), 'rb') as handle:
                out[os.path.relpath(os.path.join(base, name), top)] = handle.read()
    return out


@pytest.fixture
def sources():
    return _resync_code.package_sources()


def test_check_mode_writes_nothing(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    written, removed = _resync_code.install(lib, sources, make_run(), sys.executable, check_mode=True)
    assert written == sorted(sources) and removed == []
    assert os.listdir(str(tmp_path)) == []


def test_a_failed_byte_compile_leaves_the_installed_code_as_it_was(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    assert _resync_code.install(lib, sources, make_run(), sys.executable)[0] == sorted(sources)
    before = listing(lib)
    changed = dict(sources, **{'sync.py': sources['sync.py'] + b'# changed\n'})
    with pytest.raises(MasqError) as failure:
        _resync_code.install(lib, changed, make_run(), '/bin/false')
    assert failure.value.msg.startswith('cannot install the resync code in %s: /bin/false could not byte-compile it '
                                        '(rc=1)' % _resync_code.package_dir(lib)), failure.value.msg
    assert failure.value.msg.endswith('The code in place is as it was: nothing was changed.')
    assert failure.value.details['changed'] is False
    assert listing(lib) == before


def test_a_failed_first_install_leaves_no_directory(tmp_path, sources):
    lib = str(tmp_path / 'usr' / 'local' / 'lib')
    with pytest.raises(MasqError):
        _resync_code.install(lib, sources, make_run(), '/bin/false')
    assert os.listdir(str(tmp_path)) == []


def test_absent_removes_every_version_and_the_link(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    _resync_code.install(lib, sources, make_run(), sys.executable)
    _resync_code.install(lib, dict(sources, **{'x.py': b'\n'}), make_run(), sys.executable)
    assert len(os.listdir(_resync_code.versions_dir(lib))) == 2
    assert _resync_code.uninstall(lib) is True
    assert os.listdir(str(tmp_path)) == []


def module_run(lib, check_mode, state='present'):
    """The resync_code module's run, in-process (its options, check mode as Ansible passes it)."""
    from ansible.module_utils.basic import AnsibleModule  # pylint: disable=import-outside-toplevel
    from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel
    from ansible_collections.ipmasq.agent.plugins.modules import resync_code  # pylint: disable=import-outside-toplevel
    args = {'path': lib, 'python': sys.executable, 'state': state, '_ansible_check_mode': check_mode}
    with patch_module_args(args):
        module = AnsibleModule(argument_spec={'path': {'type': 'path'}, 'python': {'type': 'path'},
                                              'state': {'type': 'str'}}, supports_check_mode=True)
    return resync_code.manage(module, make_run(), None)


def test_the_module_says_in_one_line_what_it_wrote_would_write_or_removed(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    where = 'resync code in %s: ' % _resync_code.package_dir(lib)
    n = len(sources)
    msgs = [module_run(lib, check)['msg'] for check in (True, False, True, False)]
    assert msgs == [where + 'would write %d files' % n, where + '%d files written' % n,
                    where + 'no change', where + 'no change']
    assert [module_run(lib, check, 'absent')['msg'] for check in (True, False, False)] == [
        where + 'would be removed', where + 'removed', where + 'no change']


# ---------------------------------------------------------------- subpackages of the core

PROBE = {'probe/__init__.py': b'',
         'probe/deep/__init__.py': b'',
         'probe/deep/leaf.py': b'from ansible_collections.ipmasq.agent.plugins.module_utils._core import errors\n'
                               b'from ansible_collections.ipmasq.agent.plugins.module_utils._core.probe import near\n'
                               b'VALUE = (errors.MasqError.__name__, near.NEAR)\n',
         'probe/near.py': b'NEAR = 1\n'}
IMPORT_LEAF = ('from ansible_collections.ipmasq.agent.plugins.module_utils._core.probe.deep import leaf; '
               'print(leaf.VALUE, leaf.__file__)')


def node_import(lib):
    """What a process on the node imports from the installed code (only ``lib`` on its path)."""
    import subprocess  # pylint: disable=import-outside-toplevel
    proc = subprocess.run([sys.executable, '-S', '-B', '-c', IMPORT_LEAF], capture_output=True, text=True,
                          env={'PYTHONPATH': lib, 'PATH': os.environ['PATH']}, timeout=60, check=False)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def test_a_core_with_subpackages_is_installed_whole_and_imported_from_on_the_node(tmp_path, sources):
    """A package folder (with __init__.py, nested) is written into the
    version directory, byte-compiled, and switched with the rest; a change
    inside it is one more file written; a folder the new code no longer has
    is removed with the switch."""
    lib = str(tmp_path / 'lib')
    assert _resync_code.install(lib, dict(sources, **PROBE), make_run(), sys.executable) == (
        sorted(dict(sources, **PROBE)), [])
    rc, out, err = node_import(lib)
    version = os.path.realpath(_resync_code.package_dir(lib))
    assert rc == 0, err
    assert out == "('MasqError', 1) %s" % os.path.join(version, 'probe', 'deep', 'leaf.py')
    assert [n for n in os.listdir(os.path.join(version, 'probe', 'deep', '__pycache__')) if n.startswith('leaf.')]
    changed = dict(sources, **dict(PROBE, **{'probe/near.py': b'NEAR = 2\n'}))
    assert _resync_code.install(lib, changed, make_run(), sys.executable) == (['probe/near.py'], [])
    assert node_import(lib)[1].startswith("('MasqError', 2) ")
    assert _resync_code.install(lib, sources, make_run(), sys.executable) == ([], sorted(PROBE))
    assert not os.path.exists(os.path.join(_resync_code.package_dir(lib), 'probe'))
    assert node_import(lib)[0] != 0


def test_a_failure_inside_a_subpackage_leaves_the_code_in_place_as_it_was(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    _resync_code.install(lib, dict(sources, **PROBE), make_run(), sys.executable)
    before = listing(lib)
    broken = dict(sources, **dict(PROBE, **{'probe/deep/leaf.py': b'def (:\n'}))
    with pytest.raises(MasqError) as failure:
        _resync_code.install(lib, broken, make_run(), sys.executable)
    assert 'could not byte-compile it' in failure.value.msg and 'leaf.py' in failure.value.msg, failure.value.msg
    assert failure.value.msg.endswith('The code in place is as it was: nothing was changed.')
    assert listing(lib) == before
