"""All or nothing where a run fails half-way (issue 26): the resync code is
installed as a unit, a failed daemon-reload names its part and what the run
changed, "Nothing was changed" is said only when nothing was, and the
sandbox play removes its namespace and temporary folder when it is
interrupted.

The faults are real: a read-only bind mount and a full tmpfs, each in a
mount namespace the test makes (``unshare --mount``: they never reach this
machine's mounts), a systemctl that fails, SIGINT and SIGTERM sent to
ansible-playbook."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ipmasq_lab import netlab
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run
from ansible_collections.ipmasq.agent.plugins.modules import ip_masq_node

COLLECTIONS = os.path.join(netlab.ROOT, 'build', 'collections')

# Run in a mount namespace of its own: argv[1] is JSON (the mount namespace
# it was started from, the mount commands, the code), the code prints JSON.
BOOT = r'''
import json, os, subprocess, sys
given = json.loads(sys.argv[1])
st = os.stat('/proc/self/ns/mnt')
if '%d:%d' % (st.st_dev, st.st_ino) == given['from']:
    sys.exit('not in a mount namespace of its own: nothing mounted')
for argv in given['mounts']:
    subprocess.run(argv, check=True)
sys.path[:0] = given['path']
exec(given['code'])
'''


def in_own_mounts(mounts, code, timeout=120):
    """Run python ``code`` after ``mounts`` (argv lists), in a mount namespace
    of its own that ends with it; returns what it printed, as JSON."""
    st = os.stat('/proc/self/ns/mnt')
    given = {'from': '%d:%d' % (st.st_dev, st.st_ino), 'mounts': mounts, 'code': code, 'path': [COLLECTIONS]}
    proc = subprocess.run(['unshare', '--mount', '--propagation', 'private', sys.executable, '-c', BOOT,
                           json.dumps(given)], capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tree(top):
    """Every path below ``top`` (directories too), with the bytes of each file."""
    out = {}
    for base, dirs, files in os.walk(top):
        for name in dirs:
            out[os.path.relpath(os.path.join(base, name), top) + '/'] = None
        for name in files:
            with open(os.path.join(base, name), 'rb') as handle:
                out[os.path.relpath(os.path.join(base, name), top)] = handle.read()
    return out


def module():
    with patch_module_args({}):
        return AnsibleModule(argument_spec={}, supports_check_mode=True)


# --------------------------------------------------------------------------
# node_files: "Nothing was changed" only when nothing was
# --------------------------------------------------------------------------

NODE_FILES = r'''
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._files import node_files
with patch_module_args({}):
    module = AnsibleModule(argument_spec={})
try:
    out = {'result': node_files.manage(given['params'], False, False, None, None, module)}
except MasqError as e:
    out = {'msg': e.msg, 'details': e.details}
print(json.dumps(out))
'''


def test_a_read_only_unit_directory_leaves_no_directory_behind(tmp_path):
    """The role's files with a read-only unit directory: the config file's and
    tmpfiles.d's directories, which the run made, are removed again."""
    units = tmp_path / 'etc' / 'systemd' / 'system'
    units.mkdir(parents=True)
    config = tmp_path / 'etc' / 'ip-masq-agent' / 'config'
    tmpfiles = tmp_path / 'etc' / 'tmpfiles.d' / 'ip-masq-agent.conf'
    service = units / 'ip-masq-agent.service'
    before = tree(str(tmp_path))
    params = {'files': [{'path': str(config), 'content': 'nonMasqueradeCIDRs: []\n'},
                        {'path': str(tmpfiles), 'content': 'f /run/ipmasq-agent.lock 0600 root root -\n'},
                        {'path': str(service), 'content': '[Service]\n'}], 'mode': '0644'}
    got = in_own_mounts([['mount', '--bind', str(units), str(units)],
                         ['mount', '-o', 'remount,bind,ro', str(units)]], 'given = ' + repr({'params': params})
                        + '\n' + NODE_FILES)
    assert 'result' not in got, got
    assert got['msg'].startswith('%s: cannot be written (' % service), got['msg']
    assert 'Read-only file system' in got['msg'] and got['msg'].endswith('Nothing was changed.'), got['msg']
    assert not got['details'].get('changed')
    assert tree(str(tmp_path)) == before, 'the directories the run made were left behind'


def test_a_directory_that_cannot_be_removed_again_is_named(tmp_path):
    """The run cannot take back a directory it made (something appeared in
    it): the message names it and does not say "Nothing was changed"."""
    from ansible_collections.ipmasq.agent.plugins.module_utils._files import node_files
    made = tmp_path / 'etc' / 'ip-masq-agent'
    config = made / 'config'
    blocked = tmp_path / 'units' / 'ip-masq-agent.service'
    blocked.parent.mkdir()
    mod = module()
    real_move = mod.atomic_move

    def move(src, dest, *args, **kwargs):
        if dest == str(blocked):
            (made / 'someone-elses').write_text('x\n')
            raise OSError(30, 'Read-only file system')
        return real_move(src, dest, *args, **kwargs)
    mod.atomic_move = move
    params = {'files': [{'path': str(config), 'content': 'a\n'}, {'path': str(blocked), 'content': 'b\n'}]}
    with pytest.raises(MasqError) as failure:
        node_files.manage(params, False, False, None, None, mod)
    msg = failure.value.msg
    assert 'Nothing was changed' not in msg and failure.value.details['changed'] is True, msg
    assert 'could not be removed again: %s (' % made in msg, msg
    assert sorted(os.listdir(str(made))) == ['someone-elses']


# --------------------------------------------------------------------------
# the daemon modules: the backup store is written by steps of the same plan
# --------------------------------------------------------------------------

# On a tmpfs at the backup store, full but for a few pages: the original of
# daemon.json and its record fit, the (big) unit's original does not.
DAEMON_ENOSPC = r'''
import hashlib, os
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.docker import docker_sync
from ansible_collections.ipmasq.agent.plugins.module_utils._files.writer import Writer
root, store = given['root'], given['store']
ballast = os.path.join(store, 'ballast')
with patch_module_args({}):
    writer = Writer(AnsibleModule(argument_spec={}))

def listing():
    out = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(base, name)
            if path == ballast:
                continue
            if os.path.isfile(path):
                with open(path, 'rb') as handle:
                    out[os.path.relpath(path, root)] = hashlib.sha256(handle.read()).hexdigest()
            else:
                out[os.path.relpath(path, root) + '/'] = 'dir'
    return out

before = listing()
st = os.statvfs(store)
fill = (st.f_bavail - 4) * st.f_frsize
with open(ballast, 'wb') as handle:
    while fill > 0:
        fill -= handle.write(b'\0' * min(fill, 1 << 20))
try:
    docker_sync(given['params'], None, lambda _name: None, writer)
    failure = None
except MasqError as e:
    failure = {'msg': e.msg, 'changed': e.details.get('changed', False)}
after = listing()
os.unlink(ballast)
print(json.dumps({'failure': failure, 'same': before == after, 'before': sorted(before), 'after': sorted(after)}))
'''


def test_a_full_backup_store_midway_leaves_the_tree_and_the_store_as_they_were(tmp_path):
    """The originals are kept by steps of the run's plan: the unit's original
    does not fit (ENOSPC, a real full tmpfs) after daemon.json's original and
    record were written: those go again, with the directories and the
    timestamped copy the run made; nothing was replaced."""
    root = tmp_path / 'root'
    store = root / 'var' / 'lib' / 'ipmasq-agent' / 'backup'
    store.mkdir(parents=True)
    (root / 'etc' / 'docker').mkdir(parents=True)
    (root / 'etc' / 'docker' / 'daemon.json').write_text('{\n  "ip-masq": false,\n  "log-level": "warn"\n}\n')
    (root / 'etc' / 'systemd' / 'system').mkdir(parents=True)
    (root / 'etc' / 'systemd' / 'system' / 'docker.service').write_text(
        '[Service]\nExecStart=/usr/bin/dockerd -H fd:// --ip-masq=true\n' + '# a long comment line\n' * 8000)
    params = {'state': 'present', 'root': str(root), 'unit_dirs': ['/etc/systemd/system', '/lib/systemd/system'],
              'env_files': [], 'backup_dir': '/var/lib/ipmasq-agent/backup', 'backup': True,
              'unit_name': 'docker.service', 'daemon_json': '/etc/docker/daemon.json', 'remove_stale_rules': False,
              'report_networks': False, 'docker_bin': None, 'bridge_name': None, 'bridge_cidrs': None}
    got = in_own_mounts([['mount', '-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'imq-test-store', str(store)]],
                        'given = ' + repr({'root': str(root), 'store': str(store), 'params': params}) + '\n'
                        + DAEMON_ENOSPC)
    assert got['failure'] is not None, 'the run did not fail: the store was not full'
    assert got['same'], (got['before'], got['after'])
    # The store's copy is named (its disk is full), not the unit (whose disk has room).
    kept = os.path.join(str(store), 'etc/systemd/system/docker.service')
    assert got['failure'] == {'msg': 'cannot keep the original of /etc/systemd/system/docker.service: cannot write '
                                     '%s: No space left on device. Nothing was changed.' % kept,
                              'changed': False}, got['failure']


# --------------------------------------------------------------------------
# ip_masq_node: a failed daemon-reload is a failed part
# --------------------------------------------------------------------------

def test_a_failed_daemon_reload_names_its_part_and_what_the_run_changed(tmp_path):
    systemctl = tmp_path / 'bin' / 'systemctl'
    systemctl.parent.mkdir()
    systemctl.write_text('#!/bin/sh\necho "Failed to reload daemon: Access denied" >&2\nexit 1\n')
    systemctl.chmod(0o755)
    service = tmp_path / 'units' / 'ip-masq-agent.service'
    mod = module()
    mod.params = {'files': {'files': [{'path': str(service), 'content': '[Service]\n'}], 'mode': '0644'},
                  'resync_code': None, 'daemon_reload_for': [str(service)], 'chain': None, 'units': [],
                  'daemons': None, 'audit': None}

    def find(name):
        return str(systemctl) if name == 'systemctl' else None
    with pytest.raises(MasqError) as failure:
        ip_masq_node.node_step(mod, make_run(), find)
    err = failure.value
    assert err.msg == ('systemctl daemon-reload failed (rc=1): Failed to reload daemon: Access denied '
                       '(This run changed, before it failed: files.)'), err.msg
    assert err.details['failed_part'] == 'daemon_reload' and err.details['changed'] is True
    assert err.details['files']['changed_paths'] == [str(service)] and err.details['rc'] == 1
    assert service.read_text() == '[Service]\n'


# --------------------------------------------------------------------------
# resync_code: the code is installed as a unit
# --------------------------------------------------------------------------

# In a mount namespace of the test's own, on a tmpfs at ``lib``: the code in
# place (``layout``: the flat directory of earlier releases, or a root of this
# installer), then a new version while the tmpfs has room for only the first
# 4 of its files.
ENOSPC = r'''
import hashlib, os
from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run
lib, layout = given['lib'], given['layout']
sources = _resync_code.package_sources()
old = {name: data + b'# the old code\n' for name, data in sources.items()}
old['retired.py'] = b'# a module the new code no longer has\n'
if layout == 'flat':
    os.makedirs(_resync_code.package_dir(lib))
    for name, data in old.items():
        os.makedirs(os.path.dirname(os.path.join(_resync_code.package_dir(lib), name)), exist_ok=True)
        with open(os.path.join(_resync_code.package_dir(lib), name), 'wb') as handle:
            handle.write(data)
else:
    _resync_code.install(lib, old, make_run(), '/usr/bin/python3')

def listing():
    out = {}
    for base, dirs, files in os.walk(lib):
        for name in dirs + files:
            path = os.path.join(base, name)
            if path == ballast:
                continue
            if os.path.islink(path):
                out[os.path.relpath(path, lib)] = 'link ' + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, 'rb') as handle:
                    out[os.path.relpath(path, lib)] = hashlib.sha256(handle.read()).hexdigest()
            else:
                out[os.path.relpath(path, lib) + '/'] = 'dir'
    return out

ballast = os.path.join(lib, 'ballast')
before = listing()
names = sorted(sources)
pages = lambda size: -(-size // 4096)
room = sum(pages(len(sources[n])) for n in names[:4]) + pages(len(sources[names[4]])) - 1
st = os.statvfs(lib)
fill = (st.f_bavail - room) * st.f_frsize
with open(ballast, 'wb') as handle:
    while fill > 0:
        fill -= handle.write(b'\0' * min(fill, 1 << 20))
try:
    _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
    failure = None
except MasqError as e:
    failure = {'msg': e.msg, 'changed': e.details.get('changed', False)}
after = listing()
os.unlink(ballast)
written, removed = _resync_code.install(lib, sources, make_run(), '/usr/bin/python3')
root = _resync_code.resync_root(lib)
with open(os.path.join(_resync_code.package_dir(root), 'engine/sync.py'), 'rb') as handle:
    now = handle.read()
print(json.dumps({'failure': failure, 'same': before == after, 'before': sorted(before), 'after': sorted(after),
                  'fifth': names[4], 'written': written, 'removed': removed, 'new': now == sources['engine/sync.py'],
                  'root': root, 'names': names, 'roots': sorted(os.listdir(os.path.join(lib, 'v')))}))
'''


@pytest.mark.parametrize('layout', ['flat', 'versioned'])
def test_a_full_disk_on_the_fifth_file_leaves_the_code_in_place_as_it_was(tmp_path, layout):
    lib = tmp_path / 'lib'
    lib.mkdir()
    got = in_own_mounts([['mount', '-t', 'tmpfs', '-o', 'size=8m,mode=0755', 'imq-test-lib', str(lib)]],
                        'given = ' + repr({'lib': str(lib), 'layout': layout}) + '\n' + ENOSPC)
    assert got['failure'] is not None, 'the install did not fail: the disk was not full'
    assert got['same'], 'changed by the failed install: %s' % (got['failure'],)
    assert got['failure'] == {
        'msg': 'cannot install the resync code in %s: No space left on device. The code in place is as it '
               'was: nothing was changed.' % os.path.join(got['root'], 'ansible_collections/ipmasq/agent/plugins/'
                                                                       'module_utils/_core'),
        'changed': False}, got
    # With room, the next run installs it: every file (each differs from the old code), and the old module goes.
    assert got['new'] and got['removed'] == ['retired.py']
    assert got['written'] == got['names']
    # The root before it is kept (the unit may still name it, a resync may run from it): a later run removes it.
    assert len(got['roots']) == (1 if layout == 'flat' else 2), got['roots']


# --------------------------------------------------------------------------
# the sandbox play: its namespace and folder go when it is interrupted
# --------------------------------------------------------------------------

def namespaces():
    out = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def ours(tmp):
    """The sandbox's temporary folders in ``tmp`` (Ansible's own are there too)."""
    return [name for name in os.listdir(str(tmp)) if name.startswith('ipmasq-sandbox.')]


def until(what, seconds):
    """Poll ``what()`` every 0.1 s until it is true, at most ``seconds``; its last value."""
    end = time.monotonic() + seconds
    while True:
        value = what()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.1)


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=['SIGINT', 'SIGTERM', 'SIGKILL'])
def test_the_sandbox_play_interrupted_removes_its_namespace_and_folder(tmp_path, signum):
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_LOCALHOST_WARNING='false',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    play = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), 'ipmasq.agent.sandbox'],
                            env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ns = None
    try:
        # The play's folder, then its namespace (named after the folder).
        folder = until(lambda: ours(tmp), 120)
        assert folder, 'the play made no temporary folder'
        ns = 'ipmasq-sandbox-' + ''.join(c for c in folder[0] if c.isalnum()).lower()
        assert until(lambda: ns in namespaces(), 60), 'the play made no namespace %s' % ns
        # ansible-core's handler can raise its KeyboardInterrupt where Python
        # ignores it (inside logging's lock release), and the play goes on:
        # as a user would, signal again while it runs (bounded: 10 times, 0.5 s apart).
        for _attempt in range(10):
            play.send_signal(signum)
            if until(lambda: play.poll() is not None, 0.5):
                break
        out, _err = play.communicate(timeout=120)
    finally:
        if play.poll() is None:
            play.kill()
            play.communicate(timeout=30)
    assert play.returncode != 0 and 'PLAY RECAP' not in out, 'the play was not interrupted:\n' + out
    gone = until(lambda: ns not in namespaces() and ours(tmp) == [], 30)
    left = ns in namespaces()
    if left:
        subprocess.run(['ip', 'netns', 'del', ns], check=False)
    assert gone, 'left behind: %s, folder %s' % ('namespace %s' % ns if left else 'no namespace', ours(tmp))
