r"""A small cluster in network namespaces, for real-packet tests and the demo.

::

      pod  ---------------  node  ---------------  external      203.0.113.10/24
  10.244.1.2/24      (forwarding on,  \              2001:db8:e::10/64
  fd00:244:1::2/64    the module runs  \             no route back to the pod net:
  default via node    here)             \            replies come back only if
                                         \           masqueraded (like the internet)
                                          +-------  cluster-local 10.10.0.10/24
                                          |         fd00:10::10/64, route back via node
                                          +-------  link-local    169.254.10.10/24
                                                    route back via node

The node's addresses on its links: 10.244.1.1 / fd00:244:1::1 (pod side),
203.0.113.1 / 2001:db8:e::1 (external), 10.10.0.1 / fd00:10::1
(cluster-local), 169.254.10.1 (link-local).  A masqueraded packet carries
the node's address of the link it leaves by.

Everything lives in namespaces made through :mod:`netlab` (no route out of
them, nothing in the root namespace); ``with Topology() as topo:`` always
removes them again.  ``topo.probe()`` sends real TCP connections from the
pod to every receiver and returns what source address each receiver saw.
"""
import collections
import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

from ipmasq_lab import INTEGRATION, netlab

# peer_echo.py stays in tests/integration: Molecule's scenarios install it too.
PEER_ECHO = os.path.join(INTEGRATION, 'peer_echo.py')
MASQ_PLAYBOOK = os.path.join(INTEGRATION, 'playbooks', 'masq_chain.yml')
NO_REPLY = 'no reply'
PORT = 8080

# Addresses (documentation / private ranges only).
POD4, POD6 = '10.244.1.2', 'fd00:244:1::2'
NODE_POD4, NODE_POD6 = '10.244.1.1', 'fd00:244:1::1'
EXT4, EXT6 = '203.0.113.10', '2001:db8:e::10'
NODE_EXT4, NODE_EXT6 = '203.0.113.1', '2001:db8:e::1'
CL4, CL6 = '10.10.0.10', 'fd00:10::10'
NODE_CL4, NODE_CL6 = '10.10.0.1', 'fd00:10::1'
LL4 = '169.254.10.10'
NODE_LL4 = '169.254.10.1'
POD_NET4, POD_NET6 = '10.244.0.0/16', 'fd00:244::/32'

# name, host namespace role, address family, its address, the node's
# address on that link (what a masqueraded connection shows up as).
Receiver = collections.namedtuple('Receiver', 'name host family address node_address')
RECEIVERS = (
    Receiver('external', 'external', 4, EXT4, NODE_EXT4),
    Receiver('cluster-local', 'cluster', 4, CL4, NODE_CL4),
    Receiver('link-local', 'linklocal', 4, LL4, NODE_LL4),
    Receiver('external6', 'external', 6, EXT6, NODE_EXT6),
    Receiver('cluster-local6', 'cluster', 6, CL6, NODE_CL6),
)

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interrupt_handler(signum, _frame):
    raise KeyboardInterrupt('signal %d' % signum)


def install_signal_handlers():
    """Turn SIGTERM and SIGHUP into KeyboardInterrupt (as SIGINT already is),
    so that ``finally`` blocks and context managers remove the namespaces."""
    for sig in _SIGNALS:
        signal.signal(sig, interrupt_handler)


class Topology:
    """pod, node, external, cluster-local and link-local namespaces.

    ``backend`` (a :class:`netlab.Backend`, optional) is the iptables backend
    the module and :meth:`iptables` use; without it the node's default
    ``iptables`` on PATH is used.  Only one backend per topology: legacy
    and nf_tables rules coexist in the kernel.
    """

    def __init__(self, ipv6=True, backend=None, port=PORT):
        self.ipv6 = ipv6
        self.backend = backend
        self.port = port
        self.ns = {}
        self.receivers = [r for r in RECEIVERS if ipv6 or r.family == 4]
        self.last_probe = None

    # -- life cycle ---------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def with_tools(cls, tools, **kwargs):
        """``with Topology.with_tools('nft', ipv6=False) as topo:`` the topology
        (or a subclass's) built on a fresh ``netlab.Backend(tools)``.  The
        backend's PATH dir goes with the topology, or here when the topology
        could not even be made."""
        backend = netlab.Backend(tools)
        try:
            topo = cls(backend=backend, **kwargs)
        except BaseException:
            backend.remove()
            raise
        with topo:
            yield topo

    def __enter__(self):
        try:
            self.build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def build(self):
        for role in ('pod', 'node', 'external', 'cluster', 'linklocal'):
            self.ns[role] = netlab.Netns(role)
        pod, node = self.ns['pod'], self.ns['node']
        ext, cl, ll = self.ns['external'], self.ns['cluster'], self.ns['linklocal']

        node.sysctl('net.ipv4.ip_forward', 1)
        if self.ipv6:
            node.sysctl('net.ipv6.conf.all.forwarding', 1)
            # No duplicate address detection on the veths' link-local
            # addresses either: neighbour discovery works at once.
            for ns in self.ns.values():
                ns.sysctl('net.ipv6.conf.all.accept_dad', 0)
                ns.sysctl('net.ipv6.conf.default.accept_dad', 0)
        # The external host must really receive the SYN it cannot answer.
        ext.sysctl('net.ipv4.conf.all.rp_filter', 0)
        ext.sysctl('net.ipv4.conf.default.rp_filter', 0)

        netlab.link(node, 'to-pod', pod, 'eth0')
        netlab.link(node, 'to-ext', ext, 'eth0')
        netlab.link(node, 'to-cluster', cl, 'eth0')
        netlab.link(node, 'to-ll', ll, 'eth0')

        netlab.addr(pod, 'eth0', POD4 + '/24')
        netlab.addr(node, 'to-pod', NODE_POD4 + '/24')
        netlab.addr(ext, 'eth0', EXT4 + '/24')
        netlab.addr(node, 'to-ext', NODE_EXT4 + '/24')
        netlab.addr(cl, 'eth0', CL4 + '/24')
        netlab.addr(node, 'to-cluster', NODE_CL4 + '/24')
        netlab.addr(ll, 'eth0', LL4 + '/24')
        netlab.addr(node, 'to-ll', NODE_LL4 + '/24')
        pod.exec(['ip', 'route', 'add', 'default', 'via', NODE_POD4])
        cl.exec(['ip', 'route', 'add', POD_NET4, 'via', NODE_CL4])
        ll.exec(['ip', 'route', 'add', POD_NET4, 'via', NODE_LL4])
        # external: on-link route only, nothing back to 10.244.0.0/16.

        if self.ipv6:
            netlab.addr(pod, 'eth0', POD6 + '/64')
            netlab.addr(node, 'to-pod', NODE_POD6 + '/64')
            netlab.addr(ext, 'eth0', EXT6 + '/64')
            netlab.addr(node, 'to-ext', NODE_EXT6 + '/64')
            netlab.addr(cl, 'eth0', CL6 + '/64')
            netlab.addr(node, 'to-cluster', NODE_CL6 + '/64')
            pod.exec(['ip', '-6', 'route', 'add', 'default', 'via', NODE_POD6])
            cl.exec(['ip', '-6', 'route', 'add', POD_NET6, 'via', NODE_CL6])
            self._wait_no_tentative()
        self._check_no_route_back()

    def _wait_no_tentative(self, limit=5.0):
        deadline = time.monotonic() + limit
        for ns in self.ns.values():
            while ns.exec(['ip', '-6', 'addr', 'show', 'tentative']).stdout.strip():
                if time.monotonic() > deadline:
                    raise RuntimeError('IPv6 addresses in %s stay tentative' % ns.name)
                time.sleep(0.05)

    def _check_no_route_back(self):
        """The premise of every test: the external host cannot reach the pod."""
        families = (4, 6) if self.ipv6 else (4,)
        for family, pod_addr in ((4, POD4), (6, POD6)):
            if family not in families:
                continue
            out = self.ns['external'].exec(['ip', '-%d' % family, 'route', 'get', pod_addr], check=False)
            if out.returncode == 0:
                raise RuntimeError('external host has a route to the pod: %s' % out.stdout)

    def close(self):
        """Delete the namespaces (and the backend's PATH dir); signals wait."""
        blocked = False
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
            blocked = True
        except (ValueError, OSError):
            pass
        try:
            for role in list(self.ns):
                self.ns.pop(role).delete()
            if self.backend is not None:
                self.backend.remove()
        finally:
            if blocked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)

    # -- looking at it ------------------------------------------------------

    @property
    def node(self):
        return self.ns['node']

    @property
    def pod(self):
        return self.ns['pod']

    def receiver(self, name):
        for rec in self.receivers:
            if rec.name == name:
                return rec
        raise KeyError(name)

    def describe(self):
        """Lines saying what was built."""
        n = self.ns
        v6 = self.ipv6
        lines = [
            'pod           %-28s eth0 %s/24%s, default route via the node'
            % (n['pod'].name, POD4, ' %s/64' % POD6 if v6 else ''),
            'node          %-28s ip forwarding on; to-pod %s%s, to-ext %s%s, to-cluster %s%s, to-ll %s'
            % (n['node'].name, NODE_POD4, '/' + NODE_POD6 if v6 else '', NODE_EXT4,
               '/' + NODE_EXT6 if v6 else '', NODE_CL4, '/' + NODE_CL6 if v6 else '', NODE_LL4),
            'external      %-28s eth0 %s/24%s, NO route back to the pod network'
            % (n['external'].name, EXT4, ' %s/64' % EXT6 if v6 else ''),
            'cluster-local %-28s eth0 %s/24%s, route to %s via the node'
            % (n['cluster'].name, CL4, ' %s/64' % CL6 if v6 else '',
               POD_NET4 + (' and ' + POD_NET6 if v6 else '')),
            'link-local    %-28s eth0 %s/24, route to %s via the node'
            % (n['linklocal'].name, LL4, POD_NET4),
        ]
        return lines

    # -- iptables and ansible in the node -----------------------------------

    def iptables(self, args, family=4, check=True):
        """``iptables -w <args>`` in the node namespace with this topology's backend."""
        if self.backend is not None:
            return self.backend.iptables(self.node, args, family=family, check=check)
        tool = 'iptables' if family == 4 else 'ip6tables'
        return self.node.exec([tool, '-w'] + list(args), check=check)

    def nat_save(self, family=4):
        if self.backend is not None:
            return self.backend.save(self.node, family)
        tool = 'iptables-save' if family == 4 else 'ip6tables-save'
        return self.node.exec([tool, '-t', 'nat']).stdout

    def rules_now(self):
        """The node's IPv4 nat listing and its nft ruleset, both without their
        counters (a stray packet moves them; the rules are what must not change)."""
        return (re.sub(r'\[\d+:\d+\]', '[-:-]', self.nat_save()),
                re.sub(r'counter packets \d+ bytes \d+', 'counter', self.node.exec(['nft', 'list', 'ruleset']).stdout))

    def playbook(self, path, extra_vars=None, **kwargs):
        """Run ``ansible-playbook`` in the node namespace (see netlab.playbook)."""
        return netlab.playbook(self.node, path, extra_vars=extra_vars, backend=self.backend, **kwargs)

    def steps(self, masq_args, steps, **kwargs):
        """Run the test playbook's ``steps`` (check1, apply1, ...) with
        ``masq_args``; return ``(rc, {step: result})`` for the steps that ran."""
        rc, tasks = self.playbook(MASQ_PLAYBOOK, {'masq_args': masq_args, 'steps': list(steps)}, **kwargs)
        results = {}
        for name, result in tasks:
            step = name.split()[-1] if name else name  # 'apply1' or 'Step apply1'
            if not result.get('skipped'):
                results[step] = result
        return rc, results

    def masq(self, **masq_args):
        """Run ipmasq.agent.masq_chain once in the node with ``masq_args``;
        return its result (raises if the play failed)."""
        rc, results = self.steps(masq_args, ['apply1'])
        result = results.get('apply1')
        if rc != 0 or result is None or result.get('failed'):
            raise RuntimeError('masq_chain %r failed (rc=%d): %s'
                               % (masq_args, rc, json.dumps(results, indent=1)))
        return result

    # -- real packets -------------------------------------------------------

    def probe(self, names=None, timeout=2.0):
        """Connect from the pod to each receiver (all at once) and return
        ``{receiver name: source address the receiver saw}``, or
        :data:`NO_REPLY` when the connection never came up (the reply could
        not come back), or ``'error: ...'``.

        What the receiver saw comes from the receiver itself (its
        ``accept()``); the pod-side reply is kept in :attr:`last_probe` and
        must agree.  ``last_probe['ports']`` has the source port each
        receiver saw.  Bounded: one connection per receiver, ``timeout``
        seconds each, servers killed right after."""
        recs = [r for r in self.receivers if names is None or r.name in names]
        by_host = collections.OrderedDict()
        for rec in recs:
            by_host.setdefault(rec.host, []).append(rec)
        servers = []
        try:
            for host, host_recs in by_host.items():
                argv = [sys.executable, PEER_ECHO, 'serve', '--port', str(self.port),
                        '--max-conns', str(len(host_recs)), '--timeout', str(timeout + 10)]
                for rec in host_recs:
                    argv += ['--listen', rec.address]
                proc = self.ns[host].popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True)
                servers.append(proc)
                self._wait_listening(proc, host)
            argv = [sys.executable, PEER_ECHO, 'connect', '--port', str(self.port),
                    '--timeout', str(timeout)]
            for rec in recs:
                argv += ['--target', rec.address]
            client = self.pod.exec(argv, timeout=timeout + 15)
            client_view = json.loads(client.stdout)
        finally:
            server_seen, server_ports = {}, {}
            for proc in servers:
                try:
                    out, _err = proc.communicate(timeout=0.5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, _err = proc.communicate(timeout=5)
                for line in (out or '').splitlines():
                    parts = line.split()
                    if len(parts) == 4 and parts[0] == 'SEEN':
                        server_seen[parts[1]] = parts[2]
                        server_ports[parts[1]] = int(parts[3])
        result = collections.OrderedDict()
        for rec in recs:
            mine = client_view.get(rec.address, {})
            if rec.address in server_seen:
                seen = server_seen[rec.address]
                if mine.get('seen') not in (None, seen):
                    raise RuntimeError('%s: receiver saw %s but replied %r' % (rec.name, seen, mine))
                result[rec.name] = seen
            elif mine.get('error') == NO_REPLY:
                result[rec.name] = NO_REPLY
            else:
                result[rec.name] = 'error: %s' % mine.get('error', mine)
        self.last_probe = {'client': client_view, 'receivers': server_seen,
                           'ports': dict((rec.name, server_ports[rec.address]) for rec in recs
                                         if rec.address in server_ports)}
        return dict(result)

    @staticmethod
    def _wait_listening(proc, host, limit=10.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            ready, _w, _x = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = proc.stdout.readline()
            if line.strip() == 'LISTENING':
                return
            if not line:
                break
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ''
        raise RuntimeError('probe server in %s did not start: %s' % (host, err))
