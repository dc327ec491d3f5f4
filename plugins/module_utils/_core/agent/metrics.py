# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The node-side resync's metrics, for node_exporter's textfile collector.

With ``--metrics-dir DIR`` every cycle of the resync (``resync.py``) ends
by replacing ``DIR/ip_masq_agent.prom`` (atomically: a temporary file
beside it, then a rename; mode 0644) with its state in the Prometheus text
format (version 0.0.4)::

    ip_masq_agent_last_run_timestamp_seconds        gauge    when the last cycle ended
    ip_masq_agent_last_success_timestamp_seconds    gauge    when the last cycle with exit code 0 ended
    ip_masq_agent_cycle_duration_seconds            gauge    how long the last cycle took
    ip_masq_agent_config_valid                      gauge    1: the config file is valid (or missing)
    ip_masq_agent_runs_total{result}                counter  cycles by result: ok, failed, config_refused
    ip_masq_agent_drift_repairs_total{kind}         counter  cycles that repaired drift of a kind
    ip_masq_agent_rules{family,backend}             gauge    rules of ours in place after the cycle

and, from the watch mode's long-running process (``watch.py``) only::

    ip_masq_agent_repairs_total{cause}              counter  cycles that wrote, by what started them
    ip_masq_agent_events_total                      counter  nf_tables change events read
    ip_masq_agent_backoffs_total                    counter  times the watcher backed off a fight
    ip_masq_agent_event_repair_seconds              histogram  first event of a burst to its repair's end
    ip_masq_agent_last_event_repair_seconds         gauge    the same, for the last such repair

The watch mode's safety-net tick that found nothing changed (nf_tables'
generation the same, ``watch.py``) reads nothing and runs no cycle; it is
counted as a run that succeeded all the same (:func:`count_verified`), so
that the timestamps stay fresh.

Each cycle is a process of its own: the counters and the last success are
carried over from the file the previous cycle wrote (our own lines only; a
missing or garbled file starts them again at 0, which Prometheus takes as a
counter reset).

Drift is what a cycle repairs with the configuration it already enforced:
not the first apply of a changed config file, and not the first cycle after
a boot (the kernel starts with no rule of ours; a cycle whose previous file
was written before the boot, or that finds no previous file, counts no
drift).  A cycle counts each kind once, whatever the number of families or
rules it repaired.  docs/docsite/rst/metrics.rst documents every name.

Standard library only (``os``, ``time``): this file runs on managed nodes.
"""

import os

from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.fileio import atomic_write, read_regular

FILE_NAME = 'ip_masq_agent.prom'
PREFIX = 'ip_masq_agent_'
MODE = 0o644
# The file is a few kilobytes; anything much larger is not ours.
MAX_BYTES = 1 << 20

RESULTS = ('ok', 'failed', 'config_refused')
# What a repair repaired: the plans' kinds, one per action, as each backend
# declares them (``drift_kinds``, in the registry's order), then a removal
# from a backend the policy does not live in.  table_unwanted (state=absent)
# is never a resync's: it is in the module's result only.  A backend
# registered later (a test's) has its kinds counted after these.
DRIFT_KINDS = tuple(kind for cls in backends.REGISTRY if cls.writes for kind in cls.drift_kinds) + (
    'other_backend',        # ours in the backend the policy does not live in (removed)
)
FAMILIES = ('ipv4', 'ipv6')
# What started a cycle that wrote (watch mode): the first cycle, the
# safety-net tick, nf_tables' events, an overflowed event socket, SIGHUP.
CAUSES = ('start', 'timer', 'event', 'enobufs', 'signal')
# event_repair_seconds' buckets (the goal is under a second).
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

LAST_RUN = PREFIX + 'last_run_timestamp_seconds'
LAST_SUCCESS = PREFIX + 'last_success_timestamp_seconds'
DURATION = PREFIX + 'cycle_duration_seconds'
CONFIG_VALID = PREFIX + 'config_valid'
RUNS = PREFIX + 'runs_total'
DRIFT = PREFIX + 'drift_repairs_total'
RULES = PREFIX + 'rules'
REPAIRS = PREFIX + 'repairs_total'
EVENTS = PREFIX + 'events_total'
BACKOFFS = PREFIX + 'backoffs_total'
EVENT_REPAIR = PREFIX + 'event_repair_seconds'
LAST_EVENT_REPAIR = PREFIX + 'last_event_repair_seconds'

# name -> (type, help), in the order of the file.
METRICS = (
    (LAST_RUN, 'gauge', 'When the last resync cycle ended, in seconds since the Unix epoch.'),
    (LAST_SUCCESS, 'gauge', 'When the last resync cycle that succeeded (exit code 0) ended, in seconds since '
     'the Unix epoch; 0 when none is known.'),
    (DURATION, 'gauge', 'How long the last resync cycle took, in seconds.'),
    (CONFIG_VALID, 'gauge', 'Whether the config file on disk was valid at the last cycle (1; a missing file '
     'means the defaults and is valid) or refused (0).'),
    (RUNS, 'counter', 'Resync cycles, by result: ok (in sync or repaired), failed, config_refused (the config '
     'file was refused).'),
    (DRIFT, 'counter', 'Resync cycles that repaired drift, by kind of drift (a first apply of a changed '
     'config file and the first cycle after a boot are not drift).'),
    (RULES, 'gauge', None),     # rules_help(): each backend says how it counts
    (REPAIRS, 'counter', 'Cycles of the watch mode that wrote (applied or repaired; or failed), by what started them: '
     'start, timer (the safety net), event (nf_tables changed), enobufs (the event socket overflowed), '
     'signal (SIGHUP).'),
    (EVENTS, 'counter', "nf_tables change events the watch mode read (every table's, ours or not)."),
    (BACKOFFS, 'counter', 'Times the watch mode stopped repairing on events until its next safety-net '
     'cycle, because another writer kept removing ours.'),
    (EVENT_REPAIR, 'histogram', 'Seconds from the first nf_tables event of a burst to the end of the '
     'repair it caused (watch mode).'),
    (LAST_EVENT_REPAIR, 'gauge', 'Seconds from the first nf_tables event of a burst to the end of the '
     'last repair it caused (watch mode).'),
)


def writers():
    """The names of the backends the policy can live in (the ``rules`` metric's ``backend`` labels)."""
    return [cls.name for cls in backends.REGISTRY if cls.writes]


def rules_help():
    return 'Rules of ours in place after the last cycle, by address family and backend (%s).' % '; '.join(
        cls.metric_help for cls in backends.REGISTRY if cls.writes and cls.metric_help)


# --------------------------------------------------------------------------
# The text format
# --------------------------------------------------------------------------

def escape_help(text):
    return text.replace('\\', '\\\\').replace('\n', '\\n')


def escape_label(value):
    return value.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def _number(value):
    """A sample value: an integer as one, a float as Python's shortest exact form."""
    if isinstance(value, int):
        return '%d' % value
    return repr(float(value))


def render(samples):
    """The file's text: ``samples`` name -> [(labels, value)] (labels a tuple of
    ``(name, value)``); a metric without samples is left out."""
    out = []
    for name, kind, text in METRICS:
        text = rules_help() if text is None else text
        rows = samples.get(name)
        if not rows:
            continue
        out.append('# HELP %s %s' % (name, escape_help(text)))
        out.append('# TYPE %s %s' % (name, kind))
        for row in rows:
            # A histogram's rows name their series (_bucket, _sum, _count) third.
            labels, value, series = row[0], row[1], row[2] if len(row) > 2 else ''
            label_text = ','.join('%s="%s"' % (key, escape_label(val)) for key, val in labels)
            out.append('%s%s%s %s' % (name, series, '{%s}' % label_text if label_text else '', _number(value)))
    return '\n'.join(out) + '\n'


_UNESCAPE = {'\\': '\\', '"': '"', 'n': '\n'}


def _sample(line):
    """``(name, labels, value)`` of a sample line; ValueError when it is not one."""
    brace = line.find('{')
    space = line.find(' ')
    if brace == -1 or (space != -1 and space < brace):
        name, _sep, rest = line.partition(' ')
        labels = ()
    else:
        name, labels, at = line[:brace], [], brace + 1
        while line[at] != '}':
            eq = line.index('=', at)
            key = line[at:eq]
            if not key or line[eq + 1] != '"':
                raise ValueError('bad label in %r' % line)
            at, value = eq + 2, []
            while line[at] != '"':
                if line[at] == '\\':
                    value.append(_UNESCAPE[line[at + 1]])
                    at += 2
                else:
                    value.append(line[at])
                    at += 1
            labels.append((key, ''.join(value)))
            at += 1
            if line[at] == ',':
                at += 1
        rest = line[at + 1:]
        labels = tuple(labels)
    words = rest.split()
    if not name.startswith(PREFIX) or len(words) != 1:
        raise ValueError('not a sample of ours: %r' % line)
    return name, labels, float(words[0])


def parse(text):
    """Our own file's samples, ``{(name, labels): value}``; ValueError when
    a line is not one we write."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        try:
            name, labels, value = _sample(line)
        except (IndexError, KeyError):
            raise ValueError('a garbled line: %r' % line)
        samples[(name, labels)] = value
    return samples


class Carried:
    """What a cycle takes over from the previous cycle's file."""

    def __init__(self):
        self.runs = dict((result, 0) for result in RESULTS)
        self.drift = dict((kind, 0) for kind in DRIFT_KINDS)
        self.last_run = None
        self.last_success = None
        # The watch mode's (None: not carried, not written).
        self.watch = None


class Watched:
    """The watch mode's counters (carried over like the others)."""

    def __init__(self):
        self.repairs = dict((cause, 0) for cause in CAUSES)
        self.events = 0
        self.backoffs = 0
        self.buckets = [0] * len(BUCKETS)
        self.count = 0
        self.sum = 0.0
        self.last = None

    def observe(self, seconds):
        self.count += 1
        self.sum += seconds
        self.last = seconds
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1

    def samples(self):
        le = [((('le', repr(bound)),), self.buckets[i], '_bucket') for i, bound in enumerate(BUCKETS)]
        out = {
            REPAIRS: [((('cause', cause),), self.repairs[cause]) for cause in CAUSES],
            EVENTS: [((), self.events)],
            BACKOFFS: [((), self.backoffs)],
            EVENT_REPAIR: le + [((('le', '+Inf'),), self.count, '_bucket'), ((), self.sum, '_sum'),
                                ((), self.count, '_count')],
        }
        if self.last is not None:
            out[LAST_EVENT_REPAIR] = [((), self.last)]
        return out


def _carry_watch(state, name, labels, value):
    """Take a watch-mode sample of the previous file into ``state.watch``."""
    watch = state.watch = state.watch or Watched()
    if name == REPAIRS and len(labels) == 1 and labels[0][0] == 'cause' and labels[0][1] in CAUSES:
        watch.repairs[labels[0][1]] = _count(value)
    elif name == EVENTS and not labels:
        watch.events = _count(value)
    elif name == BACKOFFS and not labels:
        watch.backoffs = _count(value)
    elif name == EVENT_REPAIR + '_bucket' and len(labels) == 1 and labels[0][0] == 'le':
        bounds = [repr(bound) for bound in BUCKETS]
        if labels[0][1] in bounds:
            watch.buckets[bounds.index(labels[0][1])] = _count(value)
    elif name == EVENT_REPAIR + '_count' and not labels:
        watch.count = _count(value)
    elif name == EVENT_REPAIR + '_sum' and not labels and value >= 0:
        watch.sum = value
    elif name == LAST_EVENT_REPAIR and not labels and value >= 0:
        watch.last = value


def _count(value):
    if not 0 <= value <= 1e15 or value != int(value):
        raise ValueError('not a count: %r' % value)
    return int(value)


def _timestamp(value):
    if not 0 <= value < 1e11:
        raise ValueError('not a timestamp: %r' % value)
    return value


def carried(text):
    """The counters and timestamps of our previous file's text (a Carried);
    ValueError when it is garbled."""
    state = Carried()
    for (name, labels), value in parse(text).items():
        if name == RUNS and len(labels) == 1 and labels[0][0] == 'result' and labels[0][1] in RESULTS:
            state.runs[labels[0][1]] = _count(value)
        elif name == DRIFT and len(labels) == 1 and labels[0][0] == 'kind':
            state.drift[labels[0][1]] = _count(value)
        elif name == LAST_RUN and not labels:
            state.last_run = _timestamp(value)
        elif name == LAST_SUCCESS and not labels:
            state.last_success = _timestamp(value) or None
        elif name in _WATCH_NAMES:
            _carry_watch(state, name, labels, value)
    return state


_WATCH_NAMES = (REPAIRS, EVENTS, BACKOFFS, EVENT_REPAIR, EVENT_REPAIR + '_bucket', EVENT_REPAIR + '_sum',
                EVENT_REPAIR + '_count', LAST_EVENT_REPAIR)


def read_carried(path):
    """``(Carried, problem)``: the previous file's state, or a fresh one and
    why (None: no file yet)."""
    try:
        data = read_regular(path, MAX_BYTES + 1)       # a FIFO there: a problem to warn about, never a wait
    except (IOError, OSError) as e:
        if getattr(e, 'errno', None) == 2:
            return Carried(), None
        return Carried(), 'cannot be read (%s)' % (getattr(e, 'strerror', None) or e)
    try:
        if len(data) > MAX_BYTES:
            raise ValueError('larger than %d bytes' % MAX_BYTES)
        return carried(data.decode('utf-8')), None
    except (ValueError, UnicodeDecodeError) as e:
        return Carried(), 'is not ours or is garbled (%s)' % e


# --------------------------------------------------------------------------
# A cycle's metrics
# --------------------------------------------------------------------------

def rules_in_place(result, policy):
    """``{(family, backend): rules}`` after a sync (``sync.sync``'s result for
    ``policy``), as the selected backend counts them (``rules_in_place`` of
    its class in ``backends.REGISTRY``, as its ``metric_help`` says); 0 for
    every other backend the policy can live in."""
    counts = dict(((family, backend), 0) for family in FAMILIES for backend in writers())
    selected = result.get('selected_backend')
    for backend in backends.REGISTRY:
        if backend.writes and backend.name == selected:
            for family, n in backend.rules_in_place(result, policy).items():
                counts[('ipv%d' % family, backend.name)] += n
    return counts


def samples(state, ended, duration, config_valid, rules):
    """The samples of a cycle (``state``: Carried, already counted; its
    ``watch`` counters only where it has them)."""
    out = {
        LAST_RUN: [((), ended)],
        LAST_SUCCESS: [((), state.last_success or 0)],
        DURATION: [((), duration)],
        RUNS: [((('result', result),), state.runs[result]) for result in RESULTS],
        DRIFT: [((('kind', kind),), state.drift[kind]) for kind in
                list(DRIFT_KINDS) + sorted(set(state.drift) - set(DRIFT_KINDS))],
    }
    if config_valid is not None:
        out[CONFIG_VALID] = [((), 1 if config_valid else 0)]
    if rules is not None:
        out[RULES] = [((('family', family), ('backend', backend)), rules[(family, backend)])
                      for family in FAMILIES for backend in writers()]
    if state.watch is not None:
        out.update(state.watch.samples())
    return out


def boot_time(now):
    """When the machine booted (``now`` less /proc/uptime), or None."""
    try:
        with open('/proc/uptime') as handle:
            return now - float(handle.read().split()[0])
    except (IOError, OSError, ValueError, IndexError):
        return None


def update(directory, outcome, duration, config_valid=None, repairs=(), rules=None, now=None, booted=None,
           watch=None):
    """Count a cycle into ``directory/ip_masq_agent.prom`` and write it.

    ``outcome``: one of RESULTS; ``config_valid``: True, False or None
    (unknown: left out); ``repairs``: the kinds of what the cycle repaired
    as drift (each counted once); ``rules``: :func:`rules_in_place`, or None
    (unknown: left out); ``watch`` (the watch mode's cycles only): a dict
    with ``cause`` (one of CAUSES) and ``wrote`` (the cycle wrote),
    ``events`` and ``backoffs`` (counted since the previous cycle) and
    ``event_seconds`` (first event to this repair's end, or None), counted
    into the watch counters.  ``now`` and ``booted`` (seconds since the epoch)
    default to the clock and /proc/uptime.  Returns ``(text, problem)``:
    what was written, and why the previous file was not carried over (or
    None).  Raises OSError when the file cannot be written; the directory
    is never created (it is node_exporter's)."""
    import time  # pylint: disable=import-outside-toplevel

    if now is None:
        now = time.time()
    if booted is None:
        booted = boot_time(now)
    path = os.path.join(directory, FILE_NAME)
    if not os.path.isdir(directory):
        raise OSError('the directory %s does not exist (it is the textfile directory of node_exporter, '
                      'which makes it; it is never created here)' % directory)
    state, problem = read_carried(path)
    previous_run = state.last_run
    state.runs[outcome] = state.runs.get(outcome, 0) + 1
    # Repairs count as drift when an earlier cycle of this boot ran (the
    # first cycle after a boot re-applies what the kernel forgot).
    if previous_run is not None and (booted is None or previous_run >= booted):
        for kind in sorted(set(repairs)):
            state.drift[kind] = state.drift.get(kind, 0) + 1
    if outcome == 'ok':
        state.last_success = now
    if watch is not None:
        counted = state.watch = state.watch or Watched()
        counted.events += watch.get('events', 0)
        counted.backoffs += watch.get('backoffs', 0)
        if watch.get('wrote'):
            counted.repairs[watch['cause']] = counted.repairs.get(watch['cause'], 0) + 1
            if watch.get('event_seconds') is not None:
                counted.observe(watch['event_seconds'])
    text = render(samples(state, now, duration, config_valid, rules))
    atomic_write(path, text, MODE)
    return text, problem


def _replace(path, text, samples):
    """Write ``text`` (our file) with the metrics ``samples`` names replaced
    by ``samples``; every other line stays as it was."""
    names = set(samples)
    for name in list(names):
        if name == EVENT_REPAIR:        # a histogram's series are named after it
            names.update((name + '_bucket', name + '_sum', name + '_count'))
    kept = [line for line in text.splitlines()
            if line and not (line.startswith('# ') and line.split(' ', 3)[2:3] and line.split(' ', 3)[2] in names)
            and not (not line.startswith('#') and line.partition('{')[0].partition(' ')[0] in names)]
    atomic_write(path, '\n'.join(kept) + '\n' + render(samples), MODE)


def _carried(directory):
    """``(path, state, text)`` of the file a cycle wrote in ``directory``
    (:func:`read_carried`'s state), or None when there is no good file of
    ours there yet."""
    path = os.path.join(directory, FILE_NAME)
    state, problem = read_carried(path)
    if problem or state.last_run is None:
        return None
    with open(path) as handle:
        return path, state, handle.read()


def count_between(directory, events=0, backoffs=0):
    """Add ``events`` and ``backoffs`` to the watch counters of the file a
    cycle wrote, between cycles (the watch mode's back-off, which runs no
    cycle): every other line stays as the cycle wrote it.  Nothing is
    written when there is no file of ours yet (the next cycle counts them
    then: returns False).  Raises OSError when the file cannot be written."""
    carried = _carried(directory)
    if carried is None:
        return False
    path, state, text = carried
    state.watch = state.watch or Watched()
    state.watch.events += events
    state.watch.backoffs += backoffs
    _replace(path, text, state.watch.samples())
    return True


def count_verified(directory, duration, events=0, now=None):
    """Count a safety-net tick of the watch mode that needed no read of the
    node (``watch.py``: nf_tables' generation and the config file unchanged
    since a cycle that found everything in order) as a run that succeeded:
    the run counter, the last run and last success timestamps (``now``) and
    the duration are its own, ``events`` are added; every other line (the
    rules in place, the config's validity, the drift) stays as that cycle
    wrote it.  Nothing is written when there is no file of ours yet
    (returns False: the caller runs a whole cycle).  Raises OSError when the
    file cannot be written."""
    import time  # pylint: disable=import-outside-toplevel

    carried = _carried(directory)
    if carried is None:
        return False
    path, state, text = carried
    now = time.time() if now is None else now
    state.runs['ok'] += 1
    samples = {
        LAST_RUN: [((), now)],
        LAST_SUCCESS: [((), now)],
        DURATION: [((), duration)],
        RUNS: [((('result', result),), state.runs[result]) for result in RESULTS],
    }
    if state.watch is not None or events:
        state.watch = state.watch or Watched()
        state.watch.events += events
        samples.update(state.watch.samples())
    _replace(path, text, samples)
    return True
