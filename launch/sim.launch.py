"""Embedded simulator + UK controller (+ robot_state_publisher) over real topics.

    ros2 launch uk_controller sim.launch.py robot:=five_bar
    ros2 launch uk_controller sim.launch.py robot:=scara rate:=500.0
    ros2 launch uk_controller sim.launch.py robot:=dual_arm plant:=mujoco

robot: a setup shipped in config/<robot>.yaml (scara, five_bar, dual_arm, ...), or
config:=/path/to/robot.yaml for your own setup. uk_sim_node integrates the true closed-chain
dynamics (plant:=uk, the embedded UK plant; plant:=mujoco, the MuJoCo engine with its own loop
closures, `pip install mujoco`) and publishes /joint_states; uk_controller_node closes the loop on
/effort_controller/commands. Every default comes from the robot YAML (else the settings schema): a
launch argument reaches the nodes only when it is given. See docs/ros.md.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from uk_controller.paths import available_configs, robot_description
from uk_controller.settings.resolve import resolve
from uk_controller.sim import plants

PACKAGE = 'uk_controller'
ROBOTS = tuple(available_configs())  # the robot setups shipped in config/
SIM_ARGUMENTS = {  # launch argument -> (uk_sim_node parameter: a key of the robot YAML, type)
    'plant': ('simulation.plant', str),
    'real_time_factor': ('simulation.real_time_factor', float),
    'max_command_lag': ('simulation.max_command_lag', int),
}


def nodes(context):
    robot = LaunchConfiguration('robot').perform(context)
    config_path, description = robot_description(LaunchConfiguration('config').perform(context) or robot)
    config = str(config_path)
    overrides = {'config': config}
    labels = {}
    rate = LaunchConfiguration('rate').perform(context)
    if rate:
        overrides['control.rate'] = float(rate)
        labels['control.rate'] = 'rate:= (control.rate)'
    # The plant publishes /clock (like Gazebo) and everyone else follows it, so a machine too slow
    # for real time slows the simulation down instead of letting the controller run ahead of it.
    sim = dict(overrides, **{'simulation.publish_clock': True})
    for argument, (parameter, kind) in SIM_ARGUMENTS.items():
        value = LaunchConfiguration(argument).perform(context)
        if value:
            sim[parameter] = kind(value)
            labels[parameter] = f'{argument}:= ({parameter})'
    # a bad file or argument stops here, naming the key (or the argument) and the range, not in rcl
    resolve(
        config,
        {k: v for k, v in sim.items() if k != 'config'},
        labels=labels,
        source=f'sim.launch.py arguments over {config}',
    )
    return [
        Node(package=PACKAGE, executable='uk_sim_node', name='uk_sim_node', output='screen', parameters=[config, sim]),
        Node(
            package=PACKAGE,
            executable='uk_controller_node',
            name='uk_controller_node',
            output='screen',
            parameters=[config, dict(overrides, use_sim_time=True)],
        ),
        Node(
            package='robot_state_publisher',
            executable='robot_state_publisher',
            output='screen',
            parameters=[{'robot_description': description, 'use_sim_time': True}],
        ),
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                'robot', default_value='five_bar', choices=list(ROBOTS), description='robot setup config/<robot>.yaml'
            ),
            DeclareLaunchArgument('config', default_value='', description='path of a robot YAML (overrides robot)'),
            DeclareLaunchArgument(
                'plant',
                default_value='',
                description=f'{plants.describe()} (default: simulation.plant)',
            ),
            DeclareLaunchArgument(
                'rate', default_value='', description='control and simulation rate in Hz (default: control.rate)'
            ),
            DeclareLaunchArgument(
                'real_time_factor',
                default_value='',
                description='simulated seconds per wall-clock second, lower on a slow machine '
                '(default: simulation.real_time_factor)',
            ),
            DeclareLaunchArgument(
                'max_command_lag',
                default_value='',
                description='plant waits after this many periods without an effort command '
                '(0: never; 1-2 keep a busy machine from delaying the controller; '
                'default: simulation.max_command_lag)',
            ),
            OpaqueFunction(function=nodes),
        ]
    )
