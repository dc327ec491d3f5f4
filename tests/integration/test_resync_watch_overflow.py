"""The watcher against the real kernel when events are lost (issue 36;
_core/agent/watch.py, _core/node/nfevents.py).

ENOBUFS for real: the watcher is stopped (SIGSTOP, always continued, even on
failure) while the node's namespace commits one ``nft -f`` batch that adds
and deletes thousands of rules in a table of the test's own (``ip
imq-burst``, made and removed inside the node only, through the lab's guard)
and takes ours away in the same transaction.  The kernel queues every
rule's notification for the stopped watcher's socket; beyond its receive
buffer (the product's own ``SO_RCVBUF`` of 1 MiB, which the kernel doubles:
this test sends several times that) it drops them and marks the socket
ENOBUFS.  Continued, the watcher must count an ``enobufs`` repair, have ours
back, and still be subscribed (a later flush is repaired as an event)."""
import shutil
import signal
import time

from ipmasq_lab import watchlab
from test_resync import Agent

# Rules added and deleted in the burst, each with a comment of COMMENT bytes:
# some 2 x RULES notifications of about 200 bytes, several times the 2 MiB the
# watcher's socket holds.
RULES = 12000
COMMENT = 'x' * 120
NFT = shutil.which('nft') or '/usr/sbin/nft'


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

