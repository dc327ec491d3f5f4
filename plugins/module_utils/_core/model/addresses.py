# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The node's own addresses, for snat_to: the kernel's view, read from /proc
(no tool run; /proc/net is the calling process's network namespace).

* IPv4: the local routes of ``/proc/net/fib_trie`` (``/32 host LOCAL`` for
  an address, a shorter ``host LOCAL`` prefix for a local route such as
  127.0.0.0/8);
* IPv6: ``/proc/net/if_inet6``, one assigned address per line.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.intervals import (
    address_number,
    merge,
    number_address,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import snat_text

FIB_TRIE = '/proc/net/fib_trie'
IF_INET6 = '/proc/net/if_inet6'


def parse_fib_trie(text):
    """The local IPv4 intervals of a fib_trie text, merged."""
    out = []
    leaf = None
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == '|--':
            leaf = words[1]
        elif leaf and len(words) >= 3 and words[0].startswith('/') and words[1:3] == ['host', 'LOCAL']:
            first = address_number(leaf, 4)
            size = 1 << (32 - int(words[0][1:]))
            first -= first % size
            out.append((first, first + size - 1))
    return merge(out)


def parse_if_inet6(text):
    """The assigned IPv6 addresses of an if_inet6 text, as intervals, merged."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if words and len(words[0]) == 32:
            number = int(words[0], 16)
            out.append((number, number))
    return merge(out)


def gaps(interval, merged):
    """The parts of ``interval`` outside the ``merged`` intervals, as intervals."""
    low, high = interval
    out = []
    for first, last in merged:
        if last < low:
            continue
        if first > high:
            break
        if first > low:
            out.append((low, first - 1))
        low = last + 1
        if low > high:
            return out
    out.append((low, high))
    return out


def _read(path):
    with open(path) as handle:
        return handle.read()


def local_intervals(family, read=_read):
    """The node's own addresses of a family, as merged intervals."""
    if family == 4:
        return parse_fib_trie(read(FIB_TRIE))
    try:
        return parse_if_inet6(read(IF_INET6))
    except (IOError, OSError) as e:
        if getattr(e, 'errno', None) == 2:      # no IPv6 on this kernel: nothing assigned
            return []
        raise


def check_snat_local(policy, read=_read):
    """Refuse a snat_to address the node does not hold (unless
    snat_to_require_local is off), before anything is read or written."""
    if not policy.snat_to or not policy.snat_to_require_local:
        return
    for family, (first, last) in sorted(policy.snat_to.items()):
        try:
            local = local_intervals(family, read)
        except (IOError, OSError) as e:
            raise MasqError('snat_to: cannot read the node\'s addresses (%s) to check %s: %s. Set '
                            'snat_to_require_local to false to skip the check. Nothing was changed.'
                            % (FIB_TRIE if family == 4 else IF_INET6, snat_text(first, last),
                               getattr(e, 'strerror', None) or e))
        low, high = address_number(first, family), address_number(last, family)
        missing = gaps((low, high), local)
        if not missing:
            continue
        shown = ', '.join(snat_text(number_address(a, family), number_address(b, family)) for a, b in missing[:3])
        raise MasqError('snat_to: %s is not assigned to this node (%s%s %s not among its IPv%d addresses): SNAT '
                        'to it would send replies elsewhere. Add the address to an interface, fix snat_to, or set '
                        'snat_to_require_local to false for an address the node answers for without holding it. '
                        'Nothing was changed.' % (snat_text(first, last), shown, ', ...' if len(missing) > 3 else '',
                                                  'is' if len(missing) == 1 and missing[0][0] == missing[0][1]
                                                  else 'are', family))
