"""Where the bench's node-side scripts may run: only inside a network
namespace the benchmark made.

node_core.py and node_nft.py empty the nat table or the nft ruleset of the
namespace they run in, node_cycle.py writes its rules, pod_send.py sends
packets to a documentation address: never in this machine's own namespace.
They run only where the namespace they are in is one of /run/netns/imq-*
(the names netlab gives the namespaces it makes), compared by device and
inode; anywhere else they refuse, whatever the environment says.
"""
import os
import sys

NETNS_DIR = '/run/netns'
PREFIX = 'imq-'


def in_own_namespace():
    """True when this process's network namespace is one of /run/netns/imq-*."""
    here = os.stat('/proc/self/ns/net')
    try:
        names = os.listdir(NETNS_DIR)
    except OSError:
        return False
    for name in names:
        if not name.startswith(PREFIX):
            continue
        try:
            there = os.stat(os.path.join(NETNS_DIR, name))
        except OSError:
            continue
        if (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino):
            return True
    return False


def refuse_unless_own_namespace(script):
    if not in_own_namespace():
        sys.stderr.write('%s: refusing to run outside a network namespace the benchmark made (/run/netns/%s*); '
                         'use bench/run\n' % (script, PREFIX))
        sys.exit(3)
