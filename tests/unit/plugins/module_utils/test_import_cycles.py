"""The node-side code (plugins/module_utils) has no import cycle, counting
imports inside functions as well as those at file level, and every import
inside a function says why it is there (its start-up cost), on the line or
the line before it; none may be there to dodge a cycle."""
import ast
import os

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
UTILS = os.path.normpath(os.path.join(ROOT, 'plugins', 'module_utils'))
PREFIX = 'ansible_collections.ipmasq.agent.plugins.module_utils'


def modules():
    """Every module below plugins/module_utils: dotted name -> path."""
    found = {}
    for top, dirs, files in os.walk(UTILS):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        for name in sorted(files):
            if name.endswith('.py'):
                path = os.path.join(top, name)
                rel = os.path.relpath(path, UTILS)[:-3].replace(os.sep, '.')
                rel = rel[:-len('.__init__')] if rel.endswith('.__init__') else rel
                found[PREFIX + ('' if rel == '__init__' else '.' + rel)] = path
    return found


def _targets(node, known):
    """The collection's modules one import statement loads."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level or not (node.module or '').startswith(PREFIX):
            return []
        names = [node.module] + [node.module + '.' + alias.name for alias in node.names]
    return [name for name in names if name in known]


def imports(known):
    """module -> {imported module: [(line, inside a function)]}."""
    graph = {}
    for name, path in known.items():
        with open(path, encoding='utf-8') as handle:
            tree = ast.parse(handle.read(), path)
        edges = graph.setdefault(name, {})
        parents = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                parents[child] = parent
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                inner, up = False, parents.get(node)
                while up is not None:
                    inner = inner or isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                    up = parents.get(up)
                for target in _targets(node, known):
                    if target != name:
                        edges.setdefault(target, []).append((node.lineno, inner))
    return graph


def cycles(graph):
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(start):
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        group.append(top)
                        if top == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return groups


def test_the_cycle_finder_sees_a_cycle_through_a_function_import():
    graph = {'a': {'b': [(1, False)]}, 'b': {'c': [(3, True)]}, 'c': {'a': [(2, False)]}, 'd': {'a': [(1, False)]}}
    assert cycles(graph) == [['a', 'b', 'c']]
    assert cycles({'a': {'b': [(1, False)]}, 'b': {}}) == []


def test_module_utils_has_no_import_cycle():
    known = modules()
    assert len(known) > 50
    found = cycles(imports(known))
    short = [[name[len(PREFIX) + 1:] for name in group] for group in found]
    assert not found, 'import cycles in plugins/module_utils: %r' % short


def test_every_import_inside_a_function_says_why():
    known = modules()
    bare = []
    for name, path in known.items():
        with open(path, encoding='utf-8') as handle:
            text = handle.read()
        lines = text.splitlines()
        tree = ast.parse(text, path)
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and _targets(node, known):
                    here = lines[node.lineno - 1]
                    before = lines[node.lineno - 2] if node.lineno > 1 else ''
                    said = [part.split('#', 1)[1] for part in (here, before) if '#' in part]
                    reason = ' '.join(said).replace('pylint: disable=import-outside-toplevel', '').strip()
                    if not reason or 'cycle' in reason.lower():
                        bare.append('%s:%d' % (os.path.relpath(path, ROOT), node.lineno))
    assert not bare, 'imports inside functions with no stated reason: %s' % bare
