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

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import gojson
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_names import CONF_SUFFIXES, MASQ_KEY, MASQ_PLUGINS

FLANNEL = 'flannel'
# flannel's plugin: where flanneld's subnet file is unless the network says (subnetFile).
FLANNEL_SUBNET_FILE = '/run/flannel/subnet.env'
HOST_LOCAL_DIR = '/var/lib/cni/networks'      # host-local's dataDir when the network file sets none
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
    """Add to ``out`` the family of every address below ``data`` (gojson.loads' tree)."""
    if isinstance(data, gojson.Obj):
        for key, val in data:
            if isinstance(val, str) and gojson.fold(key) in _ADDRESS_KEYS:
                out.add(6 if ':' in val else 4)
            else:
                _families_of(val, out)
    elif isinstance(data, list):
        for item in data:
            _families_of(item, out)


def _last_true(obj, order):
    """Whether the ipMasq a plugin decodes from the members ``order`` of ``obj`` is true (the last one not null)."""
    hits = gojson.matching(obj, MASQ_KEY)
    for i in reversed([i for i in order if i in hits]):
        if obj[i][1] is not None:
            return obj[i][1] is True
    return False


class Network:
    """One network file: its name, its plugins' types, the edits that switch
    its masquerading off (``edits``: ``(start, end, new text)``) and the
    address families of the plugins that masquerade (``families``: a set, or
    None when they cannot be told).  ``read(path)`` reads another node file
    (flannel's subnet file), or None.

    The file is decoded once; where the text of a value is (to edit it) is
    looked up only for the edits, so a file that needs none costs one decode."""

    def __init__(self, path, text, read=None):
        self.path = path
        self.read = read
        offset = 1 if text.startswith('\ufeff') else 0
        try:
            data = gojson.loads(text[offset:])
        except RecursionError:
            raise MasqError('%s nests objects or lists too deeply to be read here. Nothing was changed.' % path,
                            path=path)
        except ValueError as e:
            where = ' at line %d, column %d' % (e.lineno, e.colno) if hasattr(e, 'lineno') else ''
            raise MasqError('%s is not valid JSON%s: %s. The container runtime cannot load it either; fix or '
                            'remove the file first. Nothing was changed.'
                            % (path, where, getattr(e, 'msg', e)), path=path)
        if not isinstance(data, gojson.Obj):
            raise MasqError('%s must hold one JSON object ({...}), not a %s. Nothing was changed.'
                            % (path, type(data).__name__), path=path)
        # Keys spelled with a rune only Go 1.21 and later fold (escaped or not) are looked at.
        self._odd = any(c in text for c in gojson.GO_VERSION_DEPENDENT) or '\\u013' in text
        if path.endswith('.conflist'):
            # libcni's ConfListFromBytes: a Go map; its exact keys "name" and "plugins".
            name = data[gojson.exact(data, 'name')][1] if gojson.exact(data, 'name') is not None else None
            at = gojson.exact(data, 'plugins')
            plugins = data[at][1] if at is not None else None
            confs = [((at, n), conf) for n, conf in enumerate(plugins if isinstance(plugins, list) else [])
                     if isinstance(conf, gojson.Obj)]
        else:
            name = gojson.field(self._keys(data, _PLUGIN_KEYS), 'name')
            confs = [((), data)]
        self.name = name if isinstance(name, str) else None
        self.types = []
        self.masq_types = []    # the plugins edited
        self.families = set()
        # Per bridge or ptp plugin (its place in the file's list): the path and value of every ipMasq it has
        # (the restore of a file its owner edited since, cni._semantic_restore).
        self.masq_keys = []
        # host-local's dataDir of each plugin that uses it (cni_chains: where its leases are).
        self.data_dirs = []
        self.top = gojson.skip_ws(text, offset)
        todo = []               # (path, 'set' or 'append', text)
        for ordinal, (where, conf) in enumerate(confs):
            self._keys(conf, _PLUGIN_KEYS)
            order = gojson.go_order(conf)
            kind = gojson.field(conf, 'type', order)
            self.types.append(kind)
            self.data_dirs.extend(self._data_dirs(conf, order))
            if kind == FLANNEL:
                edits, masquerades = self._flannel(where, conf, order)
            elif kind in MASQ_PLUGINS:
                keys = [(where + (i,), conf[i][1]) for i in gojson.matching(conf, MASQ_KEY)]
                self.masq_keys.append((ordinal, keys))
                edits = [(at, 'set', 'false') for at, value in keys if value is True]
                masquerades = _last_true(conf, order)
            else:
                edits, masquerades = [], False
            if edits:
                todo.extend(edits)
                self.masq_types.append(kind)
            if masquerades and self.families is not None:
                # Only a plugin that masquerades as the runtime reads it decides the families.
                families = self._flannel_families(conf, order) if kind == FLANNEL else self._ipam_families(conf)
                self.families = None if families is None else self.families | families
        self.masquerading = any(t in MASQ_PLUGINS or t == FLANNEL for t in self.types)
        self.edits = self._placed(text, self.top, todo) if todo else []

    def _keys(self, obj, names):
        """``obj``, refused when one of its keys would be one of ``names`` for Go 1.21 and later only."""
        odd = gojson.version_dependent(obj, names) if self._odd else None
        if odd:
            raise MasqError('%s: the key %s is read as %s by Go 1.21 and later but not by earlier Go, so what '
                            'the container runtime makes of this file depends on the Go it was built with. Rename '
                            'the key. Nothing was changed.'
                            % (self.path, json.dumps(odd[0]), gojson.fold(odd[0]).lower()), path=self.path)
        return obj

    @staticmethod
    def _placed(text, top, todo):
        """The edits ``todo`` as ``(start, end, new text)`` of ``text`` (the top object at ``top``)."""
        out = []
        for where, how, new in todo:
            start, end = gojson.locate(text, top, where)
            if how == 'append':
                # After its last member, spaced as its first member is.
                space = text[start + 1:gojson.skip_ws(text, start + 1)]
                end = gojson.members(text, start)[-1][1]
                out.append((end, end, ',' + (space or ' ') + new))
            else:
                out.append((start, end, new))
        return out

    def _flannel(self, where, conf, order):
        """The edits of a flannel plugin (every delegate says ``"ipMasq": false``), and whether it masquerades."""
        delegates = gojson.matching(conf, 'delegate')
        merged = {}
        for i in order:
            if i in delegates:
                val = conf[i][1]
                merged = {} if val is None else dict(merged, **dict(val)) if isinstance(val, gojson.Obj) else merged
        if 'type' in merged and merged['type'] not in MASQ_PLUGINS:
            return [], False
        # Without a key spelled ipMasq flannel's plugin sets one (true, with flanneld's masquerading off).
        inner = gojson.Obj(sorted(merged.items()))
        masquerades = MASQ_KEY not in merged or _last_true(inner, range(len(inner)))
        if not delegates:
            return [(where, 'append', '"delegate": ' + DELEGATE_OFF)], masquerades
        edits = []
        for i in delegates:
            val = conf[i][1]
            if val is None or val == []:
                edits.append((where + (i,), 'set', DELEGATE_OFF))
            elif isinstance(val, gojson.Obj):
                self._keys(val, ('type', MASQ_KEY))
                edits += [(where + (i, j), 'set', 'false') for j in gojson.matching(val, MASQ_KEY) if val[j][1] is True]
                if gojson.exact(val, MASQ_KEY) is None:
                    edits.append((where + (i,), 'append', '"%s": false' % MASQ_KEY))
        return edits, masquerades

    @staticmethod
    def _data_dirs(conf, order):
        """host-local's dataDir of a plugin (its default where unset), as the plugin decodes ``ipam``."""
        hits = gojson.matching(conf, 'ipam')
        found = [conf[i][1] for i in order if i in hits and conf[i][1] is not None]
        ipam = found[-1] if found else None         # the last one decoded wins
        if not isinstance(ipam, gojson.Obj) or gojson.field(ipam, 'type') != 'host-local':
            return []
        data_dir = gojson.field(ipam, 'dataDir')
        return [data_dir if isinstance(data_dir, str) and data_dir.startswith('/') else HOST_LOCAL_DIR]

    @staticmethod
    def _ipam_families(conf):
        out = set()
        for i in gojson.matching(conf, 'ipam'):
            ipam = conf[i][1]
            if isinstance(ipam, gojson.Obj):
                if gojson.field(ipam, 'type') == 'dhcp':
                    out.add(4)
                _families_of(ipam, out)
        return out or None

    def _flannel_families(self, conf, order):
        where = gojson.field(conf, 'subnetFile', order) or FLANNEL_SUBNET_FILE
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

    def what(self, would=False):
        """What the edits do (``would``: would do, in check or report mode), in words."""
        said = []
        plain = sorted(set(t for t in self.masq_types if t != FLANNEL))
        verb = 'would be set' if would else 'set'
        if plain:
            said.append('"%s": true %s to false in %s' % (MASQ_KEY, verb, ' and '.join(plain)))
        if FLANNEL in self.masq_types:
            said.append('"%s": false %s in the delegate of flannel\'s plugin (which otherwise sets it to the '
                        'opposite of flanneld\'s FLANNEL_IPMASQ)' % (MASQ_KEY, verb))
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
