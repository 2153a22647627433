"""Robot setups: a URDF plus the constraints, actuators and gains of one config file.

``load_robot('scara')`` reads ``config/scara.yaml`` (docs/config.md), loads
the URDF into a :class:`~uk_controller.model.robot_model.RobotModel`, and builds the
passive (closure) and servo (task) constraint stacks, the actuator map and
the Baumgarte gains. Nothing here is robot specific: any URDF with a setup
file works.
"""

from .actuators import Actuator, ActuatorMap
from .setup import RobotSetup, load_robot, setup_from_settings

__all__ = ['Actuator', 'ActuatorMap', 'RobotSetup', 'load_robot', 'setup_from_settings']
