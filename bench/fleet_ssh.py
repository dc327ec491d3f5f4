"""Part ``ssh`` of bench/run: site runs over real SSH against 1, 10 and 50 hosts.

Each host is a network namespace with its own OpenSSH server
(tests/lab/ipmasq_lab/fleetlab.py, the same harness as the fleet tests), the
controller a namespace of its own running ansible-playbook with forks 10,
pipelining on and ssh's ControlPersist (60 s, Ansible's default ssh_args).
The inventory is the example's group_vars with the fleet's host_vars.

Measured, per host count, in one session and interleaved:
- the bare module: playbooks bench/playbooks/fleet_ssh_module.yml, one
  ipmasq.agent.masq_chain task with the host's settings, no change;
- the role through playbooks/site.yml, no change, resync off (as the issue
  measured it: resync, Docker, flannel and kubelet parts off);
- the role, first apply (nat table emptied, the host's files removed);
- the role, no change, resync on (its files, code and units; systemctl is
  never run on test hosts).

Per run: wall time; controller CPU (the ansible-playbook process tree and the
ssh ControlPersist masters, from wait4 and /proc); SSH commands per host
(sshd's "Starting session" lines); node CPU per host (every sshd session and
what it ran, from /proc of each host's sshd). Medians of the repetitions.
Benchmarks, not tests: nothing here asserts a time.
"""
import os
import shutil
import statistics
import time

import benchlib
from benchlib import log
from ipmasq_lab import fleetlab, netlab

FORKS = 10
MODULE_PLAYBOOK = os.path.join(benchlib.PLAYBOOKS, 'fleet_ssh_module.yml')
# The goals (role / bare module, wall and CPU): no change, first apply (issue 20), and no change with
# the resync on (issue 20 asked 1.5x; issue 34 asks the no-change goal with the resync on too).
TARGET_RATIO = 1.3
FIRST_APPLY_RATIO = 2.0
RESYNC_RATIO = TARGET_RATIO
CLK = os.sysconf('SC_CLK_TCK')
RUNS = (
    ('module', 'no change', 'module'),
    ('role', 'no change', 'role-off'),
    ('role', 'first apply', 'role-off'),
    ('role, resync on', 'no change', 'role-on'),
)


def _stat(pid):
    """(ppid, comm, utime+stime, cutime+cstime) in seconds, or None."""
    try:
        with open('/proc/%d/stat' % pid, encoding='ascii', errors='replace') as handle:
            head, tail = handle.read().rsplit(')', 1)
    except OSError:
        return None
    fields = tail.split()
    return (int(fields[1]), head.split('(', 1)[1], (int(fields[11]) + int(fields[12])) / CLK,
            (int(fields[13]) + int(fields[14])) / CLK)


def _all_stats():
    out = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            st = _stat(int(entry))
            if st:
                out[int(entry)] = st
    return out


def masters_cpu(stats):
    """CPU of the ssh processes re-parented to us: the ControlPersist masters."""
    me = os.getpid()
    return {pid: st[2] for pid, st in stats.items() if st[0] == me and st[1] == 'ssh'}


def node_cpu(stats, listener):
    """CPU of everything a host's sshd ran: its reaped children and every live descendant."""
    children = {}
    for pid, st in stats.items():
        children.setdefault(st[0], []).append(pid)
    total = stats[listener][3] if listener in stats else 0.0
    todo = list(children.get(listener, []))
    while todo:
        pid = todo.pop()
        total += stats[pid][2] + stats[pid][3]
        todo.extend(children.get(pid, []))
    return total


def sessions(host):
    with open(host.sshd_log, encoding='utf-8', errors='replace') as handle:
        return handle.read().count('Starting session:')


class Meter:
    """Wall, controller CPU, SSH commands and node CPU of one playbook run."""

    def __init__(self, fleet):
        self.fleet = fleet

    def snapshot(self):
        stats = _all_stats()
        return {'masters': masters_cpu(stats),
                'nodes': sum(node_cpu(stats, h.sshd.pid) for h in self.fleet.hosts),
                'sessions': sum(sessions(h) for h in self.fleet.hosts)}

    def run(self, playbook, expect_changed, **kwargs):
        before = self.snapshot()
        run = self.fleet.playbook(playbook, **kwargs)
        after = self.snapshot()
        if run.rc != 0:
            raise RuntimeError('%s failed: %s' % (playbook, run.explain()))
        changed = run.changed_hosts()
        hosts = len(self.fleet.hosts)
        if expect_changed and len(changed) != hosts:
            raise RuntimeError('%s: expected a change on all %d hosts, got %s' % (playbook, hosts, changed))
        if not expect_changed and changed:
            raise RuntimeError('%s: expected no change, got changes on %s' % (playbook, changed))
        masters = sum(cpu - before['masters'].get(pid, 0.0) for pid, cpu in after['masters'].items())
        return {'wall': run.wall, 'cpu': run.cpu + masters, 'ssh': (after['sessions'] - before['sessions']) / hosts,
                'node_cpu': (after['nodes'] - before['nodes']) / hosts}


def _reset(fleet):
    """Every host back to nothing of ours: empty nat tables, its files gone."""
    for host in fleet.hosts:
        host.ns.exec(['iptables-restore'], input='*nat\nCOMMIT\n')
        host.ns.exec(['ip6tables-restore'], input='*nat\nCOMMIT\n')
        for name in os.listdir(host.root):
            shutil.rmtree(os.path.join(host.root, name), ignore_errors=True)
        netlab.role_node_paths(host.root, make=fleetlab.FRESH_HOST_DIRS)   # as fleetlab's hosts start


def _median(runs):
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def measure(count, reps):
    clusters = [('cluster_east', (count + 1) // 2), ('cluster_west', count // 2)] if count > 1 else [('cluster_east', 1)]
    off = {'ip_masq_resync_enabled': False}
    on = {'ip_masq_resync_enabled': True}
    results = {'%s|%s' % (who, run): [] for who, run, _config in RUNS}
    with fleetlab.Fleet(clusters, forks=FORKS) as fleet:
        meter = Meter(fleet)
        log('ssh fleet: %d host(s) up; warming up' % count)
        meter.run(MODULE_PLAYBOOK, True)
        meter.run('site.yml', True, extra_vars=off)
        for rep in range(reps):
            log('ssh fleet: %d host(s), no-change runs, rep %d/%d' % (count, rep + 1, reps))
            results['module|no change'].append(meter.run(MODULE_PLAYBOOK, False))
            results['role|no change'].append(meter.run('site.yml', False, extra_vars=off))
        for rep in range(reps):
            log('ssh fleet: %d host(s), first apply, rep %d/%d' % (count, rep + 1, reps))
            _reset(fleet)
            results['role|first apply'].append(meter.run('site.yml', True, extra_vars=off))
        log('ssh fleet: %d host(s), resync on' % count)
        meter.run('site.yml', True, extra_vars=on)
        for rep in range(reps):
            results['role, resync on|no change'].append(meter.run('site.yml', False, extra_vars=on))
    return {key: _median(runs) for key, runs in results.items()}


def part_ssh(host_counts, reps):
    rows = []
    for count in host_counts:
        started = time.time()
        rows.append({'hosts': count, 'runs': measure(count, reps), 'seconds': round(time.time() - started)})
    return {'forks': FORKS, 'reps': reps, 'rows': rows, 'control_persist': fleetlab.CONTROL_PERSIST}


def _x(value):
    return '-' if value is None else '%.2fx' % value


def report(result):
    """Markdown: the table, then the goals."""
    forks = result['forks']
    out = ['## Fleet over SSH: the bare module against the role (site.yml)', '',
           ('Each host a network namespace with its own sshd, the controller a namespace of its own; forks %d, '
            'pipelining on, ControlPersist=%s (Ansible\'s default ssh_args), Ansible logs in as root. '
            'Example inventory group_vars; no facts gathered; Docker, flannel and kubelet steps off, no package '
            'installs (the hosts share this machine). Medians of %d runs. Controller CPU: the ansible-playbook '
            'process tree and the ssh masters. SSH commands: what reached each node. Node CPU: everything each '
            "host's sshd ran." % (forks, result['control_persist'], result['reps'])), '',
           '| hosts | what | run | wall s | wall per host s | wall / (hosts/forks) s | controller CPU s '
           '| CPU per host s | SSH commands per host | node CPU per host s | vs module: wall per host / CPU per host |',
           '|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|']
    goals = []
    for row in result['rows']:
        n = row['hosts']
        module = row['runs']['module|no change']
        for who, run, _key in RUNS:
            r = row['runs']['%s|%s' % (who, run)]
            vs = '-' if who == 'module' else '%s / %s' % (_x(r['wall'] / module['wall']), _x(r['cpu'] / module['cpu']))
            out.append('| %d | %s | %s | %.2f | %.3f | %.2f | %.2f | %.3f | %.1f | %.3f | %s |' % (
                n, who, run, r['wall'], r['wall'] / n, r['wall'] / max(1.0, n / forks), r['cpu'], r['cpu'] / n,
                r['ssh'], r['node_cpu'], vs))
        # Issue 20's goals: each run of the role against the bare module, as wall time and as controller CPU.
        for (who, run, _key), target in zip(RUNS[1:], (TARGET_RATIO, FIRST_APPLY_RATIO, RESYNC_RATIO)):
            r = row['runs']['%s|%s' % (who, run)]
            wall_x, cpu_x = r['wall'] / module['wall'], r['cpu'] / module['cpu']
            goals.append('| %s, %s, at most %.1fx the bare module, %d host(s) | wall %.2fx, CPU %.2fx | %s |' % (
                who, run, target, n, wall_x, cpu_x,
                'met' if wall_x <= target and cpu_x <= target else '**missed**'))
        ssh = row['runs']['role|no change']['ssh'], row['runs']['role, resync on|no change']['ssh']
        goals.append('| one SSH command per host in a no-change role run, %d host(s) | %.1f (resync on: %.1f) | %s |' % (
            n, ssh[0], ssh[1], 'met' if max(ssh) <= 1 else '**missed**'))
    by_n = {row['hosts']: row['runs'] for row in result['rows']}
    counts = sorted(by_n)
    if len(counts) >= 2 and counts[-1] > forks:
        lo = max(c for c in counts if c <= forks) if any(c <= forks for c in counts) else counts[0]
        hi = counts[-1]
        for who, run, _key in RUNS[:2]:
            key = '%s|%s' % (who, run)
            growth = by_n[hi][key]['wall'] / by_n[lo][key]['wall']
            rounds = (hi / forks) / max(1.0, lo / forks)
            goals.append('| wall time about linear in hosts / forks (%s, %s): %d -> %d hosts | %.2fx the wall time '
                         'for %.1fx the rounds of forks | %s |' % (
                             who, run, lo, hi, growth, rounds,
                             'met' if growth <= rounds * 1.25 else '**missed**'))
    out += ['', '| goal | measured | status |', '|---|---|---|'] + goals
    return '\n'.join(out) + '\n'
