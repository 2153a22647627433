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
def _mat_vec(A, x, out):
    """``out = A x``."""
    for i in range(A.shape[0]):
        acc = 0.0
        for j in range(x.shape[0]):
            acc += A[i, j] * x[j]
        out[i] = acc


@njit(cache=True)
def _violations(D, x, dlo, dhi, r, v):
    """``r = D x`` and the signed violations ``v`` of the intervals [dlo, dhi]; returns max |v|."""
    _mat_vec(D, x, r)
    worst = 0.0
    for k in range(D.shape[0]):
        viol = 0.0
        if r[k] < dlo[k]:
            viol = r[k] - dlo[k]
        elif r[k] > dhi[k]:
            viol = r[k] - dhi[k]
        v[k] = viol
        worst = max(worst, abs(viol))
    return worst


@njit(cache=True)
def _factor_piece(G, D, vi, nv, weight, eps, free, H, L):
    """L L^T = H, the current piece's Hessian ``G + w D_V^T D_V + eps I`` on the free set (D_V the nv rows of
    D listed in vi; identity rows on the held variables), lower triangle; False when it is not positive
    definite. The one loop of :func:`_newton_step` and :func:`_polish`, so a reused factor is the same bits."""
    p = G.shape[0]
    for a in range(p):
        for b in range(a + 1):
            if free[a] == 0.0 or free[b] == 0.0:
                H[a, b] = 1.0 if a == b else 0.0
                continue
            acc = G[a, b] + (eps if a == b else 0.0)
            for t in range(nv):
                k = int(vi[t])
                acc += weight * D[k, a] * D[k, b]
            H[a, b] = acc
    return cholesky_lower(H, L)


@njit(cache=True)
def _newton_step(G, D, vi, nv, weight, eps, g, free, H, L, step):
    """The Newton step on the free set (H: the current piece's Hessian ``G + w D_V^T D_V + eps I``, D_V the
    nv rows of D listed in vi; identity rows on the held variables); False when the factorization fails."""
    p = g.shape[0]
    if not _factor_piece(G, D, vi, nv, weight, eps, free, H, L):
        return False
    for j in range(p):
        step[j] = -g[j] if free[j] != 0.0 else 0.0
    chol_solve_col(L, step)
    for j in range(p):
        if free[j] == 0.0:
            step[j] = 0.0
    return True


@njit(cache=True)
def _exact_step(G, gt, D, r, dlo, dhi, weight, eps, u0, u, step, lo, hi, gs, ds, tlo, thi):
    """The twin of ``core.joint_limits._exact_step``: ``(alpha, blocking)`` (the kinks, computed once into
    tlo and thi, visited in order by finding the next one after each: no sort)."""
    p = u.shape[0]
    nd = D.shape[0]
    _mat_vec(G, step, gs)
    _mat_vec(D, step, ds)
    blocking = -1
    alpha_box = np.inf
    for j in range(p):
        if step[j] > 0.0:
            t = max((hi[j] - u[j]) / step[j], 0.0)
        elif step[j] < 0.0:
            t = max((lo[j] - u[j]) / step[j], 0.0)
        else:
            continue
        if t < alpha_box:
            alpha_box = t
            blocking = j
    task0 = 0.0
    task1 = 0.0
    ss = 0.0
    for j in range(p):
        task0 += gt[j] * step[j]
        task1 += gs[j] * step[j]
        ss += step[j] * step[j]
    for k in range(nd):
        if ds[k] != 0.0:
            tlo[k] = (dlo[k] - r[k]) / ds[k]
            thi[k] = (dhi[k] - r[k]) / ds[k]
        else:
            tlo[k] = -1.0
            thi[k] = -1.0
    a0 = 0.0
    for piece in range(2 * nd + 1):
        # the next kink after a0 (a row of D entering or leaving its interval), else the box
        a1 = alpha_box
        for k in range(nd):
            t = tlo[k]
            if t > a0 and t < a1:
                a1 = t
            t = thi[k]
            if t > a0 and t < a1:
                a1 = t
        mid = 0.5 * (a0 + a1) if a1 < np.inf else a0 + 1.0
        dphi = task0 + a0 * task1
        curv = task1 + eps * ss
        for k in range(nd):
            ra = r[k] + a0 * ds[k]
            va = 0.0
            if ra < dlo[k]:
                va = ra - dlo[k]
            elif ra > dhi[k]:
                va = ra - dhi[k]
            dphi += weight * va * ds[k]
            rm = r[k] + mid * ds[k]
            if rm < dlo[k] or rm > dhi[k]:
                curv += weight * ds[k] * ds[k]
        for j in range(p):
            dphi += eps * (u[j] - u0[j] + a0 * step[j]) * step[j]
        if dphi >= 0.0:
            return a0, -1
        if curv > 0.0 and a0 - dphi / curv <= a1:
            return a0 - dphi / curv, -1
        if not a1 < np.inf:
            return a0, -1
        a0 = a1
    return alpha_box, blocking


@njit(cache=True)
def bounded_lsq(C, d, D, dlo, dhi, weight, lo, hi, eps, u0, start, u, sc, o):
    """The compiled twin of :func:`uk_controller.core.joint_limits.bounded_lsq` (the active-set Newton
    method with an exact line search on ``1/2 |C u - d|^2 + w/2 sum dist(D_k u, [dlo_k, dhi_k])^2 +
    eps/2 |u - u0|^2``, ``lo <= u <= hi``, from `start`); writes u, returns ``(iterations, largest
    violation left)``. Forms ``G = C^T C`` and ``C^T d`` and calls :func:`bounded_lsq_gram`. Scratch:
    :func:`lsq_rows` (p) + p + 1 rows of sc from row o (width max(p, rows of D))."""
    p = u0.shape[0]
    G = sc[o : o + p, :p]
    Cd = sc[o + p, :p]
    _gram(C, d, G, Cd)
    return bounded_lsq_gram(G, Cd, D, dlo, dhi, weight, lo, hi, eps, u0, start, u, sc, o + p + 1)


@njit(cache=True)
def _gram(C, d, G, Cd):
    """``G = C^T C`` (both triangles) and ``Cd = C^T d``."""
    p = G.shape[0]
    m = C.shape[0]
    for a in range(p):
        acc = 0.0
        for i in range(m):
            acc += C[i, a] * d[i]
        Cd[a] = acc
        for b in range(a + 1):
            acc = 0.0
            for i in range(m):
                acc += C[i, a] * C[i, b]
            G[a, b] = acc
            G[b, a] = acc


@njit(cache=True)
def lsq_rows(p):
    """Rows of scratch :func:`bounded_lsq_gram` needs for p efforts."""
    return 2 * p + 13


@njit(cache=True)
def bounded_lsq_gram(G, Cd, D, dlo, dhi, weight, lo, hi, eps, u0, start, u, sc, o):
    """:func:`bounded_lsq` on the Gram form of the task rows: ``G = C^T C`` and ``Cd = C^T d`` (the
    objective up to the constant |d|^2 / 2). Scratch: :func:`lsq_rows` (p) rows of sc from row o."""
    p = u0.shape[0]
    nd = D.shape[0]
    H = sc[o : o + p, :p]
    L = sc[o + p : o + 2 * p, :p]
    g = sc[o + 2 * p, :p]
    step = sc[o + 2 * p + 1, :p]
    gt = sc[o + 2 * p + 2, :p]
    r = sc[o + 2 * p + 3, :nd]
    v = sc[o + 2 * p + 4, :nd]
    free = sc[o + 2 * p + 5, :p]
    gs = sc[o + 2 * p + 6, :p]
    ds = sc[o + 2 * p + 7, :nd]
    vi = sc[o + 2 * p + 8, :nd]
    tlo = sc[o + 2 * p + 9, :nd]
    thi = sc[o + 2 * p + 10, :nd]
    lastfree = sc[o + 2 * p + 11, :p]  # the free set and violated rows H was last factored for
    lastvi = sc[o + 2 * p + 12, :nd]
    lastnv = -1
    for j in range(p):
        x = start[j]
        if x < lo[j]:
            x = lo[j]
        elif x > hi[j]:
            x = hi[j]
        u[j] = x
    gscale = 1e-300
    for j in range(p):
        b = 0.0
        c = 0.0
        for k in range(nd):
            if dlo[k] > -np.inf:
                b += D[k, j] * dlo[k]
            if dhi[k] < np.inf:
                c += D[k, j] * dhi[k]
        gscale = max(gscale, abs(Cd[j]), weight * abs(b), weight * abs(c))
    iterations = 0
    for it in range(1, MAX_ITERATIONS + 1):
        iterations = it
        _violations(D, u, dlo, dhi, r, v)
        nv = np.int64(0)  # not the literal 0: numba would compile _polish for Literal[int](0) too
        for k in range(nd):
            if v[k] != 0.0:
                vi[nv] = k
                nv += 1
        gmax = 0.0
        nfree = 0
        for j in range(p):
            acc = -Cd[j]
            for b in range(p):
                acc += G[j, b] * u[b]
            gt[j] = acc
            acc += eps * (u[j] - u0[j])
            for t in range(nv):
                k = int(vi[t])
                acc += weight * D[k, j] * v[k]
            g[j] = acc
            held = (u[j] <= lo[j] and acc > 0.0) or (u[j] >= hi[j] and acc < 0.0)
            free[j] = 0.0 if held else 1.0
            if not held:
                nfree += 1
                if abs(acc) > gmax:
                    gmax = abs(acc)
        if nfree == 0:
            break
        if gmax <= 1e-13 * gscale:
            same = lastnv == nv
            for t in range(nv):
                same = same and lastvi[t] == vi[t]
            for j in range(p):
                same = same and lastfree[j] == free[j]
            _polish(G, Cd, D, dlo, dhi, v, vi, nv, weight, eps, u0, free, u, lo, hi, H, L, step, same)
            break
        # the Newton step on the free set; a free variable it pushes out through its bound is held
        ok = True
        while nfree > 0:
            if not _newton_step(G, D, vi, nv, weight, eps, g, free, H, L, step):
                ok = False
                break
            changed = False
            for j in range(p):
                if free[j] != 0.0 and ((u[j] <= lo[j] and step[j] < 0.0) or (u[j] >= hi[j] and step[j] > 0.0)):
                    free[j] = 0.0
                    nfree -= 1
                    changed = True
            if not changed:
                break
        if not ok or nfree == 0:
            break
        lastnv = nv
        for t in range(nv):
            lastvi[t] = vi[t]
        for j in range(p):
            lastfree[j] = free[j]
        alpha, blocking = _exact_step(G, gt, D, r, dlo, dhi, weight, eps, u0, u, step, lo, hi, gs, ds, tlo, thi)
        for j in range(p):
            x = u[j] + alpha * step[j]
            if j == blocking:
                x = hi[j] if step[j] > 0.0 else lo[j]
            if x < lo[j]:
                x = lo[j]
            elif x > hi[j]:
                x = hi[j]
            u[j] = x
    return iterations, _violations(D, u, dlo, dhi, r, v)


@njit(cache=True)
def _polish(G, Cd, D, dlo, dhi, v, vi, nv, weight, eps, u0, free, u, lo, hi, H, L, rhs, factored):
    """The twin of ``core.joint_limits._polish``: u on the free set becomes the minimizer of the final
    piece, solved directly (the held variables and the violated rows v, listed in vi, fixed). `factored`:
    L already holds the factor of this piece's Hessian on this free set (the last Newton step's, built by
    the same loop from the same sets, so the same bits)."""
    p = u.shape[0]
    for j in range(p):
        if free[j] == 0.0:
            rhs[j] = 0.0
            continue
        acc = Cd[j] + eps * u0[j]
        for t in range(nv):
            k = int(vi[t])
            acc += weight * D[k, j] * (dlo[k] if v[k] < 0.0 else dhi[k])
        for b in range(p):
            if free[b] == 0.0:
                c = G[j, b]
                for t in range(nv):
                    k = int(vi[t])
                    c += weight * D[k, j] * D[k, b]
                acc -= c * u[b]
        rhs[j] = acc
    if not factored and not _factor_piece(G, D, vi, nv, weight, eps, free, H, L):
        return
    chol_solve_col(L, rhs)
    for j in range(p):
        if free[j] != 0.0:
            x = rhs[j]
            if x < lo[j]:
                x = lo[j]
            elif x > hi[j]:
                x = hi[j]
            u[j] = x


@njit(cache=True)
def singular_damping(smin, smax, threshold, damping):
    """The squared damping factor of the task rows near a singularity (the compiled twin of
    :func:`uk_controller.core.joint_limits.singular_damping`: ``(1 - (smin / (threshold smax))^2)
    (damping smax)^2`` below the threshold, else 0)."""
    if not (threshold > 0.0 and damping > 0.0 and smax > 0.0) or smin >= threshold * smax:
        return 0.0
    ratio = smin / (threshold * smax)
    scale = damping * smax
    return (1.0 - ratio * ratio) * scale * scale


@njit(cache=True)
def bounded_stage(CB, bbar, NB, a0, lo, hi, limits, weight, eps, u, start, sc, o, damping=0.0, center=None):
    """The compiled twin of :func:`uk_controller.core.joint_limits.bounded_stage`: u (in place) becomes the
    bounded least squares of the task rows with the joint acceleration bounds and the effort box, from
    `start` (the warm start); with `damping` = lambda^2 > 0 the task rows damped as
    ``[CB; lambda I] u = [bbar; lambda center]`` (``G + lambda^2 I``, ``C^T d + lambda^2 center``).
    Scratch from row o of sc: :func:`bounded_stage_rows` (p) rows."""
    p = u.shape[0]
    n = a0.shape[0]
    u0 = sc[o, :p]
    blo = sc[o + 1, :p]
    bhi = sc[o + 2, :p]
    dlo = sc[o + 3, :n]
    dhi = sc[o + 4, :n]
    G = sc[o + 5 : o + 5 + p, :p]
    Cd = sc[o + 5 + p, :p]
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
    _gram(CB, bbar, G, Cd)
    if center is not None:  # (a branch numba removes when no centre is given)
        if damping > 0.0:
            for j in range(p):
                G[j, j] += damping
                Cd[j] += damping * center[j]
    return bounded_lsq_gram(
        G, Cd, NB, dlo, dhi, weight, blo, bhi, eps * max(scale, 1e-300), u0, start, u, sc, o + 6 + p
    )


@njit(cache=True)
def bounded_stage_rows(p):
    """Rows of scratch :func:`bounded_stage` needs for p efforts."""
    return 3 * p + 19
