"""ament_python package setup: works with `colcon build` and with pip."""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = 'uk_controller'


def share(folder, pattern='*'):
    """Install every file of `folder` (recursively) under share/uk_controller/."""
    entries = {}
    for path in glob(os.path.join(folder, '**', pattern), recursive=True):
        if os.path.isfile(path):
            target = os.path.join('share', PACKAGE, os.path.dirname(path))
            entries.setdefault(target, []).append(path)
    return sorted(entries.items())


ROS_FROM_PYPI = [
    # The real ROS 2 Python client (Kilted) and messages from PyPI, for machines
    # without a system ROS. In a ROS workspace rosdep provides these instead.
    'ros-rclpy[fastrtps]',
    'ros-sensor-msgs',
    'ros-std-msgs',
    'ros-std-srvs',
    'ros-diagnostic-msgs',
    'ros-trajectory-msgs',
    'ros-rosgraph-msgs',
]

setup(
    name='uk-controller',
    version='0.1.0',
    packages=find_packages(include=['uk_controller', 'uk_controller.*']),  # not bench/ or test/ (the lab)
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE]),
        ('share/' + PACKAGE, ['package.xml']),
        *share('launch'),
        *share('config'),
        *share('urdf'),
        *share('mjcf'),
    ],
    python_requires='>=3.10',
    install_requires=[
        'numpy',
        'scipy',
        'pyyaml',
        'matplotlib',
        # Pinocchio. In a ROS workspace rosdep installs the `pinocchio` key and
        # colcon does not pip-install this list.
        'pin',
        # robot.urdf may be a .xacro file, expanded at load time (uk_controller/files/description.py).
        'xacro',
    ],
    extras_require={
        'mujoco': ['mujoco'],
        # Optional compiled kernels for the control step (uk_controller/kernels/); the
        # NumPy/LAPACK path is used without it. UK_CONTROLLER_NUMBA=0 disables it.
        'fast': ['numba'],
        # the motor protocols: pyserial (uk_binary, odrive), dynamixel-sdk, python-can (can_mit)
        'serial': ['pyserial', 'dynamixel-sdk', 'python-can'],
        'ros': ROS_FROM_PYPI,
        # `uk-controller sweep` (Ray cluster, Parquet tables) and MCAP recordings
        # (`simulate --mcap`, ROS 2 CDR written from message-definition text, no rclpy)
        'sweep': ['ray', 'pyarrow', 'mcap', 'mcap-ros2-support'],
        # the published robot descriptions config/examples/ names (package://example-robot-data/...):
        # Panda, SO-101, Cassie; the arms of test_arm_starts.py
        'examples': ['example-robot-data'],
        # pytest-xdist: scripts/test.sh runs the suite in 2 worker processes
        'test': [
            'pytest',
            'pytest-xdist',
            'hypothesis',
            'mujoco',
            'pyserial',
            'dynamixel-sdk',
            'python-can',
            'numba',
            # a real `colcon build` of this package in test_colcon_build.py
            'colcon-common-extensions',
            'colcon-ros',
            'ros-ament-package',
            # sweep tests (local Ray head on loopback, Parquet) and MCAP read-back
            'ray',
            'pyarrow',
            'mcap',
            'mcap-ros2-support',
            # real robot descriptions nobody on this project wrote (Panda, SO-101 in test_real_arms.py;
            # config/examples/ names them package://example-robot-data/...)
            'example-robot-data',
            # test_lint.py: ruff check and ruff format --check with ruff.toml. Not a rosdep key: in a ROS
            # workspace `pip install ruff` for it, or the test skips saying so
            'ruff',
            # test_settings_types.py: mypy on the settings and their readers (setup.cfg [mypy]); the test
            # skips without it
            'mypy',
        ],
    },
    zip_safe=True,
    maintainer='uk_controller developers',
    maintainer_email='uk-controller@example.org',
    description='Udwadia-Kalaba constrained-dynamics control for ROS 2',
    license='BSD-3-Clause',
    entry_points={
        'console_scripts': [
            # uk_controller/entry_points.py: Ctrl-C is quiet from the first instruction (imports included)
            'uk-controller = uk_controller.entry_points:uk_controller',
            'uk_controller_node = uk_controller.entry_points:controller_node',
            'uk_sim_node = uk_controller.entry_points:sim_node',
            'serial_bridge_node = uk_controller.entry_points:serial_bridge_node',
            'uk_wait_for_topics = uk_controller.entry_points:wait_for_topics',
        ],
    },
)
