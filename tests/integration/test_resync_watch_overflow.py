"""The watcher against the real kernel when events are lost (issue 36;
_core/agent/watch.py, _core/node/nfevents.py).

ENOBUFS for real: the watcher is stopped (SIGSTOP, always continued, even on
failure) while the node's namespace commits one ``nft -f`` batch that adds
and deletes thousands of rules in a table of the test's own (``ip
imq-burst``, made and removed inside the node only, through the lab's guard)
and takes ours away in the same transaction.  The kernel queues every
rule's notification for the stopped watcher's socket; beyond its receive
buffer (the product's own ``SO_RCVBUF`` of 1 MiB, which the kernel doubles
to 2 MiB; ``net.core.rmem_max`` can only make it smaller, and is not
touched: this test sends several times that) it drops them and marks the
socket ENOBUFS.  Continued, the watcher must count an ``enobufs`` repair, have ours
back, and still be subscribed (a later flush is repaired as an event).

The safety net's tick, cheap when nothing changed: it asks the kernel's
ruleset generation (NFT_MSG_GETGEN) and reads the node only when the
generation moved since its last verified cycle (or an event, an overflow,
a signal or the config file says something may have changed)."""
import json
import os
import select
import shutil
import signal
import subprocess
import time

from ipmasq_lab import watchlab
from test_resync import Agent

# Rules added and deleted in the burst, each with a comment of COMMENT bytes:
# some 2 x RULES notifications of about 200 bytes, several times the 2 MiB the
# watcher's socket holds.
RULES = 12000
COMMENT = 'x' * 120
NFT = shutil.which('nft') or '/usr/sbin/nft'
# How long one tick of the lost-events script may take (a whole cycle on a busy machine).
TICK_LIMIT = 30.0


def burst_batch(tmp_path, policy):
    """An nft batch: a table of the test's own filled with RULES rules and
    deleted again, and ours taken away, in one transaction."""
    lines = ['add table ip imq-burst', 'add chain ip imq-burst c']
    lines += ['add rule ip imq-burst c counter comment "%s%d"' % (COMMENT, i) for i in range(RULES)]
    lines.append('delete table ip imq-burst')
    if policy == 'nftables':
        lines.append('delete table inet ip-masq-agent')
    else:
        lines.append('flush chain ip nat POSTROUTING')
    path = tmp_path / 'burst.nft'
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def stopped(rig, action):
    """Run ``action()`` while the watcher is stopped (SIGSTOP); it is always continued."""
    rig.watcher.send_signal(signal.SIGSTOP)
    try:
        time.sleep(0.2)
        return action()
    finally:
        rig.watcher.send_signal(signal.SIGCONT)


def nft(rig, *args):
    proc = rig.guarded([NFT] + list(args))
    assert proc.returncode == 0, proc.stderr
    return proc


def test_an_overflowed_socket_is_a_repair_and_the_watcher_stays_subscribed(tmp_path):
    batch = burst_batch(tmp_path, 'iptables')
    with watchlab.Rig(tmp_path, 'nft', 'iptables', agent_cls=Agent) as rig:
        rig.start('watch', interval='60s')
        writes = rig.agent.restores()
        stopped(rig, lambda: nft(rig, '-f', batch))
        assert not rig.ours() or rig.agent.restores() > writes
        assert watchlab.wait(rig.ours, 10), rig.log()
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_repairs_total', '{cause="enobufs"}') == 1, 10), \
            (rig.log(), rig.metric('ip_masq_agent_events_total'))
        assert rig.agent.restores() == writes + 1
        # The burst's table is gone again; nothing of it stays behind.
        assert rig.guarded([NFT, 'list', 'table', 'ip', 'imq-burst']).returncode != 0
        # Still subscribed: a later flush is an event, repaired within a second or two.
        assert watchlab.wait(lambda: rig.idle(0.3), 10)
        rig.flush('iptables -t nat -F POSTROUTING')
        assert watchlab.wait(rig.ours, 3), rig.log()
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_repairs_total', '{cause="event"}') == 1, 3)
        assert rig.metric('ip_masq_agent_repairs_total', '{cause="timer"}') == 0
        assert rig.stop() == 0
        assert 'Traceback' not in rig.log()


def test_idle_safety_net_ticks_read_nothing_and_keep_the_metrics_fresh(tmp_path):
    with watchlab.Rig(tmp_path, 'nft', 'iptables', agent_cls=Agent) as rig:
        rig.start('watch', interval='2s')
        # The cycles after our own write (its events, the first tick) read and find it in order.
        time.sleep(2.5)
        saves = len([c for c in rig.agent.calls() if c.startswith('iptables-save')])
        runs = rig.metric('ip_masq_agent_runs_total', '{result="ok"}')
        last = rig.metric('ip_masq_agent_last_run_timestamp_seconds')
        time.sleep(6.5)
        # Three ticks or so, and not one iptables-save: the generation said nothing changed.
        assert len([c for c in rig.agent.calls() if c.startswith('iptables-save')]) == saves, rig.agent.calls()
        assert rig.metric('ip_masq_agent_runs_total', '{result="ok"}') >= runs + 2
        assert rig.metric('ip_masq_agent_last_run_timestamp_seconds') > last + 3
        # A flush while it is stopped past its tick: repaired when it goes on.
        stopped(rig, lambda: (rig.flush('iptables -t nat -F POSTROUTING'), time.sleep(2.5)))
        assert watchlab.wait(rig.ours, 5), rig.log()
        assert rig.stop() == 0
        assert 'Traceback' not in rig.log()


# A watcher whose subscription loses every event (it never reports one, nor an
# overflow): only the kernel's generation can tell its safety net that
# something changed.  The real cycle, the real kernel, in the node's namespace;
# the test says when to tick (a line on stdin: the loop's own ``Watcher.tick``),
# the script what the tick did.
LOST = r'''
import json, os, sys
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync, watch


class Lost:
    def __init__(self):
        self.r, self.w = os.pipe()

    def fileno(self):
        return self.r

    def read(self):
        return [], False

    def close(self):
        os.close(self.r)
        os.close(self.w)


opts = resync.parse_args(sys.argv[1:])
watcher = watch.Watcher(opts, lambda level, msg: sys.stderr.write(msg + '\n'), resync.run_cycle, events_factory=Lost)
watcher.subscribe()
watcher.cycle('start')
for line in sys.stdin:
    skipped = watcher.tick()        # the loop's own tick, when it is due
    print(json.dumps({'skipped': skipped, 'code': watcher.last_code}), flush=True)
'''


def line_within(proc, held, limit):
    """The next line ``proc`` prints within ``limit`` seconds, read from its
    stdout's descriptor with select (``held``: ``{'rest': bytes read past
    the last line, 'read': everything read}``, kept between calls).  No line
    by then, or the end of its output: it is killed, and the test fails with
    what it printed so far and its stderr."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + limit
    while b'\n' not in held['rest']:
        left = deadline - time.monotonic()
        ready = left > 0 and select.select([fd], [], [], left)[0]
        chunk = os.read(fd, 65536) if ready else b''
        if not chunk:
            proc.kill()
            try:
                err = proc.communicate(timeout=10)[1]
            except subprocess.TimeoutExpired:
                err = '(its stderr still open 10 s after the kill)'
            raise AssertionError('no line within %gs (%s); its output so far: %r; its stderr: %s' % (
                limit, 'its output ended' if ready else 'timed out', held['read'], err))
        held['rest'] += chunk
        held['read'] += chunk
    line, _sep, held['rest'] = held['rest'].partition(b'\n')
    return line.decode()


def test_a_change_whose_events_were_lost_is_read_at_the_next_tick(tmp_path):
    with watchlab.Rig(tmp_path, 'nft', 'iptables', agent_cls=Agent) as rig:
        argv = rig.argv('--mode', 'watch', '--resync-interval', '60s')
        argv[argv.index('-c') + 1] = LOST
        proc = rig.topo.node.popen(argv, env=rig.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        rig.procs.append(proc)
        held = {'rest': b'', 'read': b''}

        def tick():
            proc.stdin.write('tick\n')
            proc.stdin.flush()
            # Read with a deadline: a hung watcher fails the test, it does not hang the run.
            return json.loads(line_within(proc, held, TICK_LIMIT))

        assert tick() == {'skipped': False, 'code': 0}        # the start cycle wrote: the first tick reads
        assert rig.ours()
        assert tick() == {'skipped': True, 'code': 0}
        saves = len([c for c in rig.agent.calls() if c.startswith('iptables-save')])
        rig.flush('iptables -t nat -F POSTROUTING')
        assert not rig.ours()
        # No event told it; the generation moved: the tick reads the node and repairs.
        assert tick() == {'skipped': False, 'code': 0}
        assert rig.ours()
        assert len([c for c in rig.agent.calls() if c.startswith('iptables-save')]) > saves
        assert tick() == {'skipped': False, 'code': 0}        # its own write moved it again
        assert tick() == {'skipped': True, 'code': 0}
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


# The safety net's question and the run's own questions about the kernel, asked on one
# netlink socket (``nfnetlink.exist``; ``generation()`` is that question alone), inside
# a namespace of the test's own: the generation every committed transaction moves, and
# the tables it made.
ASK = r'''
import json
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import nfnetlink
print(json.dumps([nfnetlink.generation()] + nfnetlink.exist(
    [('generation',), ('tables', 'ip'), ('table', 'ip', 'imq-gen'), ('generation',)])))
'''


def test_the_generation_is_asked_with_the_other_questions_and_moves_with_each_commit():
    import json
    import sys
    from ipmasq_lab import cni, netlab

    env = {'PYTHONPATH': netlab.COLLECTIONS, 'PATH': '/usr/sbin:/usr/bin:/sbin:/bin'}
    with netlab.Netns('gen') as ns:
        def ask():
            return json.loads(ns.exec([sys.executable, '-S', '-c', ASK], env=env).stdout)

        gen, first, tables, table, again = ask()
        assert isinstance(gen, int) and gen == first == again and (tables, table) == ([], False)
        for done, verb, there in ((1, 'add', ['imq-gen']), (2, 'delete', [])):
            ns.exec(cni.guarded(ns, [NFT, verb, 'table', 'ip', 'imq-gen']))
            now, first, tables, table, again = ask()
            assert (now, first, again, tables, table) == (gen + done,) * 3 + (there, bool(there))
