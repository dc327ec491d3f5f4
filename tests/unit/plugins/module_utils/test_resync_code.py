"""The resync code's installer (_resync_code.py) on a temporary directory:
each version in a root of its own (``<lib>/v/<id>``, the id a hash of the
code that the controller computes too), written whole or not at all, a run
that changes nothing writes nothing, earlier roots and the flat tree of 1.0
and 1.1 removed only when no process runs from them, absent removes all."""
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run

CORE = 'ansible_collections/ipmasq/agent/plugins/module_utils/_core'


def listing(top, times=False):
    """Every directory and file below ``top`` (with ``times``, directories' mtimes too: a run that writes nothing)."""
    out = {}
    for base, dirs, files in os.walk(top):
        for name in dirs:
            path = os.path.join(base, name)
            out[os.path.relpath(path, top)] = ('link' if os.path.islink(path) else 'dir',
                                               os.stat(path).st_mtime_ns if times else None)
        for name in files:
            with open(os.path.join(base, name), 'rb') as handle:
                out[os.path.relpath(os.path.join(base, name), top)] = handle.read()
    return out


@pytest.fixture
def sources():
    return _resync_code.package_sources()


def root_of(lib, sources):
    return os.path.join(lib, 'v', _resync_code.version_id(sources))


def test_the_code_is_what_the_resync_imports_and_its_id_is_the_controllers(sources):
    """The sources are the resync and what it imports (inside functions too:
    metrics.py), each package's __init__.py; the controller's root is named
    by the same id."""
    assert {'__init__.py', 'agent/resync.py', 'engine/sync.py', 'agent/metrics.py'} <= set(sources)
    assert _resync_code.resync_root('/lib') == '/lib/v/' + _resync_code.version_id(sources)
    assert len(_resync_code.version_id(sources)) == 16
    assert _resync_code.version_id(dict(sources, **{'engine/sync.py': sources['engine/sync.py'] + b'\n'})) != \
        _resync_code.version_id(sources)


def test_install_writes_a_root_of_its_own_and_a_run_that_changes_nothing_writes_nothing(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    assert _resync_code.install(lib, sources, make_run(), sys.executable, check_mode=True) == (sorted(sources), [])
    assert os.listdir(str(tmp_path)) == []
    assert _resync_code.install(lib, sources, make_run(), sys.executable) == (sorted(sources), [])
    root = root_of(lib, sources)
    assert os.listdir(lib) == ['v'] and os.listdir(os.path.join(lib, 'v')) == [os.path.basename(root)]
    assert os.path.isfile(os.path.join(root, CORE, 'agent/resync.py')) and not os.path.islink(os.path.join(root, CORE))
    with open(os.path.join(root, CORE, '__init__.py'), 'rb') as handle:
        assert b'__path__' not in handle.read()      # no path pin: the root is never changed
    before = listing(lib, times=True)
    for check_mode in (True, False):
        assert _resync_code.install(lib, sources, make_run(), sys.executable, check_mode=check_mode) == ([], [])
    assert listing(lib, times=True) == before
    proc = subprocess.run([sys.executable, '-S', '-B', '-m', _resync_code.ENTRY, '--help'], capture_output=True,
                          text=True, env={'PYTHONPATH': root, 'PATH': '/usr/bin:/bin'}, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith('usage: ip-masq-agent'), proc.stderr


def test_a_new_version_is_a_second_root_and_reports_what_differs_from_the_one_before(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    old = dict(sources, **{'retired.py': b'# gone in the new version\n'})
    _resync_code.install(lib, old, make_run(), sys.executable)
    before = listing(lib)
    new = dict(sources, **{'engine/sync.py': sources['engine/sync.py'] + b'# new\n'})
    assert _resync_code.install(lib, new, make_run(), sys.executable) == (['engine/sync.py'], ['retired.py'])
    after = listing(lib)
    kept = os.path.relpath(root_of(lib, old), lib)
    assert {k: v for k, v in after.items() if k.startswith(kept)} == {k: v for k, v in before.items() if k.startswith(kept)}
    assert sorted(os.listdir(os.path.join(lib, 'v'))) == sorted(os.path.basename(root_of(lib, s)) for s in (old, new))


def test_a_failed_byte_compile_leaves_the_installed_code_as_it_was(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    _resync_code.install(lib, sources, make_run(), sys.executable)
    before = listing(lib)
    changed = dict(sources, **{'engine/sync.py': sources['engine/sync.py'] + b'# changed\n'})
    with pytest.raises(MasqError) as failure:
        _resync_code.install(lib, changed, make_run(), '/bin/false')
    assert failure.value.msg.startswith('cannot install the resync code in %s: /bin/false could not byte-compile it '
                                        '(rc=1)' % _resync_code.package_dir(root_of(lib, changed))), failure.value.msg
    assert failure.value.msg.endswith('The code in place is as it was: nothing was changed.')
    assert failure.value.details['changed'] is False
    assert listing(lib) == before


def test_a_failed_first_install_leaves_no_directory(tmp_path, sources):
    lib = str(tmp_path / 'usr' / 'local' / 'lib')
    with pytest.raises(MasqError):
        _resync_code.install(lib, sources, make_run(), '/bin/false')
    assert os.listdir(str(tmp_path)) == []


def flat_tree(lib, sources):
    """The layout of 1.0 and 1.1: the package a plain directory below ``lib``."""
    core = os.path.join(lib, CORE)
    for name, data in sources.items():
        os.makedirs(os.path.dirname(os.path.join(core, name)), exist_ok=True)
        with open(os.path.join(core, name), 'wb') as handle:
            handle.write(data)


def test_absent_removes_every_root_and_the_flat_tree(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    flat_tree(lib, sources)
    _resync_code.install(lib, sources, make_run(), sys.executable)
    _resync_code.install(lib, dict(sources, **{'x.py': b'\n'}), make_run(), sys.executable)
    assert _resync_code.uninstall(lib, check_mode=True) is True and len(os.listdir(os.path.join(lib, 'v'))) == 2
    assert _resync_code.uninstall(lib) is True
    assert os.listdir(str(tmp_path)) == []
    assert _resync_code.uninstall(lib) is False


def test_the_code_dirs_are_what_stale_and_absent_act_on(tmp_path, sources):
    """code_dirs names the versions' roots and the flat tree of 1.0/1.1, the
    directories that stale and uninstall act on (and the action asks the node
    about): a root or a flat tree outside them is neither stale nor removed."""
    lib = str(tmp_path / 'lib')
    assert _resync_code.code_dirs(lib) == [os.path.join(lib, 'v'), os.path.join(lib, 'ansible_collections', 'ipmasq', 'agent')]
    flat_tree(lib, sources)
    _resync_code.install(lib, sources, make_run(), sys.executable)
    root = root_of(lib, sources)
    roots, flat = _resync_code.code_dirs(lib)
    assert _resync_code.stale(lib, root) == [flat] and os.path.dirname(root) == roots
    assert _resync_code.uninstall(lib) is True
    assert not any(os.path.exists(d) for d in _resync_code.code_dirs(lib))


# ------------------------------------------------ a resync in flight, the sweep

HOLD = ('import sys; from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync; '
        'resync.hold_root(); print("in", flush=True); sys.stdin.readline(); '
        'from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import metrics; '
        'print(metrics.__file__, flush=True)')


def in_flight(pythonpath, code=HOLD):
    """A process running the installed code from ``pythonpath``, past its start, waiting for a line."""
    proc = subprocess.Popen([sys.executable, '-S', '-B', '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={'PYTHONPATH': pythonpath, 'PATH': '/usr/bin:/bin'})
    assert proc.stdout.readline() == 'in\n', proc.stderr.read() if proc.poll() is not None else ''
    return proc


def finish(proc):
    try:
        out, err = proc.communicate('go\n', timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return proc.returncode, out, err


def test_a_resync_in_flight_from_the_old_root_survives_the_switch_and_the_sweep(tmp_path, sources):
    """The old root's resync imports a module lazily after the new version is
    installed and a sweep ran: the sweep kept its root (its lock is held), a
    sweep after it ended removes it; the new root is never touched."""
    lib = str(tmp_path / 'lib')
    old = dict(sources, **{'engine/sync.py': sources['engine/sync.py'] + b'# old\n'})
    _resync_code.install(lib, old, make_run(), sys.executable)
    proc = in_flight(root_of(lib, old))
    try:
        _resync_code.install(lib, sources, make_run(), sys.executable)
        new = root_of(lib, sources)
        started = time.monotonic()
        assert _resync_code.sweep(lib, new, wait=0.5) == []
        assert 0.4 < time.monotonic() - started < 30
        assert os.path.isdir(root_of(lib, old))
    finally:
        rc, out, err = finish(proc)
    assert rc == 0, err
    assert out.strip() == os.path.join(root_of(lib, old), CORE, 'agent/metrics.py')
    assert _resync_code.sweep(lib, new, check_mode=True) == [root_of(lib, old)]
    assert _resync_code.sweep(lib, new) == [root_of(lib, old)]
    assert os.listdir(os.path.join(lib, 'v')) == [os.path.basename(new)]
    assert _resync_code.sweep(lib, new) == []


def test_the_flat_tree_of_1_1_goes_only_when_no_process_runs_from_it(tmp_path, sources):
    """A resync of 1.0/1.1 holds no lock: its PYTHONPATH (the lib dir itself) marks it."""
    lib = str(tmp_path / 'lib')
    flat_tree(lib, sources)
    _resync_code.install(lib, sources, make_run(), sys.executable)
    new = root_of(lib, sources)
    code = HOLD.replace('resync.hold_root(); ', '')
    proc = in_flight(lib, code)
    try:
        assert _resync_code.sweep(lib, new, wait=0.3) == []
        assert os.path.isdir(os.path.join(lib, CORE))
    finally:
        rc, out, err = finish(proc)
    assert rc == 0 and out.strip() == os.path.join(lib, CORE, 'agent/metrics.py'), err
    assert _resync_code.sweep(lib, new) == [os.path.join(lib, 'ansible_collections', 'ipmasq', 'agent')]
    assert os.listdir(lib) == ['v']


def unit_with(path, root):
    path.write_text('[Service]\nEnvironment="PYTHONPATH=%s" "LC_ALL=C"\n' % root)
    return str(path)


def test_the_later_sweep_waits_until_the_unit_names_the_new_root_and_systemd_has_loaded_it(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    old = dict(sources, **{'engine/sync.py': sources['engine/sync.py'] + b'# old\n'})
    _resync_code.install(lib, old, make_run(), sys.executable)
    _resync_code.install(lib, sources, make_run(), sys.executable)
    new = root_of(lib, sources)
    unit = unit_with(tmp_path / 'ip-masq-agent.service', root_of(lib, old))
    assert _resync_code.later_sweep(lib, new, unit, False, False, []) == []      # the unit still runs the old root
    assert _resync_code.later_sweep(lib, new, None, False, False, []) == []      # no unit given: nothing removed
    unit = unit_with(tmp_path / 'ip-masq-agent.service', new)
    assert _resync_code.later_sweep(lib, new, unit, False, False, [unit]) == []  # written, not reloaded
    assert os.path.isdir(root_of(lib, old))
    assert _resync_code.later_sweep(lib, new, unit, True, True, [unit]) == [root_of(lib, old)]
    assert os.path.isdir(root_of(lib, old))
    assert _resync_code.later_sweep(lib, new, unit, False, True, [unit]) == [root_of(lib, old)]
    assert os.listdir(os.path.join(lib, 'v')) == [os.path.basename(new)]


def module_run(lib, check_mode, state='present', unit=None):
    """The resync_code module's run, in-process (its options, check mode as Ansible passes it)."""
    from ansible.module_utils.basic import AnsibleModule  # pylint: disable=import-outside-toplevel
    from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel
    from ansible_collections.ipmasq.agent.plugins.modules import resync_code  # pylint: disable=import-outside-toplevel
    args = {'path': lib, 'python': sys.executable, 'state': state, 'unit': unit, '_ansible_check_mode': check_mode}
    with patch_module_args(args):
        module = AnsibleModule(argument_spec={'path': {'type': 'path'}, 'python': {'type': 'path'},
                                              'state': {'type': 'str'}, 'unit': {'type': 'path'}},
                               supports_check_mode=True)
    return resync_code.manage(module, make_run(), None)


def test_the_module_says_in_one_line_what_it_wrote_would_write_or_removed(tmp_path, sources):
    lib = str(tmp_path / 'lib')
    where = 'resync code in %s: ' % _resync_code.package_dir(_resync_code.resync_root(lib))
    n = len(sources)
    msgs = [module_run(lib, check)['msg'] for check in (True, False, True, False)]
    assert msgs == [where + 'would write %d files' % n, where + '%d files written' % n,
                    where + 'no change', where + 'no change']
    flat_tree(lib, sources)
    unit = unit_with(tmp_path / 'ip-masq-agent.service', _resync_code.resync_root(lib))
    ran = [module_run(lib, check, unit=unit) for check in (True, False, False)]
    gone = os.path.join(lib, 'ansible_collections', 'ipmasq', 'agent')
    assert [(r['msg'], r['changed'], r['removed_roots']) for r in ran] == [
        (where + 'would remove 1 earlier version (%s)' % gone, True, [gone]),
        (where + '1 earlier version removed (%s)' % gone, True, [gone]), (where + 'no change', False, [])]
    assert [module_run(lib, check, 'absent')['msg'] for check in (True, False, False)] == [
        where + 'would be removed', where + 'removed', where + 'no change']


# ---------------------------------------------------------------- subpackages of the core

PROBE = {'probe/__init__.py': b'',
         'probe/deep/__init__.py': b'',
         'probe/deep/leaf.py': b'from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import errors\n'
                               b'from ansible_collections.ipmasq.agent.plugins.module_utils._core.probe import near\n'
                               b'VALUE = (errors.MasqError.__name__, near.NEAR)\n',
         'probe/near.py': b'NEAR = 1\n'}
IMPORT_LEAF = ('from ansible_collections.ipmasq.agent.plugins.module_utils._core.probe.deep import leaf; '
               'print(leaf.VALUE, leaf.__file__)')


def node_import(root):
    """What a process on the node imports from the installed code (only ``root`` on its path)."""
    proc = subprocess.run([sys.executable, '-S', '-B', '-c', IMPORT_LEAF], capture_output=True, text=True,
                          env={'PYTHONPATH': root, 'PATH': os.environ['PATH']}, timeout=60, check=False)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def test_a_core_with_subpackages_is_installed_whole_and_imported_from_on_the_node(tmp_path, sources):
    """A package folder (with __init__.py, nested) is written into the root
    and byte-compiled with the rest; any folder names will do (each root is
    a tree of its own: nothing of an earlier version is on the path)."""
    lib = str(tmp_path / 'lib')
    with_probe = dict(sources, **PROBE)
    assert _resync_code.install(lib, with_probe, make_run(), sys.executable) == (sorted(with_probe), [])
    root = root_of(lib, with_probe)
    rc, out, err = node_import(root)
    assert rc == 0, err
    assert out == "('MasqError', 1) %s" % os.path.join(root, CORE, 'probe', 'deep', 'leaf.py')
    assert [n for n in os.listdir(os.path.join(root, CORE, 'probe', 'deep', '__pycache__')) if n.startswith('leaf.')]
    changed = dict(sources, **dict(PROBE, **{'probe/near.py': b'NEAR = 2\n'}))
    assert _resync_code.install(lib, changed, make_run(), sys.executable) == (['probe/near.py'], [])
    assert node_import(root_of(lib, changed))[1].startswith("('MasqError', 2) ")
    # A version whose module has the name an earlier version's folder had: its root has only its own.
    flat = dict(sources, **{'probe.py': b'NEAR = 3\n'})
    _resync_code.install(lib, flat, make_run(), sys.executable)
    assert not os.path.exists(os.path.join(root_of(lib, flat), CORE, 'probe'))
    assert node_import(root_of(lib, flat))[0] != 0


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


def test_the_node_run_refuses_code_whose_root_is_not_the_one_the_controller_named(tmp_path):
    """The unit names the controller's root: a node run that would install another writes nothing."""
    from ansible_collections.ipmasq.agent.plugins.modules import ip_masq_node  # pylint: disable=import-outside-toplevel
    lib = str(tmp_path / 'lib')
    wrong = os.path.join(lib, 'v', '0' * 16)
    with pytest.raises(MasqError) as failure:
        ip_masq_node.code_part({'path': lib, 'python': sys.executable, 'root': wrong}, False, make_run())
    assert failure.value.msg == ('resync code: the controller named %s in the unit, but this collection installs %s. '
                                 'Nothing was changed.' % (wrong, _resync_code.resync_root(lib)))
    assert os.listdir(str(tmp_path)) == []
    assert ip_masq_node.code_part({'path': lib, 'python': sys.executable, 'root': _resync_code.resync_root(lib)},
                                  False, make_run())[2] == _resync_code.resync_root(lib)


# ------------------------------------------------ the core compiled in one file (the unit's start)

# The unit's start, then, for each of the core's modules the process loaded, its loader and file.
LOADERS = ('from _ipmasq_resync import main; import sys\ntry:\n    code = main()\nexcept SystemExit as e:\n    code = e.code\n'
           'print("\\n".join("%s %s %s" % (n, type(m.__loader__).__name__, m.__file__) for n, m in sorted(sys.modules.items()) '
           'if n.startswith("ansible_collections.ipmasq.agent.plugins.module_utils._core"))); raise SystemExit(code)')
# The start of the units of the versions before the one file (and of a root without it).
FOLDERS_ENTRY = 'from %s import main; raise SystemExit(main())' % _resync_code.ENTRY


def start(root, code, *argv):
    """``python3 -S -B -c code argv`` as the unit runs it from ``root``: (exit code, stdout, stderr)."""
    proc = subprocess.run(['/usr/bin/python3', '-S', '-B', '-c', code] + list(argv), capture_output=True, text=True,
                          env={'PYTHONPATH': root, 'PATH': '/usr/bin:/bin'}, timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def loaders(root):
    """``{module: (loader's class, file)}`` of the core's modules a run of ``--help`` from ``root`` loaded."""
    rc, out, err = start(root, LOADERS, '--help')
    assert rc == 0, err
    lines = [line.split(' ') for line in out.splitlines() if line.startswith('ansible_collections.')]
    return {name: (loader, path) for name, loader, path in lines}


def test_the_root_holds_the_units_start_and_the_core_compiled_in_one_file(tmp_path, sources):
    """At the root's top: boot.py as the unit's start (byte-compiled) and the
    core's modules compiled by the node's python into one file; the unit's
    start loads every module of the core from it, each module's file the
    one below the root it was compiled from."""
    from ansible_collections.ipmasq.agent.plugins.plugin_utils._units import ENTRY  # pylint: disable=import-outside-toplevel
    lib = str(tmp_path / 'lib')
    _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
    root = root_of(lib, sources)
    assert 'agent/boot.py' in sources
    assert sorted(os.listdir(root)) == ['__pycache__', '_ipmasq_resync.bin', '_ipmasq_resync.py', 'ansible_collections']
    with open(os.path.join(root, '_ipmasq_resync.py'), 'rb') as handle:
        assert handle.read() == sources['agent/boot.py']
    assert [n.split('.')[0] for n in os.listdir(os.path.join(root, '__pycache__'))] == ['_ipmasq_resync']
    assert ENTRY == 'from _ipmasq_resync import main; raise SystemExit(main())'
    rc, out, err = start(root, ENTRY, '--help')
    assert rc == 0 and out.startswith('usage: ip-masq-agent') and err == '', err
    loaded = loaders(root)
    assert len(loaded) > 20 and _resync_code.ENTRY in loaded
    assert {loader for loader, _path in loaded.values()} == {'_Loader'}, loaded
    for name, (_loader, path) in loaded.items():
        assert path.startswith(os.path.join(root, CORE) + '/') and os.path.isfile(path), (name, path)


@pytest.mark.parametrize('damage', ['missing', 'another python', 'cut short', 'not an index'])
def test_without_its_one_file_the_start_imports_the_core_from_the_folders(tmp_path, sources, damage):
    """The one file missing, of another interpreter (the node's python3 was
    upgraded since), not whole or without its index: the start runs the
    resync from the root's folders, as before."""
    import marshal  # pylint: disable=import-outside-toplevel
    lib = str(tmp_path / 'lib')
    _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
    root = root_of(lib, sources)
    bundle = os.path.join(root, '_ipmasq_resync.bin')
    with open(bundle, 'rb') as handle:
        data = handle.read()
    os.unlink(bundle)
    if damage == 'another python':
        with open(bundle, 'wb') as handle:
            handle.write(b'\x00\x00\r\n' + data[4:])
    elif damage == 'cut short':
        with open(bundle, 'wb') as handle:
            handle.write(data[:-1])
    elif damage == 'not an index':
        head = marshal.dumps(['not', 'an', 'index'])
        with open(bundle, 'wb') as handle:
            handle.write(data[:4] + len(head).to_bytes(4, 'little') + head)
    loaded = loaders(root)
    assert _resync_code.ENTRY in loaded
    assert {loader for loader, _path in loaded.values()} == {'SourceFileLoader'}, loaded
    assert all(path.startswith(os.path.join(root, CORE) + '/') for _loader, path in loaded.values())


START_HOLD = HOLD.replace('import sys; ', 'import sys, os, _ipmasq_resync as boot; '
                          'boot.load(os.path.dirname(boot.__file__)); ')


def test_a_resync_in_flight_from_the_one_file_holds_its_root(tmp_path, sources):
    """A resync started from the one file holds the lock of its root's
    resync.py: the sweep keeps that root while it runs (a module it imports
    later still comes from it), removes it once it ended."""
    lib = str(tmp_path / 'lib')
    old = dict(sources, **{'engine/sync.py': sources['engine/sync.py'] + b'# old\n'})
    _resync_code.install(lib, old, make_run(), '/usr/bin/python3')
    proc = in_flight(root_of(lib, old), START_HOLD)
    try:
        _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
        assert _resync_code.sweep(lib, root_of(lib, sources), wait=0.3) == []
        assert os.path.isdir(root_of(lib, old))
    finally:
        rc, out, err = finish(proc)
    assert rc == 0, err
    assert out.strip() == os.path.join(root_of(lib, old), CORE, 'agent/metrics.py')
    assert _resync_code.sweep(lib, root_of(lib, sources)) == [root_of(lib, old)]


def folders_root(lib, sources):
    """A root as the versions before the one file installed it: the package and its .pyc, nothing at the top."""
    root = root_of(lib, sources)
    for name, data in sources.items():
        path = os.path.join(root, CORE, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as handle:
            handle.write(data)
    subprocess.run(['/usr/bin/python3', '-m', 'compileall', '-q', root], check=True, timeout=120)
    return root


def test_from_a_folders_root_to_the_one_file_and_back(tmp_path, sources):
    """Upgrading from a root of folders (the version before) installs this
    version's root beside it and the sweep removes the old one whole; going
    back (the earlier version installs its root of folders again) the sweep
    removes this version's root whole, its one file with it; each root runs
    with its own unit's start, and nothing else is left."""
    lib = str(tmp_path / 'lib')
    earlier = dict(sources, **{'engine/sync.py': sources['engine/sync.py'] + b'# earlier\n'})
    earlier.pop('agent/boot.py')
    old = folders_root(lib, earlier)
    assert start(old, FOLDERS_ENTRY, '--help')[0] == 0
    _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
    new = root_of(lib, sources)
    assert _resync_code.sweep(lib, new) == [old]
    assert os.listdir(os.path.join(lib, 'v')) == [os.path.basename(new)]
    assert {loader for loader, _path in loaders(new).values()} == {'_Loader'}
    # ... and back.
    old = folders_root(lib, earlier)
    assert _resync_code.sweep(lib, old) == [new]
    assert os.listdir(os.path.join(lib, 'v')) == [os.path.basename(old)]
    rc, out, err = start(old, FOLDERS_ENTRY, '--help')
    assert rc == 0 and out.startswith('usage: ip-masq-agent'), err


def test_the_one_file_holds_no_docstrings_and_the_core_needs_none(tmp_path, sources):
    """The one file's code is compiled as ``python -OO`` would (no docstrings
    to unmarshal in every cycle, some 0.8 ms of CPU): so no module of the core
    may read a docstring, hold an ``assert`` or ask ``__debug__``, which would
    then behave otherwise from the one file than from the folders."""
    import ast  # pylint: disable=import-outside-toplevel
    for name, data in sources.items():
        for node in ast.walk(ast.parse(data, name)):
            assert not isinstance(node, ast.Assert), (name, node.lineno)
            assert getattr(node, 'id', getattr(node, 'attr', None)) not in ('__doc__', '__debug__'), (name, node.lineno)
    lib = str(tmp_path / 'lib')
    _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
    code = ('import _ipmasq_resync as b, os, sys; b.load(os.path.dirname(b.__file__)); '
            'from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync; '
            'from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import policy; '
            'print(resync.__doc__, policy.Policy.__doc__, resync.main.__doc__)')
    rc, out, err = start(root_of(lib, sources), code)
    assert rc == 0 and out.split() == ['None', 'None', 'None'], (out, err)


def test_the_one_file_holds_no_column_positions(tmp_path, sources):
    """Nor the columns of each instruction (``-X no_debug_ranges``: a
    traceback has no carets, its line numbers stay): a third less to
    unmarshal per cycle on Python 3.11 and later."""
    lib = str(tmp_path / 'lib')
    _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
    code = ('import _ipmasq_resync as b, os, sys; b.load(os.path.dirname(b.__file__)); '
            'from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync; '
            'positions = getattr(resync.main.__code__, "co_positions", None); '
            'print(sys.version_info >= (3, 11), len(set(p[2] for p in positions()) - {None}) if positions else None, '
            'resync.main.__code__.co_firstlineno > 1)')
    rc, out, err = start(root_of(lib, sources), code)
    assert rc == 0, err
    assert out.split() in (['True', '0', 'True'], ['False', 'None', 'True']), out


# The unit's start run with --help, each module the one file hands out noted with
# whether the cyclic collector was on while it ran; then the bytes this process
# read (/proc/self/io) since the start's module was imported, and what it loaded.
READS = '''
import gc, json, sys, _ipmasq_resync as b
def rchar():
    with open('/proc/self/io') as handle:
        return int([line for line in handle if line.startswith('rchar:')][0].split()[1])
first = rchar()
ran, plain = {}, b._Loader.exec_module
def exec_module(self, module):
    plain(self, module)
    ran[module.__name__] = [gc.isenabled(), module.__file__, getattr(module, '__cached__', None)]
b._Loader.exec_module = exec_module
try:
    b.main()
except SystemExit:
    pass
sys.stderr.write(json.dumps({'read': rchar() - first, 'ran': ran, 'frozen': gc.get_freeze_count()}))
'''


def test_the_start_reads_only_the_modules_it_loads_and_loads_them_without_the_collector(tmp_path, sources):
    """A cycle reads the one file's index and then only the code of the
    modules it imports (not the whole file: what only a repair, the module,
    the audit or the watcher runs is never read), and the cyclic garbage
    collector is off while they load (their objects are never garbage) and
    on again for the cycle itself (resync.main).  Each module has its
    ``__file__`` (the file below the root it was compiled from) and no
    ``__cached__``: no .pyc path is worked out for code not read from one.
    Then the objects they made are frozen (``gc.freeze``): no collection
    of the cycle, nor of the watcher's long run, walks them again."""
    import json  # pylint: disable=import-outside-toplevel
    import marshal  # pylint: disable=import-outside-toplevel
    lib = str(tmp_path / 'lib')
    _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
    root = root_of(lib, sources)
    with open(os.path.join(root, '_ipmasq_resync.bin'), 'rb') as handle:
        data = handle.read()
    size = int.from_bytes(data[4:8], 'little')
    index = marshal.loads(data[8:8 + size])
    rc, out, err = start(root, READS + 'print(gc.isenabled())', '--help')
    assert rc == 0 and out.startswith('usage: ip-masq-agent') and out.split()[-1] == 'True', (out, err)
    seen = json.loads(err)
    assert _resync_code.ENTRY in seen['ran'] and len(seen['ran']) > 20
    assert [name for name, (collecting, _file, _cached) in seen['ran'].items() if collecting] == []
    for name, (_collecting, path, cached) in seen['ran'].items():
        assert path == os.path.join(root, index[name][3]) and cached is None, (name, path, cached)
    assert seen['frozen'] > 1000, seen['frozen']
    loaded = 8 + size + sum(index[name][1] - index[name][0] for name in seen['ran'])
    assert loaded < len(data) * 0.8                          # --help loads far from all of it
    assert loaded <= seen['read'] <= loaded + 4096, (seen['read'], loaded, len(data))  # + /proc/self/io itself
