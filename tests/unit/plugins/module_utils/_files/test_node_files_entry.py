"""node_files' one entry, called in-process as another module would: the
params it leaves out take the module's defaults, diff only when asked, and
check mode writes nothing."""
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ipmasq.agent.plugins.module_utils._files import node_files


def module():
    with patch_module_args({}):
        return AnsibleModule(argument_spec={}, supports_check_mode=True)


def test_a_partial_params_dict_is_enough(tmp_path):
    path = str(tmp_path / 'a' / 'b.conf')
    params = {'files': [{'path': path, 'content': 'x\n'}], 'query': [str(tmp_path / 'missing')]}
    res = node_files.manage(params, True, True, None, None, module())
    assert res['changed'] is True and res['changed_paths'] == [path] and not (tmp_path / 'a').exists()
    assert res['msg'] == 'would write 1 file (%s)' % path
    assert res['diff'] == [{'before_header': path, 'after_header': path, 'before': '', 'after': 'x\n'}]
    res = node_files.manage(params, False, False, None, None, module())
    assert 'diff' not in res and res['existing'] == [path] and res['queried'][0]['type'] is None
    assert res['msg'] == '1 file written (%s)' % path
    assert open(path).read() == 'x\n' and oct((tmp_path / 'a').stat().st_mode & 0o777) == '0o755'
    res = node_files.manage(params, False, False, None, None, module())
    assert res['changed'] is False and res['changed_paths'] == [] and res['msg'] == 'no change (1 file)'
    res = node_files.manage({'absent': [path]}, True, False, None, None, module())
    assert res['msg'] == 'would remove 1 file (%s)' % path
    assert node_files.manage({'absent': [path]}, False, False, None, None, module())['msg'] == '1 file removed (%s)' % path
