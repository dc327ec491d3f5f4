"""The resync's watch mode (issue 36; _core/agent/watch.py): one long-running
process in the node's namespace, woken by nf_tables' own change events.

Real packets: a pod sends a UDP packet every 20 ms (a new socket each, so a
new conntrack entry meets the nat table as it is) to a receiver outside
(documentation addresses, ipmasq_lab.watchlab); mid-stream the test takes
ours away (``iptables -t nat -F POSTROUTING``, an ``iptables-restore`` of a
nat table without ours, ``nft flush ruleset``, deleting our nft table),
always inside the node's namespace through the lab's guard.  The receiver
logs each packet's source; the SNAT gap is the first to the last packet
with the wrong source.  IMQ_WATCH_FLUSHES (default 2) flushes per kind;
the issue's run is IMQ_WATCH_FLUSHES=20 (and bench/watch_bench.py prints
the table).

Also: our own writes cause no second write, a burst is a bounded number of
repairs, a remover loop makes it back off (journal line and metric),
SIGHUP runs a cycle at once, SIGTERM ends it with 0, and --mode auto polls
on iptables-legacy and says so."""
import os
import re
import signal
import time

import pytest

from ipmasq_lab import watchlab
from test_resync import Agent

from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync, watch

FLUSHES = int(os.environ.get('IMQ_WATCH_FLUSHES', '2'))
# After a flush: how long the test waits for ours to be back (and the window its wrong packets are counted in).
SETTLE = 2.0
# The back-off's journal line, the whole message on it (plain log format): the last change, what stands in our place.
BACK_OFF = re.compile(r'%s: warning: backing off: %d repairs in the last %s, another writer keeps removing ours '
                      r'\(the last change: (?P<change>.+?); (?P<standing>the nat postrouting path now holds .+)\); '
                      r'ours is put back at the next safety-net cycle in \d+s\.' % (
                          re.escape(resync.PROG), watch.LIMIT, re.escape(watch.seconds_text(watch.WINDOW))))


def back_off(log):
    """The one line of ``log`` that says the watcher backs off, matched whole (BACK_OFF)."""
    said = [line for line in log.splitlines() if 'backing off' in line]
    assert len(said) == 1, said
    match = BACK_OFF.fullmatch(said[0])
    assert match, said[0]
    return match


@pytest.mark.parametrize('tools,policy', [('nft', 'iptables'), ('nft', 'nftables')],
                         ids=['iptables-nft', 'nftables'])
def test_snat_is_back_within_a_second_of_each_flush(tmp_path, tools, policy):
    kinds = watchlab.KINDS[policy]
    with watchlab.Rig(tmp_path, tools, policy, agent_cls=Agent) as rig:
        rig.start('watch', interval='60s')
        writes = rig.agent.restores()
        seconds = len(kinds) * FLUSHES * (SETTLE + 0.3) + 1.5
        out, send, _recv = rig.stream(seconds)
        time.sleep(0.5)
        flushes = []
        for kind in kinds:
            for _i in range(FLUSHES):
                flushes.append((kind, time.monotonic()))
                rig.flush(kind)
                assert watchlab.wait(rig.ours, SETTLE), (kind, rig.log())
                time.sleep(max(0.0, flushes[-1][1] + SETTLE - time.monotonic()))
                assert rig.idle(0.2)
                # One repair per flush: our own write's events caused no second write.
                assert rig.agent.restores() == writes + 1, (kind, rig.agent.calls(), rig.log())
                writes += 1
        send.wait(timeout=seconds + 10)
        time.sleep(0.3)
        packets = watchlab.received(out)
        gaps = watchlab.gaps(packets, [at for _kind, at in flushes], SETTLE)
        assert len(packets) > 0.5 * seconds / watchlab.PERIOD, len(packets)
        # The stream saw the flushes at all (a gap of 0 everywhere would prove nothing).
        assert max(gaps) > 0, gaps
        assert max(gaps) <= 1.0, list(zip([k for k, _at in flushes], gaps))
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_repairs_total', '{cause="event"}') == len(flushes), 3)
        assert rig.metric('ip_masq_agent_event_repair_seconds_count') == len(flushes)
        assert rig.metric('ip_masq_agent_events_total') > 0
        assert rig.stop() == 0
        assert 'Traceback' not in rig.log()


def test_a_burst_is_a_bounded_number_of_repairs_and_a_remover_loop_makes_it_back_off(tmp_path):
    with watchlab.Rig(tmp_path, 'nft', 'iptables', agent_cls=Agent) as rig:
        rig.start('watch', interval='60s')
        writes = rig.agent.restores()
        # A burst: 50 flushes as fast as they run (about 0.4 s here). The debounce
        # waits for a pause, so the burst is a few repairs (3 to 5 here), not 50:
        # the test holds it to a fifth.
        burst = rig.remover('iptables -t nat -F POSTROUTING', 0.0, 20, count=50)
        assert '"runs": 50' in burst.communicate(timeout=60)[0]
        assert watchlab.wait(lambda: rig.idle(0.5), 10)
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_repairs_total', '{cause="event"}') >= 1, 3)
        burst_repairs = rig.metric('ip_masq_agent_repairs_total', '{cause="event"}')
        assert 1 <= burst_repairs <= 10 and rig.agent.restores() > writes, (burst_repairs, rig.log())
        assert rig.ours()
        # A remover every 100 ms: at most LIMIT repair cycles in the window (the
        # burst's included), then it backs off and says so. (A cycle whose write
        # met the remover's may run iptables-restore twice: cycles are counted.)
        # Bounded at 90 s (a loaded machine repairs slower; the loop ends at the back-off).
        loop = rig.remover('iptables -t nat -F POSTROUTING', 0.1, 90)
        assert watchlab.wait(lambda: 'backing off' in rig.log(), 85), rig.log()
        loop.kill()
        loop.wait(timeout=10)
        assert watchlab.wait(lambda: rig.idle(0.5), 10)
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_repairs_total', '{cause="event"}') == watch.LIMIT, 3), \
            rig.metric('ip_masq_agent_repairs_total', '{cause="event"}')
        assert rig.stop() == 0
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_backoffs_total') == 1, 3)
        said = back_off(rig.log())
        assert 'committed by iptables' in said['change'] and 'delrule ip nat' in said['change'], said[0]
        # What stands in our place: nothing (the remover flushes the chain).
        assert said['standing'] == 'the nat postrouting path now holds no SNAT rule (flushed)', said[0]
        assert 'Traceback' not in rig.log()


def test_the_back_off_names_the_audit_s_owner_of_the_rule_in_our_place(tmp_path):
    """A remover that puts Docker's default-bridge MASQUERADE where ours was
    (an iptables-restore of the nat table, every 100 ms): the back-off line
    names the committing process and the rule now in the postrouting path,
    with its owner as the audit tells it (docker)."""
    with watchlab.Rig(tmp_path, 'nft', 'iptables', agent_cls=Agent) as rig:
        rig.start('watch', interval='60s')
        # Bounded at 90 s (a loaded machine repairs slower; the loop ends at the back-off).
        loop = rig.remover('docker restore', 0.1, 90)
        assert watchlab.wait(lambda: 'backing off' in rig.log(), 85), rig.log()
        loop.kill()
        loop.wait(timeout=10)
        assert rig.stop() == 0
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_backoffs_total') == 1, 3)
        # One line says it (the whole message on it), once.
        said = back_off(rig.log())
        assert 'committed by iptables-restor' in said['change'], said[0]
        assert said['standing'] == ("the nat postrouting path now holds docker's MASQUERADE "
                                    "(-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE)"), said[0]
        assert 'Traceback' not in rig.log()


def test_sighup_runs_a_cycle_at_once_and_sigterm_ends_it_with_0(tmp_path):
    with watchlab.Rig(tmp_path, 'nft', 'iptables', agent_cls=Agent) as rig:
        rig.start('watch', interval='60s')
        rig.agent.write('nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 198.51.100.0/24\n')
        assert not watchlab.wait(lambda: '198.51.100.0/24' in rig.topo.backend.save(rig.topo.node), 0.5)
        rig.watcher.send_signal(signal.SIGHUP)
        assert watchlab.wait(lambda: '198.51.100.0/24' in rig.topo.backend.save(rig.topo.node), 3), rig.log()
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_repairs_total', '{cause="signal"}') == 1, 3)
        started = time.monotonic()
        assert rig.stop(signal.SIGTERM) == 0
        assert time.monotonic() - started < 3
        assert 'Traceback' not in rig.log()


def test_a_timer_tick_is_the_safety_net_and_auto_polls_on_iptables_legacy(tmp_path):
    with watchlab.Rig(tmp_path, 'legacy', 'iptables', agent_cls=Agent) as rig:
        rig.start('auto', interval='1s')
        assert 'iptables-legacy has no events: polling every 1s.' in rig.log()
        rig.flush('iptables -t nat -F POSTROUTING')
        assert not rig.ours()
        assert watchlab.wait(rig.ours, 3), rig.log()
        # The metrics file is written at the cycle's end, just after its write.
        assert watchlab.wait(lambda: rig.metric('ip_masq_agent_repairs_total', '{cause="timer"}') >= 1, 3)
        assert rig.stop(signal.SIGINT) == 0
