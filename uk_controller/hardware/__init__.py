"""Serial motor drivers (docs/serial_protocol.md).

Shared pieces, protocol independent:

- ``registry``    the protocol table (name -> bus, device emulator, calibration defaults) and
                  the factories ``make_bus`` / ``make_emulator``; how to add a protocol
- ``bus``         ``MotorBus`` base class, feedback, errors, opening a port
- ``crc``         CRC-16 variants of the wires
- ``calibration`` ``HardwareConfig``: joint side <-> motor side, limits (config ``hardware``)
- ``safety``      ``SafeBus``: limits, host watchdog, arming, reconnect, torque off
- ``emulator``    device emulators' base: pty link, plant driver, fault injection, stepped clock
- ``faults``      fault-injection scenarios (tests, bench/serial_bench.py)
- ``joint_state_assembler``  full (q, q') from the measured joints (closures solved)
- ``serial_loop`` the fixed-rate control loop on a bus; ``run_command``: ``uk-controller run``
- ``emulate_command``  ``uk-controller emulate``

and one subpackage per protocol, ``protocols/<name>/{codec,bus,device}.py``
(uk_binary, dynamixel, odrive). Protocol modules are imported when the registry is asked
for one, and pyserial / dynamixel_sdk only where a port is opened, so
``import uk_controller.hardware`` works without them.
"""
