"""Serial motor drivers + UK controller: the real robot.

    ros2 launch uk_controller hardware.launch.py robot:=scara port:=/dev/ttyUSB0 protocol:=uk_binary
    uk-controller emulate scara --protocol uk_binary      # no hardware: prints a port for port:=

serial_bridge_node owns the port, publishes /joint_states from the drivers' feedback and applies
the efforts from /effort_controller/commands (with its own watchdog); uk_controller_node closes
the loop. Every default comes from the robot YAML (else the settings schema); a launch argument
reaches a node only when it is given. `rate` is control.rate of both nodes (the UK node's period);
the bus follows it unless the YAML sets hardware.rate or `bus_rate` is given. See docs/ros.md and
docs/serial_protocol.md.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from uk_controller.hardware import registry
from uk_controller.paths import available_configs
from uk_controller.settings.resolve import resolve

PACKAGE = 'uk_controller'
ROBOTS = tuple(available_configs())  # the robot setups shipped in config/
BRIDGE_ARGUMENTS = {  # launch argument -> (bridge parameter: a key of the robot YAML, type)
    'port': ('hardware.port', str),
    'baud': ('hardware.baud', int),
    'protocol': ('hardware.protocol', str),
    'bus_rate': ('hardware.rate', float),
    'watchdog': ('hardware.watchdog', float),
}


def nodes(context):
    robot = LaunchConfiguration('robot').perform(context)
    config = LaunchConfiguration('config').perform(context) or os.path.join(
        get_package_share_directory(PACKAGE), 'config', f'{robot}.yaml'
    )
    bridge = {'config': config}
    controller = {'config': config}
    labels = {}
    rate = LaunchConfiguration('rate').perform(context)
    if rate:  # the bridge's hardware.rate defaults to it, so its rules see the controller's rate too
        controller['control.rate'] = bridge['control.rate'] = float(rate)
        labels['control.rate'] = 'rate:= (control.rate)'
    for argument, (parameter, kind) in BRIDGE_ARGUMENTS.items():
        value = LaunchConfiguration(argument).perform(context)
        if value:
            bridge[parameter] = kind(value)
            labels[parameter] = f'{argument}:= ({parameter})'
    # a bad file or argument stops here, naming the key (or the argument) and the range, not in rcl; the
    # bridge's settings hold the controller's (the file and control.rate) and the bus's
    resolve(
        config,
        {k: v for k, v in bridge.items() if k != 'config'},
        labels=labels,
        source=f'hardware.launch.py arguments over {config}',
    )
    return [
        Node(
            package=PACKAGE,
            executable='serial_bridge_node',
            name='serial_bridge_node',
            output='screen',
            parameters=[bridge],
        ),
        Node(
            package=PACKAGE,
            executable='uk_controller_node',
            name='uk_controller_node',
            output='screen',
            parameters=[config, controller],
        ),
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                'robot', default_value='scara', choices=list(ROBOTS), description='robot setup config/<robot>.yaml'
            ),
            DeclareLaunchArgument('config', default_value='', description='path of a robot YAML (overrides robot)'),
            DeclareLaunchArgument('port', default_value='', description='serial port (default: hardware.port)'),
            DeclareLaunchArgument('baud', default_value='', description='baud rate (default: hardware.baud)'),
            DeclareLaunchArgument(
                'protocol', default_value='', description=' | '.join(registry.names()) + ' (default: hardware.protocol)'
            ),
            DeclareLaunchArgument(
                'rate',
                default_value='',
                description='control.rate in Hz of both nodes; the bus follows it unless hardware.rate '
                'is set (default: control.rate)',
            ),
            DeclareLaunchArgument(
                'bus_rate',
                default_value='',
                description='hardware.rate in Hz if the bus differs from rate (default: '
                'hardware.rate, else control.rate)',
            ),
            DeclareLaunchArgument(
                'watchdog',
                default_value='',
                description='seconds without command or feedback before torque off (default: hardware.watchdog)',
            ),
            OpaqueFunction(function=nodes),
        ]
    )
