"""Throwaway network namespaces for tests, the demo and the benchmarks.

Everything here works inside namespaces it creates itself (names start with
``imq-``) and removes them again, also on failure.  Nothing touches the root
network namespace: every command that changes network state runs through
``ip netns exec <ns>``.  No shell strings: argv lists only.
"""
import atexit
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile

from ipmasq_lab import INTEGRATION, ROOT

PREFIX = 'imq-'
# IMQ_ANSIBLE_BIN: the bin/ of another ansible-core's venv (tests/versions.sh).
VENV_BIN = os.environ.get('IMQ_ANSIBLE_BIN') or os.path.join(ROOT, '.venv', 'bin')
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')
_counter = itertools.count()
_live = []


def run(argv, check=True, input=None, timeout=60, env=None):
    """Run an argv list; return CompletedProcess (text)."""
    proc = subprocess.run(argv, input=input, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError('%s failed (rc=%d):\n%s%s'
                           % (' '.join(argv), proc.returncode, proc.stdout, proc.stderr))
    return proc


class Netns:
    """One network namespace with loopback up.

    ``/etc/netns/<name>/networks`` is bind-mounted by ``ip netns exec`` over
    /etc/networks: we leave it empty so that ``iptables -L`` prints
    169.254.0.0/16 the way the upstream documentation shows it, rather than
    the name Debian's /etc/networks gives it (``link-local``).
    """

    def __init__(self, role='ns'):
        self.name = '%s%d-%d-%s' % (PREFIX, os.getpid(), next(_counter), role)
        self.etc = os.path.join('/etc/netns', self.name)
        run(['ip', 'netns', 'add', self.name])
        _live.append(self)
        os.makedirs(self.etc, exist_ok=True)
        open(os.path.join(self.etc, 'networks'), 'w').close()
        self.exec(['ip', 'link', 'set', 'lo', 'up'])

    def argv(self, argv):
        return ['ip', 'netns', 'exec', self.name] + list(argv)

    def exec(self, argv, check=True, input=None, timeout=60, env=None):
        return run(self.argv(argv), check=check, input=input, timeout=timeout, env=env)

    def popen(self, argv, **kwargs):
        return subprocess.Popen(self.argv(argv), **kwargs)

    def sysctl(self, key, value):
        self.exec(['sysctl', '-q', '-w', '%s=%s' % (key, value)])

    def delete(self):
        if self in _live:
            _live.remove(self)
        # Kill anything still running inside before the namespace goes.
        pids = run(['ip', 'netns', 'pids', self.name], check=False).stdout.split()
        for pid in pids:
            run(['kill', '-9', pid], check=False)
        run(['ip', 'netns', 'del', self.name], check=False)
        shutil.rmtree(self.etc, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.delete()


def cleanup_all():
    """Delete every namespace this process made (atexit, signal handlers)."""
    for ns in list(_live):
        ns.delete()


def sweep_stale():
    """Delete ``imq-*`` namespaces left by a killed earlier run of this tree."""
    out = run(['ip', 'netns', 'list'], check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ''
        if name.startswith(PREFIX):
            pid = name[len(PREFIX):].split('-')[0]
            if pid.isdigit() and not os.path.exists('/proc/%s' % pid):
                run(['ip', 'netns', 'del', name], check=False)
                shutil.rmtree(os.path.join('/etc/netns', name), ignore_errors=True)


atexit.register(cleanup_all)


def link(a, a_if, b, b_if):
    """A veth pair between two namespaces, both ends up."""
    tmp_a = 'imqa%d' % next(_counter)
    tmp_b = 'imqb%d' % next(_counter)
    # Created inside ``a`` from the start, so it never exists in the root namespace.
    a.exec(['ip', 'link', 'add', tmp_a, 'type', 'veth', 'peer', 'name', tmp_b])
    a.exec(['ip', 'link', 'set', tmp_b, 'netns', b.name])
    a.exec(['ip', 'link', 'set', tmp_a, 'name', a_if])
    b.exec(['ip', 'link', 'set', tmp_b, 'name', b_if])
    a.exec(['ip', 'link', 'set', a_if, 'up'])
    b.exec(['ip', 'link', 'set', b_if, 'up'])


def addr(ns, ifname, cidr):
    argv = ['ip', 'addr', 'add', cidr, 'dev', ifname]
    if ':' in cidr:
        argv.append('nodad')
    ns.exec(argv)


# ---------------------------------------------------------------------------
# Legacy / nf_tables: a PATH directory whose iptables tools are one backend.
# ---------------------------------------------------------------------------

TOOL_NAMES = ('iptables', 'iptables-save', 'iptables-restore',
              'ip6tables', 'ip6tables-save', 'ip6tables-restore')


class Backend:
    """The iptables backend a test uses: ``nft`` or ``legacy``.

    ``path_dir`` holds iptables/iptables-save/... symlinks to the backend's
    multi-call binary; put it first in PATH and the module (which looks the
    tools up on PATH) uses that backend, exactly as if the node's
    alternatives pointed there.
    """

    MULTI = {'nft': 'xtables-nft-multi', 'legacy': 'xtables-legacy-multi'}
    EXPECT = {'nft': 'nf_tables', 'legacy': 'legacy'}

    def __init__(self, name):
        self.name = name
        self.expect = self.EXPECT[name]
        multi = shutil.which(self.MULTI[name]) or shutil.which(self.MULTI[name], path='/usr/sbin:/sbin')
        if not multi:
            raise RuntimeError('%s not found: install iptables' % self.MULTI[name])
        self.path_dir = tempfile.mkdtemp(prefix='imq-%s-' % name)
        for tool in TOOL_NAMES:
            os.symlink(multi, os.path.join(self.path_dir, tool))

    def tool(self, name):
        return os.path.join(self.path_dir, name)

    def env(self, base=None):
        env = dict(base if base is not None else os.environ)
        env['PATH'] = self.path_dir + os.pathsep + env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')
        return env

    def save(self, ns, family=4):
        """``iptables-save -t nat`` inside ``ns`` with this backend."""
        tool = 'iptables-save' if family == 4 else 'ip6tables-save'
        out = ns.exec([self.tool(tool), '-t', 'nat']).stdout
        # Without the '# Generated ... on <date>' lines, so two saves compare.
        return ''.join(line for line in out.splitlines(True) if not line.startswith('#'))

    def iptables(self, ns, args, family=4, check=True):
        tool = 'iptables' if family == 4 else 'ip6tables'
        return ns.exec([self.tool(tool), '-w'] + list(args), check=check)

    def remove(self):
        shutil.rmtree(self.path_dir, ignore_errors=True)


def nat_rules(save_text):
    """The ``-A``/``:`` lines of the nat table, comments and counters dropped."""
    lines = []
    in_nat = False
    for line in save_text.splitlines():
        if line.startswith('*'):
            in_nat = line == '*nat'
        elif in_nat and (line.startswith('-A ') or line.startswith(':')):
            lines.append(line.split(' [')[0] if line.startswith(':') else line)
    return lines


# ---------------------------------------------------------------------------
# Running Ansible inside a namespace
# ---------------------------------------------------------------------------

NODE_DIRS = ('etc/systemd/system', 'etc/tmpfiles.d', 'run/systemd/system')


def daemon_paths():
    """``{variable: default}`` of every path variable (a path, or a list of
    paths) of the daemons of the collection's daemon registry: the files and
    directories of this machine the role edits (the CNI networks' directories,
    Docker's daemon.json, and any daemon's added later)."""
    if COLLECTIONS not in sys.path:
        sys.path.append(COLLECTIONS)
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry  # pylint: disable=import-outside-toplevel
    out = {}
    for daemon in registry.DAEMONS:
        for name, (_option, spec) in daemon.variables.items():
            if spec.get('type') == 'path' or (spec.get('type') == 'list' and spec.get('elements') == 'path'):
                out[name] = spec['default']
    return out


def moved(root, default):
    """A node path (or a list of them) below ``root``."""
    if isinstance(default, list):
        return [moved(root, path) for path in default]
    return os.path.join(str(root), default.lstrip('/'))


def role_node_paths(root, make=NODE_DIRS):
    """The ip_masq role's node paths (its variables, and the internal lock and
    systemd paths of its defaults) moved under ``root``, and the directories
    ``make`` of a node made there (by default those a booted systemd node has;
    the fleet's hosts start with the systemd marker alone): a test host of its
    own on this machine, which keeps the machine's /etc, /usr/local, /var/lib
    and /run untouched."""
    root = str(root)
    for directory in make:
        os.makedirs(os.path.join(root, directory), exist_ok=True)
    return {
        'ip_masq_config_path': os.path.join(root, 'etc/ip-masq-agent/config'),
        'ip_masq_lib_dir': os.path.join(root, 'usr/local/lib/ipmasq-agent'),
        'ip_masq_state_dir': os.path.join(root, 'var/lib/ipmasq-agent'),
        'ip_masq_backup_dir': os.path.join(root, 'var/lib/ipmasq-agent/backup'),
        'ip_masq_unit_dir': os.path.join(root, 'etc/systemd/system'),
        'ip_masq_tmpfiles_dir': os.path.join(root, 'etc/tmpfiles.d'),
        # The daemons' files (the CNI networks' directories, Docker's
        # daemon.json, ...): this machine's /etc/cni/net.d and /etc/docker are never read.
        **dict((name, moved(root, default)) for name, default in daemon_paths().items()),
        # Lock files of the host's own: nothing shares them with this machine's tools.
        '__ip_masq_xtables_lock': os.path.join(root, 'run/xtables.lock'),
        '__ip_masq_writers_lock': os.path.join(root, 'run/ipmasq-agent.lock'),
        # Where the role looks to see that the node runs systemd (/run/systemd/system).
        '__ip_masq_systemd_dir': os.path.join(root, 'run/systemd/system'),
    }


def ansible_env(extra=None, backend=None):
    env = dict(os.environ)
    if backend is not None:
        env = backend.env(env)
    env.update({
        'ANSIBLE_COLLECTIONS_PATH': COLLECTIONS,
        'ANSIBLE_STDOUT_CALLBACK': 'imq_json',
        'ANSIBLE_CALLBACK_PLUGINS': os.path.join(INTEGRATION, 'callback_plugins'),
        'ANSIBLE_NOCOLOR': '1',
        'ANSIBLE_RETRY_FILES_ENABLED': '0',
        'ANSIBLE_LOCALHOST_WARNING': '0',
        'ANSIBLE_INVENTORY_UNPARSED_WARNING': '0',
        'ANSIBLE_PYTHON_INTERPRETER': '/usr/bin/python3',
        'ANSIBLE_HOME': os.path.join(ROOT, 'build', 'ansible-home'),
        'LC_ALL': 'C.UTF-8',
    })
    if extra:
        env.update(extra)
    return env


@contextlib.contextmanager
def tool_dir(tools):
    """A PATH directory of fake tools, ``{name: python source}`` (each run by
    /usr/bin/python3), removed afterwards: put it first in PATH."""
    path = tempfile.mkdtemp(prefix='imq-shim-')
    try:
        for name, source in tools.items():
            script = os.path.join(path, name)
            with open(script, 'w') as handle:
                handle.write('#!/usr/bin/python3\n' + source)
            os.chmod(script, 0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


PRIVATE_MOUNTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'private_mounts.py')


# Role variables every playbook run here gets first (a test's own override
# them): the daemons' files of this machine stay out of reach (every path
# variable of the daemon registry, below a directory that does not exist).
HOST_SAFE_VARS = dict((name, moved('/nonexistent/ipmasq-lab', default)) for name, default in daemon_paths().items())


def playbook(ns, path, extra_vars=None, backend=None, check_mode=False, diff=False,
             env_extra=None, timeout=300, hide=(), args=(), read_only=()):
    """Run ``ansible-playbook`` on localhost inside ``ns``; return
    ``(rc, tasks)`` with ``tasks`` the list of (task name, result) pairs
    from the json callback.  ``hide``: executables the run must not find,
    as on a node where they are not installed.
    ``read_only``: directories (the test's own) the run finds read-only,
    as on a node whose filesystem refuses a write there.  Both in a mount
    namespace of the run's own (private_mounts.py).
    ``args``: more command-line arguments, as a user types them (``-e
    name=value``, ``--tags``), after ``extra_vars``' JSON."""
    argv = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local', path]
    # First, so that the test's own values win: a role run here shares this
    # machine's files, and its CNI networks (podman's 87-podman-bridge.conflist
    # masquerades) must never be read or edited by a test.
    argv += ['-e', json.dumps(HOST_SAFE_VARS)]
    if hide or read_only:
        mounts = [w for path in hide for w in ('--hide', path)] + [w for path in read_only for w in ('--read-only', path)]
        argv = ['/usr/bin/python3', PRIVATE_MOUNTS] + mounts + ['--'] + argv
    if extra_vars is not None:
        argv += ['-e', json.dumps(extra_vars)]
    argv += list(args)
    if check_mode:
        argv.append('--check')
    if diff:
        argv.append('--diff')
    # The inventory is the string 'localhost,', which only host_list reads:
    # the other inventory plugins' loading is a tenth of a short run's CPU.
    env = dict({'ANSIBLE_INVENTORY_ENABLED': 'host_list'}, **(env_extra or {}))
    proc = ns.exec(argv, check=False, timeout=timeout, env=ansible_env(env, backend))
    try:
        start = proc.stdout.index('{')
        data = json.loads(proc.stdout[start:])
    except ValueError:
        raise RuntimeError('ansible-playbook printed no JSON (rc=%d):\n%s\n%s'
                           % (proc.returncode, proc.stdout, proc.stderr))
    tasks = []
    for play in data.get('plays', []):
        for task in play.get('tasks', []):
            result = task['hosts'].get('localhost', {})
            tasks.append((task['task']['name'], result))
    return proc.returncode, tasks
