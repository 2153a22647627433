"""Serial motor drivers: calibration, protocols (uk_binary, Dynamixel 2.0, ODrive ASCII),
safety (watchdog, limits, reconnect), device emulators on pseudo-terminals, and the
fixed-rate runner behind ``uk-controller run``. See docs/serial_protocol.md.

Modules import pyserial / dynamixel_sdk lazily, so ``import uk_controller.hardware``
works without them.
"""
