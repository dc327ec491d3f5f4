# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The one exception of the collection's node-side code.

Every failure a user can meet is a :class:`MasqError`: a full sentence
(``msg``) and, when a command failed, its details (``cmd``, ``rc``,
``stdout``, ``stderr``), which a module passes to ``fail_json`` in one place
(``_module.run_module``) and the resync writes to the journal.
"""


class MasqError(Exception):
    """A failure with a sentence for the user; command details when a command failed."""

    def __init__(self, msg, **details):
        super(MasqError, self).__init__(msg)
        self.msg = msg
        self.details = details


class ConfigError(MasqError):
    """The agent config file cannot be used; ``line`` is its 1-based line or None."""

    def __init__(self, msg, line=None, **details):
        super(ConfigError, self).__init__(msg, **details)
        self.line = line


class PolicyTooLargeError(MasqError):
    """A policy the chosen backend cannot hold (its rule limit, say), found
    before anything was written: the resync refuses it like a bad file and
    enforces the last good configuration.  Raised by a backend, caught by
    the resync without knowing which backend it came from."""


def one_line(text):
    """A tool's message in one line (iptables-restore's runs over three)."""
    return ' '.join(line.strip() for line in (text or '').splitlines() if line.strip()
                    and not line.strip().startswith('Try `')).rstrip('.')


def quote(text):
    """``text`` in double quotes, escaped as JSON, for messages (only ever
    needed on an error path, so json is imported here)."""
    import json  # pylint: disable=import-outside-toplevel

    return json.dumps(text, ensure_ascii=False)
