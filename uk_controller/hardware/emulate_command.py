"""``uk-controller emulate ROBOT --protocol uk_binary|dynamixel|odrive|can_mit``: motor drivers without hardware.

Opens a pseudo-terminal (:class:`~.emulator.PtyLink`), puts the device
emulator of the protocol behind it (``protocols/<name>/device.py`` from the registry,
the same ones the serial tests use; for ``can_mit`` an slcan USB-CAN adapter with MIT motors behind it,
docs/hardware.md) and drives it with a plant:
the embedded UK plant (default) or MuJoCo (``--plant mujoco``). Prints the
device path, then the commands that use it::

    $ uk-controller emulate scara --protocol uk_binary
    emulating scara: 4 uk_binary motor drivers on /tmp/uk_emulate_x1/ttyUK_scara
      ros2 launch uk_controller hardware.launch.py robot:=scara port:=/tmp/... protocol:=uk_binary
      uk-controller run scara --port /tmp/... --protocol uk_binary

Time (``--mode``): ``realtime`` (default) integrates the plant on the wall clock
like a real robot, for a host on the wall clock (``hardware.launch.py``,
``uk-controller run``); ``lockstep`` advances it by one period (``1/--rate``,
default ``control.rate``) per torque command, for a host that steps in sync
with it. While the drivers' torque is off the joints hold still, as motors with
holding brakes do (otherwise the SCARA's vertical axis would fall without end
before the controller connects). The joints stop at the position limits of the robot description
(:class:`~.emulator.JointLimitedPlant`), as a real robot's end stops do. The motor calibration is the
robot YAML's ``hardware`` section (identity without one), as the host reads it.
Reply timing of real hardware: ``--usb-latency MS`` holds every answer until the next tick of an FTDI
adapter's latency timer (:class:`~.emulator.DeviceEmulator` ``usb_latency``), ``--fake-sysfs DIR``
writes a fake sysfs in which the emulator's pty is that adapter (run the host with
``UK_CONTROLLER_SYSFS=DIR`` and its cycle budget reads the same latency timer), and
``--return-delay UNITS`` sets the emulated Dynamixel servos' Return Delay Time register (2 us units,
factory value 250). Runs until Ctrl-C / SIGTERM (or ``--duration`` seconds), exit code 0; a bad
argument exits 2 with the reason.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time

from ..settings import schema as S
from . import registry
from .calibration import HardwareConfig
from .emulator import JointLimitedPlant, PtyLink


def add_emulate_arguments(parser):
    parser.add_argument('robot', help='robot setup: name (scara, five_bar, ...) or YAML path')
    parser.add_argument(
        '--protocol', choices=registry.names(), help=f'default: config hardware.protocol ({registry.DEFAULT_PROTOCOL})'
    )
    parser.add_argument(
        '--port',
        metavar='PATH',
        help='path of the device link to create (a symlink to the pty; default: a new temporary folder/ttyUK_<robot>)',
    )
    parser.add_argument(
        '--plant',
        choices=S.PLANTS,
        help='physics behind the drivers: embedded UK plant or MuJoCo (default: simulation.plant)',
    )
    parser.add_argument(
        '--mode',
        choices=('realtime', 'lockstep'),
        default='realtime',
        help='realtime: plant on the wall clock; lockstep: one period per torque command',
    )
    parser.add_argument('--rate', type=float, help='plant period 1/rate [Hz] (default: control.rate)')
    parser.add_argument(
        '--baud', type=int, help='impose this line rate (10 bits per byte) on the pty (default: memory speed)'
    )
    parser.add_argument('--duration', type=float, help='stop after this many seconds (default: until Ctrl-C)')
    parser.add_argument(
        '--usb-latency',
        type=float,
        default=0.0,
        metavar='MS',
        help='answers reach the host at the ticks of this latency timer, as through an FTDI USB '
        'adapter (default 0: at once)',
    )
    parser.add_argument(
        '--fake-sysfs',
        metavar='DIR',
        help='write a fake sysfs in DIR in which the pty is a USB-serial adapter with the '
        '--usb-latency timer (for UK_CONTROLLER_SYSFS=DIR uk-controller run ...)',
    )
    parser.add_argument(
        '--return-delay',
        type=int,
        metavar='UNITS',
        help='dynamixel: the servos\' Return Delay Time register, 2 us units (default 250, the factory value)',
    )


def _fail(message):
    print(f'uk-controller emulate: error: {message}', file=sys.stderr)
    return 2


def run_emulate(args):
    from ..files.parameter_file import ConfigError
    from ..robots import load_robot

    if args.rate is not None and not args.rate > 0:
        return _fail(f'--rate: must be > 0 Hz, got {args.rate}')
    if args.baud is not None and args.baud <= 0:
        return _fail(f'--baud: must be > 0, got {args.baud}')
    if args.duration is not None and args.duration < 0:
        return _fail(f'--duration: must be >= 0 s, got {args.duration}')
    if not 0 <= args.usb_latency <= 255:
        return _fail(f'--usb-latency: must be in [0, 255] ms (an FTDI latency timer), got {args.usb_latency}')
    if args.return_delay is not None and not 0 <= args.return_delay <= 254:
        return _fail(f'--return-delay: must be in [0, 254] units of 2 us, got {args.return_delay}')
    try:
        given = {'control.rate': args.rate, 'simulation.plant': args.plant, 'hardware.protocol': args.protocol}
        setup = load_robot(
            args.robot,
            {k: v for k, v in given.items() if v is not None},
            labels={
                'control.rate': '--rate (control.rate)',
                'simulation.plant': '--plant (simulation.plant)',
                'hardware.protocol': '--protocol (hardware.protocol)',
            },
        )
        hw = HardwareConfig.from_setup(setup)
        plant = _plant(setup)
    except (ConfigError, FileNotFoundError, ValueError, ImportError) as exc:
        return _fail(str(exc))
    protocol = hw.protocol  # --protocol is an override of hardware.protocol
    device_kw = {}
    if args.return_delay is not None:
        if protocol != 'dynamixel':
            return _fail(f'--return-delay: a Dynamixel register; the {protocol} protocol has none')
        device_kw['return_delay_time'] = args.return_delay
    rate = setup.settings.control.rate
    if args.port:
        folder, name = os.path.split(os.path.abspath(args.port))
        if os.path.lexists(args.port):
            return _fail(f'--port: {args.port} exists already (another emulator?); choose another path')
    else:
        folder, name = tempfile.mkdtemp(prefix='uk_emulate_'), f'ttyUK_{setup.name}'
    link = PtyLink(folder, name)
    braked = BrakedPlant(JointLimitedPlant.from_setup(plant, setup))
    emu = registry.make_emulator(
        protocol,
        braked,
        hw,
        dt=1.0 / rate,
        mode=args.mode,
        baud=args.baud,
        link=link,
        usb_latency=args.usb_latency * 1e-3,
        **device_kw,
    )
    braked.released = lambda: emu.enabled
    stop = {'now': False}

    def on_signal(signum, frame):
        stop['now'] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if args.fake_sysfs:
        from .bus_timing import SYSFS_ENV, fake_usb_serial

        path = fake_usb_serial(args.fake_sysfs, emu.port, args.usb_latency)
        print(f'fake sysfs: {path} = {args.usb_latency:g} ms (host: {SYSFS_ENV}={args.fake_sysfs})', flush=True)
    emu.start()
    robot = args.robot
    print(
        f'emulating {setup.name}: {hw.p} {protocol} motor drivers on {emu.port} '
        f'({setup.settings.simulation.plant} plant, {args.mode}, {rate:g} Hz); Ctrl-C to stop',
        flush=True,
    )
    print(
        f'  ros2 launch uk_controller hardware.launch.py robot:={robot} port:={emu.port} protocol:={protocol}',
        flush=True,
    )
    print(f'  uk-controller run {robot} --port {emu.port} --protocol {protocol}', flush=True)
    end = None if args.duration is None else time.monotonic() + args.duration
    try:
        while not stop['now'] and (end is None or time.monotonic() < end):
            time.sleep(0.05)
    finally:
        emu.close()
        if not args.port:
            try:
                os.rmdir(folder)
            except OSError:
                pass
    print(
        f'emulator stopped: {emu.counters["rx_frames"]} requests, {emu.counters["steps"]} plant steps, '
        f't = {plant.t:.3f} s',
        flush=True,
    )
    return 0


class BrakedPlant:
    """`plant` that stands still (holding brakes) while ``released()`` is False (drivers' torque off)."""

    def __init__(self, plant):
        self.plant = plant
        self.joint_names = list(plant.joint_names)
        self.released = lambda: True

    q = property(lambda self: self.plant.q)
    qd = property(lambda self: self.plant.qd)
    t = property(lambda self: self.plant.t)

    def reset(self, q, qd):
        self.plant.reset(q, qd)

    def step(self, u, dt):
        if self.released():
            return self.plant.step(u, dt)
        return self.plant.q, self.plant.qd


def _plant(setup):
    from ..sim.plants import plant_class

    return plant_class(setup.settings.simulation.plant).from_setup(setup)
