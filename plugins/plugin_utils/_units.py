# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""The node-side resync's systemd units, rendered on the controller from the
typed, checked role variables, as ``_config_file.py`` renders the config file.

Per ``ip_masq_resync_mode`` (issue 36): ``timer`` runs the resync as a
oneshot ip-masq-agent.service from ip-masq-agent.timer (boot, then every
interval) and ip-masq-agent.path (the config file changed); ``watch`` and
``auto`` run ip-masq-agent.service as one long-running process (enabled;
its own cycle every interval is the safety net, so no timer), and
ip-masq-agent.path starts ip-masq-agent-reload.service, a oneshot that
reloads it (``ExecReload=``: SIGHUP, a cycle at once).

A switch between the modes is one all-or-nothing change of the role's node
run: the new mode's unit files written, the other mode's removed with
:func:`others`, and with :func:`stale_links` the enable links of the units
the new mode does not enable (what ``systemctl disable`` would remove: the
unit files they point to are gone or have no ``[Install]`` any more). The
tasks after it only stop what :func:`stopping` names and clear what
:func:`clearing` names (from systemd's live state, so that a rerun after a
cut-off run converges), reload systemd and start this mode's units. :func:`leaving` says what the removal stops,
disables and removes.

The service's ExecStart passes every option the resync takes as a flag
(``options.RESYNC_FLAG_OPTIONS``: its flag, its role variable), so the unit
and the resync's parser (``_core/agent/resync.py``) come from one table:
tests/unit/test_units.py parses the ExecStart back with the resync's own
parser and gets the policy the module builds from the same settings.

One value is one systemd argument (:func:`arg`): double-quoted, C escapes,
specifiers (``%``) escaped and, in ExecStart=, variables (``$``) too. The
role only passes paths it has checked."""

from __future__ import annotations

import re

from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options

SERVICE = 'ip-masq-agent.service'
TIMER = 'ip-masq-agent.timer'
PATH_UNIT = 'ip-masq-agent.path'
RELOAD = 'ip-masq-agent-reload.service'
# Every unit of either mode: what a switch and the removal look for.
UNIT_NAMES = (SERVICE, TIMER, PATH_UNIT, RELOAD)
# Each mode's units, and those of them it enables and starts (the units with an [Install] section).
_UNITS = {False: (SERVICE, TIMER, PATH_UNIT), True: (SERVICE, PATH_UNIT, RELOAD)}
_STARTED = {False: (TIMER, PATH_UNIT), True: (SERVICE, PATH_UNIT)}
# The target each unit is installed into (its [Install] WantedBy=) in the mode that enables it:
# `systemctl enable` links it from <unit dir>/<target>.wants/.
WANTED_BY = {SERVICE: 'multi-user.target', TIMER: 'timers.target', PATH_UNIT: 'paths.target'}
# What `systemctl is-active` prints for a unit that runs: a oneshot run by the timer is
# "activating" while it runs, never "active" (no RemainAfterExit=); the watcher is "active".
_RUNNING = ('active', 'reloading')
# The resync's default mode: left out of ExecStart, so that the timer's unit stays as it was.
_DEFAULT_MODE = options.BY_NAME['resync_mode'].default
LAST_GOOD = 'last-good-config'
ENTRY = 'from %s import main; raise SystemExit(main())' % _resync_code.START
# A state directory systemd can make itself (StateDirectory=): one level below /var/lib.
STATE_DIRECTORY = re.compile(r'^/var/lib/([^/]+)$')


def watching(mode):
    """Whether ``mode`` (``ip_masq_resync_mode``) runs the long-running process (watch, auto)."""
    return mode not in (None, _DEFAULT_MODE)


def mode_units(mode):
    """The names of the units of ``mode``."""
    return _UNITS[watching(mode)]


def started(mode):
    """The units of ``mode`` that the role enables and starts (``()``: no mode, the removal)."""
    return _STARTED[watching(mode)] if mode else ()


def others(mode):
    """The names of the units of the other mode than ``mode``: the node run removes them."""
    return tuple(name for name in UNIT_NAMES if name not in mode_units(mode))


def stale_links(mode):
    """The enable links (relative to the unit directory) that the node run
    removes for ``mode``: those of the units of either mode that ``mode``
    does not enable (the timer's under watch; the watcher's under the timer)."""
    return tuple('%s.wants/%s' % (WANTED_BY[name], name) for name in UNIT_NAMES
                 if name in WANTED_BY and name not in started(mode))


def stopping(mode, states):
    """The units systemd still runs that ``mode`` does not start, from
    ``states`` (``{unit: {'active': ...}}`` as ``systemctl is-active``
    printed it after the node run): a timer beside the watcher, a watcher
    beside the timer (the oneshots a mode starts otherwise, the service from
    the timer, the reload unit from the path unit, are "activating" while
    they run, never "active": left alone). Read from systemd, not from the files, so that a rerun
    after a run cut off between the node run and the stop still stops them
    (their files are gone by then; systemd keeps a running unit loaded)."""
    return [name for name in UNIT_NAMES if name not in started(mode)
            and (states.get(name) or {}).get('active') in _RUNNING]


def clearing(mode, states):
    """The other mode's units (not units of ``mode``) that systemd holds as
    "failed": the daemon-reload after the node run removed a timer's file
    leaves that timer not-found and failed (it has no trigger any more).
    ``systemctl reset-failed`` lets systemd forget it. This mode's own units
    are never cleared: a failed run of the resync is for the operator to see."""
    return [name for name in UNIT_NAMES if name not in mode_units(mode)
            and (states.get(name) or {}).get('active') == 'failed']


def leaving(present):
    """What the removal stops, disables and removes, of the units ``present``
    on the node (their names, as found before this run wrote anything):
    ``{'stop': [{'name', 'disable'}], 'remove': [names]}``. Each is stopped,
    and disabled where the mode it was installed for (the reload unit is
    there: watch) had enabled it; the files are removed after that (disable
    needs them)."""
    was = 'watch' if RELOAD in present else _DEFAULT_MODE
    stop = [{'name': name, 'disable': name in started(was)} for name in UNIT_NAMES if name in present]
    return {'stop': stop, 'remove': [name for name in UNIT_NAMES if name in present]}


def arg(value, exec_line=True):
    """``value`` as one systemd argument."""
    text = str(value).replace('\\', '\\\\').replace('"', '\\"').replace('%', '%%')
    if exec_line:
        text = text.replace('$', '$$')
    return '"%s"' % text


def _specifiers(text):
    return str(text).replace('%', '%%')


def option_args(values):
    """The ExecStart arguments of the table's resync flags, for the typed
    role variables ``values``: the values first (the policy's, then the
    others'), then the switches, then the lists (comma-separated, as the
    resync reads them); a value None, the resync's own default, is left out,
    and so is the timer's mode (the resync's default: the timer's unit stays
    the unit of before)."""
    values_, switches, lists = [], [], []
    for option in sorted(options.RESYNC_FLAG_OPTIONS, key=lambda o: not o.module):
        value = values.get(option.role)
        if value is None or (option.name == 'resync_mode' and not watching(value)):
            continue
        if option.type == 'bool':
            switches.append('%s=%s' % (option.resync_flag, 'true' if value else 'false'))
        elif option.type == 'list':
            lists.append('%s %s' % (option.resync_flag, arg(','.join(str(v) for v in value))))
        else:
            values_.append('%s %s' % (option.resync_flag, arg(value)))
    return values_, switches, lists


def exec_args(values):
    """The resync's arguments in the service's ExecStart, one a line."""
    config, state_dir, metrics = values['ip_masq_config_path'], values['ip_masq_state_dir'], values['ip_masq_metrics_dir']
    values_, switches, lists = option_args(values)
    out = ['--config %s' % arg(config), '--state-file %s' % arg(state_dir + '/' + LAST_GOOD)] + values_ + switches
    if metrics:
        out.append('--metrics-dir %s' % arg(metrics))
    return out + lists


def _state_dir_lines(state_dir):
    match = STATE_DIRECTORY.match(state_dir)
    if match:
        return 'StateDirectory=%s\nStateDirectoryMode=0700\n' % match.group(1)
    return 'ReadWritePaths=%s\n' % arg(state_dir, exec_line=False)


def _head(values, watch):
    """The service's opening comment and [Unit] section."""
    chain, config, interval = values['ip_masq_chain'], values['ip_masq_config_path'], values['ip_masq_resync_interval']
    if not watch:
        return [
            '# Re-applies the ip-masq-agent SNAT policy (nat chain %s) from\n' % chain,
            '# %s; started by ip-masq-agent.timer (boot, then every\n' % config,
            '# %s) and ip-masq-agent.path (config file changes).\n' % interval,
            '# Writes nothing when nothing drifted; repairs are logged to the journal:\n',
            '#   journalctl -u ip-masq-agent.service\n',
            '[Unit]\n',
            'Description=Apply the ip-masq-agent SNAT policy (nat chain %s)\n' % _specifiers(chain),
            'Documentation=https://kubernetes.io/docs/tasks/administer-cluster/ip-masq-agent/\n',
            '# The timer and the path unit must never be stopped by a start rate limit.\n',
            'StartLimitIntervalSec=0\n',
        ]
    return [
        '# Keeps the ip-masq-agent SNAT policy (nat chain %s) applied from\n' % chain,
        '# %s (ip_masq_resync_mode: %s): one long-running process\n' % (config, values['ip_masq_resync_mode']),
        '# that repairs as soon as netfilter announces a change, runs a cycle every\n',
        '# %s (the safety net) and on reload (ip-masq-agent.path: the config file changed).\n' % interval,
        '# Writes nothing when nothing drifted; repairs are logged to the journal:\n',
        '#   journalctl -u ip-masq-agent.service\n',
        '[Unit]\n',
        'Description=Keep the ip-masq-agent SNAT policy applied (nat chain %s)\n' % _specifiers(chain),
        'Documentation=https://kubernetes.io/docs/tasks/administer-cluster/ip-masq-agent/\n',
        '# Restarted after every failure: never stopped by a start rate limit.\n',
        'StartLimitIntervalSec=0\n',
    ]


# The watcher's own lines: long-running, reloaded by SIGHUP (no shell:
# systemd substitutes $MAINPID), restarted a second after a failure, and no
# start timeout (Type=simple is started once it runs).
_WATCH_SERVICE = ('# SIGHUP: a cycle at once (ip-masq-agent-reload.service sends it when the config file changes).\n'
                  'ExecReload=/bin/kill -HUP $MAINPID\n'
                  'Restart=on-failure\n'
                  'RestartSec=1s\n')


_STOPPED_ONESHOT = ('# A run that systemctl stop (the role\'s removal, a shutdown) ends with SIGTERM\n'
                    '# was asked to end, not failed: without this a oneshot unit stays "failed".\n')
_STOPPED_WATCH = ('# The watcher exits 0 on SIGTERM; one stopped before it listens (the role\'s switch\n'
                  '# or removal, a shutdown) was asked to end, not failed either.\n')


def service(values, pythonpath, managed):
    """The service unit; ``pythonpath`` is what its PYTHONPATH names (the code's install root)."""
    metrics = values['ip_masq_metrics_dir']
    watch = watching(values.get('ip_masq_resync_mode'))
    execs = exec_args(values)
    out = ['# %s\n' % managed] + _head(values, watch) + [
        '\n',
        '[Service]\n',
        'Type=simple\n' if watch else 'Type=oneshot\n',
        'SyslogIdentifier=ip-masq-agent\n',
        'Environment=%s "LC_ALL=C"\n' % arg('PYTHONPATH=' + pythonpath, exec_line=False),
        "# -c rather than -m: runpy's imports would cost more than the cycle's own work.\n",
        'ExecStart=%s -S -B -c "%s" \\\n' % (values['ip_masq_python'], ENTRY),
        ''.join('  %s \\\n' % line for line in execs[:-1]),
        '  %s\n' % execs[-1],
        _WATCH_SERVICE if watch else 'TimeoutStartSec=120\n',
        _STOPPED_WATCH if watch else _STOPPED_ONESHOT,
        'SuccessExitStatus=SIGTERM\n',
        'UMask=0077\n',
        '\n',
        HARDENING,
        _state_dir_lines(values['ip_masq_state_dir']),
    ]
    if metrics:
        out += ['# The metrics for node_exporter\'s textfile collector ("-": a directory that\n',
                '# does not exist yet is no error; the cycle then warns and writes nothing).\n',
                'ReadWritePaths=%s\n' % arg('-' + metrics, exec_line=False)]
    out.append(SANDBOX)
    if watch:
        out.append('\n[Install]\nWantedBy=%s\n' % WANTED_BY[SERVICE])
    return ''.join(out)


HARDENING = '''# Hardening: iptables needs CAP_NET_ADMIN (nat table) and CAP_NET_RAW (the
# legacy backend's raw socket); nothing else. The kernel still loads netfilter
# modules on demand; with the legacy backend ip_tables must be loadable by the
# kernel (it is, unless module loading is disabled).
NoNewPrivileges=yes
CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW
AmbientCapabilities=
ProtectSystem=strict
'''
SANDBOX = '''# iptables-legacy takes its lock on /run/xtables.lock and every writer of
# ipmasq.agent on /run/ipmasq-agent.lock; both must exist
# (/etc/tmpfiles.d/ip-masq-agent.conf creates them at boot): /run is read-only here.
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
PrivateMounts=yes
ProtectProc=invisible
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6
# netlink and the legacy backend's raw socket send no IP packet.
IPAddressDeny=any
RestrictNamespaces=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
'''


def timer(values, timer_value, managed):
    """The timer unit; ``timer_value`` is the interval as systemd reads it (``role_args``' timer)."""
    return ('# %s\n'
            '[Unit]\n'
            'Description=Re-apply the ip-masq-agent SNAT policy at boot and every %s\n'
            '\n'
            '[Timer]\n'
            '# At boot (and at once when the timer is first started), then every resync interval.\n'
            'OnBootSec=0\n'
            'OnUnitActiveSec=%s\n'
            'AccuracySec=1s\n'
            'Unit=ip-masq-agent.service\n'
            '\n'
            '[Install]\n'
            'WantedBy=%s\n') % (managed, _specifiers(values['ip_masq_resync_interval']), timer_value, WANTED_BY[TIMER])


def path_unit(values, managed):
    """The path unit: whenever the config file changes, the service runs
    (timer) or the reload unit tells the watcher (watch, auto)."""
    config = _specifiers(values['ip_masq_config_path'])
    watch = watching(values.get('ip_masq_resync_mode'))
    return ('# %s\n'
            '[Unit]\n'
            'Description=%s when %s changes\n'
            '\n'
            '[Path]\n'
            '# Written, replaced, created or deleted (deleted means the upstream defaults).\n'
            'PathChanged=%s\n'
            'Unit=%s\n'
            '\n'
            '[Install]\n'
            'WantedBy=%s\n') % (
                managed, 'Reload the ip-masq-agent watcher' if watch else 'Re-apply the ip-masq-agent SNAT policy',
                config, config, RELOAD if watch else SERVICE, WANTED_BY[PATH_UNIT])


def reload_unit(values, managed):
    """The oneshot the path unit starts in watch and auto mode: it reloads
    the watcher (its ExecReload=, SIGHUP: a cycle at once with the new file),
    or starts it where it is not running. systemctl with an argv, no shell."""
    return ('# %s\n'
            '# Started by ip-masq-agent.path when %s changes.\n'
            '[Unit]\n'
            'Description=Tell the ip-masq-agent watcher that its config file changed\n'
            'StartLimitIntervalSec=0\n'
            '\n'
            '[Service]\n'
            'Type=oneshot\n'
            'ExecStart=/bin/systemctl reload-or-restart %s\n'
            'NoNewPrivileges=yes\n'
            'ProtectSystem=strict\n'
            'ProtectHome=yes\n'
            'PrivateTmp=yes\n'
            'RestrictAddressFamilies=AF_UNIX\n'
            'IPAddressDeny=any\n') % (managed, _specifiers(values['ip_masq_config_path']), SERVICE)


def units(values, timer_value, root, managed):
    """``{unit name: text}`` of the units of ``ip_masq_resync_mode``
    (:func:`mode_units`) for the typed role variables ``values``; the
    service's PYTHONPATH names ``root``, this version's root of the resync's
    code below ``ip_masq_lib_dir`` (``_resync_code.resync_root``, computed
    once by the caller)."""
    render = {SERVICE: lambda: service(values, root, managed),
              TIMER: lambda: timer(values, timer_value, managed),
              PATH_UNIT: lambda: path_unit(values, managed),
              RELOAD: lambda: reload_unit(values, managed)}
    return dict((name, render[name]()) for name in mode_units(values.get('ip_masq_resync_mode')))
