"""SO(3) helpers of the orientation rows and the planar angle of a frame about a world axis.

The NumPy references of the compiled twins :func:`uk_controller.kernels.rows.planar_angle` (test/test_uk_fast.py
keeps them equal) and of :mod:`uk_controller.kernels.so3` (:func:`log3`, ``jr_inv``, ``jl`` and their
derivatives; test/test_compiled_rows_all_types.py).
"""

from __future__ import annotations

import math

import numpy as np


def skew(x):
    """``[x]x`` with ``skew(x) @ y == cross(x, y)``."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def cross3(a, b):
    """Cross product of two 3-vectors (np.cross is slow for single vectors)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


_NEAR_PI = 1e-2


def log3(R):
    """Rotation vector of the rotation matrix R (principal logarithm, |e| <= pi).

    With ``v = (R21 - R12, R02 - R20, R10 - R01) = 2 sin(th) axis``: ``th = atan2(|v| / 2, (tr R - 1) / 2)``,
    ``e = th v / |v|`` (``v / 2`` as |v| -> 0). ``pinocchio.log3`` takes th from ``acos((tr R - 1) / 2)``,
    which loses up to ~1e-11 between 3 and pi - 1e-2; the atan2 form keeps round-off
    (test_so3_exp_log_equal_pinocchio).

    Within 1e-2 of pi, where v carries little of the axis, the axis comes from the symmetric part
    ``B = (R + R^T) / 2 - cos(th) I = (1 - cos th) a a^T``: its column i of largest diagonal ``B_ii``
    (``|a_i| >= 1/sqrt 3``) normalised is ``+-a``, and the one sign of the whole vector is that of ``a . v``
    (``+`` with ``a_i > 0`` when ``a . v = 0``, i.e. at th = pi, where ``th a`` and ``-th a`` are both logs
    of R). Signing each component by its own entry of v, as ``pinocchio.log3`` does, gives a vector that is
    not the axis at th = pi whenever the axis has components of both signs (R = exp(pi (1, -1, 0)/sqrt 2)
    gave ``-pi (1, 1, 0)/sqrt 2``); the column keeps every component exact to round-off (Markley,
    "Unit quaternion from rotation matrix", J. Guid. Control Dyn. 31(2), 2008, applies the same
    largest-diagonal choice to the quaternion).
    """
    v = (R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1])
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    nv = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    th = math.atan2(0.5 * nv, 0.5 * (tr - 1.0))
    if th >= math.pi - _NEAR_PI:
        cphi = -0.5 * (tr - 1.0)
        i = 0
        if R[1, 1] > R[i, i]:
            i = 1
        if R[2, 2] > R[i, i]:
            i = 2
        col = np.empty(3)
        for k in range(3):
            col[k] = 0.5 * (R[k, i] + R[i, k])
        col[i] += cphi
        nc = math.sqrt(col[0] * col[0] + col[1] * col[1] + col[2] * col[2])
        t = th / nc
        if col[0] * v[0] + col[1] * v[1] + col[2] * v[2] < 0.0:
            t = -t
        return np.array((t * col[0], t * col[1], t * col[2]))
    t = th / nv if nv > 1e-300 else 0.5
    return np.array((t * v[0], t * v[1], t * v[2]))


def _jr_inv_coeffs(theta):
    """c and (dc/dtheta)/theta of ``Jr^-1 = I + S/2 + c S^2``."""
    if theta < 0.1:
        t2 = theta * theta
        return 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0, 1.0 / 360.0 + t2 / 7560.0 + t2 * t2 / 201600.0
    half = 0.5 * theta
    cot = math.cos(half) / math.sin(half)
    c = 1.0 / theta**2 - cot / (2.0 * theta)
    dc = -2.0 / theta**3 + cot / (2.0 * theta**2) + 1.0 / (4.0 * theta * math.sin(half) ** 2)
    return c, dc / theta


def jr_inv(phi):
    """Inverse right Jacobian of SO(3): ``d/dt log(E) = Jr^-1(phi) omega_body`` (= pinocchio.Jlog3).

    ``Jr^-1(phi) = I + [phi]/2 + (1/th^2 - (1 + cos th)/(2 th sin th)) [phi]^2``, th = |phi| < pi.
    """
    S = skew(phi)
    c, _ = _jr_inv_coeffs(float(np.linalg.norm(phi)))
    return np.eye(3) + 0.5 * S + c * (S @ S)


def jr_inv_dot(phi, phidot):
    """Time derivative of ``Jr^-1(phi(t))`` given phi' (directional derivative)."""
    S, Sd = skew(phi), skew(phidot)
    c, e = _jr_inv_coeffs(float(np.linalg.norm(phi)))
    return 0.5 * Sd + e * float(phi @ phidot) * (S @ S) + c * (Sd @ S + S @ Sd)


def _jl_coeffs(theta):
    """a, b, (da/dth)/th, (db/dth)/th of ``Jl = I + a S + b S^2``."""
    if theta < 0.1:
        t2 = theta * theta
        return (
            0.5 - t2 / 24.0 + t2 * t2 / 720.0,
            1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0,
            -1.0 / 12.0 + t2 / 180.0 - t2 * t2 / 6720.0,
            -1.0 / 60.0 + t2 / 1260.0 - t2 * t2 / 60480.0,
        )
    s, c = math.sin(theta), math.cos(theta)
    a = (1.0 - c) / theta**2
    b = (theta - s) / theta**3
    da = (theta * s - 2.0 * (1.0 - c)) / theta**3
    db = (1.0 - c) / theta**3 - 3.0 * (theta - s) / theta**4
    return a, b, da / theta, db / theta


def jl(r):
    """Left Jacobian of SO(3): ``omega_world = Jl(r) r'`` for ``R = exp(r)``."""
    S = skew(r)
    a, b, _, _ = _jl_coeffs(float(np.linalg.norm(r)))
    return np.eye(3) + a * S + b * (S @ S)


def jl_dot(r, rdot):
    S, Sd = skew(r), skew(rdot)
    a, b, ea, eb = _jl_coeffs(float(np.linalg.norm(r)))
    rr = float(r @ rdot)
    return ea * rr * S + a * Sd + eb * rr * (S @ S) + b * (Sd @ S + S @ Sd)


def wrap_angle(angle):
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def planar_angle(R, Jw, drift_w, qd, axis, e1, reference):
    """Angle of a frame about a world axis, with exact first and second derivatives.

    ``v = R r`` (r: frame-fixed reference vector), ``theta = atan2(e2 . v, e1 . v)``
    with ``e2 = axis x e1``. Since ``v' = omega x v``::

        theta'  = k . omega,          k = v x g,   g = (vx e2 - vy e1) / (vx^2 + vy^2)
        theta'' = k . omega' + k' . omega,  omega' = J_ang q'' + drift_ang

    For motion about `axis` only, ``k = axis`` and ``theta' = axis . omega``.
    Returns ``(theta, theta', row, gamma)`` with ``theta'' = row . q'' + gamma``.
    Singular when the reference vector is parallel to the axis.
    """
    # 3-vectors as Python floats: a dozen cross/dot products on scalars cost far less than
    # the same number of NumPy calls on length-3 arrays (the control hot path).
    ax, ay, az = axis.tolist()
    e1x, e1y, e1z = e1.tolist()
    e2x, e2y, e2z = ay * e1z - az * e1y, az * e1x - ax * e1z, ax * e1y - ay * e1x
    v0, v1, v2 = (R @ reference).tolist()
    omega_arr = Jw @ qd
    w0, w1, w2 = omega_arr.tolist()
    d0, d1, d2 = drift_w.tolist()
    u0, u1, u2 = w1 * v2 - w2 * v1, w2 * v0 - w0 * v2, w0 * v1 - w1 * v0  # v' = omega x v
    vx = e1x * v0 + e1y * v1 + e1z * v2
    vy = e2x * v0 + e2y * v1 + e2z * v2
    vxd = e1x * u0 + e1y * u1 + e1z * u2
    vyd = e2x * u0 + e2y * u1 + e2z * u2
    rho2 = vx * vx + vy * vy
    g0, g1, g2 = (vx * e2x - vy * e1x) / rho2, (vx * e2y - vy * e1y) / rho2, (vx * e2z - vy * e1z) / rho2
    c = 2.0 * (vx * vxd + vy * vyd) / rho2
    gd0 = (vxd * e2x - vyd * e1x) / rho2 - c * g0
    gd1 = (vxd * e2y - vyd * e1y) / rho2 - c * g1
    gd2 = (vxd * e2z - vyd * e1z) / rho2 - c * g2
    k0, k1, k2 = v1 * g2 - v2 * g1, v2 * g0 - v0 * g2, v0 * g1 - v1 * g0  # k = v x g
    kd0 = (u1 * g2 - u2 * g1) + (v1 * gd2 - v2 * gd1)  # k' = v' x g + v x g'
    kd1 = (u2 * g0 - u0 * g2) + (v2 * gd0 - v0 * gd2)
    kd2 = (u0 * g1 - u1 * g0) + (v0 * gd1 - v1 * gd0)
    theta = math.atan2(vy, vx)
    row = np.array((k0, k1, k2)) @ Jw
    return (theta, k0 * w0 + k1 * w1 + k2 * w2, row, k0 * d0 + k1 * d1 + k2 * d2 + kd0 * w0 + kd1 * w1 + kd2 * w2)
