"""rqt_plot preloaded with the controller's error topics.

    ros2 launch uk_controller plot.launch.py            # task error rows 0..2, closure/constraint phi 0..1
    ros2 launch uk_controller plot.launch.py rows:=2

Field paths (docs/ros.md): /uk_controller_node/task_error/data[i],
/uk_controller_node/constraint_residual/data[i] (phi first, then phi'),
/uk_controller_node/efforts/data[i].
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

NODE = '/uk_controller_node'


def plot(context):
    rows = int(LaunchConfiguration('rows').perform(context))
    topics = [f'{NODE}/task_error/data[{i}]' for i in range(rows)]
    topics += [f'{NODE}/constraint_residual/data[{i}]' for i in range(rows)]
    return [Node(package='rqt_plot', executable='rqt_plot', name='uk_error_plot', output='screen',
                 arguments=topics)]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument('rows', default_value='3', description='how many rows of each error to plot'),
        OpaqueFunction(function=plot),
    ])
