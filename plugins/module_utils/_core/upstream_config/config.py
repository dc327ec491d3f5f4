# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The Kubernetes ip-masq-agent's config file, read as the upstream agent reads it.

Upstream (``cmd/ip-masq-agent``) reads ``/etc/config/ip-masq-agent``: a file
whose first non-blank character is ``{`` is JSON, anything else is YAML
(go-yaml v2, see ``yamlsubset.py``), converted to JSON and decoded into::

    nonMasqueradeCIDRs  []string   replaces the default 10/8, 172.16/12, 192.168/16
    masqLinkLocal       bool       default false
    masqLinkLocalIPv6   bool       default false
    cidrLimit           int        default 64
    resyncInterval      string     Go duration (time.ParseDuration), default 60s

and, as extensions of ours that the upstream agent ignores (``EXTENSION_FIELDS``;
docs/docsite/rst/extensions.rst)::

    exceptionCIDRs      []string   destinations masqueraded inside the kept ranges
    masqueradeCIDRs     []string   masquerade only these destinations
    snatTo              []string   SNAT to an address or range per family
    snatToRequireLocal  bool       default true: snatTo must be the node's own
    sourceCIDRs         []string   rewrite traffic from these sources only
    outInterfaces       []string   rewrite traffic leaving by these interfaces only

Keys match case-insensitively (``NonMasqueradeCIDRs`` works), unknown keys are
ignored (here: ignored *with a warning that names them*), a wrong type is an
error, a missing file means the defaults, an empty file means the defaults.

Standard library only: this file runs on managed nodes (the role's resync).
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.cidrs import (
    DEFAULT_CIDR_LIMIT,
    CanonicalCidrs,
    canonical_ipv4_cidr,
    default_cidrs,
    is_default_list,
    normal_text,
    over_limit,
    parse_cidrs,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import ConfigError, MasqError, quote
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.fileio import read_regular
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.golang import format_duration, parse_duration_ns
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import (
    CONFIG_FIELDS,
    EXTENSION_DEFAULTS,
    EXTENSION_FIELDS,
    OPTIONS,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.yamlsubset import (
    DEPTH_REASON,
    INT64_MIN,
    MAX_DEPTH,
    Pairs,
    key_text,
    load_yaml,
)

DEFAULT_CONFIG_PATH = '/etc/ip-masq-agent/config'
DEFAULT_RESYNC_INTERVAL = '1m0s'
MAX_CONFIG_BYTES = 1024 * 1024

# The upstream struct's JSON names, and our names for the settings; then
# keys of ours (docs/docsite/rst/extensions.rst), which the upstream agent
# ignores, as it ignores every key it does not know.  The settings hold an
# extension only when the file sets it, and a file is written with the ones
# set, so a file without them is the upstream file byte for byte.  Both come
# from the options table (_core/model/options.py).
_FOLDED = dict((key.casefold(), (key, ours)) for key, ours in CONFIG_FIELDS + EXTENSION_FIELDS)

_KEY_CHARS = frozenset('abcdefghijklmnopqrstuvwxyz0123456789')

# Keys people put in the file that the agent does not read there.
_KEY_HINTS = {
    'nonmasqueradecidrs': 'nonMasqueradeCIDRs',
    'nonmasqueradecidr': 'nonMasqueradeCIDRs',
    'nonmasqcidrs': 'nonMasqueradeCIDRs',
    'nonmasqcidr': 'nonMasqueradeCIDRs',
    'masqlinklocal': 'masqLinkLocal',
    'masqlinklocalipv6': 'masqLinkLocalIPv6',
    'cidrlimit': 'cidrLimit',
    'resyncinterval': 'resyncInterval',
    'resyncperiod': 'resyncInterval',
}


def _json():
    # Imported when needed: a no-drift cycle with a YAML file never needs it.
    import json  # pylint: disable=import-outside-toplevel

    return json


def _reject_constant(name):
    raise ValueError('%s is not valid JSON' % name)


def load_json(text):
    """Strict JSON, as Go's encoding/json reads it (no NaN, no trailing data),
    nested at most MAX_DEPTH deep, as the YAML reader."""
    try:
        document = _json().loads(text, object_pairs_hook=_json_pairs, parse_constant=_reject_constant)
    except RecursionError:      # nested deeper than the json module's own stack allows
        raise _json_too_deep()
    except ValueError as e:
        lineno = int(getattr(e, 'lineno', 0) or 0)
        colno = int(getattr(e, 'colno', 0) or 0)
        reason = getattr(e, 'msg', None) or str(e)
        if lineno > 0:
            shown = text.split('\n')[lineno - 1].strip()
            if len(shown) > 80:
                shown = shown[:77] + '...'
            raise ConfigError('line %d column %d: invalid JSON (a file that starts with "{" is read as JSON, as '
                              'upstream reads it): %s: %s'
                              % (lineno, colno, reason, quote(shown)), line=lineno)
        raise ConfigError('invalid JSON (a file that starts with "{" is read as JSON, as upstream reads it): %s'
                          % reason)
    if _depth_over(document, MAX_DEPTH):
        raise _json_too_deep()
    return document


def _json_too_deep():
    return ConfigError('%s are not supported.' % DEPTH_REASON.replace('lists and mappings', 'JSON arrays and objects'))


def _depth_over(document, limit):
    """Whether lists and mappings nest deeper than ``limit`` (no recursion)."""
    level = [document] if isinstance(document, list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        nested = []
        for node in level:
            if isinstance(node, Pairs):
                nested.extend(value for _key, value, _line in node if isinstance(value, list))
            else:
                nested.extend(item for item in node if isinstance(item, list))
        level = nested
    return False


def _json_pairs(items):
    return Pairs((key, value, None) for key, value in items)


# --------------------------------------------------------------------------
# The settings
# --------------------------------------------------------------------------

def defaults():
    """The upstream agent's settings when there is no config file."""
    return {
        'nonmasquerade_cidrs': default_cidrs(),
        'masq_link_local': False,
        'masq_link_local_ipv6': False,
        'cidr_limit': DEFAULT_CIDR_LIMIT,
        'resync_interval': DEFAULT_RESYNC_INTERVAL,
    }


def _describe(value):
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'the boolean %s' % ('true' if value else 'false')
    if isinstance(value, int):
        return 'the number %d' % value
    if isinstance(value, float):
        return 'the number %r' % value
    if isinstance(value, str):
        return 'the string %s' % quote(value)
    if isinstance(value, Pairs):
        return 'a mapping'
    if isinstance(value, list):
        return 'a list'
    return repr(value)


def _json_key_line(text, key):
    """Best effort: the line of ``"key":`` in a JSON text."""
    if text is None:
        return None
    import re  # pylint: disable=import-outside-toplevel

    match = re.search(r'"%s"\s*:' % re.escape(key), text)
    return text.count('\n', 0, match.start()) + 1 if match else None


def normalise(document, ipv6=False, from_json=False, text=None, keep_duplicates=False):
    """Turn a parsed document into ``(settings, warnings)``.

    ``ipv6`` is the agent's --enable-ipv6; ``from_json`` says the file was
    JSON (Go then refuses ``64.0`` for an int, which YAML turns into 64);
    ``keep_duplicates`` (rule_format upstream) keeps a CIDR listed twice
    twice, as upstream does, and counts it twice against cidrLimit."""
    settings = defaults()
    warnings = []
    if document is None:
        return settings, warnings
    if not isinstance(document, Pairs):
        raise ConfigError('the file must hold a mapping of keys (nonMasqueradeCIDRs, masqLinkLocal, '
                          'masqLinkLocalIPv6, cidrLimit, resyncInterval), not %s.' % _describe(document))
    seen = {}
    unknown = []
    for key, value, line in document:
        if line is None and from_json:
            line = _json_key_line(text, key)
        where = ('%s (line %d)' % (key, line)) if line else key
        found = _FOLDED.get(key.casefold()) if isinstance(key, str) else None
        if found is None:
            unknown.append((key, line))
            continue
        upstream, ours = found
        if ours in seen:
            warnings.append('%s is given more than once (also as %s); the last one is used.'
                            % (where, seen[ours]))
        seen[ours] = where
        if ours == 'nonmasquerade_cidrs':
            settings[ours] = _cidr_list(where, value, warnings)
        elif ours in ('exception_cidrs', 'masquerade_cidrs', 'snat_to', 'source_cidrs', 'out_interfaces'):
            settings[ours] = _string_list(where, value, line)
        elif ours in ('masq_link_local', 'masq_link_local_ipv6', 'snat_to_require_local'):
            if value is None:   # Go: null leaves a bool as it was
                continue
            if not isinstance(value, bool):
                hint = ' (remove the quotes)' if isinstance(value, str) and value.lower() in ('true', 'false') else ''
                raise ConfigError('%s must be true or false, not %s%s.' % (where, _describe(value), hint), line=line)
            settings[ours] = value
        elif ours == 'cidr_limit':
            if value is None:
                continue
            settings[ours] = _cidr_limit(where, value, from_json, line)
        else:
            if not isinstance(value, str):
                raise ConfigError('%s must be a string holding a Go duration such as "60s", not %s.'
                                  % (where, _describe(value)), line=line)
            try:
                ns = parse_duration_ns(value)
            except MasqError as e:
                raise ConfigError('%s: %s' % (where, e.msg), line=line)
            if ns <= 0:
                raise ConfigError('%s: %s is not a positive duration.' % (where, quote(value)), line=line)
            settings[ours] = format_duration(ns)
    warnings.extend(_check_cidrs(settings, ipv6, seen.get('nonmasquerade_cidrs'), keep_duplicates))
    for key, line in unknown:
        warnings.append(_unknown_key_warning(key, line))
    return settings, warnings


def _cidr_list(where, value, warnings):
    if value is None:
        warnings.append('%s is null: as upstream, that means no CIDR at all (everything but link-local is '
                        'masqueraded); write [] to say so, or remove the key for the defaults.' % where)
        return []
    if isinstance(value, Pairs) or not isinstance(value, list):
        raise ConfigError('%s must be a list of CIDR strings, not %s.' % (where, _describe(value)))
    try:
        # Nearly every list: canonical IPv4 CIDRs (strings without spaces), checked in one pass.
        if None not in [canonical_ipv4_cidr(item) for item in value]:
            return CanonicalCidrs(value)
    except AttributeError:      # not a string: said below
        pass
    bad = ['entry %d is %s' % (n + 1, _describe(item)) for n, item in enumerate(value) if not isinstance(item, str)]
    if bad:
        raise ConfigError('%s must be a list of CIDR strings: %s.' % (where, '; '.join(bad)))
    # Upstream hands each string to Go's net.ParseCIDR as it is, which refuses
    # " 10.0.0.0/8": so is it here (a plain YAML value loses its spaces anyway).
    spaced = ['entry %d %s' % (n + 1, quote(item)) for n, item in enumerate(value) if item != item.strip()]
    if spaced:
        raise ConfigError('%s: %s has spaces inside the quotes; upstream refuses such an entry (Go\'s '
                          'net.ParseCIDR): remove the spaces.' % (where, ', '.join(spaced)))
    return list(value)


def _string_list(where, value, line):
    """An extension key's list of strings (null or absent: empty; one
    string: a list of one).  The policy validates the entries."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Pairs) or not isinstance(value, list):
        raise ConfigError('%s must be a list of strings, not %s.' % (where, _describe(value)), line=line)
    bad = ['entry %d is %s' % (n + 1, _describe(item)) for n, item in enumerate(value) if not isinstance(item, str)]
    if bad:
        raise ConfigError('%s must be a list of strings: %s.' % (where, '; '.join(bad)), line=line)
    return list(value)


def _cidr_limit(where, value, from_json, line):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError('%s must be a whole number, not %s.' % (where, _describe(value)), line=line)
    if isinstance(value, float):
        if from_json or not value.is_integer():   # also NaN and infinities
            raise ConfigError('%s must be a whole number, not %s.' % (where, _describe(value)), line=line)
        value = int(value)
    if not INT64_MIN <= value < (1 << 63):
        raise ConfigError('%s: %d is out of range.' % (where, value), line=line)
    if value < 0:
        raise ConfigError('%s must not be negative, got %d.' % (where, value), line=line)
    return value


def _folded_key(text):
    return ''.join(char for char in text.casefold() if char in _KEY_CHARS)


def _unknown_key_warning(key, line):
    name = key if isinstance(key, str) else key_text(key)
    where = '%s (line %d)' % (quote(name), line) if line else quote(name)
    folded = _folded_key(name)
    # The agent's flags people put in the file, by their folded flag and option names: made here,
    # not at import, so that a cycle whose file has no unknown key does not make them.
    flags = dict((_folded_key(text), option.flag) for option in OPTIONS if option.flag for text in (option.flag, option.name))
    if folded in flags:
        return ('unknown key %s is ignored (as upstream ignores it): this is the agent flag %s, set on the '
                'command line (the role sets it from its variables), not in the config file.'
                % (where, flags[folded]))
    if folded in _KEY_HINTS:
        return 'unknown key %s is ignored (as upstream ignores it); did you mean %s?' % (where, _KEY_HINTS[folded])
    keys = [key for key, _ours in CONFIG_FIELDS]
    return ('unknown key %s is ignored (as upstream ignores it); the keys are %s and %s, and the extensions of '
            'ipmasq.agent %s.' % (where, ', '.join(keys[:-1]), keys[-1], ', '.join(key for key, _ours in EXTENSION_FIELDS)))


def _check_cidrs(settings, ipv6, where, keep_duplicates=False):
    """Validate the CIDRs with the core's parser; canonical, duplicates
    dropped (kept with ``keep_duplicates``)."""
    where = where or 'nonMasqueradeCIDRs'
    cidrs = settings['nonmasquerade_cidrs']
    default = is_default_list(cidrs)
    # Canonical IPv4 CIDRs (nearly every list) were checked once, by _cidr_list; anything
    # else goes through the core's parser, for its messages.
    canonical = isinstance(cidrs, CanonicalCidrs)
    normal = cidrs
    ipv6_cidrs = []
    if not canonical:
        try:
            by_family, _dups = parse_cidrs(cidrs, ipv6=True, cidr_limit=None)
        except MasqError as e:
            raise ConfigError('%s: %s' % (where, _core_reason(e.msg)))
        normal = [normal_text(raw.strip()) for raw in cidrs]
        ipv6_cidrs = by_family[6]
    canon = []
    counts = {}
    if canonical and len(set(normal)) == len(normal):
        canon = CanonicalCidrs(normal)      # each once: the policy need not check them again
    else:
        for text in normal:
            if text not in counts:
                counts[text] = 0
                canon.append(text)
            counts[text] += 1
    if ipv6_cidrs and not ipv6:
        one = len(ipv6_cidrs) == 1
        raise ConfigError('%s: %s %s IPv6 but IPv6 is not enabled: start the agent with --enable-ipv6 '
                          '(role variable ip_masq_enable_ipv6: true), or remove %s.'
                          % (where, ', '.join(ipv6_cidrs), 'is' if one else 'are', 'it' if one else 'them'))
    if keep_duplicates:
        canon = list(normal)
    limit = settings['cidr_limit']
    if over_limit(len(canon), limit):
        raise ConfigError('%s: %d CIDRs (link-local not counted) is over cidrLimit %d; aggregate the list or '
                          'raise cidrLimit.' % (where, len(canon), limit))
    settings['nonmasquerade_cidrs'] = default_cidrs() if default else canon
    if keep_duplicates or not counts:
        return []
    return ['%s lists %s %d times; one rule is written.' % (where, cidr, counts[cidr])
            for cidr in canon if counts[cidr] > 1]


def _core_reason(msg):
    """The core's message without its module-specific wrapping."""
    for prefix in ('nonmasquerade_cidrs: ',):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    suffix = ' Nothing was changed.'
    if msg.endswith(suffix):
        msg = msg[:-len(suffix)]
    return msg


def parse_config(text, ipv6=False, rule_format='docs'):
    """Parse the text of an agent config file into ``(settings, warnings)``.

    ``rule_format`` upstream keeps duplicate CIDRs, as upstream does.
    Raises ConfigError (a MasqError) naming the line and the reason."""
    if text.startswith(u'\ufeff'):
        text = text[1:]
    # Upstream (k8s.io/apimachinery util/yaml.ToJSON): JSON if the first
    # non-space character is "{", YAML otherwise.
    from_json = text.lstrip().startswith('{')
    try:
        document = load_json(text) if from_json else load_yaml(text)
        return normalise(document, ipv6=ipv6, from_json=from_json, text=text,
                         keep_duplicates=rule_format == 'upstream')
    except RecursionError:
        # The readers bound nesting (MAX_DEPTH) and never get here; a last resort, so that a file is
        # refused like any bad file (exit 2, the last good configuration enforced), never a traceback.
        raise ConfigError('%s are not supported.' % DEPTH_REASON)


def read_config(path):
    """The file's text, or None when it does not exist (upstream: defaults)."""
    try:
        data = read_regular(path, MAX_CONFIG_BYTES + 1)     # a FIFO there: refused, never waited on
    except (IOError, OSError) as e:
        if getattr(e, 'errno', None) == 2:   # ENOENT, also a dangling symlink
            return None
        raise ConfigError('%s cannot be read: %s.' % (path, getattr(e, 'strerror', None) or e))
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError('%s is larger than %d bytes; that is not an agent config file.' % (path, MAX_CONFIG_BYTES))
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b'\n') + 1
        raise ConfigError('line %d: the file is not UTF-8 text (byte 0x%02x at offset %d).'
                          % (line, data[e.start], e.start), line=line)


def to_upstream(settings):
    """The settings as the upstream JSON object (upstream key names), with
    the extension keys that are set."""
    out = dict((upstream, settings[ours]) for upstream, ours in CONFIG_FIELDS)
    if settings.get('masquerade_cidrs') and is_default_list(settings['nonmasquerade_cidrs']):
        del out['nonMasqueradeCIDRs']   # masquerade-only: a list here would be refused when read back
    out.update((key, settings[ours]) for key, ours in EXTENSION_FIELDS
               if ours in settings and settings[ours] != EXTENSION_DEFAULTS[ours])
    return out


def in_file_terms(msg):
    """A policy error about settings of the file, naming the file's keys
    (``outInterfaces``) rather than the module options (``out_interfaces``)."""
    import re  # pylint: disable=import-outside-toplevel

    keys = dict((ours, key) for key, ours in CONFIG_FIELDS + EXTENSION_FIELDS)
    return re.sub(r'\b(%s)\b' % '|'.join(keys), lambda match: keys[match.group(1)], msg)


def policy_options(settings):
    """The extension settings as ``Policy`` keyword arguments."""
    return dict((ours, settings.get(ours, EXTENSION_DEFAULTS[ours])) for _key, ours in EXTENSION_FIELDS)


def render_config(settings, compact=False):
    """The settings as an upstream config file: JSON, which this agent and
    the upstream agent both read."""
    if compact:
        return _json().dumps(to_upstream(settings), separators=(',', ':'), ensure_ascii=False)
    return _json().dumps(to_upstream(settings), indent=2, ensure_ascii=False) + '\n'
