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

extconn: the same measurement with the extensions that add set lookups to
the nft chain: exception_cidrs (E exceptions, the lower /25 of kept /24s)
and source_cidrs (S sources, the pod's /32 among them, last), and both, at
the smallest and the largest N, beside the baseline (no extension) at both;
E and S are the smallest N and the largest N.  The pod's packets take the
whole chain: its source is listed (the ``ip saddr != @sources`` return does
not match), the destination is in no exception and in no kept range, so
the exceptions, link-local and kept lookups are all made and the packet is
masqueraded by the last rule.  Before the measurement each path is probed
(PROBE packets each, expectations written here from the semantics): from a
second pod address not in the sources nothing is masqueraded, to an address
of an exception (10.0.0.1) everything is, to an address of a kept /24
outside the exceptions (10.0.0.200) nothing is.  iptables-nft beside it,
when part conn compares it too, without E x S above N x N (the one-chain
form's E x S + N + S + 1 rules; since issue 18 item 9 the core writes
S + E + N + 2 rules in sub-chains).

nftcore: ``node_nft.py measure``: the core with backend=nftables against
the bare nft commands (see there), at the same N.

Benchmarks, not tests: nothing here asserts a time.
"""
import os
import shutil
import statistics
import time

import benchlib
from benchlib import log
from ipmasq_lab import netlab

DST = '203.0.113.10'
POD = '192.0.2.2'
POD_OTHER = '192.0.2.3'      # part extconn: a second pod address, never among the sources
EXC_ADDR = '10.0.0.1'        # in the first exception, 10.0.0.0/25
KEPT_ADDR = '10.0.0.200'     # in the first kept /24, outside its exception
PROBE = 64                   # packets per probe of part extconn
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


def spaced_cidrs(count):
    """The same list as node_nft.spaced_cidrs: every other /24 of 10.0.0.0/8."""
    return ['10.%d.%d.0/24' % ((2 * i) // 256, (2 * i) % 256) for i in range(count)]


def _conntrack():
    return shutil.which('conntrack') or shutil.which('conntrack', path='/usr/sbin:/sbin') or 'conntrack'


# ---------------------------------------------------------------------------
# Part conn
# ---------------------------------------------------------------------------

class Path:
    """One pod -> node -> nowhere topology, with the node's policy in place.

    ``exceptions``/``sources`` (part extconn): the policy's exception_cidrs
    and source_cidrs counts (0: not set); ``probes``: the extra pod address
    and routes of part extconn, and its probes before the measurement."""

    def __init__(self, backend, size, exceptions=0, sources=0, probes=False):
        self.backend = backend          # 'floor', 'nftables', 'iptables-nft', 'iptables-legacy'
        self.size = size
        self.exceptions = exceptions
        self.sources = sources
        self.probes = probes
        self.pod = self.node = None
        self.setup = None
        self.probed = []

    @property
    def config(self):
        return '+'.join(name for name, count in (('exceptions', self.exceptions), ('sources', self.sources))
                        if count) or ('floor' if self.backend == 'floor' else 'baseline')

    def label(self):
        text = self.backend + ('' if self.size is None else ' N=%d' % self.size)
        return text + ''.join(' %s=%d' % (k, v) for k, v in (('E', self.exceptions), ('S', self.sources)) if v)

    def create(self, tools):
        self.pod = netlab.Netns('pod')
        self.node = netlab.Netns('node')
        netlab.link(self.pod, 'eth0', self.node, 'veth0')
        netlab.addr(self.pod, 'eth0', POD + '/24')
        netlab.addr(self.node, 'veth0', '192.0.2.1/24')
        self.pod.exec(['ip', 'route', 'add', '203.0.113.0/24', 'via', '192.0.2.1'])
        self.node.sysctl('net.ipv4.ip_forward', 1)
        # The way out: a veth pair inside the node whose peer end stays down.
        self.node.exec(['ip', 'link', 'add', 'out0', 'type', 'veth', 'peer', 'name', 'out1'])
        self.node.exec(['ip', 'link', 'set', 'out0', 'up'])
        netlab.addr(self.node, 'out0', '203.0.113.1/24')
        self.node.exec(['ip', 'neigh', 'replace', DST, 'lladdr', NEIGH_MAC, 'dev', 'out0', 'nud', 'permanent'])
        if self.probes:
            # The probes' extra source and destinations: 10.0.0.0/8 goes out of out0 through
            # DST's permanent neighbour entry (no ARP), into the same dead end.
            netlab.addr(self.pod, 'eth0', POD_OTHER + '/24')
            self.pod.exec(['ip', 'route', 'add', '10.0.0.0/8', 'via', '192.0.2.1'])
            self.node.exec(['ip', 'route', 'add', '10.0.0.0/8', 'via', DST, 'dev', 'out0'])
        if self.backend == 'floor':
            self.node.exec(['nft', '-f', '-'], input=FLOOR_TABLE)
            self.setup = {'backend': 'floor'}
        else:
            choice = 'nftables' if self.backend == 'nftables' else 'iptables'
            flavour = tools['legacy'] if self.backend == 'iptables-legacy' else tools['nft']
            args = ['apply', choice, str(self.size)]
            if self.exceptions or self.sources:
                args += [str(self.exceptions), str(self.sources), POD + '/32']
            self.setup = benchlib.node_script(self.node, 'node_nft.py', args, flavour)
        # Warm-up: neighbour entries, caches; then an empty conntrack table.
        self.send(tools, 200, 1.0)
        self.flush()
        if self.probes and self.backend != 'floor':
            self.probe_all(tools)

    def probe_all(self, tools):
        """What the policy does with the pod's traffic, checked (expectations by hand):
        a source outside source_cidrs keeps its address; an exception's address is
        masqueraded; a kept address outside the exceptions is not."""
        checks = [
            ('from %s (not a listed source) to %s' % (POD_OTHER, DST), DST, POD_OTHER, not self.sources),
            ('to %s (in the exception 10.0.0.0/25)' % EXC_ADDR, EXC_ADDR, None, bool(self.exceptions)),
            ('to %s (kept, in no exception)' % KEPT_ADDR, KEPT_ADDR, None, False),
        ]
        for what, dst, src, masqueraded in checks:
            self.flush()
            res = self.send(tools, PROBE, 2.0, dst=dst, src=src)
            flows, natted = self.flows(dst), self.natted(dst)
            self.flush()
            want = res['packets'] if masqueraded else 0
            if res['packets'] != PROBE or res['errors'] or flows != res['packets'] or natted != want:
                raise RuntimeError('extconn %s: probe %s: %d packets sent (%d errors), %d flows, %d masqueraded; '
                                   'expected %d flows, %d masqueraded'
                                   % (self.label(), what, res['packets'], res['errors'], flows, natted, PROBE, want))
            self.probed.append('%s: %d of %d masqueraded' % (what, natted, flows))

    def flush(self):
        self.node.exec([_conntrack(), '-F'])

    def send(self, tools, count, seconds, dst=DST, src=None):
        return benchlib.node_script(self.pod, 'pod_send.py', [dst, str(count), str(seconds)] + ([src] if src else []),
                                    tools['nft'])

    def natted(self, dst=DST):
        proc = self.node.exec([_conntrack(), '-L', '-p', 'udp', '--orig-dst', dst, '--src-nat'], timeout=120)
        return sum(1 for line in proc.stdout.splitlines() if line.strip())

    def flows(self, dst):
        proc = self.node.exec([_conntrack(), '-L', '-p', 'udp', '--orig-dst', dst], timeout=120)
        return sum(1 for line in proc.stdout.splitlines() if line.strip())

    def measure(self, tools, count, seconds):
        self.flush()
        res = self.send(tools, count, seconds)
        natted = self.natted()
        self.flush()
        if res['packets'] <= 0 or res['errors'] or natted != res['packets']:
            raise RuntimeError('conn %s: %d packets sent (%d errors), %d masqueraded flows in conntrack: '
                               'the measurement did not measure NATed new connections'
                               % (self.label(), res['packets'], res['errors'], natted))
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
    paths = [Path('floor', None)] + [Path(b, n) for n in sizes for b in backends]
    out = _measure_paths('conn', paths, backends, reps, count, seconds)
    out.update({'sizes': list(sizes), 'backends': list(backends)})
    return out


def extconn_paths(sizes, backends):
    """The paths of part extconn: floor; per backend the baseline at the
    smallest and the largest N, and exceptions, sources and both at each of
    them with E, S = the smallest N and, at the largest N, the largest too.
    iptables (E x S + N + S + 1 rules) without both at the largest E and S."""
    small, large = sizes[0], sizes[-1]
    configs = [(small, 0, 0), (large, 0, 0), (small, small, 0), (small, 0, small), (small, small, small),
               (large, small, 0), (large, large, 0), (large, 0, small), (large, 0, large),
               (large, small, small), (large, large, large)]
    seen, paths = set(), [Path('floor', None, probes=True)]
    for backend in backends:
        for size, exc, src in configs:
            if (backend, size, exc, src) in seen or (backend != 'nftables' and exc * src > small * small):
                continue
            seen.add((backend, size, exc, src))
            paths.append(Path(backend, size, exc, src, probes=True))
    return paths


def part_extconn(sizes, backends, reps, count=CONN_COUNT, seconds=CONN_SECONDS):
    backends = [b for b in backends if b in ('nftables', 'iptables-nft')]
    out = _measure_paths('extconn', extconn_paths(sizes, backends), backends, reps, count, seconds)
    out.update({'sizes': [sizes[0], sizes[-1]], 'backends': backends})
    return out


def _measure_paths(part, paths, backends, reps, count, seconds):
    tools = {'nft': netlab.Backend('nft')}
    if 'iptables-legacy' in backends:
        tools['legacy'] = netlab.Backend('legacy')
    started = time.time()
    load = [os.getloadavg()[0]]
    try:
        for path in paths:
            log('%s: topology for %s' % (part, path.label()))
            path.create(tools)
        setup_s = round(time.time() - started)
        runs = dict((id(p), []) for p in paths)
        for rep in range(reps):
            log('%s: rep %d/%d (%d paths, each at most %d packets and %.1f s)'
                % (part, rep + 1, reps, len(paths), count, seconds))
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
                'exceptions': path.exceptions, 'sources': path.sources, 'config': path.config,
                'probes': path.probed,
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
        return {'reps': reps, 'count': count, 'seconds': seconds, 'rows': rows,
                'duration_s': round(time.time() - started), 'setup_s': setup_s,
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


def part_nftcore(sizes, quick=False, baseline=None):
    """The nftables backend's own work; with ``baseline`` (collections path,
    revision), the same measurement of that revision right after, in the
    same namespace (its rows under ``before``)."""
    tools = netlab.Backend('nft')
    reps = [max(3, NFTCORE_REPS.get(s, 7) // (3 if quick else 1)) for s in sizes]
    started = time.time()
    load = [os.getloadavg()[0]]
    try:
        with netlab.Netns('nftcore') as ns:
            log('nftcore (the nftables backend, no Ansible) N=%s' % ','.join(str(s) for s in sizes))
            args = ['measure', ','.join(str(s) for s in sizes), ','.join(str(r) for r in reps)]
            rows = benchlib.node_script(ns, 'node_nft.py', args, tools)
            before = None
            if baseline:
                log('nftcore of the baseline %s' % baseline[1])
                before = benchlib.node_script(ns, 'node_nft.py', args, tools, env_extra={'PYTHONPATH': baseline[0]})
        with netlab.Netns('nftprof') as ns:
            log('nftcore: profile of a no-change run at N=%d' % sizes[-1])
            prof = benchlib.node_script(ns, 'node_nft.py', ['profile', str(sizes[-1])], tools)
    finally:
        tools.remove()
    return {'rows': rows, 'before': before, 'baseline': baseline[1] if baseline else None, 'profile': prof,
            'duration_s': round(time.time() - started),
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
        if core.get('before'):
            out += ['', '### Before and after: the same measurement of revision %s, in the same namespace'
                    % core['baseline'], '',
                    'Module CPU ms of each, and after/before. The change must not slow the no-change run.', '',
                    '| N | run | before: module CPU ms | after: module CPU ms | after/before |',
                    '|---:|---|---:|---:|---:|']
            for row, old in zip(rows, core['before']):
                for step in ('apply', 'nochange'):
                    a, b = row['module_' + step]['cpu'], old['module_' + step]['cpu']
                    out.append('| %s | %s | %.1f | %.1f | %s |'
                               % (_n(row['size']), 'apply from scratch' if step == 'apply' else 'no-change rerun',
                                  b * 1e3, a * 1e3, _x(_ratio(a, b))))
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

    ext = results.get('extconn')
    if ext:
        out_ext, targets_ext = report_extconn(ext)
        out += out_ext
        targets += targets_ext

    return out, targets


def report_extconn(ext):
    """Section 8 and its targets: (markdown lines, targets)."""
    out, targets = [], []
    rows = ext['rows']
    floor = next((r for r in rows if r['backend'] == 'floor'), None)
    small, large = ext['sizes']
    base = dict(((r['backend'], r['size']), r) for r in rows if r['config'] == 'baseline')
    out += ['## 8. Cost per new connection with exception_cidrs and source_cidrs (part extconn)', '',
            'The path of part conn (pod %s → node → %s, one UDP datagram per destination port, a new conntrack '
            'tuple each), the policy written by the core with the extensions: **E** exception_cidrs (the lower '
            '/25 of E of the N kept /24s, spread over the list), **S** source_cidrs (S - 1 spaced /26s of '
            '100.64.0.0/10 and the pod\'s %s/32, last). The pod\'s packets take the whole chain: their source is '
            'listed, the destination is in no exception and no kept range, so every set lookup is made and the '
            'last rule masquerades them (nft: `ip saddr != @sources-ipv4 return`, the local check, `ip daddr '
            '@exceptions-ipv4 masquerade`, link-local, `ip daddr @nonmasq-ipv4 return`, `masquerade`; iptables: '
            'E x S exception rules with `-s`/`-d`, the N + 1 RETURNs, S MASQUERADE rules with `-s`). Every '
            'path was probed first (%d packets each, expectations written in the bench): from %s, not a listed '
            'source, nothing masqueraded when S > 0 (everything when S = 0); to %s (in 10.0.0.0/25, an exception) '
            'everything masqueraded when E > 0 (nothing when E = 0); to %s (kept, in no exception) nothing; and '
            'every set\'s element count and the order of the chain\'s lookups (sources, exceptions, kept) were '
            'checked after the apply. Each repetition at most %s packets and %.1f s, every one checked: as many '
            'masqueraded flows in conntrack as packets sent. All paths interleaved, %d repetitions, medians; '
            'CPU µs/conn as in part conn; the ratios are to the same backend\'s baseline (no extension).'
            % (POD, DST, POD, PROBE, POD_OTHER, EXC_ADDR, KEPT_ADDR, _n(ext['count']), ext['seconds'], ext['reps']),
            '',
            '| backend | config | N | E | S | CPU µs/conn | ÷ baseline at N=%s | ÷ baseline at same N | over floor µs '
            '| min to max | conn/s |' % _n(small),
            '|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|']
    for row in rows:
        if row['backend'] == 'floor':
            continue
        first, same = base.get((row['backend'], small)), base.get((row['backend'], row['size']))
        out.append('| %s | %s | %s | %s | %s | %.2f | %s | %s | %s | %.2f to %.2f | %s |'
                   % (row['backend'], row['config'], _n(row['size']), _n(row['exceptions']) if row['exceptions']
                      else '-', _n(row['sources']) if row['sources'] else '-', row['cpu_us'],
                      _x(_ratio(row['cpu_us'], first and first['cpu_us'])),
                      _x(_ratio(row['cpu_us'], same and same['cpu_us'])),
                      '%.2f' % (row['cpu_us'] - floor['cpu_us']) if floor else '-',
                      row['cpu_us_min'], row['cpu_us_max'], '{:,.0f}'.format(row['cps'])))
    if floor:
        out += ['', 'Floor (bare `masquerade`, no set, no rule to walk): %.2f µs/conn (%.2f to %.2f), %s conn/s.'
                % (floor['cpu_us'], floor['cpu_us_min'], floor['cpu_us_max'], '{:,.0f}'.format(floor['cps']))]
    bad = [r for r in rows if not r['natted_ok']]
    out += ['', 'Every repetition of every path: as many masqueraded flows in conntrack as packets sent: %s. '
            'Probes passed on every path (the run stops otherwise); for example %s: %s.'
            % ('yes' if not bad else 'NO (%s)' % ', '.join(r['backend'] for r in bad),
               next(('%s N=%s E=%s S=%s' % (r['backend'], _n(r['size']), r['exceptions'], r['sources'])
                     for r in rows if r['probes'] and r['exceptions'] and r['sources']), '-'),
               next(('; '.join(r['probes']) for r in rows if r['probes'] and r['exceptions'] and r['sources']), '-')),
            'Part extconn took %d s (%d s of it building the %d paths: the core\'s apply and its no-change rerun, '
            'the probes); load average %.1f at its start, %.1f at its end.'
            % (ext['duration_s'], ext['setup_s'], len(rows), ext['load'][0], ext['load'][1]), '']
    first = base.get(('nftables', small))
    if first:
        for config in ('exceptions', 'sources', 'exceptions+sources'):
            cands = [r for r in rows if r['backend'] == 'nftables' and r['config'] == config and r['size'] == large]
            if not cands:
                continue
            row = max(cands, key=lambda r: (r['exceptions'], r['sources']))
            ratio = _ratio(row['cpu_us'], first['cpu_us'])
            beside = [r for r in rows if r['backend'] == 'iptables-nft' and r['config'] == config
                      and r['size'] == large]
            ipt = max(beside, key=lambda r: (r['exceptions'], r['sources'])) if beside else None
            ipt_first = base.get(('iptables-nft', small))
            targets.append(('nft cost per new connection with %s (N=%s, E=%s, S=%s) within %.1fx of the baseline '
                            'at N=%s (sender CPU)' % (config.replace('+', ' and '), _n(row['size']),
                                                      _n(row['exceptions']), _n(row['sources']),
                                                      TARGET_CONN_RATIO, _n(small)),
                            'nft %s (%.2f to %.2f µs/conn)%s'
                            % (_x(ratio), first['cpu_us'], row['cpu_us'],
                               '; beside it iptables-nft (N=%s, E=%s, S=%s) %s' % (
                                   _n(ipt['size']), _n(ipt['exceptions']), _n(ipt['sources']),
                                   _x(_ratio(ipt['cpu_us'], ipt_first['cpu_us'])))
                               if ipt and ipt_first else ''),
                            ratio is not None and ratio <= TARGET_CONN_RATIO))
    return out, targets
