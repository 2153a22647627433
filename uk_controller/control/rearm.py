"""Re-arming without a jolt: the trajectory clock held during an interruption, then a soft start.

After an interruption (stale or rejected state, watchdog trip, reconnect,
``~/stop`` -> ``~/start``, a period of safe effort) the robot is no longer
where the task expected it. Two effects would make the first command after
re-arming a torque spike:

1. the trajectory clock kept running during the outage, so the desired point
   jumped ahead (seen: 0.31 rad of error x the Baumgarte gains = 125-132 N m);
2. the full stabilization gains act at once on whatever error is left.

:class:`ReArm` removes both. Its trajectory time is ``t_raw - paused`` where
``paused`` sums the outages (the clock stands still from :meth:`interrupt`
until the next :meth:`time`), and for ``soft_start`` seconds after re-arming
it scales the natural frequency of the stabilization by ``s = tau / T``
(``tau`` time since re-arming), i.e. for ``phi'' + kd phi' + kp phi = 0``
(seed 000 eq 52)::

    kd(s) = s kd,   kp(s) = s^2 kp,   k1(s) = s k1

which keeps a critically damped setting critically damped (omega -> s omega)
while the feed-forward part of Chen's servo control (seed 004 eq 35: gravity,
Coriolis and the desired acceleration at the measured state) acts in full.
During the soft start each effort is also limited to the largest magnitude
that actuator needed in the last ``soft_start`` seconds (at least 0.5 s) of
undisturbed control before the interruption (:meth:`limit`): re-arming never pushes harder than steady operation did,
whatever the arm drifted meanwhile; the full limits return after
``soft_start`` seconds.
"""

from __future__ import annotations

import numpy as np

from ..core.baumgarte import Baumgarte
from ..robots.setup import stabilization_gains
from ..settings import schema as S
from ..settings.types import Settings, StabilizationSettings


def scaled(stab, s):
    """The Baumgarte gains with natural frequency scaled by `s` (kd s, kp s^2, k1 s)."""
    return Baumgarte(
        kd=np.asarray(stab.kd, dtype=float) * s,
        kp=np.asarray(stab.kp, dtype=float) * (s * s),
        k1=np.asarray(stab.k1, dtype=float) * s,
    )


class ReArm:
    """Trajectory clock with outages removed, and the soft start of a ControllerCore's gains."""

    def __init__(self, core, soft_start=S.default('control.soft_start')):
        self.core = core
        self.soft_start = float(soft_start)
        self.base = core.stabilization
        self.paused = 0.0  # seconds of outage removed from the trajectory clock
        self.paused_at = None  # raw time the current outage began (None: running)
        self.ramp_from = None  # raw time of the last re-arm while the soft start runs
        self.rearms = 0
        self._window = np.zeros((max(1, int(round(max(self.soft_start, 0.5) * core.rate))), core.p))
        self._row = 0  # ring buffer of |effort| of the undisturbed steps
        self._filled = 0
        self._cap = None

    @property
    def interrupted(self):
        return self.paused_at is not None

    @property
    def ramping(self):
        return self.ramp_from is not None

    def interrupt(self, t_raw):
        """An outage is going on at raw time `t_raw` (idempotent; the first call stops the clock)."""
        if self.paused_at is None:
            self.paused_at = float(t_raw)

    def waiting(self, t_raw):
        """Trajectory time for a step computed while not armed (its effort is what re-arming sends
        first): the clock stands still and, with a soft start, the stabilization gains are zero."""
        self.interrupt(t_raw)
        if self.soft_start > 0.0:
            self.ramp_from = None
            self.core.stabilization = scaled(self.base, 0.0)
        return self.held_time()

    def held_time(self):
        """Trajectory time at which the clock stands during the current outage (None if running)."""
        return None if self.paused_at is None else self.paused_at - self.paused

    def time(self, t_raw):
        """Trajectory time for a control step at raw time `t_raw`; re-arms after an outage."""
        if self.paused_at is not None:
            self.paused += max(0.0, float(t_raw) - self.paused_at)
            self.paused_at = None
            self.rearms += 1
            if self.soft_start > 0.0:
                self.ramp_from = float(t_raw)
                self._cap = self._window[: self._filled].max(axis=0) if self._filled else None
            else:
                self.core.stabilization = self.base
        if self.ramp_from is not None:
            s = (float(t_raw) - self.ramp_from) / self.soft_start
            if s >= 1.0:
                self.ramp_from = None
                self._cap = None
                self.core.stabilization = self.base
            else:
                self.core.stabilization = scaled(self.base, max(s, 0.0))
        return float(t_raw) - self.paused

    def limit(self, effort):
        """`effort` (modified in place) limited during the soft start to the undisturbed peak; outside
        the soft start the peak is tracked. Returns `effort`."""
        if self.paused_at is not None:
            return effort
        if self._cap is not None and self.ramp_from is not None:
            np.clip(effort, -self._cap, self._cap, out=effort)
        elif self.ramp_from is None:
            np.abs(effort, out=self._window[self._row])
            self._row = (self._row + 1) % self._window.shape[0]
            self._filled = min(self._filled + 1, self._window.shape[0])
        return effort

    def set_gains(self, stab):
        """New stabilization (live parameter): the ramp, if running, continues towards it."""
        self.base = stab
        if self.ramp_from is None:
            self.core.stabilization = stab

    #: the stabilization section the base gains were made from (None: the setup's)
    _stabilization_section: StabilizationSettings | None = None

    def apply_settings(self, settings: Settings) -> None:
        """Take a new resolved setup while running (live parameters): ``control.soft_start``, and the
        gains of ``stabilization`` when that section changed (the ramp, if running, continues towards
        them; the controller takes them in its own :meth:`ControllerCore.apply_settings`)."""
        section = self._stabilization_section or self.core.setup.settings.stabilization
        if settings.stabilization != section:
            self.set_gains(stabilization_gains(settings.stabilization, settings.file))
            self._stabilization_section = settings.stabilization
        self.set_soft_start(settings.control.soft_start)

    def set_soft_start(self, seconds):
        self.soft_start = float(seconds)
        if self.soft_start <= 0.0 and self.ramp_from is not None:
            self.ramp_from = None
            self.core.stabilization = self.base

    def reset(self):
        """A fresh start (trajectory from its beginning): no outage, full gains."""
        self.paused, self.paused_at, self.ramp_from, self._cap = 0.0, None, None, None
        self._row = self._filled = 0
        self.core.stabilization = self.base
