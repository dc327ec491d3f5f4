# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
#
# One file over 500 lines on purpose: it is the node-side program, each cycle a
# fresh python3 that pays for every module it imports; its parts (log, state
# file, cycle, command line) are used nowhere else.
"""The node-side resync: one cycle of the Kubernetes ip-masq-agent, run by systemd.

The role installs the collection's core package (this folder) under
``ip_masq_lib_dir`` and runs it from ``ip-masq-agent.service``, which a timer
starts at boot and every resync interval and a path unit starts whenever the
config file changes::

    PYTHONPATH=/usr/local/lib/ipmasq-agent/v/<id> python3 -S -B -c \\
        'from _ipmasq_resync import main; raise SystemExit(main())' \\
        --config /etc/ip-masq-agent/config --enable-ipv6

(``_ipmasq_resync`` is ``boot.py``: it loads this module and the core's
others from the root's one compiled file, and runs :func:`main`.  ``-c``
rather than ``-m``: runpy's own imports cost more than a no-drift cycle's
work.  A cycle imports nothing it does not use: no ``re``, no
``subprocess``, and ``ipaddress`` only for a list that is not plain IPv4.)

One cycle reads the config file as the upstream agent does (a missing file
means the defaults; an invalid one is refused, the last good configuration is
enforced instead and the exit code is 2), then calls the collection's one
implementation of the rules (``sync.sync`` with the backend ``--backend``
picks, ``_core/registry/backends.py``), under the writers' lock: with iptables one
``iptables-save`` per family and an ``iptables-restore --noflush`` only when
something drifted; with nftables one ``nft -j`` listing and one ``nft -j -f -``
transaction only when something drifted.
Nothing is written and nothing is logged when nothing drifted; every repair
is logged with a journald priority prefix (``<4>`` warning, ``<5>`` notice).

The state file (``--state-file``) is a verbatim copy of the last config file
that was valid and applied (empty when the defaults applied): it is rewritten
only when the config file changed, compared as text on every cycle, and
enforced while the config file is refused.

With ``--metrics-dir DIR``, every cycle ends by writing its metrics to
``DIR/ip_masq_agent.prom`` for node_exporter's textfile collector
(``metrics.py``; imported only then).  A file that cannot be written is a
warning; it never changes the exit code.

``--mode watch`` (or ``auto``) makes this one long-running process instead,
woken by nf_tables' change events, that runs the same cycle on each change
and every resync interval (``watch.py``; imported only then).

Exit codes: 0 done (in sync or repaired), 1 failed (iptables, state file),
2 the config file was refused, 64 bad command line.

Standard library only.
"""

import fcntl
import os
import sys

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.addresses import check_snat_local
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.backends import Backends, drift_words, in_sync_text, log_lines
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.config import (
    DEFAULT_CONFIG_PATH,
    defaults,
    in_file_terms,
    parse_config,
    policy_options,
    read_config,
    render_config,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import ConfigError, MasqError, PolicyTooLargeError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.fileio import atomic_write, read_regular
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.golang import (
    format_duration,
    parse_bool,
    parse_duration_ns,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import (
    Policy,
    parse_to_ports,
    validate_chain_name,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import find, make_run
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.sync import sync

PROG = 'ip-masq-agent'
DEFAULT_STATE_FILE = '/var/lib/ipmasq-agent/last-good-config'
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_USAGE = 64
PRIORITY = {'err': 3, 'warning': 4, 'notice': 5, 'info': 6, 'debug': 7}


class UsageError(MasqError):
    """A bad command line: nothing can be enforced with it."""


# --------------------------------------------------------------------------
# Logging: one line per message, journald priority prefixes under systemd
# --------------------------------------------------------------------------

def _stderr_is_journal(stream):
    """True when systemd connected ``stream`` to the journal ($JOURNAL_STREAM)."""
    dev, _sep, ino = os.environ.get('JOURNAL_STREAM', '').partition(':')
    try:
        st = os.fstat(stream.fileno())
        return st.st_dev == int(dev) and st.st_ino == int(ino)
    except (ValueError, OSError, AttributeError):
        return False


class Log:
    def __init__(self, fmt='auto', verbose=False, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        if fmt == 'auto':
            fmt = 'journal' if _stderr_is_journal(self.stream) else 'plain'
        self.journal = fmt == 'journal'
        self.verbose = verbose

    def __call__(self, level, msg):
        if level == 'debug' and not self.verbose:
            return
        for line in str(msg).splitlines() or ['']:
            if self.journal:
                self.stream.write('<%d>%s\n' % (PRIORITY[level], line))
            else:
                self.stream.write('%s: %s: %s\n' % (PROG, level, line))
        self.stream.flush()


# --------------------------------------------------------------------------
# The state file: a verbatim copy of the last config file that was good and
# applied (empty when the defaults applied because there was no file)
# --------------------------------------------------------------------------

def read_state(path, log):
    """The last good config text, or None when there is none (unreadable: logged)."""
    try:
        return read_regular(path).decode('utf-8')      # a FIFO there: a warning, never a wait
    except (IOError, OSError) as e:
        if getattr(e, 'errno', None) != 2:
            log('warning', 'state file %s cannot be read (%s); it is written again after the next good apply.'
                % (path, getattr(e, 'strerror', None) or e))
    except UnicodeDecodeError:
        log('warning', 'state file %s is not UTF-8 text; it is written again after the next good apply.' % path)
    return None


def write_state(path, text):
    """Replace the state file atomically (write, fsync, rename)."""
    atomic_write(path, text, 0o600)


def _saved(path):
    import time  # pylint: disable=import-outside-toplevel

    try:
        return time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(os.stat(path).st_mtime))
    except OSError:
        return 'earlier'


# --------------------------------------------------------------------------
# One cycle
# --------------------------------------------------------------------------

def build_policy(settings, opts):
    """The Policy of the config file's ``settings`` and the flags ``opts``:
    an option the resync takes as a flag (``options.RESYNC_FLAG_OPTIONS``)
    comes from the command line, every other one from the file."""
    values = policy_options(settings)
    for name in options.POLICY_OPTIONS:
        if name not in values:
            option = options.BY_NAME[name]
            values[name] = getattr(opts, flag_attr(option.resync_flag)) if option.resync_flag else settings[name]
    return Policy(**values)


def check_flags(opts):
    """The flag-only checks, before anything is read."""
    try:
        validate_chain_name(opts.masq_chain)
        parse_to_ports(opts.to_ports)
        if opts.resync_interval is not None and parse_duration_ns(opts.resync_interval) <= 0:
            raise MasqError('--resync-interval %s is not a positive duration.' % opts.resync_interval)
        for option in options.EXTRA_OPTIONS:        # a row's own check (options.register)
            value = getattr(opts, flag_attr(option.resync_flag)) if option.resync_flag else option.default
            if option.check is not None and value != option.default:
                option.check(value)
    except MasqError as e:
        raise UsageError(e.msg)


def _settings(text, opts):
    """``(settings, warnings, policy)`` for a config text (None: no file); ConfigError if refused."""
    if text is None:
        settings, warnings = defaults(), []
    else:
        settings, warnings = parse_config(text, ipv6=opts.enable_ipv6, rule_format=opts.rule_format)
    try:
        policy = build_policy(settings, opts)
        check_snat_local(policy)    # refused like a bad file: the last good configuration is enforced
    except MasqError as e:
        raise ConfigError(in_file_terms(e.msg))
    return settings, warnings, policy


def _fallback(opts, state_text, log, refused):
    """The policy of the last good configuration, or None (logged either way)."""
    why = '%s refused: %s' % (opts.config, refused.msg.rstrip('.'))
    if state_text is None:
        log('err', '%s. There is no last good configuration (%s) to enforce instead: the rules on the node '
            'are left as they are.' % (why, opts.state_file))
        return None
    try:
        policy = _settings(state_text, opts)[2]
    except MasqError as e:
        log('err', '%s. The last good configuration (%s) does not work with these flags either (%s): the rules '
            'on the node are left as they are.' % (why, opts.state_file, e.msg.rstrip('.')))
        return None
    log('err', '%s. Enforcing the last good configuration instead (%s, saved %s).'
        % (why, opts.state_file, _saved(opts.state_file)))
    return policy


def cycle(opts, log, seen=None):
    """Run one cycle; return the exit code.  With ``--metrics-dir`` (and not
    ``--check``) its metrics are written at its end, whatever its outcome.
    ``seen`` (the watch mode's): a dict the cycle fills (``result``, ...);
    its ``watch`` entry goes to the metrics (``metrics.update``), and its
    ``spawned`` list gets the pids of the commands the cycle runs
    (``runner.make_run``'s ``record``)."""
    seen = {} if seen is None else seen
    if not opts.metrics_dir or opts.check:
        return _cycle(opts, log, seen)
    import time  # pylint: disable=import-outside-toplevel

    started = time.monotonic()
    code = EXIT_FAILED
    try:
        code = _cycle(opts, log, seen)
    finally:
        _write_metrics(opts, log, seen, code, time.monotonic() - started)
    return code


def _write_metrics(opts, log, seen, code, duration):
    """The cycle's metrics (``metrics.py``); a failure is a warning only."""
    # Start-up cost: metrics.py is loaded only by a resync run that writes them (--metrics-dir).
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import metrics  # pylint: disable=import-outside-toplevel

    outcome = 'ok' if code == EXIT_OK else 'config_refused' if code == EXIT_CONFIG else 'failed'
    path = os.path.join(opts.metrics_dir, metrics.FILE_NAME)
    try:
        result = seen.get('result')
        rules = metrics.rules_in_place(result, seen['policy']) if result is not None else None
        watch = seen.get('watch')
        if watch is not None:       # the watch mode's cycle (watch.py): what it wrote, how soon after the event
            import time  # pylint: disable=import-outside-toplevel
            first = watch.get('first_event')
            watch = dict(watch, wrote=bool(result is not None and result['actions']) or code == EXIT_FAILED,
                         event_seconds=None if first is None else time.monotonic() - first)
        _text, problem = metrics.update(opts.metrics_dir, outcome, duration, config_valid=seen.get('config_valid'),
                                        repairs=seen.get('repairs', ()), rules=rules, watch=watch)
    except Exception as e:  # pylint: disable=broad-except
        log('warning', 'metrics: %s was not written (%s); the cycle itself is not affected.'
            % (path, getattr(e, 'strerror', None) or e))
        return
    if problem:
        log('warning', 'metrics: the previous %s %s: its counters start again at 0.' % (path, problem))


def _cycle(opts, log, seen):
    """One cycle; what metrics need goes into ``seen``."""
    check_flags(opts)
    state_text = read_state(opts.state_file, log)
    refused = None
    text = settings = warnings = None
    try:
        text = read_config(opts.config)
        settings, warnings, policy = _settings(text, opts)
        seen['config_valid'] = True
    except ConfigError as e:
        refused = e
        seen['config_valid'] = False
        policy = _fallback(opts, state_text, log, refused)
        if policy is None:
            return EXIT_CONFIG

    current = '' if text is None else text
    new_config = refused is None and state_text != current
    if new_config:
        if text is None:
            log('notice', 'no config file at %s: the upstream defaults apply: %s'
                % (opts.config, render_config(settings, compact=True)))
        else:
            log('notice', 'configuration from %s: %s' % (opts.config, render_config(settings, compact=True)))
        for warning in warnings:
            log('warning', '%s: %s' % (opts.config, warning))
        if opts.resync_interval is not None and text is not None:
            timer = format_duration(parse_duration_ns(opts.resync_interval))
            if timer != settings['resync_interval']:
                log('warning', '%s: resyncInterval is %s but this service runs every %s (the timer the role '
                    'writes from ip_masq_resync_interval); the file does not change the timer.'
                    % (opts.config, settings['resync_interval'], timer))

    try:
        result = sync(policy, Backends(make_run(record=seen.get('spawned')), find, choice=opts.backend), check_mode=opts.check)
    except PolicyTooLargeError as e:
        # The file's policy is too big for the backend (found before anything
        # was written): refused like a bad file, the last good one enforced.
        if refused is not None:
            raise
        refused = ConfigError(in_file_terms(e.msg))
        seen['config_valid'] = False
        new_config = False
        policy = _fallback(opts, state_text, log, refused)
        if policy is None:
            return EXIT_CONFIG
        result = sync(policy, Backends(make_run(record=seen.get('spawned')), find, choice=opts.backend), check_mode=opts.check)
    seen.update(result=result, policy=policy)
    if not new_config and not opts.check:
        # A repair of the configuration already enforced: drift (a changed file's first apply is not).
        seen['repairs'] = result['drift_kinds']

    if result['actions']:
        if opts.check:
            verb, level = 'would repair', 'notice'
        elif new_config:
            verb, level = 'applied', 'notice'
        elif refused is not None:
            verb, level = 'repaired drift (last good configuration)', 'warning'
        else:
            verb, level = 'repaired drift', 'warning'
        said = set()
        for action in result['actions']:
            # A repair names the rules it put back or took out, after the counts.
            words = drift_words(result, action, said) if verb.startswith('repaired') else ''
            log(level, '%s: %s%s' % (verb, action, ': %s' % words if words else ''))
        for line in log_lines(result):
            log('debug', line)
    elif opts.verbose:
        log('info', in_sync_text(result))

    if new_config and not opts.check:
        try:
            write_state(opts.state_file, current)
        except (IOError, OSError) as e:
            log('err', 'the rules are applied, but the state file %s cannot be written (%s): an invalid config '
                'file later would find no last good configuration to enforce.'
                % (opts.state_file, getattr(e, 'strerror', None) or e))
            return EXIT_FAILED
    return EXIT_CONFIG if refused is not None else EXIT_OK


# --------------------------------------------------------------------------
# Command line (upstream's flags; no argparse, which costs more than a cycle's work)
# --------------------------------------------------------------------------

# The resync's own flags, before (``_FIRST``) and after (``_PATHS``,
# ``_RUN``) the options table's: (flag, metavar or None for a switch,
# default, help lines; a tuple metavar: its choices).
_FIRST = (
    ('--config', 'PATH', DEFAULT_CONFIG_PATH, ('the agent config file (default %(default)s);',
                                               'a missing file means the upstream defaults')),
)
_STATE = (
    ('--state-file', 'PATH', DEFAULT_STATE_FILE, ('a copy of the last good config file (default %(default)s);',
                                                  'enforced when the config file is refused')),
)
_METRICS = (
    ('--metrics-dir', 'DIR', None, ('write the cycle\'s metrics to DIR/ip_masq_agent.prom at the',
                                    'end of every cycle, for node_exporter\'s textfile',
                                    'collector (default: none, no metrics; not with --check)')),
)
_RUN = (
    ('--once', None, False, ('run one cycle and exit (the default; systemd\'s timer',
                             'schedules the next one)')),
    ('--check', None, False, ('report what would change; write nothing',)),
    ('--log-format', ('auto', 'journal', 'plain'), 'auto',
     ('auto (default: journal when stderr is the journal),', 'journal (syslog priority prefixes) or plain')),
    ('--verbose', None, False, ('also say when nothing drifted; show the restore input',)),
    ('--help', None, False, ('show this help',)),
)
_SHORT = {'-v': '--verbose', '-h': '--help'}
_HELP_METAVAR = {'--log-format': 'FMT'}


def flag_attr(flag):
    """The attribute of the parsed options for ``flag``: ``--masq-chain`` -> ``masq_chain``."""
    return flag[2:].replace('-', '_')


def _option_flags(policy):
    """The options table's resync flags: the policy's (``policy``) or the others', as ``_FIRST``'s tuples."""
    out = []
    for option in options.RESYNC_FLAG_OPTIONS:
        if option.module != policy:
            continue
        if option.type == 'bool':
            metavar = None
        elif option.check == 'backends.check_backend':
            metavar = backends.BACKENDS     # the registry's: a registered backend is a choice
        else:
            metavar = tuple(option.choices) if option.choices else option.metavar
        # An option that is no module option (the resync interval) is only
        # information for the resync: not given, it is None.
        default = None if not option.module else ','.join(option.default) if option.type == 'list' else option.default
        out.append((option.resync_flag, metavar, default, option.help or (option.doc,), option.metavar))
    return out


def _groups():
    """The flags in their usage and help groups: the config file and the
    policy's flags; the state, the non-policy options and metrics; the run's."""
    return (_own(_FIRST) + _option_flags(True), _own(_STATE) + _option_flags(False) + _own(_METRICS), _own(_RUN))


def _own(entries):
    """The resync's own flags in ``_option_flags``' shape (no option metavar)."""
    return [entry + (None,) for entry in entries]


def flags():
    """flag -> (attribute, kind, default); kind: 'str', 'bool', 'int' or a tuple of choices."""
    out = {}
    for group in _groups():
        for flag, metavar, default, _help, _name in group:
            kind = 'bool' if metavar is None else metavar if isinstance(metavar, tuple) else 'str'
            out[flag] = (flag_attr(flag), kind, default)
    return out


def _usage_item(flag, metavar):
    short = dict((long, short) for short, long in _SHORT.items()).get(flag)
    if short:
        return '[%s]' % short
    if metavar is None:
        return '[%s]' % flag if flag in ('--once', '--check') else '[%s[=BOOL]]' % flag
    return '[%s %s]' % (flag, '|'.join(metavar) if isinstance(metavar, tuple) else metavar)


def usage(width=96):
    """The usage lines: each group from a new line, wrapped at ``width``."""
    head = 'usage: %s ' % PROG
    lines = []
    for group in _groups():
        line = ''
        for flag, metavar, _default, _help, _name in group:
            item = _usage_item(flag, metavar)
            if line and len(head) + len(line) + 1 + len(item) > width:
                lines.append(line)
                line = item
            else:
                line = line + ' ' + item if line else item
        lines.append(line)
    return ''.join(('%s%s\n' % (head if i == 0 else ' ' * len(head), line)) for i, line in enumerate(lines))


def _help_left(flag, metavar, name):
    short = dict((long, short) for short, long in _SHORT.items()).get(flag)
    if short:
        return '%s, %s' % (short, flag)
    if metavar is None:
        return flag if flag in ('--once', '--check') else '%s[=BOOL]' % flag
    if isinstance(metavar, tuple):
        metavar = name or _HELP_METAVAR.get(flag) or 'VALUE'
    return '%s %s' % (flag, metavar)


def help_text():
    """``--help``: the usage, then one entry per flag, in the usage's order."""
    out = [usage(), _HELP_INTRO]
    for group in _groups():
        for flag, metavar, default, lines, name in group:
            left = _help_left(flag, metavar, name)
            text = [line % {'default': default} if '%(default)s' in line else line for line in lines]
            if len(left) > 24:
                out.append('  %s\n' % left)
                out.extend('%s%s\n' % (' ' * 28, line) for line in text)
            else:
                out.append('  %-24s  %s\n' % (left, text[0]))
                out.extend('%s%s\n' % (' ' * 28, line) for line in text[1:])
    out.append(_HELP_END)
    return ''.join(out)


_HELP_INTRO = """
One cycle of the Kubernetes ip-masq-agent on a node without Kubernetes: read the agent
config file (YAML or JSON, the upstream schema, plus the ipmasq.agent extension keys
exceptionCIDRs, masqueradeCIDRs, snatTo, snatToRequireLocal, sourceCIDRs and
outInterfaces, which the upstream agent ignores) and make the nat chain and its POSTROUTING
jump (or, with --backend nftables, our nftables table) match it. Nothing is written when
nothing drifted. The flags mirror upstream's.

"""
_HELP_END = """
Booleans take Go's forms: --enable-ipv6, --enable-ipv6=true, --enable-ipv6=false.
Exit codes: 0 in sync or repaired; 1 failed; 2 the config file was refused (the last
good configuration is enforced when there is one); 64 bad command line.
"""


class Options:
    def __init__(self, table=None):
        for attr, _kind, default in (table or flags()).values():
            setattr(self, attr, default)


class _BadUsage(Exception):
    pass


def _go_bool(flag, text):
    """Go's strconv.ParseBool, as the upstream agent's boolean flags take it."""
    value = parse_bool(text)
    if value is not None:
        return value
    raise _BadUsage('invalid boolean value %r for %s (use true or false)' % (text, flag))


def _parse(argv):
    table = flags()
    opts = Options(table)
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition('=')
        name = _SHORT.get(name, name)
        if name not in table:
            raise _BadUsage('unknown option %s' % arg if arg.startswith('-') else 'unexpected argument %r' % arg)
        attr, kind, _default = table[name]
        if kind == 'bool':
            setattr(opts, attr, _go_bool(name, value) if eq else True)
            continue
        if not eq:
            if not args:
                raise _BadUsage('%s needs a value' % name)
            value = args.pop(0)
        if isinstance(kind, tuple) and value not in kind:
            raise _BadUsage('%s must be one of %s, not %r' % (name, ', '.join(kind), value))
        setattr(opts, attr, value)
    return opts


def parse_args(argv=None):
    """The options; prints help or a usage error and exits (0 / 64) as needed."""
    try:
        opts = _parse(sys.argv[1:] if argv is None else argv)
    except _BadUsage as e:
        sys.stderr.write('%s%s: error: %s\n' % (usage(), PROG, e))
        raise SystemExit(EXIT_USAGE)
    if opts.help:
        sys.stdout.write(help_text())
        raise SystemExit(EXIT_OK)
    return opts


_HELD = []


def hold_root():
    """A shared flock on this file while the resync runs: the installer
    (``_resync_code.sweep``) removes an earlier version's root only when it
    can take the lock exclusively, so never one a resync runs from."""
    try:
        fd = os.open(__file__, os.O_RDONLY | getattr(os, 'O_CLOEXEC', 0))
    except OSError:
        return              # run from a zip (a module's payload): no root to hold
    fcntl.flock(fd, fcntl.LOCK_SH)
    _HELD.append(fd)        # held until the process ends


def main(argv=None):
    hold_root()
    opts = parse_args(argv)
    log = Log(opts.log_format, opts.verbose)
    if opts.mode in ('watch', 'auto'):
        if opts.check:
            log('err', '--check runs one cycle: not with --mode %s.' % opts.mode)
            return EXIT_USAGE
        # Start-up cost: watch.py and nfevents.py load only in the long-running watcher, never in a timer run.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import watch  # pylint: disable=import-outside-toplevel
        watch.run(opts, log, run_cycle)
        return EXIT_OK
    return run_cycle(opts, log)


def run_cycle(opts, log, seen=None):
    """One cycle with its errors logged; the exit code."""
    try:
        return cycle(opts, log, seen)
    except UsageError as e:
        log('err', e.msg)
        return EXIT_USAGE
    except MasqError as e:
        detail = (e.details.get('stderr') or '').strip()
        log('err', e.msg if not detail or detail in e.msg else '%s (%s)' % (e.msg, detail))
        return EXIT_FAILED


if __name__ == '__main__':
    raise SystemExit(main())
