# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""One CNI network file as the container runtime loads it (:class:`Network`),
and which files it loads (:func:`conf_paths`), for the CNI editor
(``cni.py``).

Which files: libcni's ``ConfFiles``: every entry of the directory that is
not a directory and whose extension (from the last dot, case and all) is
``.conf``, ``.conflist`` or ``.json``; dot-files too.  A ``.conflist`` is a
list (its exact keys ``name`` and ``plugins``, as libcni's map reads them);
any other is one plugin (containerd's go-cni and CRI-O's ocicni:
``ConfListFromConf``).

What a key means: as Go's encoding/json and libcni read it (``gojson.py``).
Every ``ipMasq`` of a ``bridge`` or ``ptp`` plugin that says true is set to
false, whatever its spelling; so no duplicate, shadowed or not, can win.

flannel's own plugin (``"type": "flannel"``) hands a ``delegate`` to the
bridge plugin, and when the delegate has no key spelled ``ipMasq`` exactly
it sets one to the opposite of flanneld's ``FLANNEL_IPMASQ``
(flannel-io/cni-plugin, ``flannel_linux.go``): with flanneld's masquerading
off, every new pod is masqueraded by the bridge.  So each delegate object
gets ``"ipMasq": false`` (inserted where it has no such key, its trues set
to false), a null delegate becomes ``{"ipMasq": false}``, and a flannel
plugin without a delegate gets ``"delegate": {"ipMasq": false}``.  A delegate
whose ``type`` is another plugin (macvlan, ...) is left alone.

The families a network masquerades: its plugins' IPAM configuration (every
``subnet``, ``range`` and ``address`` below ``ipam``: host-local's
``subnet`` and ``ranges``, static's ``addresses``, whereabouts' ``range``;
``dhcp`` is IPv4), and for flannel its subnet file (``FLANNEL_SUBNET``,
``FLANNEL_IPV6_SUBNET``).  None when they cannot be told.

Standard library only: this file runs on managed nodes.
"""

import json
import os

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import gojson
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_daemon import CONF_SUFFIXES, MASQ_KEY, MASQ_PLUGINS

FLANNEL = 'flannel'
# flannel's plugin: where flanneld's subnet file is unless the network says (subnetFile).
FLANNEL_SUBNET_FILE = '/run/flannel/subnet.env'
DELEGATE_OFF = '{"%s": false}' % MASQ_KEY
# The keys read here, per object (for the keys only Go 1.21 and later read so).
_PLUGIN_KEYS = ('name', 'type', 'plugins', MASQ_KEY, 'ipam', 'delegate', 'subnetFile')
_ADDRESS_KEYS = tuple(gojson.fold(k) for k in ('subnet', 'range', 'address'))


def conf_paths(files, dirs):
    """The network files of ``dirs``, as libcni lists them (libcni.ConfFiles: by extension, dot-files
    too, in name order)."""
    out = []
    for directory in dirs:
        for name in files.listdir(directory):
            path = directory.rstrip('/') + '/' + name
            # filepath.Ext: from the last dot on ('.conf' itself is a network file).
            if '.' in name and '.' + name.rpartition('.')[2] in CONF_SUFFIXES and not os.path.isdir(files.real(path)):
                out.append(path)
    return out


def _families_of(data, out):
    """Add to ``out`` the family of every address below ``data`` (json decoded with pairs kept)."""
    if isinstance(data, list):
        for item in data:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                key, val = item
                if isinstance(val, str) and gojson.fold(key) in _ADDRESS_KEYS:
                    out.add(6 if ':' in val else 4)
                else:
                    _families_of(val, out)
            else:
                _families_of(item, out)


class Network:
    """One network file: its name, its plugins' types, the edits that switch
    its masquerading off (``edits``: ``(start, end, new text)``) and the
    address families of the plugins those edits concern (``families``: a set,
    or None when they cannot be told).  ``read(path)`` reads another node
    file (flannel's subnet file), or None."""

    def __init__(self, path, text, read=None):
        self.path = path
        self.read = read
        self._text = text
        offset = 1 if text.startswith('\ufeff') else 0
        try:
            data = json.loads(text[offset:])
        except RecursionError:
            raise MasqError('%s nests objects or lists too deeply to be read here. Nothing was changed.' % path,
                            path=path)
        except ValueError as e:
            where = ' at line %d, column %d' % (e.lineno, e.colno) if hasattr(e, 'lineno') else ''
            raise MasqError('%s is not valid JSON%s: %s. The container runtime cannot load it either; fix or '
                            'remove the file first. Nothing was changed.'
                            % (path, where, getattr(e, 'msg', e)), path=path)
        if not isinstance(data, dict):
            raise MasqError('%s must hold one JSON object ({...}), not a %s. Nothing was changed.'
                            % (path, type(data).__name__), path=path)
        conflist = path.endswith('.conflist')
        start = gojson.skip_ws(text, offset)
        top = self._keys(gojson.members(text, start), () if conflist else _PLUGIN_KEYS)
        if conflist:
            # libcni's ConfListFromBytes: a Go map; its exact keys "name" and "plugins".
            name = gojson.exact(top, 'name')
            name = gojson.value(text, name) if name else None
            plugins = gojson.exact(top, 'plugins')
            confs = []
            if plugins and text[plugins[1]] == '[':
                confs = [(at, self._keys(gojson.members(text, at), _PLUGIN_KEYS))
                         for at, _end in gojson.elements(text, plugins[1]) if text[at] == '{']
        else:
            name = gojson.field(text, top, 'name')
            confs = [(start, top)]
        self.name = name if isinstance(name, str) else None
        self.types = []
        self.edits = []
        self.masq_types = []    # the plugins edited
        self.families = set()
        for opening, conf in confs:
            kind = gojson.field(text, gojson.go_order(conf), 'type')
            self.types.append(kind)
            if kind == FLANNEL:
                edits, masquerades = self._flannel(opening, conf)
            elif kind in MASQ_PLUGINS:
                edits, masquerades = self._plugin(conf), self._last_true(gojson.go_order(conf))
            else:
                edits, masquerades = [], False
            if edits:
                self.edits.extend(edits)
                self.masq_types.append(kind)
            if masquerades and self.families is not None:
                # Only a plugin that masquerades as the runtime reads it decides the families.
                families = self._flannel_families(conf) if kind == FLANNEL else self._ipam_families(conf)
                self.families = None if families is None else self.families | families
        self.masquerading = any(t in MASQ_PLUGINS or t == FLANNEL for t in self.types)

    def _keys(self, found, names):
        """``found``, refused when one of its keys would be one of ``names`` for Go 1.21 and later only."""
        odd = gojson.version_dependent(found, names)
        if odd:
            raise MasqError('%s: the key %s is read as %s by Go 1.21 and later but not by earlier Go, so what '
                            'the container runtime makes of this file depends on the Go it was built with. Rename '
                            'the key. Nothing was changed.'
                            % (self.path, json.dumps(odd[0]), gojson.fold(odd[0]).lower()), path=self.path)
        return found

    def _last_true(self, ordered):
        """Whether the ipMasq a plugin decodes from ``ordered`` members is true (the last one not null)."""
        for _k, start, end in reversed(gojson.matching(ordered, MASQ_KEY)):
            if self._text[start:end] != 'null':
                return self._text[start:end] == 'true'
        return False

    def _plugin(self, conf):
        """The edits of a bridge or ptp plugin: every ipMasq that says true, to false."""
        text = self._text
        return [(s, e, 'false') for _k, s, e in gojson.matching(conf, MASQ_KEY) if text[s:e] == 'true']

    def _insert(self, found, opening, member):
        """The edit that adds ``member`` after the last of ``found`` (the
        members of the object that opens at ``opening``), spaced as its first member is."""
        text = self._text
        space = text[opening + 1:gojson.skip_ws(text, opening + 1)]
        return (found[-1][2], found[-1][2], ',' + (space or ' ') + member)

    def _flannel(self, opening, conf):
        """The edits of a flannel plugin: every delegate says ``"ipMasq": false``."""
        text = self._text
        delegates = gojson.matching(conf, 'delegate')
        merged = {}
        for _k, start, _e in gojson.matching(gojson.go_order(conf), 'delegate'):
            if text[start] == 'n':
                merged = {}
            elif text[start] == '{':
                merged.update((k, (s, e)) for k, s, e in gojson.members(text, start))
        if 'type' in merged:
            kind = json.loads(text[merged['type'][0]:merged['type'][1]])
            if kind not in MASQ_PLUGINS:
                return [], False
        # Without a key spelled ipMasq flannel's plugin sets one (true, with flanneld's masquerading off).
        masquerades = MASQ_KEY not in merged or self._last_true([(k,) + v for k, v in sorted(merged.items())])
        if not delegates:
            return [self._insert(conf, opening, '"delegate": ' + DELEGATE_OFF)], masquerades
        edits = []
        for _k, start, end in delegates:
            if text[start] == 'n':
                edits.append((start, end, DELEGATE_OFF))
            elif text[start] == '{':
                inner = self._keys(gojson.members(text, start), ('type', MASQ_KEY))
                if not inner:
                    edits.append((start, end, DELEGATE_OFF))
                    continue
                edits.extend(self._plugin(inner))
                if gojson.exact(inner, MASQ_KEY) is None:
                    edits.append(self._insert(inner, start, '"%s": false' % MASQ_KEY))
        return edits, masquerades

    def _ipam_families(self, conf):
        text = self._text
        out = set()
        for _k, start, end in gojson.matching(conf, 'ipam'):
            if text[start] != '{':
                continue
            ipam = json.loads(text[start:end], object_pairs_hook=list)
            kinds = [v for k, v in ipam if gojson.fold(k) == 'TYPE']
            if kinds and kinds[-1] == 'dhcp':
                out.add(4)
            _families_of(ipam, out)
        return out or None

    def _flannel_families(self, conf):
        where = gojson.field(self._text, gojson.go_order(conf), 'subnetFile') or FLANNEL_SUBNET_FILE
        env = self.read(where) if self.read is not None else None
        out = set()
        for line in (env or '').splitlines():
            key, _sep, val = line.partition('=')
            if val.strip():
                out.update({'FLANNEL_SUBNET': (4,), 'FLANNEL_IPV6_SUBNET': (6,)}.get(key.strip(), ()))
        return out or None

    def uncovered(self, ipv6):
        """Why this network's masquerading must stay on (a family our policy
        does not cover), or None.  ``ipv6``: whether our policy covers IPv6."""
        if not self.edits or ipv6 or (self.families is not None and self.families <= {4}):
            return None
        what = ('masquerades IPv6%s' % (' too' if 4 in self.families else '') if self.families is not None else
                'has no IPAM configuration that says which address families it masquerades, so it may masquerade '
                'IPv6')
        return ('%s (network %s) %s, which our policy does not cover (ip_masq_enable_ipv6 is false; the module\'s '
                'ipv6): its masquerading is left on and its rules stay. Set ip_masq_enable_ipv6: true (our policy '
                'then covers IPv6) or ip_masq_cni: skip.' % (self.path, self.name, what))

    def what(self):
        """What the edits do, in words."""
        said = []
        plain = sorted(set(t for t in self.masq_types if t != FLANNEL))
        if plain:
            said.append('"%s": true set to false in %s' % (MASQ_KEY, ' and '.join(plain)))
        if FLANNEL in self.masq_types:
            said.append('"%s": false set in the delegate of flannel\'s plugin (which otherwise sets it to the '
                        'opposite of flanneld\'s FLANNEL_IPMASQ)' % MASQ_KEY)
        return '; '.join(said)

    def switched_off(self, text):
        """``text`` with the edits made."""
        for start, end, new in sorted(self.edits, reverse=True):
            text = text[:start] + new + text[end:]
        return text

    def as_dict(self):
        return {'path': self.path, 'name': self.name, 'plugins': self.types,
                'ip_masq': sorted(set(self.masq_types)),
                'families': None if self.families is None else sorted(self.families)}
