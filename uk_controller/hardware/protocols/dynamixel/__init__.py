"""``dynamixel``: ROBOTIS Dynamixel Protocol 2.0, X series in current control (host side: dynamixel_sdk)."""
