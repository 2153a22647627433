"""Embedded simulator + UK controller (+ robot_state_publisher) over real topics.

    ros2 launch uk_controller sim.launch.py robot:=five_bar
    ros2 launch uk_controller sim.launch.py robot:=scara rate:=500.0
    ros2 launch uk_controller sim.launch.py robot:=dual_arm plant:=mujoco

robot: scara | five_bar | five_bar_redundant | dual_arm | planar_3r (config/<robot>.yaml), or
config:=/path/to/robot.yaml for your own setup. uk_sim_node integrates the true closed-chain
dynamics (plant:=uk, the embedded UK plant; plant:=mujoco, the MuJoCo engine with its own loop
closures, `pip install mujoco`) and publishes /joint_states; uk_controller_node closes the loop on
/effort_controller/commands. See docs/ros.md.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from uk_controller.paths import robot_description

PACKAGE = 'uk_controller'
ROBOTS = ('scara', 'five_bar', 'five_bar_redundant', 'dual_arm', 'planar_3r')


def nodes(context):
    robot = LaunchConfiguration('robot').perform(context)
    config_path, description = robot_description(LaunchConfiguration('config').perform(context) or robot)
    config = str(config_path)
    overrides = {'config': config}
    rate = LaunchConfiguration('rate').perform(context)
    if rate:
        overrides['control.rate'] = float(rate)
    # The plant publishes /clock (like Gazebo) and everyone else follows it, so a machine too slow
    # for real time slows the simulation down instead of letting the controller run ahead of it.
    sim = dict(overrides, **{'simulation.publish_clock': True,
                             'simulation.plant': LaunchConfiguration('plant').perform(context),
                             'simulation.real_time_factor': float(LaunchConfiguration('real_time_factor')
                                                                  .perform(context)),
                             'simulation.max_command_lag': int(LaunchConfiguration('max_command_lag')
                                                               .perform(context))})
    return [
        Node(package=PACKAGE, executable='uk_sim_node', name='uk_sim_node', output='screen',
             parameters=[config, sim]),
        Node(package=PACKAGE, executable='uk_controller_node', name='uk_controller_node', output='screen',
             parameters=[config, dict(overrides, use_sim_time=True)]),
        Node(package='robot_state_publisher', executable='robot_state_publisher', output='screen',
             parameters=[{'robot_description': description, 'use_sim_time': True}]),
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument('robot', default_value='five_bar', choices=list(ROBOTS),
                              description='robot setup config/<robot>.yaml'),
        DeclareLaunchArgument('config', default_value='',
                              description='path of a robot YAML (overrides robot)'),
        DeclareLaunchArgument('plant', default_value='uk', choices=['uk', 'mujoco'],
                              description='uk: embedded UK plant; mujoco: MuJoCo physics (pip install mujoco)'),
        DeclareLaunchArgument('rate', default_value='',
                              description='control and simulation rate in Hz (default: control.rate)'),
        DeclareLaunchArgument('real_time_factor', default_value='1.0',
                              description='simulated seconds per wall-clock second (lower it on a slow machine)'),
        DeclareLaunchArgument('max_command_lag', default_value='0',
                              description='plant waits after this many periods without an effort command '
                                          '(0: never; 1-2 keep a busy machine from delaying the controller)'),
        OpaqueFunction(function=nodes),
    ])
