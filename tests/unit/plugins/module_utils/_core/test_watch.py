"""The watch mode's decisions (_core/agent/watch.py) with a stand-in event
source: an overflowed socket (ENOBUFS) is a cycle at once, a burst is one
cycle, events in tables the policy cannot live in are none, more than LIMIT
repairs in WINDOW back off (one journal line, counted) until the next
safety-net cycle; and nf_tables' messages as nfevents.py reads them.  The
real kernel's events and packets: tests/integration/test_resync_watch.py."""
import os
import socket
import threading
import time

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._audit import owners
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import metrics, owner_table, resync, standing, watch
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import attribution
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.conds import Cond
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import runner
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import nfevents
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.nfevents import Event

DELRULE = Event('delrule', 'ip', 'nat', None, None)
GEN = Event('newgen', None, None, 4242, 'iptables')
FILTER = Event('delrule', 'ip', 'filter', None, None)
# What the rig's back-off reads in our place (standing.words; the real read: tests/integration/test_resync_watch.py).
STANDING = "the nat postrouting path now holds docker's MASQUERADE (-A POSTROUTING -s 172.17.0.0/16 -j MASQUERADE)"


class FakeEvents:
    """A selectable stand-in for nfevents.Events."""

    def __init__(self):
        self.r, self.w = socket.socketpair()
        self.queue = []
        self.overflow = False
        self.lock = threading.Lock()

    def fileno(self):
        return self.r.fileno()

    def push(self, events, overflow=False):
        with self.lock:
            self.queue.extend(events)
            self.overflow = self.overflow or overflow
        self.w.send(b'x')

    def read(self):
        self.r.setblocking(False)
        try:
            while self.r.recv(4096):
                pass
        except BlockingIOError:
            pass
        with self.lock:
            out, overflow, self.queue, self.overflow = self.queue, self.overflow, [], False
        return out, overflow

    def close(self):
        self.r.close()
        self.w.close()


@pytest.fixture
def rig():
    cycles = []
    lines = []
    writes = {'next': True}

    def run_cycle(_opts, _log, seen):
        cycles.append(seen['watch']['cause'])
        if seen['watch']['cause'] == 'timer':
            watcher.flags['stop'] = 15          # end the loop after the tick
        seen['result'] = {'actions': ['IPv4: repaired'] if writes['next'] else [], 'selected_backend': 'iptables',
                          'iptables_flavour': 'nf_tables'}
        return resync.EXIT_OK

    opts = resync.parse_args(['--mode', 'watch', '--resync-interval', '30s'])
    events = FakeEvents()
    watcher = watch.Watcher(opts, lambda level, msg: lines.append((level, msg)), run_cycle, events_factory=lambda: events,
                            generation=lambda: 7, standing=lambda _opts: STANDING)
    watcher.subscribe()
    watcher.next_tick = time.monotonic() + 30
    yield watcher, events, cycles, lines, writes
    events.close()


def test_an_overflowed_socket_is_a_cycle_at_once(rig):
    watcher, _events, cycles, _lines, _writes = rig
    started = time.monotonic()
    watcher.on_events([], True)
    assert cycles == ['enobufs'] and time.monotonic() - started < watch.QUIET


def test_a_burst_is_one_cycle_after_the_writer_s_batch_ended(rig):
    watcher, events, cycles, _lines, _writes = rig

    def writer():
        for _i in range(10):
            time.sleep(0.01)
            events.push([DELRULE, GEN])
    thread = threading.Thread(target=writer)
    thread.start()
    watcher.on_events([DELRULE], False)
    thread.join()
    assert cycles == ['event']
    # Whatever came after the debounce's bound waits for the next read: at most one cycle more.
    leftover, _overflow = events.read()
    assert len(leftover) <= 20


def test_events_of_tables_the_policy_cannot_live_in_cause_no_cycle(rig):
    watcher, _events, cycles, _lines, _writes = rig
    assert not watcher.relevant([FILTER, GEN])
    assert watcher.relevant([Event('deltable', 'inet', 'ip-masq-agent', None, None)])
    assert watcher.relevant([Event('deltable', 'ip6', 'nat', None, None)])
    watcher.on_events([FILTER], False)
    assert cycles == []


def test_more_than_limit_repairs_a_minute_back_off_until_the_next_tick(rig):
    watcher, _events, cycles, lines, _writes = rig
    for _i in range(watch.LIMIT):
        watcher.on_events([DELRULE, GEN], False)
    assert cycles == ['event'] * watch.LIMIT
    watcher.on_events([DELRULE, GEN], False)
    watcher.on_events([DELRULE, GEN], False)
    assert cycles == ['event'] * watch.LIMIT          # backed off: no seventh repair
    said = [msg for level, msg in lines if 'backing off' in msg]
    assert len(said) == 1 and 'delrule ip nat' in said[0] and 'committed by iptables (pid 4242)' in said[0], said
    assert '(the last change: delrule ip nat; committed by iptables (pid 4242); %s); ours is put back' % STANDING \
        in said[0], said
    assert watcher.pending['backoffs'] == 1
    # The safety-net tick repairs and ends the back-off.
    watcher.next_tick = time.monotonic() - 1
    watcher.loop()
    assert cycles[-1] == 'timer' and not watcher.backing_off


def test_reads_that_find_no_drift_are_no_repairs(rig):
    watcher, _events, cycles, lines, writes = rig
    writes['next'] = False
    for _i in range(watch.LIMIT * 3):
        watcher.on_events([DELRULE], False)
    assert cycles == ['event'] * watch.LIMIT * 3 and not [m for _l, m in lines if 'backing off' in m]


def _nl(msg_type, family, attrs):
    payload = bytes((family, 0, 0, 0)) + attrs
    return (16 + len(payload)).to_bytes(4, 'little') + ((10 << 8) | msg_type).to_bytes(2, 'little') + \
        b'\0\0' + b'\0' * 8 + payload


def _attr(kind, data):
    size = 4 + len(data)
    return size.to_bytes(2, 'little') + kind.to_bytes(2, 'little') + data + b'\0' * (-size % 4)


def test_nfevents_reads_the_table_and_the_committing_process():
    data = _nl(8, 2, _attr(1, b'nat\0') + _attr(2, b'POSTROUTING\0')) + \
        _nl(15, 0, _attr(1, (7).to_bytes(4, 'big')) + _attr(2, (4242).to_bytes(4, 'big')) + _attr(3, b'nft\0'))
    if nfevents._int(b'\x01\x00', 0, 2) != 1:      # a big-endian host: the header is in host order
        pytest.skip('little-endian layout built here')
    assert nfevents.parse(data) == [Event('delrule', 'ip', 'nat', None, None), Event('newgen', None, None, 4242, 'nft')]


def test_the_watch_counters_are_carried_from_cycle_to_cycle(tmp_path):
    """repairs by cause, events, back-offs and the event-to-repair histogram
    survive in the textfile (a restarted watcher counts on); a timer-mode
    cycle's file has none of them."""
    directory = str(tmp_path)
    text, _problem = metrics.update(directory, 'ok', 0.01, now=1000.0, booted=1.0)
    assert metrics.REPAIRS not in text and metrics.EVENT_REPAIR not in text
    metrics.update(directory, 'ok', 0.01, now=1001.0, booted=1.0,
                   watch={'cause': 'event', 'wrote': True, 'events': 7, 'backoffs': 1, 'event_seconds': 0.2})
    text, problem = metrics.update(directory, 'ok', 0.01, now=1002.0, booted=1.0,
                                   watch={'cause': 'timer', 'wrote': False, 'events': 3, 'backoffs': 0})
    assert problem is None
    samples = metrics.parse(text)
    assert samples[(metrics.REPAIRS, (('cause', 'event'),))] == 1
    assert samples[(metrics.REPAIRS, (('cause', 'timer'),))] == 0
    assert samples[(metrics.EVENTS, ())] == 10 and samples[(metrics.BACKOFFS, ())] == 1
    assert samples[(metrics.EVENT_REPAIR + '_bucket', (('le', '0.25'),))] == 1
    assert samples[(metrics.EVENT_REPAIR + '_bucket', (('le', '0.1'),))] == 0
    assert samples[(metrics.EVENT_REPAIR + '_bucket', (('le', '+Inf'),))] == 1
    assert samples[(metrics.EVENT_REPAIR + '_count', ())] == 1
    assert samples[(metrics.LAST_EVENT_REPAIR, ())] == 0.2
    assert '# TYPE %s histogram' % metrics.EVENT_REPAIR in text


def test_a_back_off_is_counted_in_the_file_between_cycles(tmp_path):
    directory = str(tmp_path)
    assert not metrics.count_between(directory, events=3, backoffs=1)        # no cycle's file yet
    rules = {('ipv4', 'iptables'): 2, ('ipv6', 'iptables'): 0, ('ipv4', 'nftables'): 0, ('ipv6', 'nftables'): 0}
    metrics.update(directory, 'ok', 0.01, now=1000.0, booted=1.0, rules=rules,
                   watch={'cause': 'start', 'wrote': True, 'events': 2})
    assert metrics.count_between(directory, events=3, backoffs=1)
    with open(str(tmp_path / metrics.FILE_NAME)) as handle:
        text = handle.read()
    samples = metrics.parse(text)
    assert samples[(metrics.BACKOFFS, ())] == 1 and samples[(metrics.EVENTS, ())] == 5
    assert samples[(metrics.REPAIRS, (('cause', 'start'),))] == 1
    assert samples[(metrics.RULES, (('family', 'ipv4'), ('backend', 'iptables')))] == 2
    assert samples[(metrics.LAST_RUN, ())] == 1000.0
    assert text.count('# TYPE %s ' % metrics.BACKOFFS) == 1


def test_the_back_off_names_the_last_transaction_and_its_writer():
    ours = [Event('newrule', 'ip', 'nat', None, None), Event('newgen', None, None, 7, 'iptables-restor')]
    theirs = [DELRULE, DELRULE, GEN]
    assert watch.describe(ours + theirs) == 'delrule ip nat (x2); committed by iptables (pid 4242)'
    assert watch.describe([DELRULE]) == 'delrule ip nat'
    # Our own repair's transaction last (its events read after the remover's): the remover's is named.
    assert watch.describe(theirs + ours, own=[7]) == 'delrule ip nat (x2); committed by iptables (pid 4242)'
    assert watch.describe(theirs + ours) == 'newrule ip nat; committed by iptables-restor (pid 7)'
    # Only ours: ours is what there is to name.
    assert watch.describe(ours, own=[7]) == 'newrule ip nat; committed by iptables-restor (pid 7)'


class Node:
    """The stand-in node of the safety net's shortcut: its nf_tables generation, which
    every cycle that writes moves (as the kernel does); cycles by cause."""

    def __init__(self, tmp_path):
        self.gen = 100
        self.drift = False
        self.cycles = []
        self.watcher = None
        self.config = tmp_path / 'config'
        self.config.write_text('nonMasqueradeCIDRs: []\n')
        self.metrics = tmp_path / 'metrics'
        self.metrics.mkdir()

    def run_cycle(self, opts, log, seen):
        self.cycles.append(seen['watch']['cause'])
        if seen['watch']['cause'] == 'timer':
            self.watcher.flags['stop'] = 15         # a loop ends after its tick's cycle
        actions = ['IPv4: repaired'] if self.drift else []
        if self.drift:
            self.gen += 1
            self.drift = False
        seen['result'] = {'actions': actions, 'selected_backend': 'iptables', 'iptables_flavour': 'nf_tables'}
        seen['policy'] = None
        code = resync.EXIT_OK
        resync._write_metrics(opts, log, seen, code, 0.01)
        return code


@pytest.fixture
def shortcut(tmp_path):
    node = Node(tmp_path)
    opts = resync.parse_args(['--mode', 'watch', '--resync-interval', '30s', '--config', str(node.config),
                              '--metrics-dir', str(node.metrics)])
    events = FakeEvents()
    watcher = watch.Watcher(opts, lambda level, msg: None, node.run_cycle, events_factory=lambda: events,
                            generation=lambda: node.gen)
    node.watcher = watcher
    watcher.subscribe()
    watcher.stop = lambda: None         # the loop ends after a tick's cycle, still subscribed
    watcher.wake_r, watcher.wake_w = os.pipe()
    yield watcher, node, events
    events.close()
    os.close(watcher.wake_r)
    os.close(watcher.wake_w)


def tick(watcher):
    """One safety-net tick, the one the loop runs when its tick is due
    (``Watcher.tick``): whether it read nothing."""
    watcher.next_tick = time.monotonic() - 1
    watcher.backing_off = True
    skipped = watcher.tick()
    # The tick ends a back-off, whether it read or not.
    assert not watcher.backing_off
    watcher.flags['stop'] = None
    return skipped


def bounded_loop(watcher, limit=5.0):
    """The watcher's loop until its tick's cycle ends it; stopped after ``limit`` s all the same."""
    def stop():
        watcher.flags['stop'] = 15
        os.write(watcher.wake_w, b'x')
    timer = threading.Timer(limit, stop)
    timer.start()
    started = time.monotonic()
    try:
        watcher.loop()
    finally:
        timer.cancel()
    assert time.monotonic() - started < limit, 'the tick ran no cycle'
    watcher.flags['stop'] = None


def ok_runs(node):
    samples = metrics.parse((node.metrics / metrics.FILE_NAME).read_text())
    return samples[(metrics.RUNS, (('result', 'ok'),))], samples[(metrics.LAST_RUN, ())]


def test_a_tick_reads_nothing_when_the_generation_is_the_verified_one(shortcut):
    watcher, node, _events = shortcut
    node.drift = True
    watcher.cycle('start')                   # it wrote: the next tick reads again
    assert not tick(watcher) and node.cycles == ['start', 'timer']
    runs, last = ok_runs(node)
    time.sleep(0.01)
    for _i in range(3):
        assert tick(watcher)
    assert node.cycles == ['start', 'timer']
    # Counted as runs that succeeded, the timestamps now (a staleness alert stays quiet).
    runs_after, last_after = ok_runs(node)
    assert runs_after == runs + 3 and last_after > last
    assert watcher.next_tick > time.monotonic() + 29


def test_a_generation_that_moved_while_events_were_lost_is_a_whole_cycle(shortcut):
    watcher, node, _events = shortcut
    watcher.cycle('start')
    assert tick(watcher)
    # Another writer took ours away; its events never arrived (lost): only the generation says so.
    node.gen += 1
    node.drift = True
    assert not tick(watcher) and node.cycles == ['start', 'timer'] and not node.drift
    # That cycle wrote (the generation moved again): the next tick reads too, then they are cheap again.
    assert not tick(watcher) and tick(watcher)
    assert node.cycles == ['start', 'timer', 'timer']


def test_an_event_an_overflow_a_signal_or_a_new_config_file_is_a_whole_cycle(shortcut):
    watcher, node, events = shortcut
    watcher.cycle('start')
    assert tick(watcher)
    # The loop reads what is waiting, then its tick reads the node: an event in
    # another table (no cycle of its own), an overflow while backing off (none either).
    for push, backing_off in (([FILTER, GEN], False), False), (([], True), True):
        events.push(*push)
        watcher.backing_off = backing_off
        watcher.next_tick = time.monotonic() + 0.3
        bounded_loop(watcher)
        assert tick(watcher)
    watcher._on_hup(1, None)
    watcher.flags['hup'] = False
    assert not tick(watcher) and tick(watcher)
    node.config.write_text('nonMasqueradeCIDRs: [10.0.0.0/8]\n')
    assert not tick(watcher) and tick(watcher)
    assert node.cycles == ['start'] + ['timer'] * 4


def test_no_generation_no_shortcut(shortcut):
    watcher, node, _events = shortcut
    watcher.generation = lambda: None
    watcher.cycle('start')
    assert not tick(watcher) and not tick(watcher)
    assert node.cycles == ['start', 'timer', 'timer']


def test_a_verified_tick_is_counted_as_a_run_and_keeps_the_cycle_s_lines(tmp_path):
    directory = str(tmp_path)
    assert not metrics.count_verified(directory, 0.001, events=2)           # no cycle's file yet
    rules = {('ipv4', 'iptables'): 2, ('ipv6', 'iptables'): 0, ('ipv4', 'nftables'): 0, ('ipv6', 'nftables'): 0}
    metrics.update(directory, 'ok', 0.02, config_valid=True, now=1000.0, booted=1.0, rules=rules,
                   watch={'cause': 'start', 'wrote': True, 'events': 2})
    assert metrics.count_verified(directory, 0.001, events=3, now=1060.0)
    with open(str(tmp_path / metrics.FILE_NAME)) as handle:
        text = handle.read()
    samples = metrics.parse(text)
    assert samples[(metrics.RUNS, (('result', 'ok'),))] == 2
    assert samples[(metrics.LAST_RUN, ())] == 1060.0 and samples[(metrics.LAST_SUCCESS, ())] == 1060.0
    assert samples[(metrics.DURATION, ())] == 0.001
    assert samples[(metrics.EVENTS, ())] == 5 and samples[(metrics.REPAIRS, (('cause', 'start'),))] == 1
    assert samples[(metrics.RULES, (('family', 'ipv4'), ('backend', 'iptables')))] == 2
    assert samples[(metrics.CONFIG_VALID, ())] == 1
    for name in (metrics.RUNS, metrics.LAST_RUN, metrics.EVENTS, metrics.EVENT_REPAIR):
        assert text.count('# TYPE %s ' % name) == 1, name
    # The next cycle carries it on.
    text, problem = metrics.update(directory, 'ok', 0.02, now=1120.0, booted=1.0)
    assert problem is None and metrics.parse(text)[(metrics.RUNS, (('result', 'ok'),))] == 3


def test_the_back_off_skips_the_transactions_of_the_commands_our_cycles_ran(rig):
    """The cycle's runner records its commands' pids in the list the watcher
    passes it (``seen['spawned']``, runner.make_run's ``record``); the
    back-off line names the other writer's transaction, not our repair's."""
    watcher, _events, _cycles, lines, _writes = rig
    ours = []

    def run_cycle(_opts, _log, seen):
        run = runner.make_run(timeout=5, record=seen['spawned'])
        ours.append(int(run(['/bin/sh', '-c', 'echo $$'])[1]))
        seen['result'] = {'actions': ['IPv4: repaired'], 'selected_backend': 'iptables', 'iptables_flavour': 'nf_tables'}
        return resync.EXIT_OK

    watcher.run_cycle = run_cycle
    for _i in range(watch.LIMIT):
        watcher.on_events([DELRULE, GEN], False)
    assert watcher.spawned == ours[-runner.RECORDED:]
    # Our last repair's transaction is read after the remover's: the remover's is named.
    mine = Event('newgen', None, None, ours[-1], 'iptables-restor')
    watcher.on_events([DELRULE, GEN, Event('newrule', 'ip', 'nat', None, None), mine], False)
    said = [msg for level, msg in lines if 'backing off' in msg]
    assert len(said) == 1 and 'committed by iptables (pid 4242)' in said[0], said


def test_standing_words_name_the_rules_in_our_place_and_their_owners():
    assert standing.words([]) == 'the nat postrouting path now holds no SNAT rule (flushed)'
    docker = {'owner': 'docker', 'target': 'MASQUERADE', 'chain': 'POSTROUTING', 'path': ['POSTROUTING'],
              'rule': '-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE'}
    kube = {'owner': 'kube-proxy', 'target': 'MASQUERADE', 'chain': 'KUBE-POSTROUTING',
            'path': ['POSTROUTING', 'KUBE-POSTROUTING'], 'rule': '-A KUBE-POSTROUTING -j MASQUERADE --random-fully'}
    other = dict(docker, owner='unknown', rule='masquerade')
    assert standing.words([docker, kube]) == (
        "the nat postrouting path now holds docker's MASQUERADE (-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 "
        "-j MASQUERADE), kube-proxy's MASQUERADE in KUBE-POSTROUTING (-A KUBE-POSTROUTING -j MASQUERADE --random-fully)")
    assert standing.words([docker] * 3 + [other]).endswith('(-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE) '
                                                           'and 1 more')
    assert "an unknown owner's MASQUERADE (masquerade)" in standing.words([other])


def _cond(**matches):
    cond = Cond()
    for name, values in matches.items():
        getattr(cond, name).extend(values)
    return cond


def test_the_watcher_s_owner_table_attributes_as_the_audit_does():
    """owner_table.py is the audit's owners (scripts/gen_daemons.py writes it,
    test_daemons_derived holds it): the core's attribution over it names the
    same owner as the audit for each kind of clue."""
    table = attribution.Attribution(owner_table.OWNERS, owner_table.OURS)
    cases = [
        (['POSTROUTING'], _cond(ifaces=['docker0']), None),
        (['POSTROUTING'], _cond(sources=[(False, '172.17.0.0/16')]), None),
        (['POSTROUTING', 'KUBE-POSTROUTING'], _cond(), None),
        (['POSTROUTING', 'CNI-1234'], _cond(), None),
        (['POSTROUTING'], _cond(comments=['name: "cbr0" id: "x"']), None),
        (['postrouting'], _cond(), 'netavark'),
        (['POSTROUTING', 'IP-MASQ-AGENT'], _cond(), None),
        (['POSTROUTING'], _cond(ifaces=['eth0']), None),
    ]
    got = [table.attribute(path, cond, 'IP-MASQ-AGENT', nft) for path, cond, nft in cases]
    assert got == [owners.attribute(path, cond, 'IP-MASQ-AGENT', nft) for path, cond, nft in cases]
    assert got == ['docker', 'docker', 'kube-proxy', 'cni', 'cni', 'netavark', 'ip-masq-agent', 'unknown']
