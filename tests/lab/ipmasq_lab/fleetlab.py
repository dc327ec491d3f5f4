"""A real fleet on one machine: N hosts reached over SSH, for the fleet tests
and the fleet benchmark (bench/run_fleet.py).

Topology (every piece made here and removed again, also on failure):

- a controller namespace holding a bridge ``imqbr`` with 198.18.0.1/24
  (198.18.0.0/15 is the range set aside for benchmark networks, RFC 2544);
- one namespace per host, its ``eth0`` a veth into the bridge with its own
  address 198.18.0.<10 + i>, loopback up, no route anywhere else;
- one OpenSSH server per host (Debian's ``/usr/sbin/sshd``, run with a config,
  a host key and an authorized_keys file of its own in a temporary
  directory), listening on that host's address inside its namespace only,
  public-key authentication only;
- ``ansible-playbook`` run inside the controller namespace, over SSH, with an
  inventory generated here: per-cluster groups whose group_vars are the
  example inventory's (inventories/example), like a real site.

The hosts share this machine's file system. What the role writes outside
iptables therefore goes to a directory of each host's own below the fleet's
temporary directory, through inventory host_vars (see ``HOST_VARS_NOTE``),
and the steps that would act on the machine itself are switched off there,
each with the reason.

Nothing here touches the root network namespace: every network change runs
through ``ip netns exec`` in an ``imq-*`` namespace, and traffic flows only
between the controller and the hosts. Deleting a namespace kills what still
runs in it (sshd's sessions, ssh's ControlPersist masters); the sshd
listeners are stopped first, with a bounded wait.
"""
import ctypes
import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from ipmasq_lab import netlab

SSHD = '/usr/sbin/sshd'
SSH_KEYGEN = 'ssh-keygen'
NET = '198.18.0'
CONTROLLER_ADDR = NET + '.1'
FIRST_HOST = 10
MAX_HOSTS = 200
PYTHON = '/usr/bin/python3'
EXAMPLE = os.path.join(netlab.ROOT, 'inventories', 'example')
PLAYBOOKS = os.path.join(netlab.ROOT, 'playbooks')

# What users configure (README, "Running it against a fleet"): Ansible's own ssh_args
# (compression, ControlMaster=auto, ControlPersist=60s) and pipelining on.
CONTROL_PERSIST = '60s'
# A fresh host's root holds the systemd marker alone (the role's "runs systemd"
# check looks there); the role makes every directory it writes to.
FRESH_HOST_DIRS = ('run/systemd/system',)

CONNTRACK_ON = """\
table inet imq_fleet_firewall {
  chain input {
    type filter hook input priority 0; policy accept;
    ct state established,related accept
  }
}
"""

HOST_VARS_NOTE = """\
# Written by tests/lab/ipmasq_lab/fleetlab.py. Every test host is a network
# namespace on one machine: the namespaces have their own iptables, but
# share the machine's file system, package database and service manager.
# So, for this host only:
# - every file the role writes outside iptables goes below its own
#   directory (config file, resync code and units, tmpfiles.d entry, state,
#   backups, Ansible's remote temporary files);
# - systemctl is never run (ip_masq_resync_systemctl: false): systemd
#   does not run the test hosts (nor, possibly, this machine), and a test host
#   must never start, stop or enable a unit of the machine;
# - no package is installed: the hosts share the machine's dpkg database
#   (scripts/bootstrap.sh installs iptables);
# - the Docker, flannel and kubelet steps are off: they edit and restart the
#   machine's own daemons (the Molecule scenarios test them in containers).
"""


def _become_subreaper():
    """Make this process the reaper of its orphaned descendants.

    ssh's ControlPersist masters detach from the ansible-playbook that
    started them, and an sshd session can outlive its listener: without this
    they would be re-parented to PID 1, which on some machines (containers,
    micro-VMs) never reaps them, and they would stay behind as zombies. As
    our own children they are reaped in ``_stop_pids``.
    """
    pr_set_child_subreaper = 36
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _ns_pids(ns):
    out = netlab.run(['ip', 'netns', 'pids', ns.name], check=False).stdout
    return [int(pid) for pid in out.split() if pid.isdigit()]


def _gone(pid):
    """True once ``pid`` has exited (and is reaped, when it is our child)."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        pass
    try:
        with open('/proc/%d/stat' % pid, encoding='ascii', errors='replace') as handle:
            return handle.read().rsplit(')', 1)[1].split()[0] == 'Z'   # a zombie of someone else
    except OSError:
        return True


def _stop_pids(pids, timeout=10):
    """SIGTERM, then SIGKILL after ``timeout`` s; reap those that are our children."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError as exc:
                if exc.errno != errno.ESRCH:
                    raise
        try:
            _wait(lambda: all(_gone(pid) for pid in pids), timeout, 'pids %s to exit' % pids)
            return
        except RuntimeError:
            if sig == signal.SIGKILL:
                raise


def _reap_ssh_zombies():
    """Reap the ssh/sshd processes re-parented to us that have exited (the
    intermediate processes of ssh's daemonising fork, for one)."""
    me = os.getpid()
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry, encoding='ascii', errors='replace') as handle:
                head, tail = handle.read().rsplit(')', 1)
        except OSError:
            continue
        fields = tail.split()
        if fields[0] == 'Z' and int(fields[1]) == me and head.split('(', 1)[1] in ('ssh', 'sshd'):
            try:
                os.waitpid(int(entry), os.WNOHANG)
            except ChildProcessError:
                pass


def _wait(predicate, timeout, what):
    """Poll ``predicate`` until true; bounded in time, short back-off."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise RuntimeError('timed out after %.0f s waiting for %s' % (timeout, what))
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _children(pid):
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid), encoding='ascii') as handle:
            return handle.read().split()
    except OSError:
        return []


class Host:
    """One fleet host: a namespace, an address, an sshd and a directory of its own."""

    def __init__(self, fleet, index, name, cluster):
        self.fleet = fleet
        self.name = name
        self.cluster = cluster
        self.addr = '%s.%d' % (NET, FIRST_HOST + index)
        self.dir = os.path.join(fleet.dir, 'hosts', name)
        self.root = os.path.join(self.dir, 'root')     # the host's own "file system" for the role
        self.ns = None
        self.sshd = None
        self.sshd_log = os.path.join(self.dir, 'sshd.log')

    # -- bring up ---------------------------------------------------------
    def up(self, bridge_ns, index):
        os.makedirs(self.root, mode=0o700)
        self.ns = netlab.Netns('h%d' % index)
        netlab.link(self.ns, 'eth0', bridge_ns, 'imqv%d' % index)
        bridge_ns.exec(['ip', 'link', 'set', 'imqv%d' % index, 'master', 'imqbr'])
        netlab.addr(self.ns, 'eth0', self.addr + '/24')
        # Connection tracking on from the start, as on a node whose firewall,
        # container runtime or kube-proxy already uses it. On a host where
        # nothing did, the first MASQUERADE rule switches it on while the SSH
        # session that writes it is open; the session is then picked up
        # mid-stream as a new outbound flow, and with random_fully: true its
        # source port is rewritten, which cuts the run's own connection (see
        # the README, "Running it against a fleet").
        self.ns.exec(['nft', '-f', '-'], input=CONNTRACK_ON)
        key = os.path.join(self.dir, 'ssh_host_ed25519_key')
        netlab.run([SSH_KEYGEN, '-q', '-t', 'ed25519', '-N', '', '-C', self.name, '-f', key])
        with open(key + '.pub', encoding='ascii') as handle:
            self.host_key = ' '.join(handle.read().split()[:2])
        config = os.path.join(self.dir, 'sshd_config')
        with open(config, 'w', encoding='ascii') as handle:
            handle.write(self.sshd_config(key))
        # -D: stays in the foreground, so this Popen is the listener to stop;
        # -e: log to stderr (the log file).
        with open(self.sshd_log, 'w', encoding='ascii') as log:
            self.sshd = self.ns.popen([SSHD, '-D', '-e', '-f', config], stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=subprocess.STDOUT)

    def sshd_config(self, host_key):
        return '\n'.join([
            '# fleet test host %s (tests/lab/ipmasq_lab/fleetlab.py)' % self.name,
            'ListenAddress %s:22' % self.addr,
            'HostKey %s' % host_key,
            'PidFile %s' % os.path.join(self.dir, 'sshd.pid'),
            'AuthorizedKeysFile %s' % self.fleet.authorized_keys,
            'AuthenticationMethods publickey',
            'PubkeyAuthentication yes',
            'PasswordAuthentication no',
            'KbdInteractiveAuthentication no',
            'PermitRootLogin prohibit-password',
            'AllowUsers root',
            'UsePAM no',
            # The key files live in a 0700 directory below /tmp (which is
            # world-writable, so the strict check of every parent would refuse them).
            'StrictModes no',
            'AllowTcpForwarding no',
            'AllowAgentForwarding no',
            'AllowStreamLocalForwarding no',
            'X11Forwarding no',
            'PermitTunnel no',
            'PermitUserEnvironment no',
            'PrintMotd no',
            'UseDNS no',
            'LogLevel VERBOSE',   # one "Starting session" line per command run
            'Subsystem sftp internal-sftp',
            '',
        ])

    def listening(self):
        if self.sshd.poll() is not None:
            with open(self.sshd_log, encoding='utf-8', errors='replace') as handle:
                raise RuntimeError('sshd of %s exited (rc=%s): %s' % (self.name, self.sshd.returncode, handle.read()))
        out = self.ns.exec(['ss', '-Htln', 'sport', '= :22'], check=False).stdout
        return self.addr + ':22' in out

    # -- tear down --------------------------------------------------------
    def down(self):
        """Stop sshd (its sessions first, while it can still reap them), then
        anything left in the namespace, then the namespace."""
        if self.sshd is not None and self.sshd.poll() is None:
            try:
                _wait(lambda: not _children(self.sshd.pid), 10, 'the SSH sessions of %s to end' % self.name)
            except RuntimeError:
                pass
            self.sshd.terminate()
            try:
                self.sshd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.sshd.kill()
                self.sshd.wait(timeout=10)
        if self.ns is not None:
            _stop_pids(_ns_pids(self.ns), timeout=5)
            self.ns.delete()

    # -- what tests look at ----------------------------------------------
    def nat(self, family=4):
        """``iptables-save -t nat`` of this host (comment lines dropped)."""
        tool = 'iptables-save' if family == 4 else 'ip6tables-save'
        out = self.ns.exec([tool, '-t', 'nat']).stdout
        return ''.join(line for line in out.splitlines(True) if not line.startswith('#'))

    def ipt(self, *args, family=4):
        tool = 'iptables' if family == 4 else 'ip6tables'
        return self.ns.exec([tool, '-w', '-t', 'nat'] + list(args))

    def path(self, *parts):
        """A path below this host's own directory (what the role wrote for it)."""
        return os.path.join(self.root, *parts)


class Fleet:
    """``clusters``: ordered (group name, host count) pairs. Use as a context
    manager: everything is removed on exit, also after a failure."""

    def __init__(self, clusters=(('cluster_east', 2), ('cluster_west', 1)), forks=10,
                 host_vars=None, control_persist=CONTROL_PERSIST, group_vars_from=EXAMPLE):
        total = sum(count for _name, count in clusters)
        if not 1 <= total <= MAX_HOSTS:
            raise ValueError('a fleet has 1 to %d hosts, not %d' % (MAX_HOSTS, total))
        self.clusters = list(clusters)
        self.forks = forks
        self.extra_host_vars = dict(host_vars or {})
        self.control_persist = control_persist
        self.group_vars_from = group_vars_from
        self.dir = None
        self.ctl = None
        self.hosts = []

    # -- bring up ---------------------------------------------------------
    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()

    def up(self):
        netlab.sweep_stale()
        _become_subreaper()
        self.dir = tempfile.mkdtemp(prefix='imq-fleet-')
        self.inventory = os.path.join(self.dir, 'inventory')
        self.authorized_keys = os.path.join(self.dir, 'authorized_keys')
        self.client_key = os.path.join(self.dir, 'id_ed25519')
        self.known_hosts = os.path.join(self.dir, 'known_hosts')
        self.ssh_config = os.path.join(self.dir, 'ssh_config')
        self.ansible_cfg = os.path.join(self.dir, 'ansible.cfg')
        self.control_dir = os.path.join(self.dir, 'cp')
        os.makedirs(self.control_dir, mode=0o700)
        netlab.run([SSH_KEYGEN, '-q', '-t', 'ed25519', '-N', '', '-C', 'fleet-controller', '-f', self.client_key])
        shutil.copy(self.client_key + '.pub', self.authorized_keys)
        # sshd refuses to start without its privilege-separation directory;
        # Debian's ssh.service creates it (RuntimeDirectory=sshd), and so do we
        # when it is missing. It is empty and stays, as after the service.
        if not os.path.isdir('/run/sshd'):
            os.makedirs('/run/sshd', mode=0o755, exist_ok=True)

        self.ctl = netlab.Netns('ctl')
        self.ctl.exec(['ip', 'link', 'add', 'imqbr', 'type', 'bridge'])
        self.ctl.exec(['ip', 'link', 'set', 'imqbr', 'up'])
        netlab.addr(self.ctl, 'imqbr', CONTROLLER_ADDR + '/24')
        index = 0
        for cluster, count in self.clusters:
            short = cluster.replace('cluster_', '')
            for number in range(1, count + 1):
                host = Host(self, index, '%s-%d' % (short, number), cluster)
                self.hosts.append(host)
                host.up(self.ctl, index + 1)
                index += 1
        _wait(lambda: all(h.listening() for h in self.hosts), 30, 'the sshd of every host to listen')
        self.write_client_config()
        self.write_inventory()

    def write_client_config(self):
        with open(self.known_hosts, 'w', encoding='ascii') as handle:
            for host in self.hosts:
                handle.write('%s %s\n' % (host.addr, host.host_key))
        with open(self.ssh_config, 'w', encoding='ascii') as handle:
            handle.write('\n'.join([
                '# The controller\'s ssh client for the fleet (nothing from ~/.ssh is read)',
                'Host *',
                '  IdentityFile %s' % self.client_key,
                '  IdentitiesOnly yes',
                '  UserKnownHostsFile %s' % self.known_hosts,
                '  GlobalKnownHostsFile /dev/null',
                '  StrictHostKeyChecking yes',
                '  BatchMode yes',
                '  ConnectTimeout 10',
                '',
            ]))
        with open(self.ansible_cfg, 'w', encoding='ascii') as handle:
            handle.write('\n'.join([
                '[defaults]',
                'inventory = %s' % self.inventory,
                'forks = %d' % self.forks,
                'host_key_checking = True',
                'interpreter_python = %s' % PYTHON,
                'retry_files_enabled = False',
                '',
                '[ssh_connection]',
                'pipelining = True',
                # Ansible's default ssh_args, plus our client config.
                'ssh_args = -F %s -C -o ControlMaster=auto -o ControlPersist=%s' % (
                    self.ssh_config, self.control_persist),
                'control_path_dir = %s' % self.control_dir,
                '',
            ]))

    def write_inventory(self):
        os.makedirs(os.path.join(self.inventory, 'group_vars'))
        os.makedirs(os.path.join(self.inventory, 'host_vars'))
        if self.group_vars_from:
            src = os.path.join(self.group_vars_from, 'group_vars')
            for name in sorted(os.listdir(src)):
                shutil.copy(os.path.join(src, name), os.path.join(self.inventory, 'group_vars', name))
        children = {}
        for cluster, _count in self.clusters:
            children[cluster] = {'hosts': {h.name: {'ansible_host': h.addr}
                                           for h in self.hosts if h.cluster == cluster}}
        with open(os.path.join(self.inventory, 'hosts.yml'), 'w', encoding='utf-8') as handle:
            handle.write('---\n# Generated by tests/lab/ipmasq_lab/fleetlab.py\n')
            json.dump({'all': {'children': {'ip_masq_nodes': {'children': children}}}}, handle, indent=1)
            handle.write('\n')
        for host in self.hosts:
            self.write_host_vars(host)

    def write_host_vars(self, host, **overrides):
        """(Re)write the host_vars file of ``host``; ``overrides`` win."""
        values = self.host_vars(host)
        values.update(overrides)
        with open(os.path.join(self.inventory, 'host_vars', host.name + '.yml'), 'w', encoding='utf-8') as handle:
            handle.write('---\n' + HOST_VARS_NOTE)
            json.dump(values, handle, indent=1)
            handle.write('\n')

    def host_vars(self, host):
        root = host.root
        # The role's paths under the host's own root. The machine these hosts
        # share need not run systemd (CI's does not), and systemctl is never run
        # on them: the role's "does this node run systemd" check looks at a
        # directory of the host's own, which role_node_paths makes (nothing else).
        out = netlab.role_node_paths(root, make=FRESH_HOST_DIRS)
        out.update({
            'ansible_user': 'root',
            'ansible_remote_tmp': os.path.join(host.dir, 'ansible-tmp'),
            'ip_masq_resync_systemctl': False,
            'ip_masq_install_packages': False,
            'ip_masq_docker': 'skip',
            'ip_masq_flannel': 'skip',
            'ip_masq_kubelet': 'skip',
        })
        out.update(self.extra_host_vars)
        return out

    # -- run --------------------------------------------------------------
    def env(self, extra=None):
        env = netlab.ansible_env(extra)
        env['ANSIBLE_CONFIG'] = self.ansible_cfg
        env.pop('ANSIBLE_PYTHON_INTERPRETER', None)   # from ansible.cfg, as a user has it
        return env

    def playbook(self, playbook, *args, extra_vars=None, check=False, diff=False, limit=None,
                 env_extra=None, timeout=900, json_out=True):
        """Run ``ansible-playbook`` on the controller namespace over SSH.

        Returns a ``Run`` (rc, per-task results per host, the recap, wall and
        CPU seconds of the ansible-playbook process tree)."""
        path = playbook if os.path.isabs(playbook) else os.path.join(PLAYBOOKS, playbook)
        argv = [os.path.join(netlab.VENV_BIN, 'ansible-playbook'), path] + list(args)
        if extra_vars:
            vars_file = os.path.join(self.dir, 'extra-vars-%d.json' % time.monotonic_ns())
            with open(vars_file, 'w', encoding='utf-8') as handle:
                json.dump(extra_vars, handle)
            argv += ['-e', '@' + vars_file]
        if check:
            argv.append('--check')
        if diff:
            argv.append('--diff')
        if limit:
            argv += ['--limit', limit]
        env = self.env(env_extra)
        if not json_out:
            env.pop('ANSIBLE_STDOUT_CALLBACK', None)
        usage0 = os.times()
        start = time.perf_counter()
        proc = self.ctl.exec(argv, check=False, timeout=timeout, env=env)
        wall = time.perf_counter() - start
        usage1 = os.times()
        cpu = (usage1.children_user - usage0.children_user) + (usage1.children_system - usage0.children_system)
        return Run(proc, wall, cpu, json_out)

    # -- tear down --------------------------------------------------------
    def down(self):
        errors = []
        # The controller's ssh ControlPersist masters first: their sessions on
        # the hosts then end while each host's sshd is there to reap them.
        if self.ctl is not None:
            try:
                _stop_pids(_ns_pids(self.ctl))
            except RuntimeError as exc:
                errors.append('controller: %s' % exc)
        for host in self.hosts:
            try:
                host.down()
            except Exception as exc:  # pylint: disable=broad-except
                errors.append('%s: %s' % (host.name, exc))
        if self.ctl is not None:
            self.ctl.delete()
            self.ctl = None
        _reap_ssh_zombies()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if errors:
            raise RuntimeError('fleet tear-down: ' + '; '.join(errors))

    def host(self, name):
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(name)


class Run:
    """The result of one ansible-playbook run over the fleet."""

    def __init__(self, proc, wall, cpu, json_out):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.wall = wall
        self.cpu = cpu
        self.tasks = []
        self.stats = {}
        if json_out:
            try:
                data = json.loads(proc.stdout[proc.stdout.index('{'):])
            except ValueError:
                raise RuntimeError('ansible-playbook printed no JSON (rc=%d):\n%s\n%s'
                                   % (proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
            self.tasks = [(task['task']['name'], task['hosts'])
                          for play in data.get('plays', []) for task in play.get('tasks', [])]
            self.stats = data.get('stats', {})

    def results(self, task_suffix):
        """{host: result} of the last task whose name ends with ``task_suffix``."""
        found = [hosts for name, hosts in self.tasks if name.endswith(task_suffix)]
        if not found:
            raise KeyError('no task named ...%s ran; tasks: %s' % (task_suffix, [n for n, _h in self.tasks]))
        return found[-1]

    def changed_hosts(self):
        return sorted({host for _name, hosts in self.tasks for host, res in hosts.items()
                       if res.get('changed') and not res.get('skipped')})

    def failed_hosts(self):
        return sorted({host for _name, hosts in self.tasks for host, res in hosts.items() if res.get('failed')})

    def touched_hosts(self):
        """Hosts for which any task ran (was not skipped)."""
        return sorted({host for _name, hosts in self.tasks for host, res in hosts.items()
                       if not res.get('skipped')})

    def explain(self):
        return 'rc=%d\nfailed: %s\nstderr:\n%s' % (
            self.rc, [(n, h, r.get('msg')) for n, hosts in self.tasks for h, r in hosts.items() if r.get('failed')],
            self.stderr[-3000:])
