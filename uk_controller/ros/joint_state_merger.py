"""Joint-state merging for the controller node (plain NumPy, no rclpy).

``sensor_msgs/JointState`` messages are matched to the model's generalized
coordinates **by name** (never by position) and merged: several publishers may
each send some of the joints. A message is rejected as a whole, and counted,
when it is malformed (array lengths differ, or a joint name appears twice: which
of the two values is the joint's is unknowable, so neither is used), carries NaN/Inf
for one of our joints, or is late (stamp older than the state timeout, or older than what we
already hold for one of its joints). Names we do not know are ignored and
counted; the known joints of that message are used.

Clock skew: a stamp more than ``clock_skew`` seconds *ahead* of the node's
clock is not a newer sample but a publisher whose clock is off (or a glitched
stamp); the message is rejected as ``skew`` and the offset kept for
/diagnostics. Without this check one stamp 60 s in the future would make every
real message look out of order for a minute while the node kept the frozen
sample. Freshness is judged by arrival as well as by stamp: :meth:`age` is the
larger of the two, so a held sample is never older than the state timeout by
arrival, whatever its stamp says.

Velocities missing from a message are estimated by the backward difference
``q' ~ (q_k - q_{k-1}) / (t_k - t_{k-1})`` of consecutive samples of that joint.
"""

from __future__ import annotations

import math

import numpy as np

from ..settings import schema as S


class NameMatch:
    """A message's name list matched to the model (JointStateMerger.match): ``rows[j]`` is the model
    index of message column ``cols[j]``; ``kind``/``why`` say why the list is unusable (else '')."""

    __slots__ = ('names', 'kind', 'why', 'rows', 'cols', 'unknown', 'unknown_note')

    def __init__(self, names, kind='', why=''):
        self.names, self.kind, self.why = names, kind, why
        self.rows = self.cols = np.zeros(0, dtype=np.intp)
        self.unknown, self.unknown_note = 0, ''


class JointStateMerger:
    """Latest (q, q') per joint with per-joint sample times in nanoseconds."""

    def __init__(self, joint_names, state_timeout, clock_skew=S.default('control.clock_skew')):
        self.joint_names = list(joint_names)
        self.index = {name: i for i, name in enumerate(self.joint_names)}
        self.n = len(self.joint_names)
        self.state_timeout = float(state_timeout)
        self.q = np.zeros(self.n)
        self.qd = np.zeros(self.n)
        self.stamp_ns = np.zeros(self.n, dtype=np.int64)  # sample time per joint
        self.arrival_ns = np.zeros(self.n, dtype=np.int64)  # node clock when that sample arrived
        self.clock_skew = float(clock_skew)
        self.last_skew = 0.0  # s, stamp minus node clock of the last stamped message
        self.last_kind = ''
        self.received = np.zeros(self.n, dtype=bool)
        self.complete = False
        self.newest_ns = 0
        self.counts = {
            'accepted': 0,
            'nonfinite': 0,
            'late': 0,
            'malformed': 0,
            'unknown_names': 0,
            'no_known_joint': 0,
            'skew': 0,
            'duplicate_names': 0,
        }
        self.last_rejection = ''

    def apply_settings(self, settings):
        """Take a new resolved setup while running (live parameters): ``control.state_timeout`` and
        ``control.clock_skew``."""
        self.state_timeout = settings.control.state_timeout
        self.clock_skew = settings.control.clock_skew

    def reject(self, kind, why):
        """Count a message rejected before it reached :meth:`update` (e.g. undecodable CDR: 'malformed')."""
        return self._reject(kind, why)

    def _reject(self, kind, why):
        self.counts[kind] += 1
        self.last_rejection = why
        self.last_kind = kind
        return False

    def match(self, names):
        """Names -> a :class:`NameMatch` (model rows, message columns, or why the list is unusable).

        Depends on the names only: a caller that receives the same name list again (the raw
        transport's decoder hands the same tuple while the names do not change) reuses it.
        """
        count = len(names)
        if len(set(names)) != count:
            seen = set()
            twice = next(name for name in names if name in seen or seen.add(name))
            return NameMatch(names, 'duplicate_names', f'joint {twice!r} named more than once in one message')
        rows, cols = [], []
        for k, name in enumerate(names):
            i = self.index.get(name)
            if i is not None:
                rows.append(i)
                cols.append(k)
        match = NameMatch(names)
        match.rows = np.array(rows, dtype=np.intp)
        match.cols = np.array(cols, dtype=np.intp)
        match.unknown = count - len(rows)
        if match.unknown:
            match.unknown_note = f'ignored unknown joint names, e.g. {next(n for n in names if n not in self.index)!r}'
        if not rows:
            match.kind, match.why = 'no_known_joint', f'no joint of the model in message (names {list(names)[:4]})'
        return match

    def update(self, names, positions, velocities, stamp_ns, now_ns):
        """Merge one message; returns True when it was used. `stamp_ns` 0 means unstamped."""
        return self.update_matched(self.match(names), positions, velocities, stamp_ns, now_ns)

    def update_matched(self, match, positions, velocities, stamp_ns, now_ns):
        """:meth:`update` with the names already matched (:meth:`match`); positions/velocities: float
        sequences (lists, array('d'), NumPy arrays) in the message's order."""
        names = match.names
        count = len(names)
        if len(positions) != count or (len(velocities) not in (0, count)):
            return self._reject(
                'malformed', f'{count} names but {len(positions)} positions, {len(velocities)} velocities'
            )
        if match.kind == 'duplicate_names':
            return self._reject(match.kind, match.why)
        if match.unknown:
            self.counts['unknown_names'] += 1
            self.last_rejection = match.unknown_note
        if match.kind:
            return self._reject(match.kind, match.why)
        rows, cols = match.rows, match.cols
        pos = np.asarray(positions, dtype=float)[cols]
        vel = np.asarray(velocities, dtype=float)[cols] if len(velocities) else None
        finite = np.isfinite(pos)
        if vel is not None:
            finite &= np.isfinite(vel)
        if not finite.all():
            bad = names[int(cols[int(np.argmin(finite))])]
            return self._reject('nonfinite', f'NaN/Inf in joint {bad!r}')
        if stamp_ns > 0:
            self.last_skew = (stamp_ns - now_ns) * 1e-9
            if stamp_ns - now_ns > self.clock_skew * 1e9:
                return self._reject(
                    'skew',
                    f'clock skew: stamp {self.last_skew:+.3f} s ahead of the node clock '
                    f'(tolerance {self.clock_skew * 1e3:.0f} ms)',
                )
            if now_ns - stamp_ns > self.state_timeout * 1e9:
                return self._reject(
                    'late', f'stamp {(now_ns - stamp_ns) * 1e-6:.1f} ms old (timeout {self.state_timeout * 1e3:.0f} ms)'
                )
            if (self.received[rows] & (stamp_ns < self.stamp_ns[rows])).any():
                return self._reject('late', 'stamp older than the sample already held (out of order)')
            t_ns = stamp_ns
        else:
            t_ns = now_ns
        if vel is not None:
            self.qd[rows] = vel
        else:
            # backward difference where an earlier sample of that joint exists: (q_k - q_{k-1}) / dt
            earlier = self.received[rows] & (t_ns > self.stamp_ns[rows])
            if earlier.any():
                i = rows[earlier]
                self.qd[i] = (pos[earlier] - self.q[i]) / ((t_ns - self.stamp_ns[i]) * 1e-9)
        self.q[rows] = pos
        self.stamp_ns[rows] = t_ns
        self.arrival_ns[rows] = now_ns if now_ns > 0 else t_ns  # no clock yet (sim time): by stamp
        self.received[rows] = True
        self.newest_ns = max(self.newest_ns, t_ns)
        if not self.complete:
            self.complete = bool(self.received.all())
        self.counts['accepted'] += 1
        self.last_kind = ''
        return True

    def missing(self):
        return [name for name, ok in zip(self.joint_names, self.received) if not ok]

    def age(self, now_ns):
        """Seconds since the oldest joint's latest sample, by stamp or by arrival, whichever is older
        (inf until every joint was seen)."""
        if not self.complete:
            return math.inf
        return (now_ns - min(int(self.stamp_ns.min()), int(self.arrival_ns.min()))) * 1e-9

    def oldest_joint(self):
        stamp, arrival = self.stamp_ns.min(), self.arrival_ns.min()
        return self.joint_names[int(np.argmin(self.stamp_ns if stamp <= arrival else self.arrival_ns))]

    def rejected(self):
        return sum(
            self.counts[k] for k in ('nonfinite', 'late', 'malformed', 'no_known_joint', 'skew', 'duplicate_names')
        )
