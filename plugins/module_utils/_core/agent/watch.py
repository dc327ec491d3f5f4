# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The resync's watch mode: one long-running process that repairs drift the
moment nf_tables announces a change (``--mode watch`` / ``--mode auto``).

It runs a cycle at start (cause ``start``), then blocks in ``select`` on
an nf_tables event subscription (``node/nfevents.py``) and on a pipe that
signals wake it, so it spends no CPU while nothing changes.  It runs the
same cycle as the timer (``resync.cycle``: read, compare, repair only on
drift, under the writers' lock):

- on events (``event``) in a table our policy can live in (iptables-nft's
  ``ip``/``ip6`` ``nat``, our ``inet`` table): it first waits until the
  writer's batch has ended (no event for :data:`QUIET` seconds, at most
  :data:`MAX_DEBOUNCE` after the first), so that a burst is one cycle;
- at once when the socket overflowed (``enobufs``: events were dropped, so
  the node is read now, never a lost repair);
- every resync interval (``timer``: the safety net, as the timer mode).
  Where it watches nf_tables, the tick first asks the kernel's ruleset
  generation (``NFT_MSG_GETGEN``, one netlink request): when it is the one
  its last cycle saw before it read the node and found it in order, the
  config file is the same (inode, size, times), ``iptables`` is the same
  program (no alternatives switch) and no event, overflow or
  signal came since, nothing can have changed and the tick reads nothing
  (counted as a run that succeeded: ``metrics.count_verified``); else it
  runs the whole cycle.  iptables-legacy, which has no generation, is read
  every tick;
- at once on SIGHUP (``signal``: the role's path unit reloads the service
  when the config file changes).

SIGTERM and SIGINT end it with exit code 0.  Our own writes are announced
too: the cycle they cause reads the node, finds no drift and writes
nothing, so they never cause a second write.

No fight: at most :data:`LIMIT` repairs (or failed repairs) caused by
events in any :data:`WINDOW` seconds.  Beyond that another writer keeps removing ours
(a firewall reloading in a loop, a script that flushes the nat table): the
watcher backs off, reading events without acting on them, until its next
safety-net cycle; it says so once in the journal (what changed last and
the process that committed it, as the kernel names it; and the SNAT rules
that now stand in our place in the nat postrouting path, with their owners
as the audit tells them, or "flushed": ``standing.py``) and counts it
(``backoffs_total``).

``--mode auto`` watches where the policy lives in nf_tables (iptables-nft
or the nftables backend) and polls every resync interval elsewhere
(iptables-legacy sends no events).

Standard library only: this file runs on managed nodes.
"""

import os
import select
import signal
import time

from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import metrics
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.nfevents import Events
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.nfnetlink import generation
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import runner
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.backends import nf_tables_of_ours
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.golang import parse_duration

# A writer's batch has ended when no event came for QUIET seconds; a
# stream of events is cut after MAX_DEBOUNCE seconds (the repair is not
# put off for ever by a writer that never stops).
QUIET = 0.05
MAX_DEBOUNCE = 0.3
# No fight: at most LIMIT repairs caused by events in any WINDOW seconds,
# one every 2 s on average.  A repair costs some 15 ms of CPU, so 30 a
# minute stay under 1 % of a core, and a node that some misconfigured
# reload flushes every few seconds keeps masquerading nearly all the time;
# a writer that removes ours more often than that is a fight that
# repairing cannot win (the safety net still puts ours back every interval).
LIMIT = 30
WINDOW = 60.0
# The tools whose choice (iptables-nft or -legacy) the safety net's shortcut watches.
_TOOLS = ('iptables', 'ip6tables')
# The signals that end the watcher (exit code 0).
_STOPS = ('SIGTERM', 'SIGINT')


def interval_seconds(opts):
    """The safety net's interval: ``--resync-interval``, else the table's default."""
    text = opts.resync_interval or options.BY_NAME['resync_interval'].default
    return parse_duration(text)


def seconds_text(seconds):
    return '%gs' % seconds


def describe(events, own=()):
    """What the last transaction among ``events`` changed, in a few words:
    ``delrule ip nat (x3); committed by iptables (pid 42)`` (each
    transaction's events end with its ``newgen``); one committed by a pid in
    ``own`` (our own repairs' commands) only when there is no other."""
    ends = [i for i, event in enumerate(events) if event.kind == 'newgen']
    foreign = [i for i in ends if events[i].pid not in own]
    if ends:
        last = (foreign or ends)[-1]
        before = [i for i in ends if i < last]
        events = events[(before[-1] + 1 if before else 0):last + 1]
    counts = {}
    order = []
    writer = None
    for event in events:
        if event.kind == 'newgen':
            writer = event
            continue
        key = '%s %s %s' % (event.kind, event.family, event.table)
        if key not in counts:
            order.append(key)
        counts[key] = counts.get(key, 0) + 1
    words = ', '.join('%s%s' % (key, ' (x%d)' % counts[key] if counts[key] > 1 else '') for key in order[:4])
    if len(order) > 4:
        words += ', ...'
    if writer is not None and (writer.proc or writer.pid):
        words += '; committed by %s (pid %s)' % (writer.proc or 'a process', writer.pid or '?')
    return words or 'events'


def standing_words(opts):
    """What stands in our place now, and whose it is by the audit's rules (``standing.py``)."""
    # Start-up cost: the node's reading and the owners load only at a back-off, never for a repair.
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import standing  # pylint: disable=import-outside-toplevel
    return standing.describe(runner.make_run(), runner.find, opts.masq_chain, (4, 6) if opts.enable_ipv6 else (4,))


class Watcher:
    """The loop.  ``run_cycle(opts, log, seen)`` is the resync's cycle
    (``resync.run_cycle``: its errors logged, the exit code returned);
    ``events_factory`` makes the subscription (``nfevents.Events``);
    ``standing(opts)`` words what stands in our place at a back-off
    (:func:`standing_words`)."""

    def __init__(self, opts, log, run_cycle, events_factory=Events, clock=time.monotonic, generation=generation,
                 standing=None):
        self.opts = opts
        self.log = log
        self.run_cycle = run_cycle
        self.clock = clock
        self.interval = interval_seconds(opts)
        self.ours = set(nf_tables_of_ours(opts.masq_chain))
        self.events_factory = events_factory
        self.standing = standing or standing_words
        self.events = None
        self.repairs = []           # when each event-caused repair ended (the window's)
        self.backing_off = False
        self.pending = {'events': 0, 'backoffs': 0}
        self.flags = {'stop': None, 'hup': False}
        self.next_tick = None
        self.wake_r = self.wake_w = None
        self.last_code = None
        # The safety net's shortcut: what the last cycle that found the node in
        # order saw before it read (fingerprint()), and whether anything came since.
        self.generation = generation
        self.verified = None
        self.changed = True
        # The pids of our cycles' last commands (``runner.make_run``'s
        # ``record``): the back-off line skips our own transactions.
        self.spawned = []

    # -- signals --------------------------------------------------------------

    def _on_stop(self, signum, _frame):
        self.flags['stop'] = signum

    def _on_hup(self, _signum, _frame):
        self.flags['hup'] = True
        self.changed = True

    def install_signals(self):
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w)
        for name in _STOPS:
            signal.signal(getattr(signal, name), self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    def _drain_wake(self):
        try:
            while os.read(self.wake_r, 512):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    # -- the subscription -------------------------------------------------------

    def subscribe(self):
        """Open the event subscription; None (logged) when the kernel refuses it."""
        try:
            self.events = self.events_factory()
        except OSError as e:
            self.log('warning', 'nf_tables events cannot be read here (%s): polling every %s.'
                     % (getattr(e, 'strerror', None) or e, seconds_text(self.interval)))
            self.events = None

    def unsubscribe(self):
        if self.events is not None:
            self.events.close()
            self.events = None

    def relevant(self, events):
        """Whether any event touches a table our policy can live in."""
        return any(e.kind != 'newgen' and (e.table is None or (e.family, e.table) in self.ours) for e in events)

    # -- cycles -------------------------------------------------------------------

    def cycle(self, cause, first_event=None):
        """One cycle (``resync.run_cycle``); True when it wrote."""
        watch = dict(self.pending, cause=cause, first_event=first_event)
        self.pending = {'events': 0, 'backoffs': 0}
        seen = {'watch': watch, 'spawned': self.spawned}
        self.changed = False
        before = self.fingerprint() if self.events is not None else None
        self.last_code = self.run_cycle(self.opts, self.log, seen)
        result = seen.get('result')
        # Verified: the node as it was at ``before``, read and found in order
        # (after a cycle that wrote, the next tick reads again).
        self.verified = before if (before is not None and self.last_code == 0 and result is not None
                                   and not result.get('actions') and self.watchable(result)) else None
        # A cycle that failed (exit code 1: a write refused, the lock not had)
        # may have written part of it: it counts as a repair for the bound.
        wrote = (bool(result and result.get('actions')) or self.last_code == 1) and not self.opts.check
        if cause == 'timer' or cause == 'start':
            self.next_tick = self.clock() + self.interval
        return wrote, result

    def watchable(self, result):
        """Whether the policy lives in nf_tables (after the cycle at start)."""
        if result is None:
            return True
        return result.get('selected_backend') == 'nftables' or result.get('iptables_flavour') == 'nf_tables'

    def on_events(self, first, overflow):
        """Debounce, then repair (or back off); ``first``: the burst's first events."""
        started = self.clock()
        seen = list(first)
        deadline = started + MAX_DEBOUNCE
        while not overflow:
            wait = min(QUIET, deadline - self.clock())
            if wait <= 0 or self.flags['stop'] is not None:
                break
            ready = select.select([self.events], [], [], wait)[0]
            if not ready:
                break
            more, overflow = self.events.read()
            self.pending['events'] += len(more)
            seen.extend(more)
        if not overflow and not self.relevant(seen):
            return
        now = self.clock()
        self.repairs = [t for t in self.repairs if now - t < WINDOW]
        if self.backing_off:
            return
        if len(self.repairs) >= LIMIT:
            self.backing_off = True
            self.pending['backoffs'] += 1
            self.log('warning', 'backing off: %d repairs in the last %s, another writer keeps removing ours '
                     '(the last change: %s; %s); ours is put back at the next safety-net cycle in %s.'
                     % (len(self.repairs), seconds_text(WINDOW), describe(seen, self.spawned), self.standing(self.opts),
                        seconds_text(round(max(0.0, self.next_tick - now)))))
            self.count_now()
            return
        wrote, _result = self.cycle('enobufs' if overflow else 'event', first_event=started)
        if wrote:
            self.repairs.append(self.clock())

    def fingerprint(self):
        """What says that nothing changed: nf_tables' generation, the config
        file's identity and which iptables the node runs (an alternatives
        switch to iptables-legacy moves it); None when the generation cannot
        be read."""
        gen = self.generation()
        if gen is None:
            return None
        try:
            st = os.stat(self.opts.config)
            config = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError as e:
            config = e.errno
        tools = tuple(os.path.realpath(path) if path else None for path in map(runner.find, _TOOLS))
        return gen, config, tools

    def unchanged(self):
        """The safety net's tick without a read: True (counted, the next tick
        set) when nothing can have changed since the last verified cycle."""
        if self.verified is None or self.changed or self.events is None:
            return False
        started = self.clock()
        if self.fingerprint() != self.verified:
            return False
        if self.opts.metrics_dir:
            try:
                if not metrics.count_verified(self.opts.metrics_dir, self.clock() - started, self.pending['events']):
                    return False        # no file of ours yet: a whole cycle writes it
            except (IOError, OSError):
                return False            # the whole cycle says why
            self.pending['events'] = 0
        self.next_tick = self.clock() + self.interval
        return True

    def tick(self):
        """The safety net's tick, when it is due: it ends a back-off, then
        reads nothing when :meth:`unchanged` says so, else runs a whole
        cycle (cause ``timer``); True when it read nothing."""
        self.backing_off = False
        if self.unchanged():
            return True
        self.cycle('timer')
        return False

    def count_now(self):
        """The pending events and back-offs into the metrics file now (a back-off runs no cycle)."""
        if not self.opts.metrics_dir:
            return
        try:
            if metrics.count_between(self.opts.metrics_dir, self.pending['events'], self.pending['backoffs']):
                self.pending = {'events': 0, 'backoffs': 0}
        except (IOError, OSError) as e:
            self.log('warning', 'metrics: %s was not written (%s).'
                     % (os.path.join(self.opts.metrics_dir, metrics.FILE_NAME), getattr(e, 'strerror', None) or e))

    # -- the loop ---------------------------------------------------------------------

    def run(self):
        self.install_signals()
        if self.opts.mode == 'watch' or self.opts.mode == 'auto':
            self.subscribe()        # before the first read: no change between the two is missed
        _wrote, result = self.cycle('start')
        if self.events is not None and not self.watchable(result):
            if self.opts.mode == 'auto':
                self.unsubscribe()
                self.log('notice', 'iptables-legacy has no events: polling every %s.' % seconds_text(self.interval))
            else:
                self.log('warning', 'the policy lives in iptables-legacy, which has no events: watching nf_tables '
                         'anyway and polling every %s.' % seconds_text(self.interval))
        elif self.events is not None:
            self.log('info', 'watching nf_tables for changes (a cycle every %s as well).'
                     % seconds_text(self.interval))
        return self.loop()

    def loop(self):
        while True:
            if self.flags['stop'] is not None:
                return self.stop()
            if self.flags['hup']:
                self.flags['hup'] = False
                self.cycle('signal')
                continue
            wait = self.next_tick - self.clock()
            if wait <= 0:
                self.tick()
                continue
            watched = [self.wake_r] + ([self.events] if self.events is not None else [])
            try:
                ready = select.select(watched, [], [], wait)[0]
            except InterruptedError:
                continue
            if self.wake_r in ready:
                self._drain_wake()
            if self.events is not None and self.events in ready:
                events, overflow = self.events.read()
                self.pending['events'] += len(events)
                self.changed = self.changed or overflow or bool(events)
                if overflow or self.relevant(events):
                    self.on_events(events, overflow)

    def stop(self):
        self.log('info', 'stopping (%s).' % signal.Signals(self.flags['stop']).name)
        self.unsubscribe()


def run(opts, log, run_cycle):
    """The watch (or auto) mode's process, until SIGTERM or SIGINT
    (``run_cycle``: ``resync.run_cycle``)."""
    try:
        Watcher(opts, log, run_cycle).run()
    except KeyboardInterrupt:
        pass
