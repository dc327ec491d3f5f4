"""What a container runtime makes of a CNI network directory, written for
the tests apart from the code under test (plugins/module_utils/_daemons/
gojson.py, cni_network.py), to judge it:

- libcni's ``ConfFiles`` (every non-directory entry whose ``filepath.Ext``
  is ``.conf``, ``.conflist`` or ``.json``, dot-files too, sorted), then
  containerd's go-cni / CRI-O's ocicni: ``ConfListFromFile`` for a
  ``.conflist``, ``ConfFromFile`` + ``ConfListFromConf`` for the others;
- Go's encoding/json: an object decoded into a map keeps the last of keys
  spelled the same; ``json.Marshal`` of a map sorts its keys; a struct field
  takes every key equal to its name under Go's case folding, in order
  (``null`` leaves a bool or a string as it was, a wrong type fails the
  decode; a second object for a map field adds to the same map);
- flannel's CNI plugin (flannel-io/cni-plugin ``flannel_linux.go``),
  EMULATED for its one rule that matters here (Debian does not package the
  plugin): the delegate's ``type`` defaults to bridge, and when the delegate
  has no key ``ipMasq`` exactly it gets ``"ipMasq": !FLANNEL_IPMASQ``; the
  delegate then goes to that plugin as its configuration, with the IPAM
  flannel builds from subnet.env (``FLANNEL_SUBNET``, ``FLANNEL_IPV6_SUBNET``).

Case folding here is done its own way: a character's case orbit (closed
under one-character ``lower()``/``upper()``), plus U+0130 with i, as
Go 1.21's ``foldName`` (ToUpper(ToLower(r))) folds it.
"""
import json
import os
import tempfile

from ipmasq_lab import cni

EXTENSIONS = ('.conf', '.conflist', '.json')


class Refused(Exception):
    """The runtime (or the plugin) cannot load this: it masquerades nothing."""


def _orbit_min(c):
    seen, todo = {c}, [c]
    while todo:
        x = todo.pop()
        for y in (x.lower(), x.upper()):
            if len(y) == 1 and y not in seen:
                seen.add(y)
                todo.append(y)
    if c == '\u0130':
        seen |= {'i', 'I'}
    return min(seen)


def go_fold(key):
    return ''.join(_orbit_min(c) for c in key)


class Obj(list):
    is_obj = True


def _pairs_typed(text):
    """Like :func:`_pairs`, arrays as lists and objects as Obj (lists of pairs)."""
    if text.startswith('\ufeff'):
        raise Refused('Go does not skip a byte order mark')

    def no_constant(name):
        raise Refused('Go has no %s' % name)
    return json.loads(text, object_pairs_hook=Obj, parse_constant=no_constant)


def go_map(v):
    """Decoded into interface{} and marshalled again: objects are dicts, last
    exact key wins, keys sorted."""
    if isinstance(v, Obj):
        out = {}
        for k, x in v:
            out[k] = go_map(x)
        return dict(sorted(out.items()))
    if isinstance(v, list):
        return [go_map(x) for x in v]
    return v


def as_pairs(m):
    """A Go map (dict, keys sorted) as the pairs json.Marshal writes."""
    return Obj(sorted(m.items()))


def struct_field(pairs, name, kind):
    """Decode a struct field of Go ``kind`` ('string', 'bool', 'map') named ``name`` from ``pairs`` in order."""
    want = go_fold(name)
    val = None
    for k, v in pairs:
        if go_fold(k) != want:
            continue
        if kind == 'map':
            if v is None:
                val = None
            elif isinstance(v, dict):
                val = dict(val or {}, **v)
            elif isinstance(v, Obj):
                val = dict(val or {}, **go_map(v))
            else:
                raise Refused('%s: not an object' % name)
            continue
        if v is None:
            continue
        want_type = str if kind == 'string' else bool
        if not isinstance(v, want_type):
            raise Refused('%s: not a %s' % (name, kind))
        val = v
    return val


def conf_files(directory):
    names = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isdir(path):
            continue
        ext = name[name.rfind('.'):] if '.' in name else ''
        if ext in EXTENSIONS:
            names.append(path)
    return names


def plugins_of(path, text):
    """``(network name, [plugin map])``: each plugin as the runtime hands it over
    (a Go map, sorted); Refused when the runtime cannot load the file."""
    data = _pairs_typed(text)
    if not isinstance(data, Obj):
        raise Refused('not an object')
    if path.endswith('.conflist'):
        raw = go_map(data)
        name, plugins = raw.get('name'), raw.get('plugins')
        if not isinstance(name, str) or not isinstance(plugins, list):
            raise Refused('no name or plugins')
        if not all(isinstance(p, dict) for p in plugins):
            raise Refused('a plugin is not an object')
        for p in plugins:
            if not struct_field(as_pairs(p), 'type', 'string'):
                raise Refused('a plugin has no type')
        return name, plugins
    name = struct_field(data, 'name', 'string')
    if not struct_field(data, 'type', 'string'):
        raise Refused("missing 'type'")
    return name or '', [go_map(data)]


def flannel_delegate(plugin, flannel_ipmasq, subnet4='10.244.7.0/24', subnet6=None):
    """EMULATION of flannel's CNI plugin's one rule (flannel_linux.go,
    doCmdAdd): the configuration it hands its delegate plugin, from the
    flannel plugin's map and flanneld's subnet.env (FLANNEL_IPMASQ,
    FLANNEL_SUBNET, FLANNEL_IPV6_SUBNET)."""
    delegate = struct_field(as_pairs(plugin), 'delegate', 'map')
    delegate = dict(delegate or {})
    delegate['name'] = struct_field(as_pairs(plugin), 'name', 'string') or plugin.get('name')
    if 'type' not in delegate:
        delegate['type'] = 'bridge'
    if 'ipMasq' not in delegate:
        delegate['ipMasq'] = not flannel_ipmasq
    if delegate['type'] == 'bridge' and 'isGateway' not in delegate:
        delegate['isGateway'] = True
    ranges = [[{'subnet': subnet4}]] if subnet4 else []
    if subnet6:
        ranges.append([{'subnet': subnet6}])
    delegate['ipam'] = {'type': 'host-local', 'ranges': ranges}
    return dict(sorted(delegate.items()))


def families_of(ipam):
    out = set()

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, str) and go_fold(k) in (go_fold('subnet'), go_fold('range'), go_fold('address')):
                    out.add(6 if ':' in x else 4)
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(ipam)
    return out


def masquerading(plugin, flannel_ipmasq=False, flannel_subnet6=None):
    """The families one plugin masquerades (an empty set: none), as the plugin
    binary decodes its configuration."""
    try:
        kind = struct_field(as_pairs(plugin), 'type', 'string')
        if kind == 'flannel':
            plugin = flannel_delegate(plugin, flannel_ipmasq, subnet6=flannel_subnet6)
            kind = plugin['type']
        if kind not in ('bridge', 'ptp'):
            return set()
        if not struct_field(as_pairs(plugin), 'ipMasq', 'bool'):
            return set()
    except Refused:
        return set()
    ipam = [v for k, v in plugin.items() if go_fold(k) == go_fold('ipam')]
    return families_of(ipam) or {4, 6}


def load(directory, flannel_ipmasq=False, flannel_subnet6=None):
    """``{path: families masqueraded}`` of every file the runtime loads from ``directory``."""
    out = {}
    for path in conf_files(directory):
        with open(path, encoding='utf-8', errors='surrogateescape') as handle:
            text = handle.read()
        try:
            _name, plugins = plugins_of(path, text)
        except (Refused, ValueError):
            out[path] = set()
            continue
        fams = set()
        for plugin in plugins:
            fams |= masquerading(plugin, flannel_ipmasq, flannel_subnet6)
        out[path] = fams
    return out


# ---------------------------------------------------------------- running a file's plugins

class FileNetwork(cni.Network):
    """A network file written as given, run as the runtime reads it
    (:func:`plugins_of`; a flannel plugin through :func:`flannel_delegate`,
    the EMULATION of flannel's plugin's rule, with ``FLANNEL_IPMASQ`` and the
    subnets given here), by the real plugins of /usr/lib/cni inside the node
    namespace (``ipmasq_lab.cni.Network``'s add/delete and guard).  The file
    text is what the editor sees; only host-local's ``dataDir`` (the leases)
    is pointed at this network's temporary directory when a plugin is run,
    never at /var/lib/cni."""

    def __init__(self, node, conf_dir, file_name, text, backend=None, flannel_ipmasq=False,
                 flannel_subnet4='10.244.7.0/24', flannel_subnet6=None):  # pylint: disable=super-init-not-called
        self.node = node
        self.backend = backend
        self.flannel = (flannel_ipmasq, flannel_subnet4, flannel_subnet6)
        self.state = tempfile.mkdtemp(prefix='imq-cni-state-')
        self.path = os.path.join(conf_dir, file_name)
        with open(self.path, 'w') as handle:
            handle.write(text)
        self.name = plugins_of(self.path, text)[0]
        self.results = {}

    def conf(self):
        with open(self.path, encoding='utf-8') as handle:
            text = handle.read()
        name, plugins = plugins_of(self.path, text)
        version = go_map(_pairs_typed(text)).get('cniVersion') or '0.4.0'
        out = []
        for plugin in plugins:
            if struct_field(as_pairs(plugin), 'type', 'string') == 'flannel':
                ipmasq, subnet4, subnet6 = self.flannel
                plugin = flannel_delegate(dict(plugin, name=name), ipmasq, subnet4, subnet6)
            plugin = dict(plugin)
            for key, ipam in list(plugin.items()):
                if go_fold(key) == go_fold('ipam') and isinstance(ipam, dict):
                    plugin[key] = dict(ipam, dataDir=os.path.join(self.state, 'ipam'))
            out.append(plugin)
        return {'name': name, 'cniVersion': version, 'plugins': out}
