# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Every policy option, declared once.

One :class:`Option` per setting of the policy: its type (and element type),
its default, the module option (``masq_chain``, ``ip_masq_node``'s chain
part), the role variable, the key of the agent's config file, the upstream
agent's flag, the rule that validates it, its documentation line and the
version that added it.  Everything else is derived from :data:`OPTIONS`:

- masq_chain's and ip_masq_node's argument specs and defaults
  (:func:`module_spec`, :data:`DEFAULTS`);
- the config file's key map (:data:`CONFIG_FIELDS`, :data:`EXTENSION_FIELDS`)
  and the file the role writes (``config.role_config_text``);
- the role's checks on the controller (``plugin_utils/_role_args.py``) and
  the table of docs/docsite/rst/variables.rst (``scripts/options_table.py``).

The role's meta/argument_specs.yml and masq_chain's DOCUMENTATION stay files
(ansible-doc reads them); tests/unit/test_options.py fails when either
disagrees with this table on a name, type, element type, default, choice or
version.

An option whose row says ``extra=True`` needs no keyword of ``Policy``: the
Policy keeps its value in ``Policy.extra``, checked by the row's ``check``,
and each backend writes it by its own rule for that option (its
``OPTION_RULES``, name -> function) while it lays out ours.  :func:`register`
adds such a row from outside this file (a test's option,
tests/lab/ipmasq_lab/option_probe.py) and derives every table below again;
CONTRIBUTING.md, "Adding a policy option".

Standard library only, and cheap: the resync imports this on every cycle
(plain tuples and one small class; nothing is compiled at import).
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.ranges import DEFAULT_NONMASQ_CIDRS


class Option:
    """One policy option.  ``role``/``key``/``flag`` are None where the
    option has no role variable, config-file key or upstream flag;
    ``module`` is False for a setting that is no module option (the resync
    interval: the role's timer and the config file only).  ``check`` names
    the core rule that validates the value (``policy.py`` unless said).

    ``extra``: an option that no keyword of ``Policy`` names; the Policy
    keeps its value in ``Policy.extra``, each backend writes it by its rule
    (``OPTION_RULES`` of ``iptables_backend/rules.py``,
    ``nftables_backend/rules.py``), and ``check`` is the function that
    validates it (value -> the value to keep; MasqError naming the option)."""

    __slots__ = ('name', 'type', 'elements', 'default', 'choices', 'role', 'key', 'extension', 'flag',
                 'module', 'role_default', 'check', 'doc', 'version_added', 'resync_flag', 'metavar', 'help',
                 'extra')

    def __init__(self, name, type, default, doc, elements=None, choices=None, role=True, key=None,  # pylint: disable=redefined-builtin
                 extension=False, flag=None, module=True, role_default=None, check=None, version_added=None,
                 resync_flag=None, metavar=None, help=None, extra=False):  # pylint: disable=redefined-builtin
        self.name = name
        self.type = type
        self.elements = elements
        self.default = default
        self.choices = choices
        self.role = ('ip_masq_' + name) if role is True else role
        self.key = key
        self.extension = extension
        self.flag = flag
        self.module = module
        # The role's default where it differs from the module's (the module's
        # None means the upstream default list; the role spells it out).
        self.role_default = default if role_default is None else role_default
        self.check = check
        self.doc = doc
        self.version_added = version_added
        # The node-side resync's flag (and so the service unit's ExecStart
        # argument; upstream's flag where it has one), its value's name in the
        # usage and help, and its help lines (``%(default)s``: the default).
        # An option without one reaches the resync through the config file.
        self.resync_flag = resync_flag or flag
        self.metavar = metavar
        self.help = help
        self.extra = extra

    def spec(self):
        """The AnsibleModule/ArgumentSpecValidator entry."""
        out = {'type': self.type}
        if self.elements:
            out['elements'] = self.elements
        if self.default is not None:
            out['default'] = list(self.default) if isinstance(self.default, list) else self.default
        if self.choices:
            out['choices'] = list(self.choices)
        return out


OPTIONS = (
    # The upstream agent's config file keys, in the order the Kubernetes docs write them.
    Option('nonmasquerade_cidrs', 'list', None, 'Destination CIDRs that keep their source address (one RETURN '
           'rule each); the module leaves it out for the upstream default list.', elements='str',
           key='nonMasqueradeCIDRs', role_default=list(DEFAULT_NONMASQ_CIDRS), check='cidrs.parse_cidrs'),
    Option('masq_link_local', 'bool', False, 'Masquerade traffic to 169.254.0.0/16.', key='masqLinkLocal'),
    Option('masq_link_local_ipv6', 'bool', False, 'Masquerade traffic to fe80::/10.', key='masqLinkLocalIPv6'),
    Option('resync_interval', 'str', '60s', "How often the resync re-applies the policy (a Go duration of "
           "a millisecond or more).", key='resyncInterval', module=False, check='golang.parse_duration',
           resync_flag='--resync-interval', metavar='DURATION',
           help=('the interval the timer runs this at (Go duration); only',
                 "used to warn when the file's resyncInterval differs")),
    Option('resync_mode', 'str', 'timer', 'How the node notices drift: timer (a cycle every resync interval), '
           "watch (one long-running process woken by nf_tables' own change events, with a cycle every resync "
           'interval as a safety net) or auto (watch where the policy lives in nf_tables, else the timer).',
           choices=('timer', 'watch', 'auto'), module=False, version_added='2.0.0', resync_flag='--mode',
           metavar='MODE', help=('timer (default: one cycle, then exit), watch (run on',
                                 "nf_tables' change events, and every interval) or auto",
                                 '(watch where nf_tables holds the policy, else poll)')),
    Option('cidr_limit', 'int', 64, 'Most CIDRs allowed in nonmasquerade_cidrs (and masquerade_cidrs).',
           key='cidrLimit', check='cidrs.over_limit'),
    # The upstream agent's flags.
    Option('chain', 'str', 'IP-MASQ-AGENT', 'The nat chain of ours.', flag='--masq-chain',
           check='validate_chain_name', metavar='NAME', help=('the nat chain (default %(default)s)',)),
    Option('nomasq_all_reserved_ranges', 'bool', False, 'Also keep the source address for the reserved IPv4 '
           'ranges.', flag='--nomasq-all-reserved-ranges',
           help=('also exempt the reserved IPv4 ranges, appended to the list',)),
    Option('ipv6', 'bool', False, 'Manage IPv6 too.', role='ip_masq_enable_ipv6', flag='--enable-ipv6',
           help=('manage ip6tables too (IPv6 CIDRs in the file need it)',)),
    Option('random_fully', 'bool', None, 'Add --random-fully to the MASQUERADE rules (null: the rule '
           "format's default).", flag='--random-fully',
           help=('add --random-fully to MASQUERADE (default: off with',
                 '--rule-format docs; with upstream, on where iptables',
                 "supports it, as upstream's default true)")),
    Option('to_ports', 'list', [], 'Source ports for masqueraded TCP, UDP and SCTP.', elements='str',
           flag='--to-ports', check='parse_to_ports', metavar='RANGES',
           help=('source ports for MASQUERADE, e.g. 1024-29999,32768-65535',
                 '(in the order given; "" means none)')),
    # What ipmasq.agent adds.
    Option('jump_position', 'str', 'append', 'Where the jump from POSTROUTING goes.',
           choices=('append', 'first'), resync_flag='--jump-position', metavar='POS',
           help=('append (upstream, default) or first (kept at position 1)',)),
    Option('rule_format', 'str', 'docs', 'The rules as the Kubernetes docs show them, or as upstream '
           'writes them.', choices=('docs', 'upstream'), version_added='1.0.0', resync_flag='--rule-format',
           metavar='FMT', help=('docs (default: the rule text the Kubernetes docs show) or',
                                'upstream (byte for byte what the upstream agent v2.12 writes;',
                                'duplicate CIDRs kept, reserved ranges added to the default',
                                'list only)')),
    Option('backend', 'str', 'auto', 'Where the policy lives: iptables, nftables, or auto.',
           choices=('auto', 'iptables', 'nftables'), version_added='1.1.0', check='backends.check_backend',
           resync_flag='--backend', metavar='B',
           help=('where the policy lives: iptables (the chain), nftables',
                 '(the table inet <chain in lower case>) or auto (default:',
                 'a node keeps the backend that holds our policy; a new',
                 'node gets iptables where it is installed, else nftables).',
                 'Every cycle also removes ours from the other backend')),
    Option('exception_cidrs', 'list', [], 'Parts of a kept range that are rewritten after all.', elements='str',
           key='exceptionCIDRs', extension=True, version_added='1.1.0', check='cidrs.parse_cidrs'),
    Option('masquerade_cidrs', 'list', [], 'Masquerade-only: the only destinations rewritten.', elements='str',
           key='masqueradeCIDRs', extension=True, version_added='1.1.0', check='cidrs.parse_cidrs'),
    Option('snat_to', 'list', [], 'SNAT to these addresses instead of MASQUERADE.', elements='str',
           key='snatTo', extension=True, version_added='1.1.0', check='parse_snat_to'),
    Option('snat_to_require_local', 'bool', True, 'Every snat_to address must be one of the node.',
           key='snatToRequireLocal', extension=True, version_added='1.1.0', check='addresses.check_snat_local'),
    Option('source_cidrs', 'list', [], 'Only traffic from these sources is rewritten.', elements='str',
           key='sourceCIDRs', extension=True, version_added='1.1.0', check='cidrs.parse_cidrs'),
    Option('out_interfaces', 'list', [], 'Only traffic leaving by these interfaces is rewritten.',
           elements='str', key='outInterfaces', extension=True, version_added='1.1.0', check='parse_interfaces'),
    # The module's own (no role variable of the policy's: the role sets state itself).
    Option('adopt_chain', 'bool', False, 'Take over a chain of this name that ipmasq.agent never wrote.',
           role=None, version_added='1.0.0'),
    Option('state', 'str', 'present', 'present applies the policy; absent removes every chain and table of ours.',
           choices=('present', 'absent')),
)


def _derived(table):
    """Every table derived from the options ``table`` (:data:`OPTIONS`), in
    the order of the names they are bound to below."""
    return (
        dict((o.name, o) for o in table),
        # The options the node-side resync takes as flags (the service unit's
        # ExecStart), in the table's order; the rest it reads from the config file.
        tuple(o for o in table if o.resync_flag),
        # Module options that make the Policy (the rest: backend, adopt_chain, state).
        tuple(o.name for o in table if o.module and o.name not in ('backend', 'adopt_chain', 'state')),
        # The options the Policy keeps in ``Policy.extra``, each backend writing it by its rule.
        tuple(o for o in table if o.extra),
        # The config file: (file key, our name); upstream's keys, then ours.
        tuple((o.key, o.name) for o in table if o.key and not o.extension),
        tuple((o.key, o.name) for o in table if o.key and o.extension),
        dict((o.name, o.default) for o in table if o.key and o.extension),
        # The module's defaults, for a caller that leaves some out.
        dict((o.name, o.default) for o in table if o.module),
        # Role variable -> option, for the options the role sets.
        dict((o.role, o) for o in table if o.role),
    )


(BY_NAME, RESYNC_FLAG_OPTIONS, POLICY_OPTIONS, EXTRA_OPTIONS, CONFIG_FIELDS, EXTENSION_FIELDS, EXTENSION_DEFAULTS,
 DEFAULTS, ROLE_VARIABLES) = _derived(OPTIONS)
# Our nat chain's (and, in lower case, our nftables table's) default name.
DEFAULT_CHAIN = BY_NAME['chain'].default


def register(option):
    """Add ``option``, a row with ``extra=True``, to the end of the table,
    and derive every table again; returns the function that takes it out.
    For an option that lives outside plugins/ (the tests'
    ``tests/lab/ipmasq_lab/option_probe.py``, which also adds its rule to
    each backend's ``OPTION_RULES``): the module's spec, the Policy, the
    resync's flags, usage and help and the unit's ExecStart all read the
    tables at call time, so this line is all the row needs.  It reaches the
    resync by its flag: a config-file key, which the file's reader types key
    by key (``upstream_config/config.py``), is refused here.  A caller reads
    the tables as ``options.NAME`` (a name imported from here keeps the
    table of before)."""
    if (not isinstance(option, Option) or option.name in BY_NAME or not option.extra or option.key
            or not option.module or (option.check is not None and not callable(option.check))):
        raise MasqError('internal error: %r is not an extra option of a new name, a module option without a '
                        'config-file key.' % (getattr(option, 'name', option),))
    _bind(OPTIONS + (option,))

    def unregister():
        _bind(tuple(o for o in OPTIONS if o is not option))
    return unregister


def _bind(table):
    global OPTIONS, BY_NAME, RESYNC_FLAG_OPTIONS, POLICY_OPTIONS, EXTRA_OPTIONS  # pylint: disable=global-statement
    global CONFIG_FIELDS, EXTENSION_FIELDS, EXTENSION_DEFAULTS, DEFAULTS, ROLE_VARIABLES  # pylint: disable=global-statement
    OPTIONS = table
    (BY_NAME, RESYNC_FLAG_OPTIONS, POLICY_OPTIONS, EXTRA_OPTIONS, CONFIG_FIELDS, EXTENSION_FIELDS, EXTENSION_DEFAULTS,
     DEFAULTS, ROLE_VARIABLES) = _derived(table)


def module_spec(names=None):
    """The argument spec of the module options ``names`` (all by default)."""
    return dict((o.name, o.spec()) for o in OPTIONS if o.module and (names is None or o.name in names))


def role_variable(name):
    """The role variable of option ``name`` (the option's own name where it has none)."""
    option = BY_NAME.get(name)
    return option.role if option is not None and option.role else name
