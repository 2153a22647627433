"""`colcon build` of the package in a temporary workspace, then the installed node runs over DDS.

The repository's package files are copied to <tmp>/src/uk_controller (the
checkout is never written to); colcon (from the venv) builds and installs
them; the installed `uk_controller_node` console script starts from
install/, finds its config through the ament index, publishes /diagnostics
and exits cleanly on SIGINT.
"""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from parallel import domain_id

DOMAIN_ID = domain_id(73)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'

ROOT = Path(__file__).resolve().parents[1]
COLCON = Path(sys.executable).parent / 'colcon'
PACKAGE_FILES = [
    'setup.py',
    'setup.cfg',
    'package.xml',
    'resource',
    'uk_controller',
    'launch',
    'config',
    'urdf',
    'mjcf',
]


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
    if not COLCON.exists() and shutil.which('colcon') is None:
        if os.environ.get('CI'):
            pytest.fail('colcon is not installed: CI must prove the ament_python layout with a real build')
        pytest.skip('colcon is not installed')
    ws = tmp_path_factory.mktemp('colcon_ws')
    src = ws / 'src' / 'uk_controller'
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns('__pycache__', '*.pyc', '*.egg-info')
    for name in PACKAGE_FILES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    env = dict(os.environ, PATH=f'{Path(sys.executable).parent}{os.pathsep}{os.environ.get("PATH", "")}')
    proc = subprocess.run(
        [
            str(COLCON if COLCON.exists() else 'colcon'),
            'build',
            '--base-paths',
            'src',
            '--build-base',
            'build',
            '--install-base',
            'install',
            '--event-handlers',
            'console_cohesion+',
        ],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return ws


def _installed_env(ws):
    prefix = ws / 'install' / 'uk_controller'
    site = next((prefix / 'lib').glob('python3*/site-packages'))
    return dict(
        os.environ,
        PYTHONPATH=f'{site}{os.pathsep}{os.environ.get("PYTHONPATH", "")}',
        AMENT_PREFIX_PATH=str(prefix),
        ROS_DOMAIN_ID=str(DOMAIN_ID),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )


@pytest.mark.slow
def test_colcon_installs_executables_share_files_and_ament_index(workspace):
    prefix = workspace / 'install' / 'uk_controller'
    for exe in ('uk_controller_node', 'uk_sim_node', 'serial_bridge_node', 'uk-controller'):
        assert (prefix / 'lib' / 'uk_controller' / exe).is_file(), exe
    share = prefix / 'share' / 'uk_controller'
    for rel in [
        'package.xml',
        'config/controllers.yaml',
        *[f'config/{p.name}' for p in (ROOT / 'config').glob('*.yaml')],
        *[f'launch/{p.name}' for p in (ROOT / 'launch').glob('*.py')],
        *[f'urdf/{p.name}' for p in (ROOT / 'urdf').glob('*.urdf')],
    ]:
        assert (share / rel).is_file(), rel
    assert (prefix / 'share' / 'ament_index' / 'resource_index' / 'packages' / 'uk_controller').is_file()


@pytest.mark.slow
def test_installed_package_resolves_to_the_install_space(workspace):
    env = _installed_env(workspace)
    out = subprocess.run(
        [
            sys.executable,
            '-c',
            'import uk_controller, uk_controller.paths as p;'
            'print(uk_controller.__file__); print(p.resolve_config("scara"))',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=workspace,
    )
    assert out.returncode == 0, out.stderr
    module, config = out.stdout.split()
    install = str(workspace / 'install')
    assert module.startswith(install) and config.startswith(install), out.stdout


@pytest.mark.ros
@pytest.mark.slow
def test_installed_node_starts_publishes_diagnostics_and_exits_cleanly(workspace):
    from diagnostic_msgs.msg import DiagnosticArray
    from ros_nodes import Probe

    probe = Probe(DOMAIN_ID)
    try:
        diags = probe.record(DiagnosticArray, '/diagnostics', convert=lambda m: [(s.name, s.message) for s in m.status])
        exe = workspace / 'install' / 'uk_controller' / 'lib' / 'uk_controller' / 'uk_controller_node'
        # the installed copy has its own (cold) numba cache: compiling it would take 20-60 s on a
        # busy machine and is not what this test is about (the layout); the NumPy path starts at once
        env = dict(_installed_env(workspace), UK_CONTROLLER_NUMBA='0')
        proc = subprocess.Popen(
            [str(exe), '--ros-args', '-p', 'config:=scara', '-p', 'ros.diagnostics_period:=0.2'],
            env=env,
            cwd=workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            seen = probe.wait_for(
                lambda: any(
                    name.startswith('uk_controller_node') and 'waiting for joint states' in msg
                    for _, status in diags
                    for name, msg in status
                ),
                40.0,
            )
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                output, _ = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
        assert seen, output
        assert proc.returncode == 0, output
        assert 'scara' in output and 'joint1' in output
    finally:
        probe.close()
