"""CNI networks in the lab: Debian's containernetworking-plugins (the
bridge, ptp, portmap and host-local plugins in /usr/lib/cni) run with
``CNI_COMMAND=ADD``/``DEL`` as a container runtime runs them, from a network
file in a temporary directory, into namespaces the test made.

The plugin runs INSIDE the node namespace (``ip netns exec``), so the
bridge, the veth and every iptables rule it writes land there.  Before the
plugin is started, :func:`guard` (this file run as a script in the
namespace) checks that its network namespace is the node's
(``/proc/self/ns/net`` and ``/run/netns/<node>``, device and inode) and not
the root namespace's; otherwise nothing runs.  host-local keeps its leases in
the temporary directory (``dataDir``), never in /var/lib/cni; nothing reads
or writes /etc/cni of this machine.  Addresses: 10.244.0.0/16 and
fd00:244::/32 (the topology's pod ranges, so its cluster-local host has a
route back); no route out.
"""
import contextlib
import json
import os
import shutil
import sys
import tempfile

PLUGIN_DIR = '/usr/lib/cni'
PACKAGE = 'containernetworking-plugins'


def installed():
    """Whether Debian's CNI plugins are there (scripts/bootstrap.sh installs them)."""
    return all(os.access(os.path.join(PLUGIN_DIR, p), os.X_OK) for p in ('bridge', 'ptp', 'portmap', 'host-local'))


def conflist(name, plugin='bridge', subnet4='10.244.7.0/24', subnet6='fd00:244:7::/64', ip_masq=True,
             bridge='cni-imq0', portmap=False, data_dir=None):
    """A network list as containerd's default (10-containerd-net.conflist) has it."""
    ranges = [[{'subnet': subnet4}]]
    routes = [{'dst': '0.0.0.0/0'}]
    if subnet6:
        ranges.append([{'subnet': subnet6}])
        routes.append({'dst': '::/0'})
    main = {'type': plugin}
    if plugin == 'bridge':
        main.update(bridge=bridge, isGateway=True)
    main.update(ipMasq=ip_masq, ipam={'type': 'host-local', 'ranges': ranges, 'routes': routes})
    if data_dir:
        main['ipam']['dataDir'] = data_dir
    plugins = [main]
    if portmap:
        plugins.append({'type': 'portmap', 'capabilities': {'portMappings': True}})
    return {'cniVersion': '1.0.0', 'name': name, 'plugins': plugins}


class Network:
    """One network list written to ``conf_dir/<file>`` and run from there:
    every :meth:`add`/:meth:`delete` reads the file again, as a runtime
    does, so an edit of it decides the next ADD and DEL.

    ``backend`` (netlab.Backend, optional): the iptables tools the plugins
    find first on PATH."""

    def __init__(self, node, conf_dir, name, file_name=None, backend=None, **kwargs):
        self.node = node
        self.name = name
        self.backend = backend
        self.state = tempfile.mkdtemp(prefix='imq-cni-state-')
        self.path = os.path.join(conf_dir, file_name or '10-%s.conflist' % name)
        data = conflist(name, data_dir=os.path.join(self.state, 'ipam'), **kwargs)
        with open(self.path, 'w') as handle:
            json.dump(data, handle, indent=2)
            handle.write('\n')
        self.results = {}

    @classmethod
    def load(cls, node, path, backend=None):
        """The network of the file ``path`` as it is (nothing written): a
        runtime's cached copy of a network's configuration, to run DEL with."""
        net = cls.__new__(cls)
        net.node, net.backend, net.path, net.results, net.state = node, backend, path, {}, None
        net.caller = None
        net.name = net.conf()['name']
        return net

    def conf(self):
        with open(self.path) as handle:
            return json.load(handle)

    def _env(self, command, pod, container, ifname):
        env = self.backend.env() if self.backend is not None else dict(os.environ)
        env.update(CNI_COMMAND=command, CNI_CONTAINERID=container, CNI_NETNS='/run/netns/%s' % pod.name,
                   CNI_IFNAME=ifname, CNI_PATH=PLUGIN_DIR)
        return env

    def _plugin(self, conf, plugin_conf, env, prev, runtime):
        stdin = dict(plugin_conf, name=conf['name'], cniVersion=conf['cniVersion'])
        if prev is not None:
            stdin['prevResult'] = prev
        if plugin_conf.get('capabilities', {}).get('portMappings') and runtime.get('portMappings'):
            stdin['runtimeConfig'] = {'portMappings': runtime['portMappings']}
        # The guard refuses the caller's namespace: the test's (the root one),
        # also for a DEL run from inside the node (delete_argv passes it).
        caller = getattr(self, 'caller', None) or _ident('/proc/self/ns/net')
        argv = [sys.executable, os.path.abspath(__file__), 'guard', self.node.name, caller,
                '--', os.path.join(PLUGIN_DIR, plugin_conf['type'])]
        proc = self.node.exec(argv, check=False, input=json.dumps(stdin), env=env, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError('CNI %s %s of %s failed (rc=%d): %s%s' % (
                env['CNI_COMMAND'], plugin_conf['type'], self.name, proc.returncode, proc.stdout, proc.stderr))
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    def add(self, pod, container, ifname='eth0', port_mappings=()):
        """CNI ADD of every plugin of the list, in order (each gets the
        previous one's result); the last result."""
        for key in ('net.ipv6.conf.all.accept_dad', 'net.ipv6.conf.default.accept_dad'):
            pod.sysctl(key, 0)
        conf = self.conf()
        env = self._env('ADD', pod, container, ifname)
        runtime = {'portMappings': list(port_mappings)}
        prev = None
        for plugin_conf in conf['plugins']:
            prev = self._plugin(conf, plugin_conf, env, prev, runtime)
        self.results[(pod.name, container, ifname)] = (prev, runtime)
        return prev

    def delete(self, pod, container, ifname='eth0'):
        """CNI DEL of every plugin of the list, in reverse order, with the file as it is now."""
        prev, runtime = self.results.pop((pod.name, container, ifname), (None, {}))
        conf = self.conf()
        env = self._env('DEL', pod, container, ifname)
        for plugin_conf in reversed(conf['plugins']):
            self._plugin(conf, plugin_conf, env, prev, runtime)

    def remove(self):
        if self.state:
            shutil.rmtree(self.state, ignore_errors=True)

    def delete_argv(self, pod, container, conf_path, ifname='eth0'):
        """The command that runs this network's DEL for ``container`` with
        the configuration in ``conf_path`` (a runtime's cached copy), from any
        process: for :func:`before_restore`."""
        return [sys.executable, os.path.abspath(__file__), 'delete', self.node.name, conf_path, pod.name, container,
                ifname, self.backend.path_dir if self.backend is not None else '', _ident('/proc/self/ns/net')]


# A shim of iptables-restore/ip6tables-restore (before_restore): on its n-th
# call it runs the n-th hook, if any, then the real tool (the next on PATH).
_SHIM = r'''
import json, os, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
path = [p for p in os.environ.get('PATH', '').split(os.pathsep) if p and p != here]
os.environ['PATH'] = os.pathsep.join(path)
calls = os.path.join(here, 'calls')
with open(calls, 'a+') as handle:
    handle.seek(0)
    n = len(handle.read().splitlines())
    handle.write(sys.argv[0] + '\n')
with open(os.path.join(here, 'hooks.json')) as handle:
    hooks = json.load(handle)
if n < len(hooks) and hooks[n]:
    subprocess.run(hooks[n], check=True, timeout=60, stdout=sys.stderr)
name = os.path.basename(sys.argv[0])
for directory in path:
    real = os.path.join(directory, name)
    if os.access(real, os.X_OK):
        os.execv(real, [real] + sys.argv[1:])
sys.exit('%s: not found on PATH' % name)
'''


@contextlib.contextmanager
def _shim_dir(hooks, names, shim):
    """A temporary PATH directory holding ``hooks.json``, an empty ``calls``
    and, for each of ``names``, an executable Python ``shim``; removed afterwards."""
    path = tempfile.mkdtemp(prefix='imq-hook-')
    try:
        with open(os.path.join(path, 'hooks.json'), 'w') as handle:
            json.dump(list(hooks), handle)
        open(os.path.join(path, 'calls'), 'w').close()
        for name in names:
            script = os.path.join(path, name)
            with open(script, 'w') as handle:
                handle.write('#!/usr/bin/python3\n' + shim)
            os.chmod(script, 0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def before_restore(hooks):
    """A PATH directory (put it first) whose iptables-restore and
    ip6tables-restore run ``hooks[n]`` (an argv, or None) before their
    n-th call, then the real tool: a container torn down between a run's
    read and its write, at exactly that point.  Removed afterwards."""
    return _shim_dir(hooks, ('iptables-restore', 'ip6tables-restore'), _SHIM)


# A shim of nft (before_nft_write): on its n-th call that writes (a batch
# with anything but listings), it runs the n-th hook, if any, then the real
# nft (the next on PATH) with the same input.
_NFT_SHIM = r'''
import json, os, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
path = [p for p in os.environ.get('PATH', '').split(os.pathsep) if p and p != here]
os.environ['PATH'] = os.pathsep.join(path)
data = sys.stdin.read() if '-f' in sys.argv[1:] else None
try:
    batch = json.loads(data)['nftables'] if data else []
except (ValueError, KeyError, TypeError):
    batch = [{'write': None}]
if any('list' not in command for command in batch):
    calls = os.path.join(here, 'calls')
    with open(calls, 'a+') as handle:
        handle.seek(0)
        n = len(handle.read().splitlines())
        handle.write(' '.join(sorted(set(k for c in batch for k in c))) + '\n')
    with open(os.path.join(here, 'hooks.json')) as handle:
        hooks = json.load(handle)
    if n < len(hooks) and hooks[n]:
        subprocess.run(hooks[n], check=True, timeout=60, stdout=sys.stderr)
for directory in path:
    real = os.path.join(directory, 'nft')
    if os.access(real, os.X_OK):
        done = subprocess.run([real] + sys.argv[1:], input=data, text=True, timeout=120, check=False)
        sys.exit(done.returncode)
sys.exit('nft: not found on PATH')
'''


def before_nft_write(hooks):
    """A PATH directory (put it first) whose nft runs ``hooks[n]`` (an argv,
    or None) before its n-th call that writes (listings pass untouched),
    then the real nft: a rule removed by its owner between a run's read and
    its transaction, at exactly that point.  Its file ``calls`` has a line
    per write (the batch's command kinds).  Removed afterwards."""
    return _shim_dir(hooks, ('nft',), _NFT_SHIM)


def guarded(node, argv):
    """``argv`` (its program an absolute path) as a hook: it runs only inside
    the network namespace ``node`` (a ``netlab.Netns``), never in this
    process's own (:func:`guard`)."""
    return [sys.executable, os.path.abspath(__file__), 'guard', node.name, _ident('/proc/self/ns/net'), '--'] + list(argv)


def _ident(path):
    st = os.stat(path)
    return '%d:%d' % (st.st_dev, st.st_ino)


def guard(node, caller, argv):
    """Run ``argv`` (exec) only inside the network namespace ``node``, and
    not in ``caller``'s (the test's, the root namespace: device:inode of its
    /proc/self/ns/net)."""
    mine = _ident('/proc/self/ns/net')
    if mine != _ident('/run/netns/%s' % node) or mine == caller:
        sys.exit('cni.py guard: not in the network namespace %s; %s not run' % (node, argv[0]))
    os.execv(argv[0], argv)


if __name__ == '__main__':
    if len(sys.argv) > 5 and sys.argv[1] == 'guard' and sys.argv[4] == '--':
        guard(sys.argv[2], sys.argv[3], sys.argv[5:])
    if len(sys.argv) == 9 and sys.argv[1] == 'delete':
        # delete NODE CONF POD CONTAINER IFNAME BACKEND_PATH_DIR CALLER_NS (Network.delete_argv)
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from ipmasq_lab import netlab  # pylint: disable=import-outside-toplevel

        class _Backend:
            path_dir = sys.argv[7]

            def env(self):
                return netlab.Backend.env(self)
        _node, _pod = netlab.Netns.__new__(netlab.Netns), netlab.Netns.__new__(netlab.Netns)
        _node.name, _pod.name = sys.argv[2], sys.argv[4]
        _net = Network.load(_node, sys.argv[3], _Backend() if sys.argv[7] else None)
        _net.caller = sys.argv[8]
        _net.delete(_pod, sys.argv[5], sys.argv[6])
        sys.exit(0)
    sys.exit('usage: cni.py guard NODE CALLER_NS -- PLUGIN [ARGS...] | delete NODE CONF POD CONTAINER IFNAME PATH_DIR CALLER_NS')
