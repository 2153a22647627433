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


class JointStateMerger:
    """Latest (q, q') per joint with per-joint sample times in nanoseconds."""

    def __init__(self, joint_names, state_timeout, clock_skew=0.05):
        self.joint_names = list(joint_names)
        self.index = {name: i for i, name in enumerate(self.joint_names)}
        self.n = len(self.joint_names)
        self.state_timeout = float(state_timeout)
        self.q = np.zeros(self.n)
        self.qd = np.zeros(self.n)
        self.stamp_ns = np.zeros(self.n, dtype=np.int64)     # sample time per joint
        self.arrival_ns = np.zeros(self.n, dtype=np.int64)   # node clock when that sample arrived
        self.clock_skew = float(clock_skew)
        self.last_skew = 0.0             # s, stamp minus node clock of the last stamped message
        self.last_kind = ''
        self.received = np.zeros(self.n, dtype=bool)
        self.complete = False
        self.newest_ns = 0
        self.counts = {'accepted': 0, 'nonfinite': 0, 'late': 0, 'malformed': 0,
                       'unknown_names': 0, 'no_known_joint': 0, 'skew': 0, 'duplicate_names': 0}
        self.last_rejection = ''

    def _reject(self, kind, why):
        self.counts[kind] += 1
        self.last_rejection = why
        self.last_kind = kind
        return False

    def update(self, names, positions, velocities, stamp_ns, now_ns):
        """Merge one message; returns True when it was used. `stamp_ns` 0 means unstamped."""
        count = len(names)
        if len(positions) != count or (len(velocities) not in (0, count)):
            return self._reject('malformed', f'{count} names but {len(positions)} positions, '
                                             f'{len(velocities)} velocities')
        if len(set(names)) != count:
            seen = set()
            twice = next(name for name in names if name in seen or seen.add(name))
            return self._reject('duplicate_names', f'joint {twice!r} named more than once in one message')
        rows, cols, unknown = [], [], 0
        for k, name in enumerate(names):
            i = self.index.get(name)
            if i is None:
                unknown += 1
            else:
                rows.append(i)
                cols.append(k)
        if unknown:
            self.counts['unknown_names'] += 1
            self.last_rejection = f'ignored unknown joint names, e.g. {next(n for n in names if n not in self.index)!r}'
        if not rows:
            return self._reject('no_known_joint', f'no joint of the model in message (names {list(names)[:4]})')
        pos = [positions[k] for k in cols]
        vel = [velocities[k] for k in cols] if velocities else []
        if not all(math.isfinite(v) for v in pos) or not all(math.isfinite(v) for v in vel):
            bad = next(names[k] for k, i in zip(cols, rows)
                       if not math.isfinite(positions[k]) or (velocities and not math.isfinite(velocities[k])))
            return self._reject('nonfinite', f'NaN/Inf in joint {bad!r}')
        if stamp_ns > 0:
            self.last_skew = (stamp_ns - now_ns) * 1e-9
            if stamp_ns - now_ns > self.clock_skew * 1e9:
                return self._reject('skew', f'clock skew: stamp {self.last_skew:+.3f} s ahead of the node clock '
                                            f'(tolerance {self.clock_skew * 1e3:.0f} ms)')
            if now_ns - stamp_ns > self.state_timeout * 1e9:
                return self._reject('late', f'stamp {(now_ns - stamp_ns) * 1e-6:.1f} ms old '
                                            f'(timeout {self.state_timeout * 1e3:.0f} ms)')
            if any(self.received[i] and stamp_ns < self.stamp_ns[i] for i in rows):
                return self._reject('late', 'stamp older than the sample already held (out of order)')
            t_ns = stamp_ns
        else:
            t_ns = now_ns
        for j, (i, k) in enumerate(zip(rows, cols)):
            if vel:
                self.qd[i] = vel[j]
            elif self.received[i] and t_ns > self.stamp_ns[i]:
                self.qd[i] = (pos[j] - self.q[i]) / ((t_ns - self.stamp_ns[i]) * 1e-9)
            self.q[i] = pos[j]
            self.stamp_ns[i] = t_ns
            self.arrival_ns[i] = now_ns if now_ns > 0 else t_ns     # no clock yet (sim time): by stamp
            self.received[i] = True
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
        return sum(self.counts[k] for k in ('nonfinite', 'late', 'malformed', 'no_known_joint', 'skew',
                                            'duplicate_names'))
