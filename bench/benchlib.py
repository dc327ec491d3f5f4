"""Shared helpers of the benchmarks (controller side; run with .venv/bin/python).

Every network change happens inside a namespace made with
tests/lab/ipmasq_lab/netlab.py and removed again in a ``finally`` block.
Benchmarks are not tests: nothing here asserts a time.
"""
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time

from ipmasq_lab import netlab   # tests/lab, on the venv's path (scripts/bootstrap.sh)

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
PLAYBOOKS = os.path.join(BENCH, 'playbooks')
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')
NODE_PYTHON = '/usr/bin/python3'   # what the module runs under (ANSIBLE_PYTHON_INTERPRETER)
CHAIN = 'IP-MASQ-AGENT'


def log(msg):
    """A progress line on stderr, stamped with the time of day."""
    sys.stderr.write('[bench %s] %s\n' % (time.strftime('%H:%M:%S'), msg))
    sys.stderr.flush()


def make_cidrs(count):
    """``count`` distinct, aligned, non-overlapping /24s: half in 10.0.0.0/8,
    half in 100.64.0.0/10 (up to 16,384 each)."""
    first = count // 2
    out = ['10.%d.%d.0/24' % (i // 256, i % 256) for i in range(first)]
    out += ['100.%d.%d.0/24' % (64 + i // 256, i % 256) for i in range(count - first)]
    return out


def child_cpu():
    """User+system CPU seconds of every child waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(func):
    """Run ``func()`` (which runs and waits for subprocesses); return
    ``(result, wall seconds, CPU seconds of the children)``."""
    cpu0 = child_cpu()
    start = time.perf_counter()
    result = func()
    wall = time.perf_counter() - start
    return result, wall, child_cpu() - cpu0


def median(values):
    return statistics.median(values) if values else None


def write_json(path, data):
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(data, handle)


def node_script(ns, script, args, backend, timeout=600, env_extra=None):
    """Run a bench/ script with the node's Python inside ``ns``; return its JSON."""
    env = backend.env()
    env['PYTHONPATH'] = COLLECTIONS
    env['LC_ALL'] = 'C'
    env.update(env_extra or {})
    argv = [NODE_PYTHON, os.path.join(BENCH, script)] + list(args)
    proc = ns.exec(argv, check=False, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError('%s failed (rc=%d):\n%s\n%s' % (script, proc.returncode, proc.stdout, proc.stderr))
    return json.loads(proc.stdout)


def playbook(ns, name, extra_vars, backend, workdir, inventory=None, timeout=900, env_extra=None):
    """Run ``bench/playbooks/<name>`` with ansible-playbook inside ``ns`` (or,
    with ``ns=None`` and an inventory, from the root namespace against
    hosts that are namespaces themselves).  Extra vars go through a file:
    a 5,000-rule restore payload is longer than one argv string may be.

    Returns ``(tasks, wall, cpu)``; ``tasks`` is a list of (task name,
    {host: result}) from the json callback.  Raises on a failed run.
    """
    vars_file = os.path.join(workdir, 'vars-%d.json' % os.getpid())
    write_json(vars_file, extra_vars)
    argv = [os.path.join(netlab.VENV_BIN, 'ansible-playbook'),
            '-i', inventory or 'localhost,', os.path.join(PLAYBOOKS, name), '-e', '@' + vars_file]
    if inventory is None:
        argv[3:3] = ['-c', 'local']
    env = netlab.ansible_env(env_extra, backend)
    if ns is not None:
        proc, wall, cpu = timed(lambda: ns.exec(argv, check=False, timeout=timeout, env=env))
    else:
        proc, wall, cpu = timed(lambda: netlab.run(argv, check=False, timeout=timeout, env=env))
    try:
        data = json.loads(proc.stdout[proc.stdout.index('{'):])
    except ValueError:
        raise RuntimeError('ansible-playbook %s printed no JSON (rc=%d):\n%s\n%s'
                           % (name, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    tasks = [(task['task']['name'], task['hosts'])
             for play in data.get('plays', []) for task in play.get('tasks', [])]
    failed = [(name_, host, res.get('msg')) for name_, hosts in tasks
              for host, res in hosts.items() if res.get('failed')]
    if proc.returncode != 0 or failed:
        raise RuntimeError('ansible-playbook %s failed (rc=%d): %s\n%s'
                           % (name, proc.returncode, failed, proc.stderr[-3000:]))
    return tasks, wall, cpu


def changed(tasks):
    """True if any task on any host reported a change."""
    return any(res.get('changed') for _name, hosts in tasks for res in hosts.values())


def chain_rule_count(ns, backend):
    """Number of rules in our chain plus jumps to it, from iptables-save."""
    rules = netlab.nat_rules(backend.save(ns))
    return sum(1 for r in rules if r.startswith('-A %s ' % CHAIN) or r.endswith('-j ' + CHAIN))


def _first_line(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if text else None


def machine_info(backend):
    """Machine, versions and date for the results header."""
    cpu = None
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as handle:
            for line in handle:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    mem_kb = None
    try:
        with open('/proc/meminfo', encoding='utf-8') as handle:
            mem_kb = int(handle.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    os_name = None
    try:
        with open('/etc/os-release', encoding='utf-8') as handle:
            for line in handle:
                if line.startswith('PRETTY_NAME='):
                    os_name = line.split('=', 1)[1].strip().strip('"')
    except OSError:
        pass
    commit = _first_line(['git', '-C', ROOT, 'rev-parse', '--short', 'HEAD'])
    dirty = _first_line(['git', '-C', ROOT, 'status', '--porcelain', '--', 'plugins'])
    return {
        'date': time.strftime('%Y-%m-%d %H:%M:%S %Z'),
        'host': socket.gethostname(),
        'cpu': cpu,
        'cpus': os.cpu_count(),
        'memory_gib': round(mem_kb / 1048576.0, 1) if mem_kb else None,
        'kernel': platform.release(),
        'os': os_name,
        'python': _first_line([NODE_PYTHON, '--version']),
        'ansible': _first_line([os.path.join(netlab.VENV_BIN, 'ansible-playbook'), '--version']),
        'iptables': _first_line([backend.tool('iptables'), '--version']),
        'commit': (commit or '?') + (' (+ local changes under plugins/)' if dirty else ''),
    }
