"""ODrive ASCII protocol helpers (line format shared by bus and emulator).

A line is ``command [*checksum] [; comment]`` terminated by ``\\n``; the
optional GCode-style checksum is the XOR of all bytes before ``*``, written in
decimal. Commands used here (ODrive firmware 0.5.x ASCII protocol):

- ``c <axis> <torque>``   torque setpoint in N m (no reply; feeds the watchdog)
- ``f <axis>``            reply ``<pos> <vel>`` in turns and turns/s
- ``w <property> <value>`` / ``r <property>``  write / read a property
- ``sc``                  clear errors; ``u <axis>`` feeds the watchdog
"""

from __future__ import annotations

from ....settings.setting import Setting

# calibration defaults of the config section hardware.odrive: the device watchdog (axis
# config.watchdog_timeout) is this factor times the host's hardware.watchdog
OPTIONS = {'device_watchdog_factor': 2.0}
#: the settings schema's keys of section hardware.odrive
SETTINGS = (
    Setting(
        'hardware.odrive.device_watchdog_factor',
        'float',
        OPTIONS['device_watchdog_factor'],
        '',
        'device watchdog = factor x hardware.watchdog',
        low=0.0,
        low_open=True,
        high=100.0,
    ),
)

AXIS_STATE_IDLE = 1
AXIS_STATE_CLOSED_LOOP = 8
CONTROL_MODE_TORQUE = 1
AXIS_ERROR_WATCHDOG_TIMER_EXPIRED = 0x800


def _line_min(text: str) -> int:
    """The fewest bytes of a checksummed line of `text` (each number written as one digit):
    the text, a space, ``*``, one checksum digit, ``\\n``."""
    return len(text) + 1 + 1 + 1 + 1


def cycle_cost(p: int, options: dict, facts: dict):
    """One armed cycle of :class:`~.bus.ODriveBus`: the ``c <axis> <torque>`` lines of all axes with
    ``f <axis>`` of the first, then ``f <axis>`` of each further axis, every ``f`` answered by a
    ``<pos> <vel>`` line the host waits for. The ASCII lengths depend on the numbers; these are the
    shortest (one digit each), so the budget is a lower bound."""
    from ...bus_timing import CycleCost, Exchange

    c, f, reply = _line_min('c 0 0'), _line_min('f 0'), _line_min('0 0')
    exchanges = [Exchange('torque lines + feedback of the first axis', p * c + f, reply_bytes=reply, replies=1)]
    if p > 1:
        exchanges.append(Exchange('feedback of a further axis', f, reply_bytes=reply, replies=1, count=p - 1))
    return CycleCost(exchanges=tuple(exchanges), notes=('ASCII line lengths: the shortest numbers (a lower bound)',))


def checksum(text: bytes) -> int:
    cs = 0
    for b in text:
        cs ^= b
    return cs


def make_line(cmd: str, with_checksum: bool = True) -> bytes:
    raw = cmd.encode('ascii') + b' '
    if with_checksum:
        return raw + b'*' + str(checksum(raw)).encode() + b'\n'
    return raw.rstrip() + b'\n'


class ChecksumError(ValueError):
    pass


def parse_line(line: bytes):
    """-> (text: str, had_checksum: bool). Raises ChecksumError on mismatch or garbage."""
    line = line.split(b';', 1)[0].strip(b'\r\n ')
    if b'*' in line:
        body, _, cs = line.rpartition(b'*')
        try:
            ok = int(cs.strip()) == checksum(body)
        except ValueError:
            ok = False
        if not ok:
            raise ChecksumError('checksum mismatch')
        try:
            return body.decode('ascii').strip(), True
        except UnicodeDecodeError:
            raise ChecksumError('non-ASCII line') from None
    try:
        return line.decode('ascii').strip(), False
    except UnicodeDecodeError:
        raise ChecksumError('non-ASCII line') from None
