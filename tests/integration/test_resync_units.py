"""The role's resync pieces: the systemd units rendered by Ansible from the
role's templates (checked with ``systemd-analyze verify``, and the command
line systemd parses out of the unit run for real in a network namespace), and
the whole role run with the resync on, then off, with every path pointing
into a temporary directory and systemctl left out (this machine's systemd,
/etc and /run are never touched)."""
import os
import re
import shlex
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code
from ipmasq_lab import netlab
from ipmasq_lab.policy_view import CHAIN, JUMP, chain_lines, ours

HERE = os.path.dirname(os.path.abspath(__file__))
ROLE_PLAYBOOK = os.path.join(HERE, 'playbooks', 'resync_role.yml')
UNITS_PLAYBOOK = os.path.join(HERE, 'playbooks', 'resync_units.yml')
UNITS = ('ip-masq-agent.service', 'ip-masq-agent.timer', 'ip-masq-agent.path')
CORE = os.path.join(netlab.ROOT, 'plugins', 'module_utils', '_core')
PKG = 'ansible_collections/ipmasq/agent/plugins/module_utils/_core'
# What the resync imports: the modules the role must have installed (the
# resync_code module installs every module of the package).
RESYNC_NEEDS = ('agent/resync', 'upstream_config/config', 'upstream_config/yamlsubset', 'upstream_config/golang',
                'model/errors', 'node/fileio', 'iptables_backend/chain', 'iptables_backend/rules', 'iptables_backend/tools',
                'iptables_backend/save', 'model/policy', 'model/cidrs', 'model/ranges', 'node/runner', 'engine/sync',
                'node/lock')


def install_core(lib):
    """The core package as the resync_code module installs it (its installer, from the source tree)."""
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run  # pylint: disable=import-outside-toplevel
    _resync_code.install(str(lib), _resync_code.package_sources(), make_run(), '/usr/bin/python3')


SYSTEMD_ANALYZE = shutil.which('systemd-analyze')


def playbook(path, extra_vars, check_mode=False, ns=None):
    """Run in ``ns``, or in a namespace of its own."""
    if ns is not None:
        return netlab.playbook(ns, path, extra_vars=extra_vars, check_mode=check_mode)
    with netlab.Netns('units') as own:
        return netlab.playbook(own, path, extra_vars=extra_vars, check_mode=check_mode)


@pytest.fixture
def node_ns():
    """One namespace for every run of a test: the node the role runs on."""
    with netlab.Netns('node') as ns:
        yield ns


def changed(tasks):
    return [name.split(' : ', 1)[-1] for name, result in tasks if result.get('changed')]


def failed(tasks):
    return [(name, result.get('msg')) for name, result in tasks if result.get('failed')]


def render(out_dir, **extra):
    """The units as the role's action renders them: the service names the root of this version's code."""
    extra_vars = dict(out_dir=str(out_dir), **extra)
    rc, tasks = playbook(UNITS_PLAYBOOK, extra_vars)
    assert rc == 0, failed(tasks)
    return {name: open(os.path.join(str(out_dir), name)).read() for name in UNITS}


def render_unchecked(out_dir, **extra):
    """The units for values the role's checks would refuse (awkward paths):
    the renderer itself (plugins/plugin_utils/_units.py), over the role's
    defaults, for what systemd makes of its quoting."""
    from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code  # pylint: disable=import-outside-toplevel
    from ansible_collections.ipmasq.agent.plugins.plugin_utils import _units  # pylint: disable=import-outside-toplevel
    with open(os.path.join(netlab.ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml'), encoding='utf-8') as handle:
        values = dict(yaml.safe_load(handle), **extra)
    root = _resync_code.resync_root(values['ip_masq_lib_dir'])
    for name, text in _units.units(values, '60s', root, 'Ansible managed').items():
        with open(os.path.join(str(out_dir), name), 'w', encoding='utf-8') as handle:
            handle.write(text)


def verify(unit_dir):
    """``systemd-analyze verify`` of our units; returns (problems, debug dump)."""
    if SYSTEMD_ANALYZE is None:
        pytest.skip('systemd-analyze is not installed here')
    paths = [os.path.join(str(unit_dir), name) for name in UNITS]
    proc = subprocess.run([SYSTEMD_ANALYZE, 'verify', '--man=no'] + paths, capture_output=True, text=True,
                          cwd=str(unit_dir), timeout=120, env=dict(os.environ, SYSTEMD_LOG_LEVEL='debug'),
                          check=False)
    if proc.returncode != 0 and 'Failed to initialize manager' in proc.stderr:
        pytest.skip('systemd-analyze cannot run here: %s' % proc.stderr.strip().splitlines()[-1])
    # At debug level systemd also says which names of its own @system-service
    # group this libseccomp does not know yet; Debian's units get the same.
    problems = [line for line in proc.stderr.splitlines()
                if str(unit_dir) in line and re.search(r'\.(service|timer|path):\d+:', line)
                and 'Failed to parse system call, ignoring' not in line]
    problems += ['rc=%d' % proc.returncode] if proc.returncode else []
    return problems, proc.stdout + proc.stderr


def parsed_service(dump):
    """The ExecStart argv and the environment systemd parsed from our service."""
    section = dump[dump.index('-> Unit ip-masq-agent.service:'):]
    section = section[:section.index('-> Unit ', 10)] if '-> Unit ' in section[10:] else section
    env = dict(line.split('Environment: ', 1)[1].split('=', 1) for line in section.splitlines()
               if line.strip().startswith('Environment: '))
    command = [line.split('Command Line: ', 1)[1] for line in section.splitlines() if 'Command Line: ' in line]
    assert len(command) == 1, section
    # The dump quotes for a POSIX shell (shlex leaves "\\$" inside double quotes)
    # and shows "$$", systemd's escape for "$", as stored.
    return [arg.replace('\\$', '$').replace('$$', '$') for arg in shlex.split(command[0])], env


# --------------------------------------------------------------------------
# the units
# --------------------------------------------------------------------------

def test_units_render_and_pass_systemd_analyze_verify(tmp_path):
    units = render(tmp_path, ip_masq_enable_ipv6=True, ip_masq_to_ports=['1024-29999', '32768-65535'],
                   ip_masq_jump_position='first', ip_masq_resync_interval='1m30s', __ip_masq_resync_timer='90s')
    service = units['ip-masq-agent.service']
    assert 'Type=oneshot' in service
    for line in ('NoNewPrivileges=yes', 'CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW', 'ProtectSystem=strict',
                 'ProtectHome=yes', 'PrivateTmp=yes', 'ProtectKernelModules=yes', 'MemoryDenyWriteExecute=yes',
                 'RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6', 'SystemCallArchitectures=native',
                 'StateDirectory=ipmasq-agent', 'StartLimitIntervalSec=0', 'SyslogIdentifier=ip-masq-agent',
                 'SystemCallFilter=@system-service', 'IPAddressDeny=any', 'PrivateMounts=yes'):
        assert line in service.splitlines(), line
    assert 'OnBootSec=0' in units['ip-masq-agent.timer'] and 'OnUnitActiveSec=90s' in units['ip-masq-agent.timer']
    assert 'PathChanged=/etc/ip-masq-agent/config' in units['ip-masq-agent.path']
    assert 'PathExists' not in units['ip-masq-agent.path']

    problems, dump = verify(tmp_path)
    assert problems == []
    argv, env = parsed_service(dump)
    assert env == {'PYTHONPATH': _resync_code.resync_root('/usr/local/lib/ipmasq-agent'), 'LC_ALL': 'C'}
    assert argv == [
        '/usr/bin/python3', '-S', '-B', '-c',
        'from _ipmasq_resync import main; raise SystemExit(main())',
        '--config', '/etc/ip-masq-agent/config', '--state-file', '/var/lib/ipmasq-agent/last-good-config',
        '--masq-chain', 'IP-MASQ-AGENT', '--jump-position', 'first', '--rule-format', 'docs', '--backend', 'auto',
        '--resync-interval', '1m30s', '--nomasq-all-reserved-ranges=false', '--enable-ipv6=true',
        '--to-ports', '1024-29999,32768-65535']


def test_state_dir_outside_var_lib_is_made_writable(tmp_path):
    units = render(tmp_path, ip_masq_state_dir='/srv/ipmasq/state')
    assert 'ReadWritePaths="/srv/ipmasq/state"' in units['ip-masq-agent.service'].splitlines()
    assert 'StateDirectory' not in units['ip-masq-agent.service']
    assert verify(tmp_path)[0] == []


INTERVALS = [
    ('60s', '60s'), ('1m0s', '60s'), ('1m30s', '90s'), ('500ms', '500ms'), ('1.5h', '5400s'),
    ('1h0m0.25s', '3600250ms'), ('2h', '7200s'), (u'1500000\u00b5s', '1500ms'),
]


def test_timer_interval_from_a_go_duration(tmp_path):
    render(tmp_path, intervals=[interval for interval, _expected in INTERVALS])
    for index, (interval, expected) in enumerate(INTERVALS):
        with open(os.path.join(str(tmp_path), 'interval-%d.timer' % index)) as handle:
            assert 'OnUnitActiveSec=%s\n' % expected in handle.read(), interval


def test_systemd_runs_the_command_line_the_unit_holds(node, tmp_path):
    """Render with awkward paths, let systemd parse the unit, run what it parsed."""
    base = tmp_path / 'odd dir %n $HOME'
    lib = base / 'lib'
    install_core(lib)
    config = base / 'etc' / 'my "config"'
    config.parent.mkdir()
    config.write_text('nonMasqueradeCIDRs: [10.0.0.0/8, 192.168.0.0/16]\nmasqLinkLocal: true\n')
    out = tmp_path / 'units'
    out.mkdir()
    render_unchecked(out, ip_masq_lib_dir=str(lib), ip_masq_config_path=str(config),
                     ip_masq_state_dir=str(base / 'state'), ip_masq_chain='MY-SNAT', ip_masq_random_fully=True)
    problems, dump = verify(out)
    assert [p for p in problems if 'ip-masq-agent.service' in p] == []
    argv, env = parsed_service(dump)
    assert argv[argv.index('--config') + 1] == str(config)
    assert env['PYTHONPATH'] == _resync_code.resync_root(str(lib)) and os.path.isdir(env['PYTHONPATH'])

    env['PATH'] = os.pathsep.join([node.backend.path_dir, '/usr/sbin', '/usr/bin', '/sbin', '/bin'])
    proc = node.ns.exec(argv + ['--log-format', 'journal'], check=False, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rules = chain_lines(['10.0.0.0/8', '192.168.0.0/16'], chain='MY-SNAT')
    rules[-1] += ' --random-fully'
    assert ours(node.rules(), chain='MY-SNAT') == [rules[0], JUMP % ('MY-SNAT', 'MY-SNAT')] + rules[1:]
    assert (base / 'state' / 'last-good-config').read_text() == config.read_text()
    assert ours(node.rules()) == [] and CHAIN == 'IP-MASQ-AGENT'


# --------------------------------------------------------------------------
# the tasks
# --------------------------------------------------------------------------

def role_vars(base, **extra):
    values = netlab.role_node_paths(base)
    values.update(extra)
    return values


NODE_TASK = "Validate, write the agent's files, apply the policy and audit, in one node run"


def node_runs(values, ns, count):
    """The node run's result of ``count`` role runs one after the other."""
    runs = []
    for _run in range(count):
        rc, tasks = playbook(ROLE_PLAYBOOK, dict(values), ns=ns)
        assert rc == 0, failed(tasks)
        runs.append([res for name, res in tasks if name.endswith(NODE_TASK)][0])
    return runs


def write_tree(base, sources):
    """``sources`` ({relative path: bytes}) written as files below ``base``."""
    for name, data in sources.items():
        os.makedirs(os.path.dirname(os.path.join(base, name)), exist_ok=True)
        with open(os.path.join(base, name), 'wb') as handle:
            handle.write(data)


def test_resync_installs_idempotently_and_switching_it_off_removes_only_ours(tmp_path, node_ns):
    textfile = os.path.join(str(tmp_path), 'textfile')
    values = role_vars(tmp_path, ip_masq_metrics_dir=textfile)
    units = os.path.join(str(tmp_path), 'etc/systemd/system')
    tmpfiles = os.path.join(str(tmp_path), 'etc/tmpfiles.d/ip-masq-agent.conf')
    locks = [values['__ip_masq_xtables_lock'], values['__ip_masq_writers_lock']]
    root = _resync_code.resync_root(values['ip_masq_lib_dir'])
    pkg = os.path.join(root, PKG)

    rc, tasks = playbook(ROLE_PLAYBOOK, dict(values), check_mode=True, ns=node_ns)
    assert rc == 0, failed(tasks)
    assert not os.path.exists(values['ip_masq_lib_dir']), 'check mode wrote files'
    assert os.listdir(units) == []

    rc, tasks = playbook(ROLE_PLAYBOOK, dict(values), ns=node_ns)
    assert rc == 0, failed(tasks)
    # The role's one task: its node run wrote the files and installed the code.
    node = [res for name, res in tasks if name.endswith(NODE_TASK)][0]
    assert node['files']['changed'] and node['resync_code']['changed'], node
    installed = sorted(os.path.relpath(os.path.join(top, n), pkg) for top, _dirs, names in os.walk(pkg)
                       for n in names if n.endswith('.py'))
    assert set(n + '.py' for n in RESYNC_NEEDS) <= set(installed)
    for name in installed:
        with open(os.path.join(CORE, name)) as a, open(os.path.join(pkg, name)) as b:
            assert a.read() == b.read(), name
    # Every module byte-compiled, in the __pycache__ of its own folder.
    compiled = sorted(os.path.join(os.path.relpath(top, pkg), f.split('.')[0])
                      for top, _dirs, names in os.walk(pkg) if os.path.basename(top) == '__pycache__'
                      for f in names)
    assert compiled == sorted(os.path.join(os.path.dirname(n), '__pycache__', os.path.basename(n)[:-3])
                              for n in installed)
    assert sorted(os.listdir(units)) == sorted(UNITS)
    with open(tmpfiles) as handle:
        text = handle.read()
    for lock in locks:
        assert 'f %s 0600 root root -' % lock in text
        assert oct(os.stat(lock).st_mode & 0o777) == '0o600'
    with open(os.path.join(units, 'ip-masq-agent.service')) as handle:
        text = handle.read()
    assert '--config "%s"' % values['ip_masq_config_path'] in text
    # The unit runs the code from the root the node run installed, the only one there.
    assert node['resync_code']['path'] == pkg and 'Environment="PYTHONPATH=%s" "LC_ALL=C"' % root in text.splitlines()
    assert os.listdir(values['ip_masq_lib_dir']) == ['v'] and os.listdir(os.path.dirname(root)) == [os.path.basename(root)]

    rc, tasks = playbook(ROLE_PLAYBOOK, dict(values), ns=node_ns)
    assert rc == 0 and changed(tasks) == [], changed(tasks)
    rc, tasks = playbook(ROLE_PLAYBOOK, dict(values), check_mode=True, ns=node_ns)
    assert rc == 0 and changed(tasks) == [], changed(tasks)

    # Resync off: our files go; the state directory and what else it holds stay.
    os.makedirs(values['ip_masq_state_dir'])
    with open(os.path.join(values['ip_masq_state_dir'], 'last-good-config'), 'w') as handle:
        handle.write('nonMasqueradeCIDRs: []\n')
    os.makedirs(os.path.join(values['ip_masq_state_dir'], 'backup'), exist_ok=True)
    # The metrics file goes too (node_exporter would export it, stale); others' files stay.
    os.makedirs(textfile)
    for name in ('ip_masq_agent.prom', 'other.prom'):
        with open(os.path.join(textfile, name), 'w') as handle:
            handle.write('x 1\n')
    off = dict(values, ip_masq_resync_enabled=False)
    rc, tasks = playbook(ROLE_PLAYBOOK, off, check_mode=True, ns=node_ns)
    assert rc == 0 and 'Remove the resync units, the tmpfiles.d entry and the last good config' in changed(
        tasks), changed(tasks)
    assert 'Remove the resync code (and ip_masq_lib_dir when nothing else is in it)' in changed(tasks)
    assert sorted(os.listdir(units)) == sorted(UNITS), 'check mode removed files'
    rc, tasks = playbook(ROLE_PLAYBOOK, off, ns=node_ns)
    assert rc == 0, failed(tasks)
    assert not os.path.exists(values['ip_masq_lib_dir'])
    assert os.listdir(units) == []
    assert not os.path.exists(tmpfiles)
    assert os.listdir(values['ip_masq_state_dir']) == ['backup']
    assert os.listdir(textfile) == ['other.prom']
    for lock in locks:
        assert os.path.exists(lock), 'the lock files are shared with other runs and tools'
    assert os.path.exists(values['ip_masq_config_path'])

    # Nothing left: the removal steps are not even included.
    rc, tasks = playbook(ROLE_PLAYBOOK, off, ns=node_ns)
    assert rc == 0 and changed(tasks) == [], changed(tasks)
    assert not [name for name, _result in tasks if 'Remove the resync' in name]


def test_the_flat_tree_of_1_1_goes_on_the_run_after_the_unit_names_the_new_root(tmp_path, node_ns):
    """Upgrading a node with 1.1's flat tree (systemctl off: no daemon-reload
    of ours): the first run installs this version's root and writes the unit
    naming it, and keeps the old tree (systemd may still run it); the run
    after it removes the old tree (nothing runs from it), then nothing changes."""
    values = role_vars(tmp_path)
    lib = values['ip_masq_lib_dir']
    flat = os.path.join(lib, PKG)
    write_tree(flat, _resync_code.package_sources())     # the core's folders
    runs = node_runs(values, node_ns, 3)
    root = _resync_code.resync_root(lib)
    assert {'files', 'resync_code'} <= set(runs[0]['changed_parts']) and runs[0]['resync_code']['removed_roots'] == []
    assert runs[0]['resync_code']['written'] == sorted(_resync_code.package_sources())
    assert runs[1]['changed_parts'] == ['resync_code'], runs[1]
    assert runs[1]['resync_code']['removed_roots'] == [os.path.join(lib, 'ansible_collections/ipmasq/agent')]
    assert runs[1]['resync_code']['msg'].endswith('1 earlier version removed (%s/ansible_collections/ipmasq/agent)' % lib)
    assert runs[2]['changed'] is False, runs[2]
    assert os.listdir(lib) == ['v'] and os.listdir(os.path.join(lib, 'v')) == [os.path.basename(root)]


def test_a_root_of_folders_goes_on_the_run_after_the_unit_starts_the_one_file(tmp_path, node_ns):
    """Upgrading a node whose root is the version before's (the core's
    folders and .pyc, nothing at the root's top; systemctl off): the first
    run installs this version's root, with the unit's start and the core
    compiled into one file, and writes the unit that starts it; the run after
    it removes the old root whole, then nothing changes."""
    values = role_vars(tmp_path)
    lib = values['ip_masq_lib_dir']
    sources = _resync_code.package_sources()
    earlier = dict(sources, **{'engine/sync.py': sources['engine/sync.py'] + b'# the version before\n'})
    earlier.pop('agent/boot.py', None)
    old = os.path.join(lib, 'v', _resync_code.version_id(earlier))
    write_tree(os.path.join(old, PKG), earlier)
    subprocess.run(['/usr/bin/python3', '-m', 'compileall', '-q', old], check=True, timeout=120)
    runs = node_runs(values, node_ns, 3)
    root = _resync_code.resync_root(lib)
    assert runs[0]['resync_code']['changed'] and runs[0]['resync_code']['removed_roots'] == [], runs[0]
    assert runs[1]['resync_code']['removed_roots'] == [old], runs[1]
    assert runs[2]['changed'] is False, runs[2]
    assert os.listdir(os.path.join(lib, 'v')) == [os.path.basename(root)]
    assert {'_ipmasq_resync.py', '_ipmasq_resync.bin'} <= set(os.listdir(root))
    with open(os.path.join(tmp_path, 'etc/systemd/system/ip-masq-agent.service')) as handle:
        assert '-c "from _ipmasq_resync import main; raise SystemExit(main())"' in handle.read()


def test_switching_off_keeps_a_lib_dir_that_holds_other_files(tmp_path, node_ns):
    values = role_vars(tmp_path)
    rc, tasks = playbook(ROLE_PLAYBOOK, dict(values), ns=node_ns)
    assert rc == 0, failed(tasks)
    other = os.path.join(values['ip_masq_lib_dir'], 'someone-elses-file')
    with open(other, 'w') as handle:
        handle.write('keep me\n')
    rc, tasks = playbook(ROLE_PLAYBOOK, dict(values, ip_masq_resync_enabled=False), ns=node_ns)
    assert rc == 0, failed(tasks)
    assert os.listdir(values['ip_masq_lib_dir']) == ['someone-elses-file']


@pytest.mark.parametrize('extra,fragment', [
    ({'ip_masq_resync_interval': '1d'}, 'unknown unit'),
    ({'ip_masq_resync_interval': '0s'}, 'a positive Go duration'),
    # Each path the units carry is refused on a line of its own, naming its variable (issue 32 item 5).
    ({'ip_masq_config_path': '/etc/ip masq/config'},
     'ip_masq_config_path of localhost: "/etc/ip masq/config" is written into the resync\'s systemd units'),
    ({'ip_masq_lib_dir': 'relative/lib'}, 'ip_masq_lib_dir of localhost: "relative/lib" is not an absolute path'),
    ({'ip_masq_unit_dir': '/etc/systemd/my units'},
     'ip_masq_unit_dir of localhost: "/etc/systemd/my units" is written into the resync\'s systemd units'),
])
def test_bad_paths_and_intervals_fail_before_anything_is_written(tmp_path, extra, fragment):
    values = role_vars(tmp_path, **extra)
    rc, tasks = playbook(ROLE_PLAYBOOK, values)
    assert rc != 0
    assert any(fragment in (msg or '') for _name, msg in failed(tasks)), failed(tasks)
    assert os.listdir(os.path.join(str(tmp_path), 'etc/systemd/system')) == []
    assert not os.path.exists(str(tmp_path / 'usr'))
    assert not os.path.exists(str(tmp_path / 'etc' / 'ip-masq-agent'))
