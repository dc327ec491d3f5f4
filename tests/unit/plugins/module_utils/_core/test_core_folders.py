"""The core's folders never take the name of a module that the flat layout of
an earlier release installed on nodes.  Going back to such a release (the
Molecule upgrade scenarios do) writes its flat modules into the directory the
resync's ``_core`` link points at, beside this release's folders; a package
directory shadows a module of the same name, so ``_core/policy/`` would make
1.1.0's resync import the folder instead of its ``policy.py`` and fail."""
import os

from ansible_collections.ipmasq.agent.plugins.module_utils import _core

# plugins/module_utils/_core/*.py of each release with the flat layout.
FLAT_RELEASES = {
    '1.0.0': ('cidrs config errors fileio golang iptables iptables_save lock nft_json policy ranges resync runner '
              'sync yamlsubset'),
    '1.1.0': ('addresses backends cidrs config drift errors fileio golang intervals iptables iptables_save lock '
              'metrics nfnetlink nft_json nftables policy ranges resync runner sync xtables_kernel yamlsubset'),
}


def folders():
    top = _core.__path__[0]
    return sorted(name for name in os.listdir(top)
                  if os.path.isfile(os.path.join(top, name, '__init__.py')))


def test_the_core_has_folders():
    assert len(folders()) >= 4, folders()


def test_no_folder_shadows_a_module_an_earlier_release_installed():
    for release, names in FLAT_RELEASES.items():
        clash = sorted(set(folders()) & set(names.split()))
        assert clash == [], 'folders named as modules of %s: %s' % (release, clash)
