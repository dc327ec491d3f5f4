"""One rule for imports (issue 34, item 3): which package of plugins/ may
import which.  ``RULE`` below is the rule's one home (CONTRIBUTING.md points
here).  Every import counts, at file level or inside a function: the test
reads the source with ast, it does not import it.

A package is a folder of plugins/ (``modules``, ``action``, ...), a folder of
module_utils (``_audit``, ``_daemons``, ``_files``), a folder of the core
(``_core.model``, ...), or ``module_utils`` for the runs at its top
(``_masq_chain.py``, ``_msg.py``, ...).  A package may always import its own
modules; any other import must be listed.  The core's floors, lowest first:
model, node, upstream_config, engine, the backends, registry, agent; each
imports only floors below it, and no floor of the core imports anything
outside the core (the resync runs it alone on a node).  No backend imports
another; the daemons' editors and the audit go through the registry and the
engine, never into a backend's package.
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, 'plugins')
PREFIX = 'ansible_collections.ipmasq.agent.plugins.'

_CORE_BASE = ('_core.model', '_core.node', '_core.engine')
_CORE_ALL = _CORE_BASE + ('_core', '_core.upstream_config', '_core.iptables_backend', '_core.nftables_backend',
                          '_core.registry', '_core.agent')
_NODE_SIDE = _CORE_ALL + ('_audit', '_daemons', '_files', '_msg', '_explain', 'module_utils')
_CONTROLLER = ('plugin_utils', 'filter', 'test')

# package -> the packages it may import (besides itself)
RULE = {
    '_core': (),
    '_core.model': (),
    '_core.node': ('_core.model',),
    '_core.upstream_config': ('_core.model', '_core.node'),
    '_core.engine': ('_core.model', '_core.node'),
    '_core.iptables_backend': _CORE_BASE,
    '_core.nftables_backend': _CORE_BASE,
    '_core.registry': _CORE_BASE + ('_core.iptables_backend', '_core.nftables_backend'),
    '_core.agent': _CORE_BASE + ('_core.upstream_config', '_core.registry'),
    '_msg': _CORE_BASE + ('_core.registry',),
    '_files': _CORE_BASE + ('_msg',),
    '_daemons': _CORE_BASE + ('_core.upstream_config', '_core.registry', '_files', '_msg'),
    '_audit': _CORE_BASE + ('_core.registry', '_daemons'),
    # The SNAT explanation reads the node through the audit's reader (its
    # View, every backend's audit_read) and names owners with the audit's
    # owners; the backends evaluate their own rules (their explain.py).
    # After mode asks each registered backend for its listings as the
    # policy run leaves them (Backend.after_run), and runs the role's daemon
    # steps with the daemons' own modules (the registry's editors).
    '_explain': _CORE_BASE + ('_audit', '_core.registry', '_daemons'),
    'module_utils': _NODE_SIDE,
    'modules': _NODE_SIDE + ('doc_fragments',),
    'doc_fragments': (),
    # The controller's side: the filters, the test plugin and the action are
    # entry points over the controller's library (plugin_utils: the CIDR
    # code, the list checks the role shares with its filters); the library
    # never imports an entry point.
    'plugin_utils': _NODE_SIDE,
    'filter': _NODE_SIDE + _CONTROLLER,
    'test': _NODE_SIDE + _CONTROLLER,
    'action': _NODE_SIDE + _CONTROLLER,
}


def package_of(module):
    """'module_utils._core.model.policy' -> '_core.model'; 'filter.snat_to' -> 'filter'."""
    parts = module.split('.')
    if parts[0] != 'module_utils':
        return parts[0]
    if len(parts) == 2:
        return parts[1] if parts[1] in ('_core', '_audit', '_daemons', '_files', '_msg', '_explain') else 'module_utils'
    if parts[1] == '_core':
        return '_core' if len(parts) == 3 and parts[2] == '__init__' else '_core.' + parts[2]
    return parts[1]


def source_modules(top=PLUGINS):
    """dotted name below plugins/ -> file, for every .py (packages end in .__init__)."""
    found = {}
    for dirpath, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        for name in sorted(names):
            if name.endswith('.py'):
                path = os.path.join(dirpath, name)
                found[os.path.relpath(path, top)[:-3].replace(os.sep, '.')] = path
    return found


def _resolve(name, modules):
    """A dotted name below plugins/ -> the module it loads, or None."""
    while name:
        if name in modules:
            return name
        if name + '.__init__' in modules:
            return name + '.__init__'
        name = name.rpartition('.')[0]
    return None


def imports_of(module, text, modules):
    """[(line, imported module)] of one file, every import in it (in functions too)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                here = module.split('.')[:-1]
                here = here[:len(here) - (node.level - 1)]
                base = '.'.join(here + ([base] if base else []))
            elif base.startswith(PREFIX):
                base = base[len(PREFIX):]
            else:
                continue
            targets = ['%s.%s' % (base, alias.name) for alias in node.names]
        for target in targets:
            if target.startswith(PREFIX):
                target = target[len(PREFIX):]
            resolved = _resolve(target, modules)
            if resolved and resolved != module and (node.lineno, resolved) not in found:
                found.append((node.lineno, resolved))
    return found


def import_graph(modules):
    graph = {}
    for module, path in modules.items():
        with open(path, encoding='utf-8') as handle:
            graph[module] = imports_of(module, handle.read(), modules)
    return graph


def against_rule(graph, rule):
    """Every import the rule does not allow, as 'file:line: a -> b (package -> package)'."""
    bad = []
    for module in sorted(graph):
        mine = package_of(module)
        for line, target in graph[module]:
            theirs = package_of(target)
            if theirs != mine and theirs not in rule.get(mine, ()):
                bad.append('%s.py:%d imports %s (%s -> %s)' % (module.replace('.', '/'), line, target, mine, theirs))
    return bad


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]
    edges = {m: sorted({t for _l, t in graph.get(m, ()) if t in graph}) for m in graph}
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope='module')
def graph():
    return import_graph(source_modules())


def test_every_package_has_a_rule(graph):
    assert sorted({package_of(m) for m in graph} - set(RULE)) == []


def test_the_rule_itself_has_no_cycle():
    """On the node's side the packages are floors; the controller's are not."""
    as_graph = {pkg: [(0, other) for other in allowed if other not in _CONTROLLER]
                for pkg, allowed in RULE.items() if pkg not in _CONTROLLER}
    assert [pkg for pkg in RULE for other in RULE[pkg] if other not in RULE] == []
    assert cycles(as_graph) == []


def test_imports_follow_the_rule(graph):
    assert against_rule(graph, RULE) == []


def test_no_import_cycle(graph):
    assert cycles(graph) == []


# The checker itself: each fails on what it must catch.

def test_checker_sees_an_import_inside_a_function():
    modules = {'module_utils._core.model.policy': '', 'module_utils._core.agent.resync': ''}
    text = ('def late():\n'
            '    from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync\n')
    graph = {'module_utils._core.model.policy': imports_of('module_utils._core.model.policy', text, modules),
             'module_utils._core.agent.resync': []}
    assert against_rule(graph, RULE) == [
        'module_utils/_core/model/policy.py:2 imports module_utils._core.agent.resync (_core.model -> _core.agent)']


def test_checker_sees_a_cycle_and_a_relative_import():
    modules = {'module_utils._audit.walk': '', 'module_utils._audit.owners': '', 'module_utils._audit.__init__': ''}  # move_core: keep
    graph = {
        'module_utils._audit.walk': imports_of('module_utils._audit.walk', 'from .owners import attribute\n', modules),  # move_core: keep
        'module_utils._audit.owners': imports_of('module_utils._audit.owners', 'from . import walk\n', modules),
    }
    assert cycles(graph) == [['module_utils._audit.owners', 'module_utils._audit.walk']]  # move_core: keep
    assert against_rule(graph, RULE) == []


def test_every_import_inside_a_function_says_why(graph):
    """An import of ours inside a function is there for start-up cost (a
    module a run rarely needs) and says so on its line or the line above;
    never to dodge a cycle (there is none: test_no_import_cycle)."""
    modules = source_modules()
    bare = []
    for module, path in sorted(modules.items()):
        with open(path, encoding='utf-8') as handle:
            text = handle.read()
        lines = text.splitlines()
        late = set(node.lineno for func in ast.walk(ast.parse(text)) if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for node in ast.walk(func) if isinstance(node, (ast.Import, ast.ImportFrom)))
        for line in sorted(set(line for line, _target in graph[module]) & late):
            said = [part.split('#', 1)[1] for part in (lines[line - 1], lines[line - 2] if line > 1 else '') if '#' in part]
            reason = ' '.join(said).replace('pylint: disable=import-outside-toplevel', '').strip()
            if not reason or 'cycle' in reason.lower():
                bare.append('%s:%d' % (os.path.relpath(path, os.path.dirname(PLUGINS)), line))
    assert not bare, 'imports inside functions with no stated reason: %s' % bare
