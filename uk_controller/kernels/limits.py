"""Compiled joint-limit stage (numba): position and velocity limits as bounds on the joint accelerations,
and the bounded least squares that holds them with the effort limits.

The twins of :mod:`uk_controller.core.joint_limits` (``acceleration_bounds``, ``bounded_lsq``,
``bounded_stage``; the equations are in their docstrings); test/test_joint_limits.py keeps them equal.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import njit
from .linalg import chol_solve_col, cholesky_lower


@njit(cache=True)
def acceleration_bounds(q, qd, table, brake, tc, lo, hi):
    """Writes ``lo <= q'' <= hi`` per coordinate from ``table`` (3, n): effective lower and upper position
    limits and speed limit (+-inf / inf where none), the braking deceleration `brake` and the time
    constant `tc` (:func:`uk_controller.core.joint_limits.acceleration_bounds`)."""
    n = qd.shape[0]
    for k in range(n):
        x = q[k]
        v = qd[k]
        vmax = table[2, k]
        vhi = vmax
        vlo = -vmax
        upper = table[1, k]
        if upper < math.inf:
            room = upper - x
            env = math.sqrt(2.0 * brake * abs(room))
            if room < 0.0:
                env = -env
            if env < vhi:
                vhi = env
        lower = table[0, k]
        if lower > -math.inf:
            room = x - lower
            env = math.sqrt(2.0 * brake * abs(room))
            if room >= 0.0:
                env = -env
            if env > vlo:
                vlo = env
        if vlo > vhi:
            mid = 0.5 * (vlo + vhi)
            vlo = mid
            vhi = mid
        lo[k] = (vlo - v) / tc
        hi[k] = (vhi - v) / tc


@njit(cache=True)
def beyond_limits(u, limits, qdd, lo, hi):
    """True when an effort is beyond +-limits or a joint acceleration outside [lo, hi]."""
    for j in range(u.shape[0]):
        if abs(u[j]) > limits[j]:
            return True
    for k in range(qdd.shape[0]):
        if qdd[k] < lo[k] or qdd[k] > hi[k]:
            return True
    return False


#: iterations of :func:`bounded_lsq` at most (core.joint_limits.MAX_ITERATIONS)
MAX_ITERATIONS = 100


@njit(cache=True)
def _objective(C, d, D, dlo, dhi, weight, eps, u0, x, r, v, e):
    """f(x) of :func:`bounded_lsq`; writes D x into r, the signed violations into v, C x - d into e."""
    f = 0.0
    for i in range(C.shape[0]):
        acc = -d[i]
        for j in range(x.shape[0]):
            acc += C[i, j] * x[j]
        e[i] = acc
        f += acc * acc
    fv = 0.0
    for k in range(D.shape[0]):
        acc = 0.0
        for j in range(x.shape[0]):
            acc += D[k, j] * x[j]
        r[k] = acc
        viol = 0.0
        if acc < dlo[k]:
            viol = acc - dlo[k]
        elif acc > dhi[k]:
            viol = acc - dhi[k]
        v[k] = viol
        fv += viol * viol
    fe = 0.0
    for j in range(x.shape[0]):
        t = x[j] - u0[j]
        fe += t * t
    return 0.5 * f + 0.5 * weight * fv + 0.5 * eps * fe


@njit(cache=True)
def bounded_lsq(C, d, D, dlo, dhi, weight, lo, hi, eps, u0, u, sc, o):
    """The compiled twin of :func:`uk_controller.core.joint_limits.bounded_lsq` (the projected Newton method
    on ``1/2 |C u - d|^2 + w/2 sum dist(D_k u, [dlo_k, dhi_k])^2 + eps/2 |u - u0|^2``, ``lo <= u <= hi``);
    writes u, returns ``(iterations, largest violation left)``. Scratch: 2 p + 7 rows of sc from row o
    (width max(p, rows of C, rows of D))."""
    p = u0.shape[0]
    m = C.shape[0]
    nd = D.shape[0]
    H = sc[o:o + p, :p]
    L = sc[o + p:o + 2 * p, :p]
    g = sc[o + 2 * p, :p]
    step = sc[o + 2 * p + 1, :p]
    trial = sc[o + 2 * p + 2, :p]
    e = sc[o + 2 * p + 3, :m]
    r = sc[o + 2 * p + 4, :nd]
    v = sc[o + 2 * p + 5, :nd]
    free = sc[o + 2 * p + 6, :p]
    for j in range(p):
        x = u0[j]
        if x < lo[j]:
            x = lo[j]
        elif x > hi[j]:
            x = hi[j]
        u[j] = x
    f = _objective(C, d, D, dlo, dhi, weight, eps, u0, u, r, v, e)
    gscale = 1e-300
    for j in range(p):
        a = 0.0
        b = 0.0
        c = 0.0
        for i in range(m):
            a += C[i, j] * d[i]
        for k in range(nd):
            if dlo[k] > -np.inf:
                b += D[k, j] * dlo[k]
            if dhi[k] < np.inf:
                c += D[k, j] * dhi[k]
        gscale = max(gscale, abs(a), weight * abs(b), weight * abs(c))
    iterations = 0
    for it in range(1, MAX_ITERATIONS + 1):
        iterations = it
        # gradient and the free set
        gmax = 0.0
        nfree = 0
        for j in range(p):
            acc = eps * (u[j] - u0[j])
            for i in range(m):
                acc += C[i, j] * e[i]
            for k in range(nd):
                if v[k] != 0.0:
                    acc += weight * D[k, j] * v[k]
            g[j] = acc
            fixed = (u[j] <= lo[j] and acc > 0.0) or (u[j] >= hi[j] and acc < 0.0)
            free[j] = 0.0 if fixed else 1.0
            if not fixed:
                nfree += 1
                if abs(acc) > gmax:
                    gmax = abs(acc)
        if nfree == 0 or gmax <= 1e-13 * gscale:
            break
        # the eps-active set (core.joint_limits.bounded_lsq): within delta of a bound it is pushed against
        wnorm = 0.0
        for j in range(p):
            x = u[j] - g[j]
            if x < lo[j]:
                x = lo[j]
            elif x > hi[j]:
                x = hi[j]
            wnorm += (u[j] - x) * (u[j] - x)
        wnorm = np.sqrt(wnorm)
        nfree = 0
        for j in range(p):
            delta = min(0.01 * (hi[j] - lo[j]), wnorm)
            fixed = (u[j] <= lo[j] + delta and g[j] > 0.0) or (u[j] >= hi[j] - delta and g[j] < 0.0)
            free[j] = 0.0 if fixed else 1.0
            if not fixed:
                nfree += 1
        if nfree == 0:
            for j in range(p):
                fixed = (u[j] <= lo[j] and g[j] > 0.0) or (u[j] >= hi[j] and g[j] < 0.0)
                free[j] = 0.0 if fixed else 1.0
        # Hessian of the current piece (rows/columns of the held variables: their diagonal entry only)
        for a in range(p):
            for b in range(a + 1):
                if (free[a] == 0.0 or free[b] == 0.0) and a != b:
                    H[a, b] = 0.0
                    continue
                acc = eps if a == b else 0.0
                for i in range(m):
                    acc += C[i, a] * C[i, b]
                for k in range(nd):
                    if v[k] != 0.0:
                        acc += weight * D[k, a] * D[k, b]
                H[a, b] = acc
        if not cholesky_lower(H, L):
            break
        # Newton on the free set, a diagonally scaled gradient step on the held ones (H diagonal there)
        for j in range(p):
            step[j] = -g[j]
        chol_solve_col(L, step)
        # Armijo search along the projected arc
        alpha = 1.0
        ft = f
        same = True
        for _ in range(60):
            slope = 0.0
            same = True
            for j in range(p):
                x = u[j] + alpha * step[j]
                if x < lo[j]:
                    x = lo[j]
                elif x > hi[j]:
                    x = hi[j]
                trial[j] = x
                slope += g[j] * (x - u[j])
                if x != u[j]:
                    same = False
            ft = _objective(C, d, D, dlo, dhi, weight, eps, u0, trial, r, v, e)
            if ft <= f + 1e-4 * slope:
                break
            alpha *= 0.5
        if ft >= f and same:
            break
        for j in range(p):
            u[j] = trial[j]
        f = ft
    f = _objective(C, d, D, dlo, dhi, weight, eps, u0, u, r, v, e)
    worst = 0.0
    for k in range(nd):
        if abs(v[k]) > worst:
            worst = abs(v[k])
    return iterations, worst


@njit(cache=True)
def bounded_stage(CB, bbar, NB, a0, lo, hi, limits, weight, eps, u, sc, o):
    """The compiled twin of :func:`uk_controller.core.joint_limits.bounded_stage`: u (in place) becomes the
    bounded least squares of the task rows with the joint acceleration bounds and the effort box. Scratch
    from row o of sc: 2 p + 12 rows (:func:`bounded_stage_rows`)."""
    p = u.shape[0]
    n = a0.shape[0]
    u0 = sc[o, :p]
    blo = sc[o + 1, :p]
    bhi = sc[o + 2, :p]
    dlo = sc[o + 3, :n]
    dhi = sc[o + 4, :n]
    scale = 0.0
    for i in range(CB.shape[0]):
        for j in range(p):
            scale += CB[i, j] * CB[i, j]
    acc = 0.0
    for k in range(n):
        for j in range(p):
            acc += NB[k, j] * NB[k, j]
    scale = (scale + weight * acc) / max(p, 1)
    for j in range(p):
        u0[j] = u[j]
        blo[j] = -limits[j]
        bhi[j] = limits[j]
    for k in range(n):
        dlo[k] = lo[k] - a0[k]
        dhi[k] = hi[k] - a0[k]
    return bounded_lsq(CB, bbar, NB, dlo, dhi, weight, blo, bhi, eps * max(scale, 1e-300), u0, u, sc, o + 5)


@njit(cache=True)
def bounded_stage_rows(p):
    """Rows of scratch :func:`bounded_stage` needs for p efforts."""
    return 2 * p + 12
