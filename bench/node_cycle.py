"""The node-side resync cycle, ours against upstream's rewrite-every-cycle (node side).

Runs INSIDE a network namespace made by bench/run.py, with the node's Python;
reads a JSON spec file (argv[1]) and prints one JSON document.  Never run it
in the root namespace: it empties the nat table of the namespace it runs in.

Each cycle is spawned as its own process (as a timer would start it) and
reaped with os.wait4, so its CPU time is exactly that process's and its
children's (iptables-save, iptables-restore).  Peak memory is measured in
separate, untimed cycles run under ptrace: the VmHWM of every process of the
cycle, read when it exits.  (ru_maxrss cannot be used: a spawned child's
ru_maxrss starts from its parent's RSS, here this script's own ~11 MiB.)

Spec keys: size (N CIDRs), cycles, ours (list of variants of our cycle, each
{name, argv, env, state_file, drift}: env's PATH has a shim that counts
iptables-restore runs into writes_file), writes_file, payload_file
(upstream's restore input), jump_args (upstream's `iptables -C POSTROUTING`
arguments).
"""
import ctypes
import json
import os
import shutil
import signal
import statistics
import sys
import time

from nsguard import refuse_unless_own_namespace  # bench/, this script's directory

CHAIN = 'IP-MASQ-AGENT'


def spawn(argv, env, stdin_path=os.devnull, log_path=os.devnull):
    """Run argv to completion; return (exit code, wall s, CPU s of it and its children)."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, stdin_path, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _pid, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    return os.waitstatus_to_exitcode(status), wall, usage.ru_utime + usage.ru_stime


# ptrace(2) requests, options and events (linux/ptrace.h).
PTRACE_TRACEME, PTRACE_CONT, PTRACE_SETOPTIONS, PTRACE_GETEVENTMSG = 0, 7, 0x4200, 0x4201
PTRACE_O_TRACEFORK, PTRACE_O_TRACEVFORK, PTRACE_O_TRACECLONE = 0x2, 0x4, 0x8
PTRACE_O_TRACEEXEC, PTRACE_O_TRACEEXIT, PTRACE_O_EXITKILL = 0x10, 0x40, 0x100000
EVENT_NEW_PROCESS = (1, 2, 3)   # fork, vfork, clone
EVENT_EXIT = 6
WALL = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_LIBC.ptrace.restype = ctypes.c_long


def _vm_hwm(pid):
    try:
        with open('/proc/%d/status' % pid, encoding='ascii') as handle:
            for line in handle:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def traced_peak(argv, env, stdin_path=os.devnull):
    """Run argv under ptrace; return (exit code, the largest VmHWM in KiB of
    it and every process it started), or (None, None) if ptrace is refused."""
    pid = os.fork()
    if pid == 0:   # the child: be traced, then exec
        try:
            fd = os.open(stdin_path, os.O_RDONLY)
            os.dup2(fd, 0)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            if _LIBC.ptrace(PTRACE_TRACEME, 0, None, None) != 0:
                os._exit(126)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    _pid, status = os.waitpid(pid, WALL)
    if not os.WIFSTOPPED(status):          # ptrace refused: the child exited
        return None, None
    options = (PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC
               | PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL)
    _LIBC.ptrace(PTRACE_SETOPTIONS, pid, None, ctypes.c_void_p(options))
    _LIBC.ptrace(PTRACE_CONT, pid, None, None)
    live, peak, code = {pid}, 0, None
    while live:
        wpid, status = os.waitpid(-1, WALL)
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            live.discard(wpid)
            if wpid == pid:
                code = os.waitstatus_to_exitcode(status)
            continue
        live.add(wpid)
        sig, event, deliver = os.WSTOPSIG(status), (status >> 16) & 0xff, 0
        if event == EVENT_EXIT:            # still has its memory: read its high-water mark
            peak = max(peak, _vm_hwm(wpid))
        elif event in EVENT_NEW_PROCESS:
            new = ctypes.c_ulong()
            _LIBC.ptrace(PTRACE_GETEVENTMSG, wpid, None, ctypes.byref(new))
            live.add(new.value)
        elif event == 0 and sig not in (signal.SIGTRAP, signal.SIGSTOP):
            deliver = sig                  # a real signal (SIGCHLD, ...): pass it on
        _LIBC.ptrace(PTRACE_CONT, wpid, None, ctypes.c_void_p(deliver))
    return code, peak


class Node:
    def __init__(self):
        self.env = dict(os.environ)
        self.ipt = shutil.which('iptables')
        self.save = shutil.which('iptables-save')
        self.save6 = shutil.which('ip6tables-save')
        self.restore = shutil.which('iptables-restore')

    def must(self, argv, stdin_path=os.devnull):
        code = spawn(argv, self.env, stdin_path)[0]
        if code != 0:
            raise RuntimeError('%s: exit %d' % (' '.join(argv), code))

    def reset(self, workdir):
        path = os.path.join(workdir, 'reset.txt')
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write('*nat\nCOMMIT\n')   # without --noflush: empties this namespace's nat table
        self.must([self.restore], path)

    def drift(self):
        """One rule of ours goes missing (someone ran iptables -D)."""
        self.must([self.ipt, '-w', '-t', 'nat', '-D', CHAIN, '2'])

    def ours_rules(self, workdir):
        log = os.path.join(workdir, 'save.txt')
        if os.path.exists(log):
            os.unlink(log)
        code = spawn([self.save, '-t', 'nat'], self.env, log_path=log)[0]
        if code != 0:
            raise RuntimeError('iptables-save failed')
        with open(log, encoding='utf-8') as handle:
            lines = handle.read().splitlines()
        return (sum(1 for line in lines if line.startswith('-A %s ' % CHAIN)),
                sum(1 for line in lines if line.startswith('-A POSTROUTING ') and line.endswith('-j ' + CHAIN)))


def count_lines(path):
    try:
        with open(path, encoding='utf-8') as handle:
            return sum(1 for _line in handle)
    except OSError:
        return 0


def mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except (OSError, TypeError):
        return None


def floor_row(spec, samples):
    return {'mode': 'floor', 'drift': False, 'size': spec['size'], 'cycles': len(samples),
            'cpu_ms': statistics.median(s[1] for s in samples) * 1000.0,
            'cpu_ms_max': max(s[1] for s in samples) * 1000.0,
            'wall_ms': statistics.median(s[0] for s in samples) * 1000.0,
            'peak_rss_mib': None, 'writes': 0, 'repaired': True, 'state_file_written': False}


def run_mode(node, spec, mode, drift, workdir, variant=None, floor_samples=None):
    """One mode's row.  With ``floor_samples`` (a list), each measured cycle is followed by one
    run of the floor's commands, appended there: the floor interleaved with the cycle, the chain
    in place as that cycle leaves it, so that the machine's load swings hit both alike."""
    size, cycles = spec['size'], spec['cycles']
    log = os.path.join(workdir, 'cycle.log')
    node.reset(workdir)
    upstream = [
        # EnsureChain: `-N` (exit 1 = already exists, fine), EnsureRule: `-C`, then `-A` if missing.
        ([node.ipt, '-w', '-t', 'nat', '-N', CHAIN], (0, 1), os.devnull),
        ([node.ipt, '-w', '-t', 'nat', '-C', 'POSTROUTING'] + spec['jump_args'], (0, 1), os.devnull),
        # ... and the whole chain rewritten in one restore, every cycle.
        ([node.restore, '--noflush'], (0,), spec['payload_file']),
    ]

    floor = [[spec['python'], '-I', '-S', '-c', 'pass'], [node.save, '-t', 'nat'], [node.save6, '-t', 'nat']]

    def floor_once():
        # What a no-drift cycle cannot do without: start the interpreter and
        # read both families, each run bare.
        wall = cpu = 0.0
        for argv in floor:
            code, w, c = spawn(argv, node.env)
            if code != 0:
                raise RuntimeError('%s exited %d' % (' '.join(argv), code))
            wall += w
            cpu += c
        return wall, cpu

    def cycle():
        if mode == 'floor':
            return floor_once()
        if mode != 'upstream':
            code, wall, cpu = spawn(variant['argv'], variant['env'], log_path=log)
            if code != 0:
                with open(log, encoding='utf-8') as handle:
                    raise RuntimeError('cycle exited %d: %s' % (code, handle.read()[-2000:]))
            return wall, cpu
        wall = cpu = 0.0
        for argv, ok, stdin in upstream:
            code, w, c = spawn(argv, node.env, stdin_path=stdin)
            if code not in ok:
                raise RuntimeError('%s exited %d' % (' '.join(argv), code))
            if argv[4:5] == ['-C'] and code == 1:   # the jump is missing: upstream appends it
                w2, c2 = spawn([node.ipt, '-w', '-t', 'nat', '-A', 'POSTROUTING'] + spec['jump_args'], node.env)[1:]
                w, c = w + w2, c + c2
            wall += w
            cpu += c
        return wall, cpu

    def peak():
        """Peak RSS (KiB) of one more cycle, run under ptrace (not timed)."""
        if mode == 'floor':
            return None
        if mode != 'upstream':
            return traced_peak(variant['argv'], variant['env'])[1]
        peaks = [traced_peak(argv, node.env, stdin)[1] for argv, _ok, stdin in upstream]
        return None if None in peaks else max(peaks)

    if mode == 'floor':
        if variant is not None:
            # The chain in place, as a no-drift cycle finds it (one cycle of ours, not timed): the
            # floor's iptables-save reads the N + 2 rules the cycle's own iptables-save reads.
            code = spawn(variant['argv'], variant['env'], log_path=log)[0]
            if code != 0 or node.ours_rules(workdir) != (size + 2, 1):
                raise RuntimeError('floor: the chain could not be put in place (exit %d, %r)'
                                   % (code, node.ours_rules(workdir)))
        return floor_row(spec, [cycle() for _i in range(cycles)])
    cycle()   # the first cycle creates the chain: setup, not recorded
    if node.ours_rules(workdir) != (size + 2, 1):
        raise RuntimeError('%s: after the first cycle the chain is %r, expected (%d, 1)'
                           % (mode, node.ours_rules(workdir), size + 2))
    writes0 = count_lines(spec['writes_file'])
    state0 = mtime(variant.get('state_file')) if variant else None
    samples = []
    for _i in range(cycles):
        if drift:
            node.drift()
        samples.append(cycle())
        if floor_samples is not None:
            floor_samples.append(floor_once())
    state = node.ours_rules(workdir)
    writes = cycles if mode == 'upstream' else count_lines(spec['writes_file']) - writes0
    state_written = bool(variant and mtime(variant.get('state_file')) != state0)
    peaks = []
    for _i in range(spec.get('peak_runs', 3)):
        if drift:
            node.drift()
        peaks.append(peak())
    return {
        'mode': mode, 'drift': drift, 'size': size, 'cycles': cycles,
        'cpu_ms': statistics.median(s[1] for s in samples) * 1000.0,
        'cpu_ms_max': max(s[1] for s in samples) * 1000.0,
        'wall_ms': statistics.median(s[0] for s in samples) * 1000.0,
        'peak_rss_mib': None if None in peaks else max(peaks) / 1024.0,
        'writes': writes,
        'repaired': state == (size + 2, 1),
        'state_file_written': state_written,
    }


def main(argv):
    refuse_unless_own_namespace('node_cycle.py')   # it writes the rules of where it runs
    with open(argv[0], encoding='utf-8') as handle:
        spec = json.load(handle)
    workdir = os.path.dirname(os.path.abspath(argv[0]))
    node = Node()
    out = []
    try:
        # The floor interleaved with each byte-compiled variant's no-drift cycles (so that "before"
        # and "ours" are measured alike); the row is the one taken with ours, what the target compares.
        floors = {}
        for variant in spec['ours']:
            if '.pyc' in variant['name']:
                floors[variant['name']] = []
            out.append(run_mode(node, spec, variant['name'], False, workdir, variant, floors.get(variant['name'])))
            if variant.get('drift'):
                out.append(run_mode(node, spec, variant['name'], True, workdir, variant))
        for drift in (False, True):
            out.append(run_mode(node, spec, 'upstream', drift, workdir))
        ours = floors.get('ours, .pyc')
        out.append(floor_row(spec, ours) if ours else run_mode(node, spec, 'floor', False, workdir, spec['ours'][0]))
    finally:
        node.reset(workdir)
    json.dump(out, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
