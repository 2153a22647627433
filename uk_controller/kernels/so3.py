"""Compiled SO(3) rows (numba): a frame's full orientation error ``log(R_d^T R) = 0`` and its derivatives.

The twin of :class:`uk_controller.constraints.terms.FrameOrientation` with ``mode: so3`` and of the three
rotation rows of a ``LoopClosure`` with ``mode: weld`` (the reference: ``terms._so3_rows`` with the helpers
of :mod:`uk_controller.constraints.so3` and Pinocchio's ``exp3``). With ``e = log(R_d^T R)``,
``omega_e = R^T (omega - omega_d)`` and ``Jr^-1`` the inverse right Jacobian of SO(3)::

    phi  = e,    phi' = Jr^-1(e) omega_e,    A = Jr^-1 R^T (J_ang - J_ang,B)
    b    = -Jr^-1 R^T (J_ang' q' - omega_d' + omega x omega_d - J_ang,B' q') - (d/dt Jr^-1) omega_e

For a trajectory ``r(t)`` (rotation vector, world): ``R_d = exp(r)``, ``omega_d = Jl(r) r'``,
``omega_d' = Jl(r) r'' + Jl'(r, r') r'`` (Jl the left Jacobian). For a weld, R_d is frame B's rotation and
``omega_d = J_ang,B q'`` (its time part of omega_d' is zero; J_ang,B' q' enters through ``dB``).

The Jacobians are applied to vectors (scalar code); the one 3x3 temporary, ``R_d^T R``, lives in the
caller's scratch ``s`` (SO3_SCRATCH floats): no heap allocation.
Tests: ``test/test_compiled_rows_all_types.py`` (log3/exp3 against Pinocchio, rows against the reference
terms on random states, the controller's two backends).
"""

from __future__ import annotations

import math

from .jit import njit

#: floats of scratch :func:`so3_rows` and :func:`so3_desired` need
SO3_SCRATCH = 64
_NEAR_PI = 1e-2  # below pi - this, log3 uses the antisymmetric part; above, the diagonal (as Pinocchio)


@njit(cache=True)
def exp3(r, R):
    """``R = exp([r]x)`` (Rodrigues): ``R = cos th I + (sin th / th) [r] + ((1 - cos th) / th^2) r r^T``;
    for th < 1e-4 the Taylor coefficients ``1 - th^2/6``, ``1/2 - th^2/24``."""
    t2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
    th = math.sqrt(t2)
    if th < 1e-4:
        a = 1.0 - t2 / 6.0
        b = 0.5 - t2 / 24.0
        c = 1.0 - 0.5 * t2
    else:
        a = math.sin(th) / th
        c = math.cos(th)
        b = (1.0 - c) / t2
    R[0, 0] = c + b * r[0] * r[0]
    R[1, 1] = c + b * r[1] * r[1]
    R[2, 2] = c + b * r[2] * r[2]
    R[0, 1] = b * r[0] * r[1] - a * r[2]
    R[1, 0] = b * r[0] * r[1] + a * r[2]
    R[0, 2] = b * r[0] * r[2] + a * r[1]
    R[2, 0] = b * r[0] * r[2] - a * r[1]
    R[1, 2] = b * r[1] * r[2] - a * r[0]
    R[2, 1] = b * r[1] * r[2] + a * r[0]


@njit(cache=True)
def log3(E, e):
    """Rotation vector e of the rotation matrix E (the principal logarithm, |e| <= pi), the twin of
    ``constraints.so3.log3`` (which is ``pinocchio.log3`` with th from atan2 instead of acos). With ``v = (E21 - E12,
    E02 - E20, E10 - E01) = 2 sin(th) axis``:
    ``th = atan2(|v| / 2, (tr E - 1) / 2)`` and ``e = th v / |v|`` (``e = v / 2`` as |v| -> 0); within 1e-2 of
    pi, where v carries little of the axis, the axis is the column i of largest diagonal of
    ``(E + E^T) / 2 - cos(th) I = (1 - cos th) a a^T``, normalised, with the one sign of ``a . v`` (``a_i > 0``
    when that is 0, at th = pi); the reference's docstring says why not each component signed by v."""
    v0 = E[2, 1] - E[1, 2]
    v1 = E[0, 2] - E[2, 0]
    v2 = E[1, 0] - E[0, 1]
    tr = E[0, 0] + E[1, 1] + E[2, 2]
    nv = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    th = math.atan2(0.5 * nv, 0.5 * (tr - 1.0))
    if th >= math.pi - _NEAR_PI:
        cphi = -0.5 * (tr - 1.0)
        i = 0
        if E[1, 1] > E[i, i]:
            i = 1
        if E[2, 2] > E[i, i]:
            i = 2
        for k in range(3):
            e[k] = 0.5 * (E[k, i] + E[i, k])
        e[i] += cphi
        nc = math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2])
        t = th / nc
        if e[0] * v0 + e[1] * v1 + e[2] * v2 < 0.0:
            t = -t
        e[0] *= t
        e[1] *= t
        e[2] *= t
        return
    t = th / nv if nv > 1e-300 else 0.5
    e[0] = t * v0
    e[1] = t * v1
    e[2] = t * v2


@njit(cache=True, inline='always')
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True, inline='always')
def _sq(x0, x1, x2, y0, y1, y2):
    """``[x]^2 y = x (x . y) - |x|^2 y``."""
    d = x0 * y0 + x1 * y1 + x2 * y2
    n2 = x0 * x0 + x1 * x1 + x2 * x2
    return x0 * d - n2 * y0, x1 * d - n2 * y1, x2 * d - n2 * y2


@njit(cache=True, inline='always')
def _series(x0, x1, x2, k1, k2, y0, y1, y2):
    """``(I + k1 [x] + k2 [x]^2) y`` (Jr^-1 with k1 = 1/2, Jl with k1 = a, k2 = b)."""
    c0, c1, c2 = _cross(x0, x1, x2, y0, y1, y2)
    s0, s1, s2 = _sq(x0, x1, x2, y0, y1, y2)
    return y0 + k1 * c0 + k2 * s0, y1 + k1 * c1 + k2 * s1, y2 + k1 * c2 + k2 * s2


@njit(cache=True, inline='always')
def _series_dot(x0, x1, x2, d0, d1, d2, k1, k2, e1, e2, y0, y1, y2):
    """``(e1 [x] + k1 [d] + e2 [x]^2 + k2 ([d][x] + [x][d])) y``: the time derivative of
    ``I + k1 [x] + k2 [x]^2`` along x' = d when k1' = e1 and k2' = e2."""
    a0, a1, a2 = _cross(x0, x1, x2, y0, y1, y2)
    b0, b1, b2 = _cross(d0, d1, d2, y0, y1, y2)
    s0, s1, s2 = _sq(x0, x1, x2, y0, y1, y2)
    u0, u1, u2 = _cross(d0, d1, d2, a0, a1, a2)  # [d][x] y
    v0, v1, v2 = _cross(x0, x1, x2, b0, b1, b2)  # [x][d] y
    return (
        e1 * a0 + k1 * b0 + e2 * s0 + k2 * (u0 + v0),
        e1 * a1 + k1 * b1 + e2 * s1 + k2 * (u1 + v1),
        e1 * a2 + k1 * b2 + e2 * s2 + k2 * (u2 + v2),
    )


@njit(cache=True)
def _jr_inv_coeffs(th):
    """c and (dc/dth)/th of ``Jr^-1 = I + S/2 + c S^2`` (constraints.so3._jr_inv_coeffs)."""
    if th < 0.1:
        t2 = th * th
        return 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0, 1.0 / 360.0 + t2 / 7560.0 + t2 * t2 / 201600.0
    half = 0.5 * th
    cot = math.cos(half) / math.sin(half)
    c = 1.0 / th**2 - cot / (2.0 * th)
    dc = -2.0 / th**3 + cot / (2.0 * th**2) + 1.0 / (4.0 * th * math.sin(half) ** 2)
    return c, dc / th


@njit(cache=True)
def _jl_coeffs(th):
    """a, b, (da/dth)/th, (db/dth)/th of ``Jl = I + a S + b S^2`` (constraints.so3._jl_coeffs)."""
    if th < 0.1:
        t2 = th * th
        return (
            0.5 - t2 / 24.0 + t2 * t2 / 720.0,
            1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0,
            -1.0 / 12.0 + t2 / 180.0 - t2 * t2 / 6720.0,
            -1.0 / 60.0 + t2 / 1260.0 - t2 * t2 / 60480.0,
        )
    s, c = math.sin(th), math.cos(th)
    a = (1.0 - c) / th**2
    b = (th - s) / th**3
    da = (th * s - 2.0 * (1.0 - c)) / th**3
    db = (1.0 - c) / th**3 - 3.0 * (th - s) / th**4
    return a, b, da / th, db / th


@njit(cache=True)
def so3_desired(r, rd, rdd, Rd, wd, wdd, s):
    """``R_d = exp(r)``, ``omega_d = Jl(r) r'``, ``omega_d' = Jl(r) r'' + Jl'(r, r') r'`` (FrameOrientation.fill);
    ``Jl = I + a [r] + b [r]^2``, applied to vectors (no 3x3 products). `s` is unused (kept for the layout)."""
    exp3(r, Rd)
    r0, r1, r2 = r[0], r[1], r[2]
    v0, v1, v2 = rd[0], rd[1], rd[2]
    a, b, ea, eb = _jl_coeffs(math.sqrt(r0 * r0 + r1 * r1 + r2 * r2))
    rr = r0 * v0 + r1 * v1 + r2 * v2
    w0, w1, w2 = _series(r0, r1, r2, a, b, v0, v1, v2)
    x0, x1, x2 = _series(r0, r1, r2, a, b, rdd[0], rdd[1], rdd[2])
    y0, y1, y2 = _series_dot(r0, r1, r2, v0, v1, v2, a, b, ea * rr, eb * rr, v0, v1, v2)
    wd[0], wd[1], wd[2] = w0, w1, w2
    wdd[0], wdd[1], wdd[2] = x0 + y0, x1 + y1, x2 + y2


@njit(cache=True)
def so3_rows(R, J, drift, qd, Rd, wd, wdd, JB, dB, relative, phi, phid, A, b, s):
    """The three rows of ``log(R_d^T R) = 0`` (module docstring; ``terms._so3_rows``).

    ``J`` (6, n), ``drift`` (6,): the frame's Jacobian and ``J' q'`` (angular part rows 3..5); with
    ``relative`` true, ``JB``/``dB`` those of the second frame (a weld), subtracted from A and b.
    ``wdd`` is omega_d's time derivative apart from ``JB q'' + dB``. ``s``: SO3_SCRATCH floats (E = R_d^T R).
    ``Jr^-1 = I + [e]/2 + c [e]^2`` and its derivative are applied to vectors (no 3x3 products)."""
    n = J.shape[1]
    E = s[0:9].reshape((3, 3))
    for i in range(3):
        for j in range(3):
            E[i, j] = Rd[0, i] * R[0, j] + Rd[1, i] * R[1, j] + Rd[2, i] * R[2, j]
    log3(E, phi)
    e0, e1, e2 = phi[0], phi[1], phi[2]
    w0 = w1 = w2 = 0.0
    for j in range(n):
        w0 += J[3, j] * qd[j]
        w1 += J[4, j] * qd[j]
        w2 += J[5, j] * qd[j]
    x0, x1, x2 = w0 - wd[0], w1 - wd[1], w2 - wd[2]
    oe0 = R[0, 0] * x0 + R[1, 0] * x1 + R[2, 0] * x2  # omega_e = R^T (omega - omega_d)
    oe1 = R[0, 1] * x0 + R[1, 1] * x1 + R[2, 1] * x2
    oe2 = R[0, 2] * x0 + R[1, 2] * x1 + R[2, 2] * x2
    c, ec = _jr_inv_coeffs(math.sqrt(e0 * e0 + e1 * e1 + e2 * e2))
    d0, d1, d2 = _series(e0, e1, e2, 0.5, c, oe0, oe1, oe2)
    phid[0], phid[1], phid[2] = d0, d1, d2
    for j in range(n):
        g0, g1, g2 = J[3, j], J[4, j], J[5, j]
        if relative:
            g0 -= JB[3, j]
            g1 -= JB[4, j]
            g2 -= JB[5, j]
        y0 = R[0, 0] * g0 + R[1, 0] * g1 + R[2, 0] * g2
        y1 = R[0, 1] * g0 + R[1, 1] * g1 + R[2, 1] * g2
        y2 = R[0, 2] * g0 + R[1, 2] * g1 + R[2, 2] * g2
        A[0, j], A[1, j], A[2, j] = _series(e0, e1, e2, 0.5, c, y0, y1, y2)
    r0 = drift[3] - wdd[0] + (w1 * wd[2] - w2 * wd[1])
    r1 = drift[4] - wdd[1] + (w2 * wd[0] - w0 * wd[2])
    r2 = drift[5] - wdd[2] + (w0 * wd[1] - w1 * wd[0])
    if relative:
        r0 -= dB[3]
        r1 -= dB[4]
        r2 -= dB[5]
    y0 = R[0, 0] * r0 + R[1, 0] * r1 + R[2, 0] * r2
    y1 = R[0, 1] * r0 + R[1, 1] * r1 + R[2, 1] * r2
    y2 = R[0, 2] * r0 + R[1, 2] * r1 + R[2, 2] * r2
    m0, m1, m2 = _series(e0, e1, e2, 0.5, c, y0, y1, y2)
    ee = e0 * d0 + e1 * d1 + e2 * d2
    k0, k1, k2 = _series_dot(e0, e1, e2, d0, d1, d2, 0.5, c, 0.0, ec * ee, oe0, oe1, oe2)
    b[0], b[1], b[2] = -m0 - k0, -m1 - k1, -m2 - k2
