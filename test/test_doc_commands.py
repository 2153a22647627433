"""Every command README.md and docs/ros.md show, run here exactly as written where it can run.

Each line of a ```bash block is one command. Commands are run as a user types
them (`uk-controller ...`, `.venv/bin/uk-controller ...` from the repository
root); `ros2 run uk_controller X ARGS` runs the installed executable X with
ARGS, which is what ros2 run does; `ros2 launch uk_controller F ARGS` runs
launch file F with ARGS through the stand-ins of launch_stub.py (ROS launch is
not installable here) and starts the nodes of this package it returns, the way
launch_ros starts them. A node that starts is stopped with two SIGINTs, as
launch does on Ctrl-C, and must exit 0 without a traceback. What cannot run
here stops at a named absent upstream package (gz sim, robot_state_publisher,
rqt_plot, PlotJuggler) or is listed in NOT_RUN with the reason; a new command
in the docs fails test_every_command_is_classified until it is one or the other.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from launch_stub import PackageNotFoundError, launch_nodes, start_node
from parallel import domain_id

ROOT = Path(__file__).resolve().parents[1]
DOMAIN_ID = domain_id(77)
DOCS = ('README.md', 'docs/ros.md')
OUR_PACKAGE = 'uk_controller'
ABSENT = {'robot_state_publisher', 'rqt_plot', 'plotjuggler', 'ros_gz_sim', 'ros_gz_bridge', 'controller_manager'}
STARTED = {
    'uk_controller_node': ' joints ',
    'uk_sim_node': ' plant with ',
    'serial_bridge_node': ' on ',
    'uk_wait_for_topics': 'waiting for publishers',
}
NOT_RUN = {
    './scripts/demo.sh': 'the full SCARA demo (minutes); its parts run in test_cli_simulate.py',
    './scripts/test.sh': 'this test suite itself',
    './scripts/test.sh -m "not ros and not serial and not slow"': 'a part of this test suite',
    './scripts/test.sh -k scara': 'a part of this test suite',
    'python3 -m venv .venv && .venv/bin/pip install -e ".[mujoco,fast,serial,examples]"': 'test_install_lines.py '
    'installs it in a fresh venv and runs the commands after it',
    'cd ~/ws/src && git clone <this repo> uk_controller && cd ~/ws': 'placeholder URL; the colcon build of '
    'this checkout is test_colcon_build.py',
    'rosdep install --from-paths src -y && colcon build --packages-select uk_controller && '
    'source install/setup.bash': 'rosdep needs apt and the network; its keys: test_rosdep_keys.py; colcon '
    'build: test_colcon_build.py',
    '.venv/bin/uk-controller bench --quick': 'benchmark tables, not a test (bench/)',
    '.venv/bin/uk-controller simulate dual_arm --plant mujoco': 'full-length MuJoCo run; the same plant and '
    'controller: test_sim_mujoco.py, test_ros_mujoco.py',
    '.venv/bin/pip install -e ".[sweep]"': 'needs the package index (network)',
    '.venv/bin/uk-controller sweep scara --grid stabilization.omega=5:40:4 --grid control.rate=500,1000 '
    '--grid simulation.mass_scale=0.8,1,1.2 --duration 5 --out results/sweep24': 'a 48-run sweep (minutes); '
    'the sweep has its own tests',
    '.venv/bin/uk-controller sweep scara ... --out results/sweep24_ray --ray local': 'elided arguments (...)',
    'uk-controller sweep scara --set stabilization.convention=seed000 --grid stabilization.alpha=0.5,2,8,32,128,512 '
    '--grid stabilization.beta=50,200,800,3200,12800,51200 --grid control.rate=250,1000 '
    '--grid simulation.mass_scale=0.8,1.2 --duration 5 --best task_error_rms --best-by '
    'stabilization.alpha,stabilization.beta --max-saturation 0.01 --heatmap '
    'stabilization.alpha,stabilization.beta,task_error_rms --mark "seed 000=0.5,200"': 'a 144-run sweep (minutes); '
    'the sweep has its own tests',
    '.venv/bin/uk-controller simulate scara --alpha 0.5 --beta 200': 'full-length run with plots; the gains: '
    'test_cli_simulate.py',
}


def doc_commands():
    out = []
    for name in DOCS:
        block, pending = False, ''
        for line in (ROOT / name).read_text().splitlines():
            if line.startswith('```'):
                block, pending = line.strip() == '```bash', ''
                continue
            if block and line.strip():
                command = re.sub(r'\s+#.*$', '', line).strip()
                if command.endswith('\\'):  # continued on the next line
                    pending += command[:-1].strip() + ' '
                    continue
                command, pending = pending + command, ''
                if command not in out:
                    out.append(command)
    return out


COMMANDS = doc_commands()


def kind(command):
    if command in NOT_RUN:
        return 'not run'
    if command.startswith('ros2 run uk_controller '):
        return 'ros2 run'
    if command.startswith('ros2 launch uk_controller '):
        return 'ros2 launch'
    if re.match(r'(\.venv/bin/)?uk-controller ', command):
        return 'cli'
    return None


def robot_of(command):
    """The robot a command's nodes run (their kernels are compiled first: conftest.robots), or None."""
    if kind(command) not in ('ros2 run', 'ros2 launch'):
        return None
    found = re.search(r'\b(?:robot|config):=(\w+)(?:\s|$)', command)
    return found.group(1) if found else None


def params():
    """(command, robot) of every command run here, marked by what it starts."""
    out = []
    for command in COMMANDS:
        if kind(command) in (None, 'not run'):
            continue
        marks = [pytest.mark.ros] if kind(command) in ('ros2 run', 'ros2 launch') else []
        if command in SLOW:
            marks.append(pytest.mark.slow)
        if ' emulate ' in command:
            marks.append(pytest.mark.serial)
        out.append(pytest.param(command, robot_of(command), marks=marks, id=command))
    return out


def test_every_command_is_classified():
    assert COMMANDS
    unknown = [c for c in COMMANDS if kind(c) is None]
    assert not unknown, f'commands in {DOCS} neither run by this test nor in NOT_RUN: {unknown}'


def env():
    from ros_nodes import ros_env

    e = ros_env(DOMAIN_ID)
    e['PATH'] = f'{Path(sys.executable).parent}{os.pathsep}{e.get("PATH", "")}'
    return e


def interrupt_twice(proc, timeout=30.0):
    proc.send_signal(signal.SIGINT)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


#: commands that take more than a second or two (measured on the 2-core VM)
SLOW = {
    '.venv/bin/uk-controller simulate scara --mcap results/scara.mcap',
    '.venv/bin/uk-controller simulate config/examples/cassie_hung.yaml --out results/cassie',
    '.venv/bin/uk-controller simulate five_bar_redundant --duration 6.3 --out results/fb3',
    '.venv/bin/uk-controller run scara --port /dev/ttyUSB0 --protocol uk_binary',
    'ros2 launch uk_controller sim.launch.py robot:=five_bar',
    'ros2 launch uk_controller sim.launch.py robot:=dual_arm plant:=mujoco',
}


def wait_for(proc, path, text, timeout=120.0):
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if text in Path(path).read_text():
            return True
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    return text in Path(path).read_text()


def run_ros2_run(command, tmp_path):
    tokens = shlex.split(command)
    executable, args = tokens[3], tokens[4:]
    log = tmp_path / f'{executable}.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / executable), *args],
            cwd=ROOT,
            env=env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        started = wait_for(proc, log, STARTED[executable])
        code = interrupt_twice(proc)
    text = log.read_text()
    assert started, text
    assert code == 0 and 'Traceback' not in text, text
    return f'ran: {executable} started and stopped (exit 0)'


def run_launch(command, tmp_path):
    tokens = shlex.split(command)
    launch_file = ROOT / 'launch' / tokens[3]
    arguments = dict(t.split(':=', 1) for t in tokens[4:])
    try:
        nodes = launch_nodes(launch_file, **arguments)
    except PackageNotFoundError as exc:
        assert exc.args[0].split("'")[1] in ABSENT, exc
        return f'stops at {exc.args[0]}'
    except Exception as exc:  # what launch prints: "Caught exception in launch: ..."
        return f'refused: {exc}'
    ours = [n for n in nodes if n.get('package') == OUR_PACKAGE]
    absent = sorted({n['package'] for n in nodes if n.get('package') not in (None, OUR_PACKAGE)})
    assert set(absent) <= ABSENT, absent
    procs = [start_node(n, DOMAIN_ID, str(tmp_path)) for n in ours]
    try:
        for node, proc in zip(ours, procs):
            assert proc.wait_for_output(STARTED[node['executable']]), proc.output()
        codes = [proc.interrupt_twice() for proc in procs]
    finally:
        for proc in procs:
            proc.stop()
    for node, proc, code in zip(ours, procs, codes):
        out = proc.output()
        assert code == 0 and 'Traceback' not in out, (node['executable'], out)
    outputs = {n['executable']: p.output() for n, p in zip(ours, procs)}
    return (
        'ran: ' + ', '.join(n['executable'] for n in ours) + (f'; absent here: {", ".join(absent)}' if absent else ''),
        outputs,
    )


def run_cli(command, tmp_path):
    if ' emulate ' in command:
        proc = subprocess.Popen(
            ['/bin/sh', '-c', 'exec ' + command],
            cwd=ROOT,
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        first = proc.stdout.readline()
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        rest = proc.communicate(timeout=60)[0]
        assert proc.returncode == 0 and first.startswith('emulating '), first + rest
        return f'ran: {first.strip()}'
    done = subprocess.run(command, shell=True, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    text = done.stdout + done.stderr
    assert 'Traceback' not in text, text
    if '--port /dev/ttyUSB0' in command and not os.path.exists('/dev/ttyUSB0'):
        assert done.returncode == 2 and 'serial port /dev/ttyUSB0 does not exist' in text, text
        return 'no /dev/ttyUSB0 here: exit 2, ' + text.strip().splitlines()[-1]
    assert done.returncode == 0, text
    return 'ran: ' + text.strip().splitlines()[-1][:120]


@pytest.mark.parametrize('command, robot', params(), indirect=['robot'])
@pytest.mark.slow
def test_documented_command_runs_as_written(command, robot, tmp_path):
    pytest.importorskip('rclpy')
    runner = {'ros2 run': run_ros2_run, 'ros2 launch': run_launch, 'cli': run_cli}[kind(command)]
    result = runner(command, tmp_path)
    outputs = {}
    if isinstance(result, tuple):
        result, outputs = result
    if 'hardware.launch.py' in command and 'port:=/dev/ttyUSB0' in command:
        assert (
            'port:=/dev/ttyUSB0' in outputs['serial_bridge_node']
            and 'uk-controller emulate' in outputs['serial_bridge_node']
        ), outputs['serial_bridge_node']
        result += '; serial_bridge_node: no /dev/ttyUSB0, says port:= and uk-controller emulate'
    if 'gazebo.launch.py' in command:
        assert 'ros_gz_sim' in result
    if 'config:=/path/my_robot.yaml' in command:
        assert "no robot setup '/path/my_robot.yaml'" in result, result
    print(f'\n{command}\n  -> {result}')


def python_examples():
    """The ```python blocks of README.md, each a program as a user would paste it."""
    blocks, current = [], None
    for line in (ROOT / 'README.md').read_text().splitlines():
        if line.startswith('```'):
            if current is not None:
                blocks.append('\n'.join(current) + '\n')
                current = None
            elif line.strip() == '```python':
                current = []
            continue
        if current is not None:
            current.append(line)
    return blocks


@pytest.mark.slow
def test_readme_python_example_runs_and_tracks(tmp_path):
    """The README's own loop around ControllerCore: it runs as pasted, in a fresh interpreter, and tracks
    (the SCARA settles to ~2e-7 within the 2 s it runs; a broken example or API prints no such error)."""
    examples = python_examples()
    assert examples, 'README.md has no python example'
    for i, code in enumerate(examples):
        script = tmp_path / f'example_{i}.py'
        script.write_text(code)
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, 'OPENBLAS_NUM_THREADS': '1'},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        found = re.search(r'task error ([0-9.e+-]+), status (\w+)', done.stdout)
        assert found and float(found.group(1)) < 1e-5 and found.group(2) == 'OK', done.stdout
