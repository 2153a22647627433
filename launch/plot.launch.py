"""Plots of the controller's errors, efforts and loop timing: rqt_plot or PlotJuggler.

    ros2 launch uk_controller plot.launch.py robot:=five_bar                   # rqt_plot: task + closure rows
    ros2 launch uk_controller plot.launch.py robot:=scara tool:=plotjuggler    # PlotJuggler layout of the robot

The rows come from the robot (config/<robot>.yaml or config:=path): every task
(servo) row of /uk_controller_node/task_error and every closure row's phi of
/uk_controller_node/constraint_residual (docs/ros.md). The plot starts only once
those topics have a publisher (uk_wait_for_topics): rqt_plot drops start-up
topics it has not discovered yet. tool:=plotjuggler loads
config/plotjuggler/<robot>.xml (task error, closure residual, efforts, loop
timing) with the ROS 2 topic subscriber; it keeps up with kHz topics, which
rqt_plot does not (ros-visualization/rqt_plot#112).
"""

import os
import tempfile

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from uk_controller.paths import available_configs
from uk_controller.ros.plot_layout import PlotRows, plotjuggler_layout, rqt_plot_fields, topics

PACKAGE = 'uk_controller'
ROBOTS = tuple(available_configs())  # the robot setups shipped in config/


def plot(context):
    robot = LaunchConfiguration('robot').perform(context)
    config = LaunchConfiguration('config').perform(context)
    tool = LaunchConfiguration('tool').perform(context)
    rows = PlotRows.load(config or robot)
    wait = Node(
        package=PACKAGE,
        executable='uk_wait_for_topics',
        name='uk_wait_for_topics',
        output='screen',
        arguments=topics(rows),
    )
    if tool == 'plotjuggler':
        layout = os.path.join(get_package_share_directory(PACKAGE), 'config', 'plotjuggler', f'{robot}.xml')
        if config:  # your own robot: its layout, made now
            handle, layout = tempfile.mkstemp(prefix=f'uk_{rows.robot}_', suffix='.xml')
            with os.fdopen(handle, 'w') as stream:
                stream.write(plotjuggler_layout(rows))
        viewer = Node(
            package='plotjuggler',
            executable='plotjuggler',
            name='uk_plotjuggler',
            output='screen',
            arguments=['--layout', layout],
            additional_env={'PLOTJUGGLER_ACCEPT_SELECT_ROS_TOPIC_DIALOG': '1'},
        )
    else:
        viewer = Node(
            package='rqt_plot',
            executable='rqt_plot',
            name='uk_error_plot',
            output='screen',
            arguments=rqt_plot_fields(rows),
        )
    return [wait, RegisterEventHandler(OnProcessExit(target_action=wait, on_exit=[viewer]))]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                'robot',
                default_value='five_bar',
                choices=list(ROBOTS),
                description='robot whose rows are plotted (config/<robot>.yaml)',
            ),
            DeclareLaunchArgument('config', default_value='', description='path of a robot YAML (overrides robot)'),
            DeclareLaunchArgument(
                'tool',
                default_value='rqt_plot',
                choices=['rqt_plot', 'plotjuggler'],
                description='rqt_plot, or plotjuggler (layout config/plotjuggler/<robot>.xml)',
            ),
            OpaqueFunction(function=plot),
        ]
    )
