"""Gazebo (gz sim) + gz_ros2_control + the UK controller.

    ros2 launch uk_controller gazebo.launch.py robot:=scara
    ros2 launch uk_controller gazebo.launch.py robot:=planar_3r gz_args:="-r -v 2 empty.sdf"

Gazebo simulates the URDF (its <ros2_control> block: effort command interfaces,
position/velocity state interfaces; a `world` link, a fixed joint and a base_link
with mass, so that libsdformat's URDF converter keeps the whole model). Closed
chains (five_bar, five_bar_redundant, dual_arm) are refused with the alternative:
gz sim Harmonic's DART engine does not close a loop (a joint whose child already
has a parent joint, gazebosim/gz-physics#25), so the mechanism would fall apart.
controller_manager runs inside Gazebo (gz_ros2_control) with
config/controllers.yaml: joint_state_broadcaster publishes /joint_states and
<robot>_effort_controller (effort_controllers/JointGroupEffortController)
takes /<robot>_effort_controller/commands, which the UK node publishes.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from uk_controller.paths import gazebo_robot_description

PACKAGE = 'uk_controller'
ROBOTS = ('scara', 'planar_3r')
# Closed chains -> what to run instead (gz sim Harmonic cannot close their loops, see check_robot).
CLOSED_CHAINS = {
    'five_bar': 'ros2 launch uk_controller sim.launch.py robot:=five_bar plant:=mujoco',
    'five_bar_redundant': 'ros2 launch uk_controller sim.launch.py robot:=five_bar_redundant plant:=mujoco',
    'dual_arm': 'ros2 launch uk_controller sim.launch.py robot:=dual_arm plant:=mujoco',
}


def check_robot(robot):
    """The robot name, or a RuntimeError that launch prints: why not, and what to run instead."""
    if robot in CLOSED_CHAINS:
        raise RuntimeError(
            f"gazebo.launch.py robot:={robot}: a closed chain, which gz sim Harmonic cannot simulate: "
            f"gz-physics' DART engine drops a joint whose child already has a parent joint "
            f"(gazebosim/gz-physics#25), so the loop would open and the mechanism fall apart. "
            f"Run it on an independent physics engine instead: {CLOSED_CHAINS[robot]} "
            f"(or plant:=uk for the embedded simulator)"
        )
    if robot not in ROBOTS:
        raise RuntimeError(
            f'gazebo.launch.py robot:={robot}: not one of {", ".join(ROBOTS)} '
            f'(your own robot: sim.launch.py config:=/path/robot.yaml)'
        )
    return robot


def nodes(context):
    robot = check_robot(LaunchConfiguration('robot').perform(context))
    share = get_package_share_directory(PACKAGE)
    default_controllers = os.path.join(share, 'config', 'controllers.yaml')
    controllers = LaunchConfiguration('controllers').perform(context) or default_controllers
    # $(find uk_controller) resolved as xacro would, gz_ros2_control's <parameters> set to `controllers`;
    # test/test_gazebo_conversion.py converts this very text with libsdformat.
    config_path, description = gazebo_robot_description(robot, controllers)
    config = str(config_path)
    effort_controller = f'{robot}_effort_controller'

    gazebo = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(
            os.path.join(get_package_share_directory('ros_gz_sim'), 'launch', 'gz_sim.launch.py')
        ),
        launch_arguments=[('gz_args', LaunchConfiguration('gz_args').perform(context))],
    )
    state_publisher = Node(
        package='robot_state_publisher',
        executable='robot_state_publisher',
        output='screen',
        parameters=[{'robot_description': description, 'use_sim_time': True}],
    )
    spawn = Node(
        package='ros_gz_sim',
        executable='create',
        output='screen',
        arguments=['-topic', 'robot_description', '-name', robot, '-allow_renaming', 'true'],
    )
    clock_bridge = Node(
        package='ros_gz_bridge',
        executable='parameter_bridge',
        output='screen',
        arguments=['/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock'],
    )
    broadcaster = Node(package='controller_manager', executable='spawner', arguments=['joint_state_broadcaster'])
    effort = Node(
        package='controller_manager', executable='spawner', arguments=[effort_controller, '--param-file', controllers]
    )
    controller = Node(
        package=PACKAGE,
        executable='uk_controller_node',
        name='uk_controller_node',
        output='screen',
        parameters=[
            config,
            {'config': config, 'use_sim_time': True, 'ros.effort_topic': f'/{effort_controller}/commands'},
        ],
    )
    return [
        gazebo,
        clock_bridge,
        state_publisher,
        spawn,
        RegisterEventHandler(OnProcessExit(target_action=spawn, on_exit=[broadcaster])),
        RegisterEventHandler(OnProcessExit(target_action=broadcaster, on_exit=[effort, controller])),
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                'robot',
                default_value='scara',
                description='scara | planar_3r (config/<robot>.yaml with a <ros2_control> URDF); '
                'closed chains: sim.launch.py plant:=mujoco',
            ),
            DeclareLaunchArgument(
                'controllers',
                default_value='',
                description='controller_manager YAML (default config/controllers.yaml; '
                'Rolling: config/controllers_rolling.yaml)',
            ),
            DeclareLaunchArgument(
                'gz_args',
                default_value='-r -v 1 empty.sdf',
                description='arguments of gz sim (world, -r to run, -s headless)',
            ),
            OpaqueFunction(function=nodes),
        ]
    )
