# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The words of the one-line ``msg`` that every result says in the same
way (``_msg.py`` builds the lines; each backend says its own part of the
``masq_chain`` line with these, ``Backend.msg_parts``).

Standard library only: this file runs on managed nodes.
"""


def plural(count, word):
    """``1 rule``, ``5 rules``."""
    return '%d %s%s' % (count, word, '' if count == 1 else 's')


def did(check_mode, what, done, would, extra=''):
    """``IPv4 5 rules written (was 0)`` or, in check mode, ``would write IPv4 5 rules (was 0)``."""
    if check_mode:
        return 'would %s %s%s' % (would, what, extra)
    return '%s %s%s' % (what, done, extra)
