"""The resync's watch mode on a real packet path, for its tests and its bench
(tests/integration/test_resync_watch.py, bench/watch_bench.py).

:class:`Rig` builds the topology (pod, node, external: documentation
addresses, ``topology.Topology``) on one iptables backend, installs the
core below the test's temporary root as the role does (``Agent`` of
test_resync.py: every node path there) and starts the resync in the node's
namespace as a subprocess (``--mode watch`` or ``timer`` cycles), killed at
the end even on failure.  A UDP stream from the pod to the external
receiver (a new socket per packet, so each packet is a new conntrack entry
and meets the nat table as it is then) shows how long pod traffic left with
the wrong source after each flush (each packet from a source port of its
own: a port used again would meet the conntrack entry an earlier packet
made during a gap, and leave unmasqueraded whatever the rules say).

Every command that changes netfilter runs inside the node's namespace
through ``cni.guarded`` (the namespace is compared by device and inode;
anywhere else it refuses); :data:`LOOP` (``python3 watchlab.py loop ...``)
is the remover loop, guarded the same way, bounded in count and time.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

if __name__ != '__main__':
    from ipmasq_lab import cni, topology
    from ipmasq_lab.topology import EXT4, NODE_EXT4

PORT = 9999
# The resync runs on the node's python3, as the role's unit starts it.
PYTHON = '/usr/bin/python3'
PERIOD = 0.02           # the stream: a packet every 20 ms
NAT_WITHOUT_OURS = '*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n' \
                   ':POSTROUTING ACCEPT [0:0]\nCOMMIT\n'
# A nat table where Docker's default-bridge MASQUERADE stands in place of ours
# (the remover ``docker restore``: an iptables-restore of it, which flushes ours).
NAT_DOCKER_NOT_OURS = NAT_WITHOUT_OURS.replace('COMMIT', '-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\nCOMMIT')
# The flush kinds, per policy backend.
KINDS = {
    'iptables': ('iptables -t nat -F POSTROUTING', 'iptables-restore', 'nft flush ruleset'),
    'nftables': ('nft flush ruleset', 'nft delete table'),
}
CONFIG = 'nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n'

SENDER = r'''
import socket, sys, time
end = time.monotonic() + float(sys.argv[1])
count = int(sys.argv[2])
n = 0
while n < count and time.monotonic() < end:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(('', 10000 + n % 50000))     # never a port twice: a new flow, never a conntrack entry made during a gap
    s.sendto(b'%d' % n, (sys.argv[3], int(sys.argv[4])))
    s.close()
    n += 1
    time.sleep(float(sys.argv[5]))
'''
RECEIVER = r'''
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[3], int(sys.argv[4])))
s.settimeout(0.2)
end = time.monotonic() + float(sys.argv[1])
with open(sys.argv[2], 'w') as out:
    out.write('ready\n')
    out.flush()
    while time.monotonic() < end:
        try:
            data, peer = s.recvfrom(64)
        except socket.timeout:
            continue
        out.write('%.6f %s\n' % (time.monotonic(), peer[0]))
        out.flush()
'''


def wait(predicate, limit, step=0.05):
    """Whether ``predicate()`` holds within ``limit`` seconds (polled every ``step``)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class Rig:
    """One node on ``tools`` (``nft`` or ``legacy``) whose policy lives in
    ``policy`` (``iptables`` or ``nftables``), with a pod and an outside
    receiver.  ``with Rig(...) as rig:`` removes everything again."""

    def __init__(self, base, tools='nft', policy='iptables', agent_cls=None):
        self.base = str(base)
        self.tools, self.policy = tools, policy
        self.topo_cm = topology.Topology.with_tools(tools, ipv6=False)
        self.topo = None
        self.agent_cls = agent_cls
        self.agent = None
        self.watcher = None
        self.log_path = os.path.join(self.base, 'watcher.log')
        self.metrics = os.path.join(self.base, 'metrics')
        self.procs = []
        self.log_handle = None

    def __enter__(self):
        self.topo = self.topo_cm.__enter__()
        try:
            node = _NodeView(self.topo.node, self.topo.backend, self.policy)
            self.agent = self.agent_cls(node, os.path.join(self.base, 'agent'))
            self.agent.write(CONFIG)
            os.makedirs(self.metrics)
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc):
        try:
            for proc in [self.watcher] + self.procs:
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=10)
        finally:
            if self.log_handle is not None:
                self.log_handle.close()
            self.topo_cm.__exit__(*exc)

    # -- the watcher --------------------------------------------------------

    def argv(self, *flags):
        argv = [PYTHON, '-S', '-B', '-c', ENTRY,
                '--config', self.agent.config, '--state-file', self.agent.state,
                '--backend', self.policy, '--log-format', 'plain', '--metrics-dir', self.metrics]
        return argv + list(flags)

    def env(self):
        from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import resync_root  # pylint: disable=import-outside-toplevel
        return {'PATH': os.pathsep.join([self.agent.shim, self.topo.backend.path_dir, '/usr/sbin', '/usr/bin',
                                         '/sbin', '/bin']),
                'PYTHONPATH': resync_root(self.agent.lib)}

    def start(self, mode='watch', interval='60s', ready=True):
        """Start the resync (``--mode mode``) in the node; wait until ours is in place."""
        self.log_handle = open(self.log_path, 'a')
        self.watcher = self.topo.node.popen(self.argv('--mode', mode, '--resync-interval', interval),
                                            env=self.env(), stdout=subprocess.DEVNULL, stderr=self.log_handle)
        if ready and not wait(lambda: self.ours() and self.agent.restores() >= 1 and self.idle(0.3), 30):
            raise RuntimeError('the watcher did not put ours in place within 30 s:\n%s' % self.log())
        return self.watcher

    def stop(self, sig=signal.SIGTERM, limit=10):
        """Signal the watcher; its exit code (None: it did not end within ``limit``)."""
        self.watcher.send_signal(sig)
        try:
            return self.watcher.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return None

    def log(self):
        with open(self.log_path) as handle:
            return handle.read()

    def idle(self, quiet):
        """True when the watcher wrote nothing for ``quiet`` seconds."""
        before = self.agent.restores()
        time.sleep(quiet)
        return self.agent.restores() == before

    def metric(self, name, labels=''):
        """A sample of the metrics file (0 when absent)."""
        path = os.path.join(self.metrics, 'ip_masq_agent.prom')
        if not os.path.exists(path):
            return 0
        with open(path) as handle:
            for line in handle:
                key, _sep, value = line.rpartition(' ')
                if key == name + labels:
                    return float(value)
        return 0

    # -- ours, and taking it away -------------------------------------------

    def ours(self):
        """Whether our rules are in place in the policy's backend."""
        node = self.topo.node
        if self.policy == 'nftables':
            proc = node.exec(['nft', 'list', 'table', 'inet', 'ip-masq-agent'], check=False)
            return proc.returncode == 0 and 'masquerade' in proc.stdout
        save = self.topo.backend.save(node)
        return '-j IP-MASQ-AGENT' in save and '-j MASQUERADE' in save

    def guarded(self, argv, data=None):
        return self.topo.node.exec(cni.guarded(self.topo.node, argv), input=data, check=False)

    def flush(self, kind):
        """Take ours away by one of KINDS' ways (inside the node only)."""
        tool = self.topo.backend.tool
        nft = shutil.which('nft') or '/usr/sbin/nft'
        if kind == 'iptables -t nat -F POSTROUTING':
            proc = self.guarded([tool('iptables'), '-w', '-t', 'nat', '-F', 'POSTROUTING'])
        elif kind == 'iptables-restore':
            proc = self.guarded([tool('iptables-restore'), '-w'], data=NAT_WITHOUT_OURS)
        elif kind == 'nft flush ruleset':
            proc = self.guarded([nft, 'flush', 'ruleset'])
        elif kind == 'nft delete table':
            proc = self.guarded([nft, 'delete', 'table', 'inet', 'ip-masq-agent'])
        else:
            raise ValueError(kind)
        if proc.returncode != 0:
            raise RuntimeError('%s failed: %s' % (kind, proc.stderr))

    def remover(self, kind, period, seconds, count=None):
        """A loop in the node that takes ours away every ``period`` s for ``seconds`` s
        (at most ``count`` times; Popen); ``docker restore`` puts Docker's
        MASQUERADE in its place (:data:`NAT_DOCKER_NOT_OURS`)."""
        tool = self.topo.backend.tool
        nft = shutil.which('nft') or '/usr/sbin/nft'
        argv = {'iptables -t nat -F POSTROUTING': [tool('iptables'), '-w', '-t', 'nat', '-F', 'POSTROUTING'],
                'nft delete table': [nft, 'delete', 'table', 'inet', 'ip-masq-agent'],
                'nft flush ruleset': [nft, 'flush', 'ruleset']}
        if kind == 'docker restore':
            table = os.path.join(self.base, 'nat-docker.rules')
            with open(table, 'w') as handle:
                handle.write(NAT_DOCKER_NOT_OURS)
            argv['docker restore'] = [tool('iptables-restore'), table]
        count = count or int(seconds / period) + 1
        loop = [sys.executable, os.path.abspath(__file__), 'loop', '%g' % period, str(count), '%g' % seconds, '--']
        proc = self.topo.node.popen(cni.guarded(self.topo.node, loop + argv[kind]), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    # -- the stream -----------------------------------------------------------

    def stream(self, seconds):
        """Start the receiver (outside) and the sender (pod) for ``seconds``; returns the receiver's file."""
        out = os.path.join(self.base, 'received-%d.txt' % len(self.procs))
        recv = self.topo.ns['external'].popen(['/usr/bin/python3', '-c', RECEIVER, '%g' % (seconds + 2), out, EXT4,
                                               str(PORT)])
        self.procs.append(recv)
        if not wait(lambda: os.path.exists(out) and os.path.getsize(out) > 0, 10):
            raise RuntimeError('the receiver did not start')
        count = min(int(seconds / PERIOD) + 1, 50000)
        send = self.topo.pod.popen(['/usr/bin/python3', '-c', SENDER, '%g' % seconds, str(count), EXT4, str(PORT),
                                    '%g' % PERIOD])
        self.procs.append(send)
        return out, send, recv


def received(path):
    """``[(monotonic time, source)]`` the receiver logged."""
    out = []
    with open(path) as handle:
        for line in handle:
            parts = line.split()
            if len(parts) == 2:
                out.append((float(parts[0]), parts[1]))
    return out


def gaps(packets, flushes, window):
    """Per flush (its time), the SNAT gap: from the first to the last packet
    with the wrong source (not the node's outside address) in the
    ``window`` seconds after it, plus one packet period (0 when none was wrong)."""
    out = []
    for at in flushes:
        wrong = [t for t, src in packets if at <= t < at + window and src != NODE_EXT4]
        out.append(wrong[-1] - wrong[0] + PERIOD if wrong else 0.0)
    return out


def percentile(values, p):
    if not values:
        return float('nan')
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(p / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[k]


class _NodeView:
    """What test_resync.Agent needs of a node: its namespace, tools and policy backend."""

    def __init__(self, ns, backend, policy):
        self.ns, self.backend, self.policy = ns, backend, policy


ENTRY = ('from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent.resync import main; '
         'raise SystemExit(main())')


def _loop(argv):
    """``loop PERIOD COUNT SECONDS -- CMD...``: run CMD every PERIOD s, at most
    COUNT times and SECONDS s, only inside a namespace of ours (run it
    through cni.guarded); prints how many runs succeeded."""
    period, count, seconds = float(argv[0]), int(argv[1]), float(argv[2])
    cmd = argv[4:]
    end = time.monotonic() + seconds
    done = 0
    for _i in range(count):
        if time.monotonic() >= end:
            break
        started = time.monotonic()
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode == 0:
            done += 1
        time.sleep(max(0.0, period - (time.monotonic() - started)))
    print(json.dumps({'runs': done}))


if __name__ == '__main__':
    if len(sys.argv) > 5 and sys.argv[1] == 'loop' and sys.argv[5] == '--':
        _loop(sys.argv[2:])
