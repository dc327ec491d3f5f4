"""Parts ``conn`` and ``nftcore`` of bench/run: the nftables backend.

conn: what the policy costs each new connection, the iptables walk (one
RETURN rule per non-masquerade CIDR) against the nft interval set (one
lookup), at N = 10, 1,000, 5,000 and 20,000 CIDRs.  Per backend and N, a
topology of its own, in network namespaces made here::

    pod (192.0.2.2) --veth--> node (192.0.2.1, forwarding on, the policy)
        --> out0 (203.0.113.1/24; a veth whose peer end stays down)

The destination 203.0.113.10 is on out0's link, with a permanent neighbour
entry, so no ARP is sent: a packet is routed, its nat POSTROUTING chain
evaluated (conntrack's first packet of a tuple), and then dropped by the
veth because its peer is down.  Nothing leaves the node namespace; this
kernel has no ``dummy`` driver.  The non-masquerade CIDRs are every other
/24 of 10.0.0.0/8 (N intervals in the set, N RETURN rules), the pod and the
destination match none: the worst case of the iptables walk, which is the
ordinary internet-bound case.  The policy is written by the core (Policy +
sync) inside the node namespace (``node_nft.py apply``); the iptables
flavours come from netlab.Backend's PATH directory.  The floor is the same
path with a bare ``masquerade`` chain (no set, no rule to walk).

Each repetition: ``conntrack -F`` in the node, then ``pod_send.py`` sends
one UDP datagram per destination port (a new conntrack tuple each), at most
COUNT packets and at most SECONDS; afterwards ``conntrack -L --src-nat``
in the node must list exactly as many masqueraded flows as packets were
sent (else the run fails: the bench cannot measure nothing).  Backends and
sizes are interleaved and rotated; medians.

nftcore: ``node_nft.py measure``: the core with backend=nftables against
the bare nft commands (see there), at the same N.

Benchmarks, not tests: nothing here asserts a time.
"""
import os
import shutil
import statistics
import sys
import time

import benchlib
import netlab

DST = '203.0.113.10'
NEIGH_MAC = '02:00:5e:00:53:0a'     # locally administered, never answered
FULL_SIZES = (10, 1000, 5000, 20000)
QUICK_SIZES = (10, 20000)
CONN_BACKENDS = ('nftables', 'iptables-nft', 'iptables-legacy')
CONN_COUNT = 20000          # packets per repetition, at most
CONN_SECONDS = 1.0          # seconds of sending per repetition, at most
TARGET_CONN_RATIO = 1.2     # nft at the largest N within 1.2x of nft at the smallest
TARGET_NOCHANGE_RATIO = 1.3  # nft no-change run within 1.3x of a bare `nft -j list table`
FLOOR_TABLE = ('table inet imq-floor {\n\tchain postrouting {\n'
               '\t\ttype nat hook postrouting priority srcnat; policy accept;\n'
               '\t\tmasquerade\n\t}\n}\n')


def log(msg):
    sys.stderr.write('[bench %s] %s\n' % (time.strftime('%H:%M:%S'), msg))
    sys.stderr.flush()


def spaced_cidrs(count):
    """The same list as node_nft.spaced_cidrs: every other /24 of 10.0.0.0/8."""
    return ['10.%d.%d.0/24' % ((2 * i) // 256, (2 * i) % 256) for i in range(count)]


def _conntrack():
    return shutil.which('conntrack') or shutil.which('conntrack', path='/usr/sbin:/sbin') or 'conntrack'


# ---------------------------------------------------------------------------
# Part conn
# ---------------------------------------------------------------------------

class Path:
    """One pod -> node -> nowhere topology, with the node's policy in place."""

    def __init__(self, backend, size):
        self.backend = backend          # 'floor', 'nftables', 'iptables-nft', 'iptables-legacy'
        self.size = size
        self.pod = self.node = None
        self.setup = None

    def create(self, tools):
        self.pod = netlab.Netns('pod')
        self.node = netlab.Netns('node')
        netlab.link(self.pod, 'eth0', self.node, 'veth0')
        netlab.addr(self.pod, 'eth0', '192.0.2.2/24')
        netlab.addr(self.node, 'veth0', '192.0.2.1/24')
        self.pod.exec(['ip', 'route', 'add', '203.0.113.0/24', 'via', '192.0.2.1'])
        self.node.sysctl('net.ipv4.ip_forward', 1)
        # The way out: a veth pair inside the node whose peer end stays down.
        self.node.exec(['ip', 'link', 'add', 'out0', 'type', 'veth', 'peer', 'name', 'out1'])
        self.node.exec(['ip', 'link', 'set', 'out0', 'up'])
        netlab.addr(self.node, 'out0', '203.0.113.1/24')
        self.node.exec(['ip', 'neigh', 'replace', DST, 'lladdr', NEIGH_MAC, 'dev', 'out0', 'nud', 'permanent'])
        if self.backend == 'floor':
            self.node.exec(['nft', '-f', '-'], input=FLOOR_TABLE)
            self.setup = {'backend': 'floor'}
        else:
            choice = 'nftables' if self.backend == 'nftables' else 'iptables'
            flavour = tools['legacy'] if self.backend == 'iptables-legacy' else tools['nft']
            self.setup = benchlib.node_script(self.node, 'node_nft.py', ['apply', choice, str(self.size)], flavour)
        # Warm-up: neighbour entries, caches; then an empty conntrack table.
        self.send(tools, 200, 1.0)
        self.flush()

    def flush(self):
        self.node.exec([_conntrack(), '-F'])

    def send(self, tools, count, seconds):
        return benchlib.node_script(self.pod, 'pod_send.py', [DST, str(count), str(seconds)], tools['nft'])

    def natted(self):
        proc = self.node.exec([_conntrack(), '-L', '-p', 'udp', '--orig-dst', DST, '--src-nat'], timeout=120)
        return sum(1 for line in proc.stdout.splitlines() if line.strip())

    def measure(self, tools, count, seconds):
        self.flush()
        res = self.send(tools, count, seconds)
        natted = self.natted()
        self.flush()
        if res['packets'] <= 0 or res['errors'] or natted != res['packets']:
            raise RuntimeError('conn %s N=%s: %d packets sent (%d errors), %d masqueraded flows in conntrack: '
                               'the measurement did not measure NATed new connections'
                               % (self.backend, self.size, res['packets'], res['errors'], natted))
        res['natted'] = natted
        return res

    def delete(self):
        for ns in (self.pod, self.node):
            if ns is not None:
                ns.delete()


def _rotate(items, k):
    k %= len(items)
    return items[k:] + items[:k]


def part_conn(sizes, backends, reps, count=CONN_COUNT, seconds=CONN_SECONDS):
    tools = {'nft': netlab.Backend('nft')}
    if 'iptables-legacy' in backends:
        tools['legacy'] = netlab.Backend('legacy')
    paths = [Path('floor', None)] + [Path(b, n) for n in sizes for b in backends]
    started = time.time()
    load = [os.getloadavg()[0]]
    try:
        for path in paths:
            log('conn: topology for %s%s' % (path.backend, '' if path.size is None else ' N=%d' % path.size))
            path.create(tools)
        runs = dict((id(p), []) for p in paths)
        for rep in range(reps):
            log('conn: rep %d/%d (%d paths, each at most %d packets and %.1f s)'
                % (rep + 1, reps, len(paths), count, seconds))
            # Interleaved, the order rotated and reversed every other rep.
            order = _rotate(paths, rep * 5)
            if rep % 2:
                order.reverse()
            for path in order:
                runs[id(path)].append(path.measure(tools, count, seconds))
        rows = []
        for path in paths:
            samples = runs[id(path)]
            rows.append({
                'backend': path.backend, 'size': path.size, 'reps': len(samples),
                'cpu_us': statistics.median(1e6 * s['cpu'] / s['packets'] for s in samples),
                'cpu_us_min': min(1e6 * s['cpu'] / s['packets'] for s in samples),
                'cpu_us_max': max(1e6 * s['cpu'] / s['packets'] for s in samples),
                'busy_us': statistics.median(1e6 * s['stat_busy'] / s['packets'] for s in samples),
                'softirq_share': statistics.median(s['stat_softirq'] / s['stat_busy'] if s['stat_busy'] else 0.0
                                                   for s in samples),
                'cps': statistics.median(s['packets'] / s['wall'] for s in samples),
                'packets': statistics.median(s['packets'] for s in samples),
                'natted_ok': all(s['natted'] == s['packets'] for s in samples),
                'setup': path.setup,
            })
        return {'sizes': list(sizes), 'backends': list(backends), 'reps': reps, 'count': count,
                'seconds': seconds, 'rows': rows, 'duration_s': round(time.time() - started),
                'load': load + [os.getloadavg()[0]]}
    finally:
        for path in paths:
            path.delete()
        for tool in tools.values():
            tool.remove()


# ---------------------------------------------------------------------------
# Part nftcore
# ---------------------------------------------------------------------------

NFTCORE_REPS = {10: 21, 100: 15, 1000: 15, 5000: 9, 20000: 7}


def part_nftcore(sizes, quick=False):
    tools = netlab.Backend('nft')
    reps = [max(3, NFTCORE_REPS.get(s, 7) // (3 if quick else 1)) for s in sizes]
    started = time.time()
    load = [os.getloadavg()[0]]
    try:
        with netlab.Netns('nftcore') as ns:
            log('nftcore (the nftables backend, no Ansible) N=%s' % ','.join(str(s) for s in sizes))
            rows = benchlib.node_script(ns, 'node_nft.py', ['measure', ','.join(str(s) for s in sizes),
                                                            ','.join(str(r) for r in reps)], tools)
        with netlab.Netns('nftprof') as ns:
            log('nftcore: profile of a no-change run at N=%d' % sizes[-1])
            prof = benchlib.node_script(ns, 'node_nft.py', ['profile', str(sizes[-1])], tools)
    finally:
        tools.remove()
    return {'rows': rows, 'profile': prof, 'duration_s': round(time.time() - started),
            'load': load + [os.getloadavg()[0]]}


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def _ratio(a, b):
    return a / b if a is not None and b else None


def _x(value):
    return '-' if value is None else '%.2fx' % value


def _n(size):
    return '{:,}'.format(size)


def report(results):
    """(markdown lines, targets as (name, measured, ok))."""
    out, targets = [], []
    core = results.get('nftcore')
    if core:
        rows = core['rows']
        out += ['## 6. The nftables backend\'s own work without Ansible vs the floor (part nftcore)', '',
                'Module = `Policy(...)` + `sync(...)` with backend `nftables`, in one Python process (validation, '
                'the nft listing of our table, parse, plan, and for an apply one `nft -j -f -` transaction; the '
                'commands it ran are listed below the table). nft processes = every command the module spawned '
                '(recorded from its runner). Floor = one bare `nft -j -f -` of exactly the transaction the module '
                'writes (apply, from an empty ruleset), one bare `nft -j list table inet ip-masq-agent` (no change). '
                'Same commands = the argv and stdin the module ran (recorded from it), run bare: module/same is the '
                'module\'s own Python work. Every command through the core\'s runner (posix_spawn); CPU of the '
                'process and its waited-for children. CIDRs every other /24 of 10.0.0.0/8 (N set intervals). '
                'Milliseconds, medians.', '',
                '| N | run | nft processes | module wall | module CPU | floor wall | floor CPU | module/floor wall | '
                'module/floor CPU | same cmds CPU | module/same CPU | reps |',
                '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
        for row in rows:
            for step in ('apply', 'nochange'):
                mod, flo, same = row['module_' + step], row['floor_' + step], row['same_' + step]
                out.append('| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %s | %s | %.1f | %s | %d |'
                           % (_n(row['size']), 'apply from scratch' if step == 'apply' else 'no-change rerun',
                              row['%s_processes' % step], mod['wall'] * 1e3, mod['cpu'] * 1e3,
                              flo['wall'] * 1e3, flo['cpu'] * 1e3, _x(_ratio(mod['wall'], flo['wall'])),
                              _x(_ratio(mod['cpu'], flo['cpu'])), same['cpu'] * 1e3,
                              _x(_ratio(mod['cpu'], same['cpu'])), row['reps']))
            ratio = _ratio(row['module_nochange']['cpu'], row['floor_nochange']['cpu'])
            targets.append(('nft no-change run within %.1fx of a bare `nft -j list table`, N=%s (CPU)'
                            % (TARGET_NOCHANGE_RATIO, _n(row['size'])),
                            '%s (%.1f vs %.1f ms; wall %s); %d nft process: %s'
                            % (_x(ratio), row['module_nochange']['cpu'] * 1e3, row['floor_nochange']['cpu'] * 1e3,
                               _x(_ratio(row['module_nochange']['wall'], row['floor_nochange']['wall'])),
                               row['nochange_processes'], '; '.join(row['nochange_commands'])),
                            ratio is not None and ratio <= TARGET_NOCHANGE_RATIO
                            and row['nochange_processes'] == 1))
        out.append('')
        out.append('Commands the module ran (its `result[\'commands\']`, checked in every measured no-change run): '
                   'apply from scratch: %s; no-change: %s.'
                   % ('; '.join('`%s`' % c for c in rows[0]['apply_commands']),
                      '; '.join('`%s`' % c for c in rows[0]['nochange_commands'])))
        out.append('Part nftcore took %d s; load average %.1f at its start, %.1f at its end (other tenants\' tests '
                   'on these 2 cores: module, floor and same commands are interleaved and rotated, compare ratios).'
                   % (core['duration_s'], core['load'][0], core['load'][1]))
        out.append('Transaction and listing sizes: %s.' % ', '.join(
            'N=%s: %s / %s bytes' % (_n(r['size']), '{:,}'.format(r['transaction_bytes']),
                                     '{:,}'.format(r['listing_bytes'])) for r in rows))
        out.append('')
        prof = core.get('profile')
        if prof:
            out += ['### Where a no-change run of the nftables backend goes (N=%s, best of several, ms of CPU)'
                    % _n(prof['size']), '', '| part | ms |', '|---|---:|']
            for part in prof['parts']:
                out.append('| %s | %.2f |' % (part['part'], part['ms']))
            out += ['', '<details><summary>cProfile of 5 no-change runs (Policy + sync, backend nftables)</summary>',
                    '', '```', prof['cprofile_top'], '', prof['cprofile_cumulative'], '```', '', '</details>', '']
    conn = results.get('conn')
    if conn:
        rows = dict(((r['backend'], r['size']), r) for r in conn['rows'])
        floor = rows.get(('floor', None))
        sizes = conn['sizes']
        first = sizes[0]
        out += ['## 7. Cost per new connection: iptables walk vs nft set (part conn)', '',
                'A pod namespace sends one UDP datagram per destination port to %s (a new conntrack tuple each) '
                'through a node namespace where the core wrote the policy, out of an interface with no peer '
                '(a veth whose peer end is down): the nat POSTROUTING chain is evaluated once per packet, then the '
                'packet is dropped. N non-masquerade CIDRs = every other /24 of 10.0.0.0/8 (N set intervals, '
                'N RETURN rules), none matching the destination: the walk\'s worst case, which is the ordinary '
                'internet-bound case. Each repetition at most %s packets and %.1f s, conntrack flushed before; '
                'every repetition checked: as many masqueraded flows in conntrack as packets sent. Backends and '
                'sizes interleaved, %d repetitions, medians.' % (DST, _n(conn['count']), conn['seconds'], conn['reps']),
                '',
                '**CPU per new connection** = the sending process\'s CPU time over the send loop (the scheduler\'s '
                'exact runtime; the forwarding, conntrack, the nat chain and the drop run as softirq in the sender\'s '
                'context and count there) divided by the packets: microseconds. It includes the sender\'s own '
                'Python loop and syscall, the same on every row; the floor row (a bare `masquerade` chain, nothing '
                'to walk) shows that common part, and "over floor" is what the policy adds.', '']
        head = ['N']
        for backend in conn['backends']:
            label = {'nftables': 'nft', 'iptables-nft': 'iptables (nf_tables)',
                     'iptables-legacy': 'iptables (legacy)'}[backend]
            head += ['%s µs/conn' % label, '%s ÷ at N=%s' % (label, _n(first)), '%s over floor µs' % label]
            if backend != 'nftables':
                head.append('%s ÷ nft' % label)
        out += ['| ' + ' | '.join(head) + ' |', '|' + '---:|' * len(head)]
        for size in sizes:
            cells = [_n(size)]
            nft = rows.get(('nftables', size))
            for backend in conn['backends']:
                row = rows.get((backend, size))
                base = rows.get((backend, first))
                cells += ['%.2f' % row['cpu_us'], _x(_ratio(row['cpu_us'], base['cpu_us'])),
                          '%.2f' % (row['cpu_us'] - floor['cpu_us']) if floor else '-']
                if backend != 'nftables':
                    cells.append(_x(_ratio(row['cpu_us'], nft['cpu_us']) if nft else None))
            out.append('| ' + ' | '.join(cells) + ' |')
        if floor:
            out.append('')
            out.append('Floor (bare `masquerade`, no set, no rule to walk): %.2f µs/conn, %s conn/s.'
                       % (floor['cpu_us'], '{:,.0f}'.format(floor['cps'])))
        out += ['', 'Every path, in detail: CPU µs/conn median (min to max over the repetitions); all CPUs = the '
                '`/proc/stat` busy time of the whole machine over the loop, per packet (10 ms ticks, and it counts '
                'every other tenant of this shared machine: an upper bound, not a cost); '
                'conn/s = packets / wall time of the loop; packets per repetition (median).', '',
                '| path | N | CPU µs/conn | min to max | all CPUs µs/conn | conn/s | packets/rep | NATed = sent |',
                '|---|---:|---:|---|---:|---:|---:|---|']
        for row in conn['rows']:
            out.append('| %s | %s | %.2f | %.2f to %.2f | %.2f | %s | %s | %s |'
                       % (row['backend'], '-' if row['size'] is None else _n(row['size']), row['cpu_us'],
                          row['cpu_us_min'], row['cpu_us_max'], row['busy_us'],
                          '{:,.0f}'.format(row['cps']), '{:,.0f}'.format(row['packets']),
                          'yes' if row['natted_ok'] else 'NO'))
        out += ['', 'Part conn took %d s; load average %.1f at its start, %.1f at its end: other tenants\' tests '
                'ran on these 2 cores meanwhile, so absolute numbers are noisy; the ratios are taken inside this '
                'run, between interleaved repetitions.' % (conn['duration_s'], conn['load'][0], conn['load'][1]), '']
        last = sizes[-1]
        nft_first, nft_last = rows.get(('nftables', first)), rows.get(('nftables', last))
        if nft_first and nft_last and last != first:
            ratio = _ratio(nft_last['cpu_us'], nft_first['cpu_us'])
            beside = []
            for backend in conn['backends']:
                if backend != 'nftables' and rows.get((backend, last)):
                    beside.append('%s %s (%.1f to %.1f µs)' % (
                        backend, _x(_ratio(rows[(backend, last)]['cpu_us'], rows[(backend, first)]['cpu_us'])),
                        rows[(backend, first)]['cpu_us'], rows[(backend, last)]['cpu_us']))
            targets.append(('nft cost per new connection at N=%s within %.1fx of N=%s (sender CPU)'
                            % (_n(last), TARGET_CONN_RATIO, _n(first)),
                            'nft %s (%.2f to %.2f µs/conn); beside it %s'
                            % (_x(ratio), nft_first['cpu_us'], nft_last['cpu_us'], '; '.join(beside) or '-'),
                            ratio is not None and ratio <= TARGET_CONN_RATIO))

    return out, targets
