"""Run a command with a directory of the test's own as its /run.

    python3 private_run.py DIR -- argv...

It re-runs itself under ``unshare --mount --propagation private`` (a mount
namespace of its own, whose mounts never reach the machine's), checks that
it is in one (its mount namespace is not the one it was started in),
bind-mounts DIR over
/run there, then runs argv.  Every process started this way with the same
DIR sees the same /run: the writers' lock /run/ipmasq-agent.lock and the
xtables lock /run/xtables.lock are the test's own, so a test can remove,
replace or hold them without touching any other run on the machine.
"""
import os
import subprocess
import sys

MARK = 'IMQ_PRIVATE_RUN'


def _mount_ns():
    st = os.stat('/proc/self/ns/mnt')
    return '%d:%d' % (st.st_dev, st.st_ino)


def main():
    pid, _sep, started_in = os.environ.get(MARK, '').partition(' ')
    if pid != str(os.getpid()):
        # Not yet in a mount namespace of our own: unshare execs python, which keeps this pid.
        env = dict(os.environ)
        env[MARK] = '%d %s' % (os.getpid(), _mount_ns())
        os.execve('/usr/bin/unshare', ['unshare', '--mount', '--propagation', 'private',
                                       sys.executable] + sys.argv, env)
    if _mount_ns() == started_in:
        sys.exit('private_run.py: not in a mount namespace of its own; /run left alone')
    sep = sys.argv.index('--')
    (directory,), argv = sys.argv[1:sep], sys.argv[sep + 1:]
    subprocess.run(['mount', '--bind', directory, '/run'], check=True)
    del os.environ[MARK]
    os.execvp(argv[0], argv)


if __name__ == '__main__':
    main()
