"""Serial motor drivers + UK controller: the real robot.

    ros2 launch uk_controller hardware.launch.py robot:=scara port:=/dev/ttyUSB0 protocol:=uk_binary
    uk-controller emulate scara --protocol uk_binary      # no hardware: prints a port for port:=

serial_bridge_node owns the port, publishes /joint_states from the drivers' feedback and applies
the efforts from /effort_controller/commands (with its own watchdog); uk_controller_node closes
the loop. Defaults come from section `hardware` of the robot YAML; the launch arguments
override them when given. `rate` is control.rate (the UK node's period) and also the bus
rate unless `bus_rate` is given. See docs/ros.md and docs/serial_protocol.md.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from uk_controller.files.parameter_file import load_config
from uk_controller.hardware import registry

PACKAGE = 'uk_controller'
ROBOTS = ('scara', 'five_bar', 'five_bar_redundant', 'dual_arm', 'planar_3r')
BRIDGE_ARGUMENTS = {          # launch argument -> (bridge parameter: a key of the robot YAML, type)
    'port': ('hardware.port', str),
    'baud': ('hardware.baud', int),
    'protocol': ('hardware.protocol', str),
    'bus_rate': ('hardware.rate', float),
    'watchdog': ('hardware.watchdog', float),
}


def nodes(context):
    robot = LaunchConfiguration('robot').perform(context)
    config = LaunchConfiguration('config').perform(context) or os.path.join(
        get_package_share_directory(PACKAGE), 'config', f'{robot}.yaml')
    load_config(config)          # a bad file stops here with the key and the fix, not in rcl
    bridge = {'config': config}
    controller = {'config': config}
    rate = LaunchConfiguration('rate').perform(context)
    if rate:
        controller['control.rate'] = float(rate)
        bridge['hardware.rate'] = float(rate)
    for argument, (parameter, kind) in BRIDGE_ARGUMENTS.items():
        value = LaunchConfiguration(argument).perform(context)
        if value:
            bridge[parameter] = kind(value)
    return [
        Node(package=PACKAGE, executable='serial_bridge_node', name='serial_bridge_node', output='screen',
             parameters=[bridge]),
        Node(package=PACKAGE, executable='uk_controller_node', name='uk_controller_node', output='screen',
             parameters=[config, controller]),
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument('robot', default_value='scara', choices=list(ROBOTS),
                              description='robot setup config/<robot>.yaml'),
        DeclareLaunchArgument('config', default_value='', description='path of a robot YAML (overrides robot)'),
        DeclareLaunchArgument('port', default_value='', description='serial port (default: hardware.port)'),
        DeclareLaunchArgument('baud', default_value='', description='baud rate (default: hardware.baud)'),
        DeclareLaunchArgument('protocol', default_value='',
                              description=' | '.join(registry.names()) + ' (default: hardware.protocol)'),
        DeclareLaunchArgument('rate', default_value='',
                              description='control.rate in Hz: the UK node and the bus (default: control.rate)'),
        DeclareLaunchArgument('bus_rate', default_value='',
                              description='bus rate in Hz if it differs from rate (default: hardware.rate or rate)'),
        DeclareLaunchArgument('watchdog', default_value='',
                              description='seconds without command or feedback before torque off '
                                          '(default: hardware.watchdog)'),
        OpaqueFunction(function=nodes),
    ])
