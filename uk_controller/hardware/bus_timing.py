"""The cycle budget of a motor bus: what one control cycle costs on the wire, in the devices and in the
USB adapter, and the highest rate the bus can carry.

A protocol says what one armed cycle sends and waits for through ``cycle_cost(p, options, facts)`` in
its ``codec.py`` (:meth:`~.registry.Protocol.cycle_cost` finds it): a :class:`CycleCost`, a sequence
of :class:`Exchange` (one request on the bus and the replies the host waits for). ``facts`` are what
the bus read from the devices at connect (:meth:`~.bus.MotorBus.timing_facts`, e.g. the Dynamixel
Return Delay Time of every servo). The budget of one exchange k is

    t_k = (request_bytes + reply_bytes) * 10 / baud + device_delay + frame_time

(a UART byte is 10 bits, 8N1: start, 8 data, stop; ``frame_time`` is time on another medium, e.g.
CAN frames, :func:`can_frame_time`). An FTDI USB-serial adapter hands received bytes to the host when
its 62-byte buffer fills or when its latency timer expires; the timer restarts whenever the chip
sends to the host, and it sends (at least its two status bytes) whenever the timer expires (FTDI
AN232B-04, "Small Amounts of Data and End of Buffer Conditions"), so the host sees a short reply at
the next tick of a grid of period L (the latency timer). A reply the host waits for arrives at the
first tick after everything sent since the previous delivery is through, so each segment of the
cycle that ends with an awaited reply (the exchanges after the previous awaited one, this one
included) takes at least max(sum of its t_k, L), and the cycle at least

    T_min = sum_segments max(sum_{k in segment} n_k t_k, L)  +  sum of the exchanges after the last awaited one

(n_k: how often exchange k repeats in a cycle; with L = 0, or no latency timer, T_min = sum_k n_k t_k).
The highest rate the bus can carry is 1 / T_min. T_min is a lower bound: the host's own time (the
control step, the OS) comes on top, and the loop timing figures of a run show the period it reached.

The latency timer is read from sysfs on Linux: ``<root>/bus/usb-serial/devices/<ttyUSBn>/latency_timer``
(ms), ``<ttyUSBn>`` found from the port's real path (symlinks such as /dev/serial/by-id resolved) or,
for a device node under another name, from its character device number through
``<root>/dev/char/<major>:<minor>``. ``<root>`` is ``/sys``, or the environment variable
``UK_CONTROLLER_SYSFS`` (a fake sysfs for tests and ``uk-controller emulate --fake-sysfs``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

__all__ = [
    'Exchange',
    'CycleCost',
    'CycleBudget',
    'UART_BITS_PER_BYTE',
    'SYSFS_ENV',
    'sysfs_root',
    'usb_latency_timer',
    'fake_usb_serial',
    'can_frame_bits',
    'can_frame_time',
    'budget',
    'UDEV_RULE',
]

UART_BITS_PER_BYTE = 10  # 8N1: start bit, 8 data bits, stop bit
SYSFS_ENV = 'UK_CONTROLLER_SYSFS'
#: the udev rule that sets the FTDI latency timer to 1 ms whenever such an adapter is plugged in
UDEV_RULE = 'ACTION=="add", SUBSYSTEM=="usb-serial", DRIVER=="ftdi_sio", ATTR{latency_timer}="1"'


@dataclass(frozen=True)
class Exchange:
    """One request on the bus per cycle and the replies the host waits for (sizes in bytes)."""

    what: str  # e.g. 'sync read feedback'
    request_bytes: int
    reply_bytes: int = 0  # all replies together; 0: the host waits for nothing (a write)
    replies: int = 0  # how many reply frames (one per answering device)
    device_delay: float = 0.0  # s the devices wait before answering, summed over the replies
    frame_time: float = 0.0  # s on another medium (CAN frames behind an adapter)
    waits: bool | None = None  # the host waits for a reply (default: reply_bytes > 0)
    count: int = 1  # the same exchange, one after the other, this many times a cycle

    @property
    def awaited(self) -> bool:
        return self.reply_bytes > 0 if self.waits is None else bool(self.waits)


@dataclass(frozen=True)
class CycleCost:
    """What one armed control cycle of a protocol puts on the bus (from the codec's ``cycle_cost``)."""

    exchanges: tuple
    #: (text, when) pieces of advice for a rate above the bus's; ``when`` is 'device_delay' (shown when
    #: the devices' delays are part of the budget) or 'always'
    advice: tuple = ()
    notes: tuple = ()  # facts behind the sizes (e.g. where the return delays came from)


def sysfs_root() -> str:
    """``UK_CONTROLLER_SYSFS`` or ``/sys``."""
    return os.environ.get(SYSFS_ENV) or '/sys'


def _usb_serial_dir(root: str, name: str) -> str | None:
    d = os.path.join(root, 'bus', 'usb-serial', 'devices', name)
    return d if os.path.isfile(os.path.join(d, 'latency_timer')) else None


def usb_latency_timer(port: str, root: str | None = None):
    """The FTDI latency timer of the adapter behind `port`: ``(seconds, path)``, or ``(None, reason)``.

    Looks for ``<root>/bus/usb-serial/devices/<name>/latency_timer`` with <name> the basename of the
    port's real path, then the name sysfs gives the port's character device number
    (``<root>/dev/char/<major>:<minor>``, a link whose last component is the tty name).
    """
    root = root or sysfs_root()
    real = os.path.realpath(port)
    names = [os.path.basename(real)]
    try:
        rdev = os.stat(real).st_rdev
        link = os.path.join(root, 'dev', 'char', f'{os.major(rdev)}:{os.minor(rdev)}')
        if os.path.lexists(link):
            names.append(os.path.basename(os.path.realpath(link)))
    except OSError:
        pass
    for name in names:
        d = _usb_serial_dir(root, name)
        if d is None:
            continue
        path = os.path.join(d, 'latency_timer')
        try:
            with open(path) as f:
                ms = float(f.read().strip())
        except (OSError, ValueError) as exc:
            return None, f'{path} unreadable ({exc})'
        return ms * 1e-3, path
    return None, (
        f'{real} has no {root}/bus/usb-serial/devices/<tty>/latency_timer: not a USB-serial '
        f'adapter with a latency timer (a ttyACM device, a pty) or not Linux'
    )


def fake_usb_serial(root: str, port: str, latency_ms: float, name: str = 'ttyUSB0') -> str:
    """Make `root` a fake sysfs in which `port` (e.g. an emulator's pty) is the USB-serial adapter
    `name` with a latency timer of `latency_ms`: ``<root>/bus/usb-serial/devices/<name>/latency_timer``
    and ``<root>/dev/char/<major>:<minor>`` linking to it. Returns the latency_timer path."""
    d = os.path.join(root, 'bus', 'usb-serial', 'devices', name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, 'latency_timer')
    with open(path, 'w') as f:
        f.write(f'{int(round(latency_ms))}\n')
    rdev = os.stat(os.path.realpath(port)).st_rdev
    char = os.path.join(root, 'dev', 'char')
    os.makedirs(char, exist_ok=True)
    link = os.path.join(char, f'{os.major(rdev)}:{os.minor(rdev)}')
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.relpath(d, char), link)
    return path


def can_frame_bits(data_bytes: int, *, extended: bool = False, worst_case_stuffing: bool = True) -> int:
    """Bits of one CAN 2.0 data frame with `data_bytes` (0..8) data bytes, the 3-bit interframe space
    included.

    Without stuffing a standard (11-bit id) frame is 47 + 8 n bits (SOF 1, id 11, RTR 1, IDE 1, r0 1,
    DLC 4, data 8 n, CRC 15, CRC delimiter 1, ACK 2, EOF 7, IFS 3): 111 bits for 8 bytes; an extended
    (29-bit id) frame 67 + 8 n. Bit stuffing (a complementary bit after five equal bits) acts on the
    g + 8 n bits from SOF to the end of the CRC (g = 34 standard, 54 extended) and adds at most
    floor((g + 8 n - 1) / 4) bits (Davis, Burns, Bril, Lukkien 2007, "Controller Area Network (CAN)
    schedulability analysis: refuted, revisited and revised", eq 1: C = (55 + 10 n) bits standard,
    (80 + 10 n) extended, 135 and 160 bits for 8 bytes). ``worst_case_stuffing`` (default) gives that
    upper bound, so a rate computed with it is one the bus carries whatever the data; False gives the
    lower bound without stuffing.
    """
    n = int(data_bytes)
    if not 0 <= n <= 8:
        raise ValueError(f'a CAN 2.0 frame carries 0..8 data bytes, not {n}')
    g = 54 if extended else 34
    bits = g + 8 * n + 13  # + CRC delimiter, ACK 2, EOF 7, IFS 3
    if worst_case_stuffing:
        bits += (g + 8 * n - 1) // 4
    return bits


def can_frame_time(data_bytes: int, bitrate: float, **kw) -> float:
    """Seconds one CAN frame occupies the bus: :func:`can_frame_bits` / bitrate."""
    return can_frame_bits(data_bytes, **kw) / float(bitrate)


@dataclass
class CycleBudget:
    """The cycle budget of one bus (see the module docstring for the formulas)."""

    protocol: str
    motors: int
    baud: int
    cost: CycleCost
    usb_latency: float | None  # s, None: no latency timer found
    usb_latency_source: str  # sysfs path, or why there is none
    port: str = ''

    @property
    def byte_time(self) -> float:
        return UART_BITS_PER_BYTE / self.baud

    def exchange_time(self, ex: Exchange) -> float:
        """t_k: bytes at the baud rate + the devices' delays + frame time on another medium."""
        return (ex.request_bytes + ex.reply_bytes) * self.byte_time + ex.device_delay + ex.frame_time

    def segments(self) -> list:
        """[(exchanges, seconds on the wire, seconds with the latency timer)]: the cycle cut after every
        awaited exchange (module docstring); a repeated awaited exchange is one segment per repeat."""
        out, current, t = [], [], 0.0
        L = self.usb_latency or 0.0
        for ex in self.cost.exchanges:
            tk = self.exchange_time(ex)
            if not ex.awaited:
                current.append(ex)
                t += ex.count * tk
                continue
            for _ in range(ex.count):
                current.append(ex)
                t += tk
                out.append((tuple(current), t, max(t, L)))
                current, t = [], 0.0
        if current:
            out.append((tuple(current), t, t))
        return out

    @property
    def min_period(self) -> float:
        return sum(seg[2] for seg in self.segments())

    @property
    def max_rate(self) -> float:
        t = self.min_period
        return math.inf if t <= 0 else 1.0 / t

    @property
    def device_delay(self) -> float:
        return sum(ex.count * ex.device_delay for ex in self.cost.exchanges)

    @property
    def latency_bound(self) -> bool:
        """The latency timer, not the wire, sets the time of at least one segment of the cycle."""
        return any(with_timer > wire for _, wire, with_timer in self.segments())

    def report(self) -> str:
        """The budget as the lines ``uk-controller run`` prints."""
        bt = self.byte_time
        out = [
            f'bus budget: {self.protocol}, {self.motors} motors, {self.baud} baud '
            f'({UART_BITS_PER_BYTE} bits per byte: {bt * 1e6:.2f} us per byte)'
        ]
        for ex in self.cost.exchanges:
            terms = []
            if ex.request_bytes or ex.reply_bytes:
                parts = [f'{ex.request_bytes} B out']
                if ex.reply_bytes:
                    parts.append(f'{ex.reply_bytes} B back' + (f' from {ex.replies} devices' if ex.replies > 1 else ''))
                terms.append(', '.join(parts) + f' = {(ex.request_bytes + ex.reply_bytes) * bt * 1e3:.3f} ms')
            if ex.device_delay:
                terms.append(f'device delays {ex.device_delay * 1e3:.3f} ms')
            if ex.frame_time:
                terms.append(f'frames {ex.frame_time * 1e3:.3f} ms')
            text = f'  {ex.what}' + (f' (x{ex.count})' if ex.count != 1 else '') + ': ' + ' + '.join(terms)
            text += f' -> {self.exchange_time(ex) * 1e3:.3f} ms'
            out.append(text)
        for note in self.cost.notes:
            out.append(f'  {note}')
        if self.usb_latency is None:
            out.append(f'  USB latency timer: none ({self.usb_latency_source})')
        else:
            waits = sum(1 for _, wire, with_timer in self.segments() if with_timer > wire)
            awaited = sum(ex.count for ex in self.cost.exchanges if ex.awaited)
            out.append(
                f'  USB latency timer: {self.usb_latency * 1e3:g} ms ({self.usb_latency_source}): replies '
                f'reach the host at its ticks; it sets the time of {waits} of the cycle\'s {awaited} '
                f'request(s) the host waits for'
            )
        if not self.cost.exchanges:
            out.append('  the protocol states no cycle cost (no cycle_cost in its codec): no bound on the rate')
        else:
            out.append(f'  cycle >= {self.min_period * 1e3:.3f} ms: the bus carries at most {self.max_rate:.0f} Hz')
        return '\n'.join(out)

    def check_rate(self, rate: float) -> str | None:
        """None if `rate` fits, else the error naming what to change."""
        if rate <= self.max_rate * (1 + 1e-9):
            return None
        fixes = []
        if self.latency_bound:
            path = self.usb_latency_source
            fixes.append(
                f'set the USB adapter\'s latency timer to 1 ms: `echo 1 | sudo tee {path}` '
                f'(until unplugged), or for good the udev rule `{UDEV_RULE}` in '
                f'/etc/udev/rules.d/99-usb-serial-latency.rules'
            )
        for text, when in self.cost.advice:
            if when == 'always' or (when == 'device_delay' and self.device_delay > 0):
                fixes.append(text)
        wire = sum(ex.count * (ex.request_bytes + ex.reply_bytes) for ex in self.cost.exchanges) * self.byte_time
        if wire > 0:
            fixes.append(
                f'a faster line: {wire * 1e3:.3f} ms of each cycle are bytes at {self.baud} baud '
                f'(hardware.baud / --baud, as far as the devices and the adapter support it)'
            )
        fixes.append(
            f'or a rate the bus carries: --rate {math.floor(self.max_rate)} or lower (control.rate; '
            f'hardware.rate where the file sets the bus rate)'
        )
        return (
            f'the requested rate {rate:g} Hz is above the {self.max_rate:.0f} Hz the bus carries '
            f'(cycle >= {self.min_period * 1e3:.3f} ms). Change: '
            + '; '.join(f'({i + 1}) {f}' for i, f in enumerate(fixes))
        )


def budget(
    entry,
    p: int,
    baud: int,
    *,
    options: dict | None = None,
    facts: dict | None = None,
    port: str = '',
    sysfs: str | None = None,
    motors=None,
) -> CycleBudget:
    """The :class:`CycleBudget` of protocol `entry` (a registry line) with `p` motors at `baud` on `port`
    (`options`: its ``hardware.<section>`` map, `motors`: the MotorCalibration list for per-motor options)."""
    cost = entry.cycle_cost(p, options, facts, motors)
    if port:
        latency, source = usb_latency_timer(port, sysfs)
    else:
        latency, source = None, 'no port'
    return CycleBudget(entry.name, int(p), int(baud), cost, latency, source, port=port)
