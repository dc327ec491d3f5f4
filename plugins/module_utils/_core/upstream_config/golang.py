# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Go's value syntax, where the agent and the daemons around it use it.

* booleans as Go's ``strconv.ParseBool`` reads them (the agent's flags,
  dockerd's and flanneld's ``--ip-masq``);
* durations as Go's ``time.ParseDuration`` reads them and
  ``Duration.String`` writes them (``resyncInterval``, ``--resync-interval``
  and the role's ``go_duration`` filter).

Standard library only, and no import at all: this file is on the resync's
every-minute path.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError, quote

TRUE = ('1', 't', 'T', 'TRUE', 'true', 'True')
FALSE = ('0', 'f', 'F', 'FALSE', 'false', 'False')


def parse_bool(text):
    """Go's strconv.ParseBool: True, False, or None when ``text`` is neither."""
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    return None


# --------------------------------------------------------------------------
# Durations (time.ParseDuration and Duration.String, exactly)
# --------------------------------------------------------------------------

_NS = 1
_US = 1000 * _NS
_MS = 1000 * _US
_SECOND = 1000 * _MS
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_UNITS = {
    'ns': _NS,
    'us': _US,
    u'\u00b5s': _US,   # micro sign
    u'\u03bcs': _US,   # Greek small letter mu
    'ms': _MS,
    's': _SECOND,
    'm': _MINUTE,
    'h': _HOUR,
}
_MAX_U63 = 1 << 63


def _is_digit(char):
    return '0' <= char <= '9'


def parse_duration_ns(text):
    """Parse a Go duration (``"1h2m3.5s"``, ``"300ms"``, ``"-1.5h"``, ``"0"``)
    into integer nanoseconds, with Go's grammar, rounding and overflow
    rules.  Raises MasqError with Go's reason."""
    if not isinstance(text, str):
        raise MasqError('%r is not a Go duration: it must be a string such as "60s".' % (text,))
    orig = text
    s = text
    neg = False

    def invalid(reason='expected numbers, each followed by a unit'):
        return MasqError('%s is not a Go duration: %s (examples: "60s", "1m30s", "500ms", "1h").'
                         % (quote(orig), reason))

    if s and s[0] in '-+':
        neg = s[0] == '-'
        s = s[1:]
    if s == '0':
        return 0
    if not s:
        raise invalid()
    total = 0
    while s:
        if not (s[0] == '.' or _is_digit(s[0])):
            raise invalid()
        # [0-9]*
        i = 0
        whole = 0
        while i < len(s) and _is_digit(s[i]):
            if whole > _MAX_U63 // 10:
                raise invalid('it overflows')
            whole = whole * 10 + ord(s[i]) - 48
            if whole > _MAX_U63:
                raise invalid('it overflows')
            i += 1
        pre = i > 0
        s = s[i:]
        # (\.[0-9]*)?
        post = False
        frac = 0
        scale = 1.0
        if s and s[0] == '.':
            s = s[1:]
            i = 0
            overflow = False
            while i < len(s) and _is_digit(s[i]):
                if not overflow:
                    if frac > (_MAX_U63 - 1) // 10:
                        overflow = True
                    else:
                        nxt = frac * 10 + ord(s[i]) - 48
                        if nxt > _MAX_U63:
                            overflow = True
                        else:
                            frac = nxt
                            scale *= 10
                i += 1
            post = i > 0
            s = s[i:]
        if not pre and not post:
            raise invalid()
        # unit: everything up to the next '.' or digit
        i = 0
        while i < len(s) and s[i] != '.' and not _is_digit(s[i]):
            i += 1
        if i == 0:
            raise invalid('missing unit (use ns, us, ms, s, m or h)')
        unit_text = s[:i]
        s = s[i:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise invalid('unknown unit %s (the units are ns, us, ms, s, m and h%s)'
                          % (quote(unit_text),
                             '; there is no day unit, write 24h' if unit_text == 'd' else ''))
        if whole > _MAX_U63 // unit:
            raise invalid('it overflows')
        value = whole * unit
        if frac > 0:
            value += int(float(frac) * (float(unit) / scale))
            if value > _MAX_U63:
                raise invalid('it overflows')
        total += value
        if total > _MAX_U63:
            raise invalid('it overflows')
    if neg:
        return -total
    if total > _MAX_U63 - 1:
        raise invalid('it overflows')
    return total


def parse_duration(text):
    """Parse a Go duration into seconds: an int when whole, else a float (the
    ``go_duration`` filter's value; the role's resync timer starts from it)."""
    ns = parse_duration_ns(text)
    return ns // _SECOND if ns % _SECOND == 0 else ns / _SECOND


def _frac(value, prec):
    div = 10 ** prec
    whole, rest = divmod(value, div)
    if not rest:
        return str(whole)
    return '%d.%s' % (whole, str(rest).rjust(prec, '0').rstrip('0'))


def format_duration(ns):
    """Go's Duration.String(): 0s, 500ms, 1.5\u00b5s, 1m0s, 1h2m3.5s."""
    neg = ns < 0
    u = -ns if neg else ns
    if u < _SECOND:
        if u == 0:
            text = '0s'
        elif u < _US:
            text = '%dns' % u
        elif u < _MS:
            text = _frac(u, 3) + u'\u00b5s'
        else:
            text = _frac(u, 6) + 'ms'
    else:
        seconds, rest = divmod(u, _SECOND)
        minutes, sec = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        text = _frac(sec * _SECOND + rest, 9) + 's'
        if minutes or hours:
            text = '%dm' % minutes + text
        if hours:
            text = '%dh' % hours + text
    return '-' + text if neg else text
