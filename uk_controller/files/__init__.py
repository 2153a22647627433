"""Files and process: robot setup files (ROS 2 parameter YAML), robot descriptions (URDF, xacro,
MJCF, SDF), where the package data lives, and outputs that never destroy an input.
"""
