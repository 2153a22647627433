"""The joint-limit stage of a robot setup: which position and speed limits the control law holds.

Limits come from the description (URDF ``<limit lower upper velocity>``, the same fields of MJCF/SDF
joints) and, where tighter, from the ``hardware.<motor>`` section of a joint's actuator
(``position_limit``, ``velocity_limit``: what the drive itself trips on). The ``limits`` section says how
they are held (:mod:`uk_controller.core.joint_limits`).
"""

from __future__ import annotations

import numpy as np

from ..core.joint_limits import JointLimitStage, limit_table


def joint_limit_stage(setup, rate):
    """The :class:`JointLimitStage` of `setup` at the control rate `rate` (Hz), or None when
    ``limits.enabled`` is false. The time constant is at least two control periods (a first-order
    follower of its bound is then monotone in discrete time)."""
    limits = setup.settings.limits
    if not limits.enabled:
        return None
    model = setup.model
    lower, upper = (np.array(v, dtype=float) for v in model.position_limits)
    velocity = np.array(model.velocity_limits, dtype=float)
    hardware = getattr(setup.settings.hardware, 'items', None) or {}
    for actuator in setup.actuators.actuators:
        item = hardware.get(actuator.name)
        if item is None or actuator.joint is None:
            continue
        j = actuator.joint
        if item.position_limit is not None:
            lo, hi = item.position_limit
            lower[j], upper[j] = max(lower[j], lo), min(upper[j], hi)
        if item.velocity_limit is not None:
            velocity[j] = min(velocity[j], item.velocity_limit)
    try:
        table = limit_table(lower, upper, velocity, margin=limits.margin, velocity_scale=limits.velocity_scale)
    except ValueError as exc:
        names = model.joint_names
        k = int(str(exc).split()[1].rstrip(':'))
        raise ValueError(
            f'joint {names[k]!r}: position limits [{lower[k]}, {upper[k]}] (description and '
            f'hardware.<motor>.position_limit) leave no range'
        ) from None
    return JointLimitStage(
        table,
        float(limits.deceleration),
        max(float(limits.time_constant), 2.0 / rate),
        float(limits.weight),
        singular_threshold=float(limits.singular_threshold),
        singular_damping=float(limits.singular_damping),
    )
