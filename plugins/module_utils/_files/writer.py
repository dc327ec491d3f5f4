# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""How the files our modules edit reach the disk: through ``AnsibleModule``.

Used by the daemon modules (``_daemons/files.py``) and ``node_files``.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError


class _Refused(Exception):
    pass


def _reason(exc):
    """The words of an exception and of what caused it."""
    text = str(exc) or exc.__class__.__name__
    cause = getattr(exc, '__cause__', None)
    if cause is not None:
        text = '%s (%s)' % (text.rstrip('.'), getattr(cause, 'strerror', None) or cause)
    return text


class Writer:
    """How edited files reach the disk: ``AnsibleModule.atomic_move`` (keeps
    the SELinux context, owner and mode of the file it replaces) and
    ``AnsibleModule.backup_local`` (the timestamped copy beside the file).

    Depending on the ansible-core version these report a failure by raising
    or through ``fail_json``; both become a MasqError here, so that the
    transaction can put back what it already wrote before it fails."""

    def __init__(self, module):
        self.module = module

    def _call(self, fn, *args):
        module = self.module
        saved = module.fail_json

        def refuse(msg='', **_kwargs):
            raise _Refused(msg)

        module.fail_json = refuse
        try:
            return fn(*args)
        except _Refused as e:
            raise MasqError(str(e))
        except (IOError, OSError) as e:
            raise MasqError(e.strerror or str(e))
        except Exception as e:  # pylint: disable=broad-except
            raise MasqError(_reason(e))
        finally:
            module.fail_json = saved

    def backup(self, real):
        return self._call(self.module.backup_local, real)

    def move(self, tmp, real):
        self._call(self.module.atomic_move, tmp, real)
