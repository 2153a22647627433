"""The static load of a set-up against the effort its motors give.

The efforts that hold the robot still at its start pose q0 (``robot.initial_position``) against
gravity solve the static equations of motion

    B(q0) u + A_p(q0)^T lambda = G(q0)

(G: generalized gravity of the RobotModel at q0, B: the actuator columns, A_p: the passive closure
rows; the minimum-norm solution (u, lambda) of this linear system, ``numpy.linalg.lstsq``; for an
open chain with one actuator per joint, u = G at the driven joints). An actuator whose |u_k| exceeds
its limit ``u_max`` (:class:`~.calibration.HardwareConfig`: the configured effort limit, the motor
torque limit x gear, and what the devices enforce, read at connect) cannot hold the robot: ``uk-controller
run`` refuses to start and names the motor and the numbers (:func:`problems`).
"""

from __future__ import annotations

import numpy as np

__all__ = ['static_effort', 'effort_unit', 'problems', 'report']


def static_effort(setup) -> np.ndarray:
    """u (actuator order) holding `setup` still at ``setup.q0`` against gravity (module docstring)."""
    n = setup.model.n
    passive, _servo, B = setup.evaluate(np.asarray(setup.q0, float), np.zeros(n), 0.0)
    G = np.array(setup.model.g, dtype=float)
    B = np.asarray(B, float).reshape(n, -1)
    p = B.shape[1]
    K = np.hstack([B, np.asarray(passive.A, float).reshape(-1, n).T]) if passive.m else B
    sol = np.linalg.lstsq(K, G, rcond=None)[0]
    return sol[:p].copy()


def effort_unit(setup, joint: str | None) -> str:
    """'N' for an actuator on a prismatic joint, 'N m' otherwise."""
    if joint is None:
        return 'N m'
    pin_model = setup.model.model
    jid = pin_model.getJointId(joint)
    if jid >= len(pin_model.joints):
        return 'N m'
    short = pin_model.joints[jid].shortname()
    return 'N' if short.startswith('JointModelP') else 'N m'


def _limit_text(hw, k, unit, source=''):
    """``3.209 N = min(effort limit 50 N, motor 3.209 N m x gear 1); the device enforces 3.209 N m (...)``."""
    eff = np.inf if hw.effort_limits is None else float(np.asarray(hw.effort_limits, float)[k])
    text = (
        f'{hw.u_max[k]:.4g} {unit} = min(effort limit {eff:.4g} {unit}, motor {hw.tau_m_max[k]:.4g} N m '
        f'x gear {hw.gear[k]:g})'
    )
    dev = hw.device_torque_limit[k]
    if np.isfinite(dev):
        text += f'; the device enforces {dev:.4g} N m' + (f' ({source})' if source else ' (read at connect)')
    return text


def report(setup, hw, u_static, sources=None) -> str:
    """One line per motor: static load at q0 and the limit it is held to."""
    sources = sources or [''] * hw.p
    lines = ['effort limits (the controller clips to these) and the static load at the start pose:']
    for k, name in enumerate(hw.names):
        unit = effort_unit(setup, hw.joints[k])
        ok = abs(u_static[k]) <= hw.u_max[k]
        lines.append(
            f'  {name}: gravity load {u_static[k]:+.4g} {unit}, limit {_limit_text(hw, k, unit, sources[k])}'
            f'{"" if ok else "  <-- EXCEEDED"}'
        )
    return '\n'.join(lines)


def problems(setup, hw, u_static, sources=None) -> list:
    """One message per motor whose static load at q0 exceeds its limit (empty: all hold)."""
    sources = sources or [''] * hw.p
    out = []
    for k, name in enumerate(hw.names):
        if abs(u_static[k]) <= hw.u_max[k]:
            continue
        unit = effort_unit(setup, hw.joints[k])
        joint = f' ({hw.joints[k]})' if hw.joints[k] else ''
        out.append(
            f'motor {name}{joint} cannot hold the start pose: gravity needs {abs(u_static[k]):.4g} {unit}, '
            f'the motor gives {_limit_text(hw, k, unit, sources[k])}. Change: a higher current limit on '
            f'the device, a gear_ratio / torque_constant that matches the drive (hardware.{name}.gear_ratio, '
            f'hardware.{name}.torque_constant), or a start pose with less load (robot.initial_position)'
        )
    return out
