"""New connections from a pod, one UDP packet each (part ``conn``, pod side).

Runs INSIDE the pod network namespace bench/run.py makes (``nft_bench.py``),
with the node's Python; prints one JSON document.  Never run it in the root
namespace: it sends packets to DST (a documentation address, routed in the
bench's topology to the node namespace, NATed there and dropped on an
interface with no peer).

    pod_send.py DST COUNT SECONDS [SRC]

SRC (part ``extconn``'s probes): the socket is bound to this address of the
pod first, so the packets leave from it.

One socket, one datagram per destination port 1, 2, 3, ...: every packet is a
new conntrack tuple, so the node's nat POSTROUTING chain is evaluated once per
packet.  Bounded both ways: at most COUNT packets (at most 65,535) and at
most SECONDS of sending (checked every BATCH packets).

Measured around the send loop only (not this interpreter's start):
- ``cpu``: this process's CPU time (CLOCK_PROCESS_CPUTIME_ID, the scheduler's
  exact runtime).  A packet is forwarded, NATed and dropped in softirq context
  in the sending task (veth -> backlog -> net_rx on the same CPU, run when
  the send re-enables bottom halves), and this kernel has no
  IRQ_TIME_ACCOUNTING, so that softirq time is in the task's runtime;
- ``stat_busy``/``stat_softirq``: the all-CPU ``/proc/stat`` busy time
  (user+nice+system+irq+softirq) and softirq time, in seconds: catches
  softirq work deferred to ksoftirqd or another CPU, but also counts every
  other tenant of the machine (10 ms ticks);
- ``wall``: elapsed seconds of the loop.
"""
import json
import os
import resource
import socket
import sys
import time

from nsguard import refuse_unless_own_namespace  # bench/, this script's directory

BATCH = 16
MAX_COUNT = 65535
MAX_SECONDS = 10.0


def proc_stat():
    """(busy, softirq) seconds of all CPUs from /proc/stat."""
    with open('/proc/stat', encoding='ascii') as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user)
    tick = float(os.sysconf('SC_CLK_TCK'))
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / tick, fields[6] / tick


def send(dst, count, seconds, src=None):
    count = min(int(count), MAX_COUNT)
    seconds = min(float(seconds), MAX_SECONDS)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if src:
        sock.bind((src, 0))
    payload = b'x'
    sent = errors = 0
    port = 1
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    stat0 = proc_stat()
    cpu0 = time.process_time()
    start = time.perf_counter()
    deadline = start + seconds
    sendto = sock.sendto
    while sent < count:
        for _i in range(min(BATCH, count - sent)):
            try:
                sendto(payload, (dst, port))
            except OSError:
                errors += 1
            sent += 1
            port += 1
        if time.perf_counter() >= deadline:
            break
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    stat1 = proc_stat()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    sock.close()
    return {'attempts': sent, 'errors': errors, 'packets': sent - errors, 'wall': wall, 'cpu': cpu,
            'utime': ru1.ru_utime - ru0.ru_utime, 'stime': ru1.ru_stime - ru0.ru_stime,
            'stat_busy': stat1[0] - stat0[0], 'stat_softirq': stat1[1] - stat0[1],
            'timed_out': sent < count}


def main(argv):
    refuse_unless_own_namespace('pod_send.py')   # its packets must never leave the bench's namespaces
    if len(argv) not in (3, 4):
        sys.stderr.write(__doc__)
        return 2
    json.dump(send(*argv), sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
