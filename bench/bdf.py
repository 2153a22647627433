"""Gear's method (BDF, orders 1-5) written out for numba: the integrator of the seed 002 parallelogram runs.

Seed 002 eq 32 (`bench.parallelogram_model.rhs_k`, with the pseudo-inverse
twins of uk_controller.core.pinv.compiled) integrated by Gear's method, the stiff option of the paper's
own IMSL integrator DIVPAG, written out so that a whole 20 s run is one compiled call (`bdf_k`).
The algorithm is the variable-order, quasi-constant step BDF on a table of backward differences
(Shampine & Reichelt 1997, "The MATLAB ODE Suite", section 2.3, with kappa = 0: plain BDF):
predictor y0 = sum_{m<=k} del^m y_n, corrector gamma_k (y - y0) + sum_{m=1..k} gamma_m del^m y_n
= h f(y), gamma_m = sum_{j<=m} 1/j, by simplified Newton with (I - h/gamma_k J); local error
estimate del^{k+1} y_{n+1} / (k + 1); step and order chosen from the error estimates of orders
k-1, k, k+1 after k+1 equal steps.

Reference: scipy's BDF (``solve_ivp(method='BDF')``) on the NumPy right-hand side;
test/test_seed002_parallelogram.py checks it against that (``test_compiled_bdf_matches_scipy_bdf``)
and over seed 002's full 20 s against the reduced model (``test_compiled_full_run_follows_reduced_model``).
numba's cache of this file does not see edits of parallelogram_model.py or pinv/compiled.py;
uk_controller.kernels.jit.drop_stale_caches clears it when one of them changed.
"""

from __future__ import annotations

import numpy as np

from .parallelogram_model import njit, rhs_k


@njit(cache=True)
def _lu_k(A, piv):
    """In-place LU with partial pivoting, ``A[piv] = L U``. False if singular."""
    n = A.shape[0]
    for i in range(n):
        piv[i] = i
    for k in range(n):
        p = k
        for i in range(k + 1, n):
            if abs(A[i, k]) > abs(A[p, k]):
                p = i
        if A[p, k] == 0.0:
            return False
        if p != k:
            for j in range(n):
                t = A[k, j]
                A[k, j] = A[p, j]
                A[p, j] = t
            t2 = piv[k]
            piv[k] = piv[p]
            piv[p] = t2
        for i in range(k + 1, n):
            A[i, k] /= A[k, k]
            f = A[i, k]
            if f != 0.0:
                for j in range(k + 1, n):
                    A[i, j] -= f * A[k, j]
    return True


@njit(cache=True)
def _lu_solve_k(LU, piv, b, x):
    n = LU.shape[0]
    for i in range(n):
        s = b[piv[i]]
        for j in range(i):
            s -= LU[i, j] * x[j]
        x[i] = s
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= LU[i, j] * x[j]
        x[i] = s / LU[i, i]


@njit(cache=True)
def _rms_scaled(v, scale):
    s = 0.0
    for i in range(v.size):
        s += (v[i] / scale[i]) ** 2
    return np.sqrt(s / v.size)


@njit(cache=True)
def _change_D(D, order, factor):
    """Rescale the difference table to step h * factor (Shampine & Reichelt 1997, eq 2.3 ff.):
    ``D[:k+1] <- (R(factor) R(1))^T D[:k+1]``, ``R(r)_{ij} = prod_{l=1..i} (l - 1 - r j) / l``."""
    k = order
    R = np.zeros((k + 1, k + 1))
    U = np.zeros((k + 1, k + 1))
    for j in range(k + 1):
        R[0, j] = 1.0
        U[0, j] = 1.0
    for i in range(1, k + 1):
        for j in range(k + 1):
            R[i, j] = R[i - 1, j] * (i - 1 - factor * j) / i
            U[i, j] = U[i - 1, j] * (i - 1 - 1.0 * j) / i
    RU = R @ U
    n = D.shape[1]
    new = np.zeros((k + 1, n))
    for a in range(k + 1):
        for b in range(k + 1):
            f = RU[b, a]
            if f != 0.0:
                for c in range(n):
                    new[a, c] += f * D[b, c]
    for a in range(k + 1):
        for c in range(n):
            D[a, c] = new[a, c]


#: bdf_k's statuses (numba reads these module constants at compile time)
BDF_OK, BDF_STEP_UNDERFLOW, BDF_OUT_OF_CALLS, BDF_NOT_FINITE = 0, 1, 2, 3
#: their words, for the run's message
BDF_STATUS_TEXT = {
    BDF_OK: 'ok',
    BDF_STEP_UNDERFLOW: 'step size underflow',
    BDF_OUT_OF_CALLS: 'more than {max_nfev} function calls',
    BDF_NOT_FINITE: 'non-finite acceleration',
}


@njit(cache=True)
def bdf_k(y0, tf, pinv, rcond, alpha, beta, mih, qf, rtol, atol, newton_tol, t_out, y_out, y_last, stats, max_nfev):
    """Integrate eq 32 from t = 0 to tf by BDF (orders 1-5); states at t_out into y_out, the last into y_last.

    stats <- (nfev, njev, nlu, accepted steps, rejected steps, t reached). Returns BDF_OK on
    success, BDF_STEP_UNDERFLOW if the step size underflowed, BDF_OUT_OF_CALLS if the function budget
    ran out, BDF_NOT_FINITE on a non-finite right-hand side.
    """
    MAXORD = 5
    MAXIT = 4
    n = y0.size
    gam = np.zeros(MAXORD + 2)
    for k in range(1, MAXORD + 2):
        gam[k] = gam[k - 1] + 1.0 / k
    errc = np.zeros(MAXORD + 2)
    for k in range(MAXORD + 2):
        errc[k] = 1.0 / (k + 1)
    f = np.empty(n)
    jac = np.empty((n, n))
    LU = np.empty((n, n))
    piv = np.empty(n, np.int64)
    nfev = 0
    njev = 0
    nlu = 0
    nacc = 0
    nrej = 0
    t = 0.0
    y = y0.copy()
    iout = 0
    while iout < t_out.size and t_out[iout] <= 0.0:
        y_out[:, iout] = y
        iout += 1
    if not rhs_k(y, pinv, rcond, alpha, beta, mih, qf, f, jac, True):
        stats[5] = t
        y_last[:] = y
        return BDF_NOT_FINITE
    nfev += 1
    njev += 1
    # initial step (Hairer, Norsett & Wanner, Solving ODE I, II.4), for order 1
    scale = atol + rtol * np.abs(y)
    d0 = _rms_scaled(y, scale)
    d1 = _rms_scaled(f, scale)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    f1 = np.empty(n)
    rhs_k(y + h0 * f, pinv, rcond, alpha, beta, mih, qf, f1, jac, False)
    nfev += 1
    d2 = _rms_scaled(f1 - f, scale) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** 0.5
    h = min(100.0 * h0, h1, tf)
    D = np.zeros((MAXORD + 3, n))
    D[0] = y
    D[1] = f * h
    order = 1
    n_equal = 0
    lu_ok = False
    ypred = np.empty(n)
    psi = np.empty(n)
    dvec = np.empty(n)
    ynew = np.empty(n)
    rhs = np.empty(n)
    dy = np.empty(n)
    err = np.empty(n)
    status = BDF_OK
    while t < tf:
        if nfev > max_nfev:
            status = BDF_OUT_OF_CALLS
            break
        if h < 10.0 * 2.220446049250313e-16 * max(abs(t), 1.0):
            status = BDF_STEP_UNDERFLOW
            break
        if t + h > tf:
            _change_D(D, order, (tf - t) / h)
            h = tf - t
            n_equal = 0
            lu_ok = False
        current_jac = False
        step_ok = False
        n_iter = 0
        safety = 0.9
        err_norm = 0.0
        while not step_ok:
            if h < 10.0 * 2.220446049250313e-16 * max(abs(t), 1.0):
                status = BDF_STEP_UNDERFLOW
                break
            t_new = t + h
            for i in range(n):
                s = 0.0
                for k in range(order + 1):
                    s += D[k, i]
                ypred[i] = s
                scale[i] = atol + rtol * abs(s)
                s = 0.0
                for k in range(1, order + 1):
                    s += gam[k] * D[k, i]
                psi[i] = s / gam[order]
            c = h / gam[order]
            converged = False
            while True:
                if not lu_ok:
                    for a in range(n):
                        for b in range(n):
                            LU[a, b] = -c * jac[a, b]
                        LU[a, a] += 1.0
                    nlu += 1
                    if not _lu_k(LU, piv):
                        break
                    lu_ok = True
                # simplified Newton for d = y - ypred
                for i in range(n):
                    dvec[i] = 0.0
                    ynew[i] = ypred[i]
                old = -1.0
                converged = False
                n_iter = 0
                for it in range(MAXIT):
                    n_iter = it + 1
                    ok = rhs_k(ynew, pinv, rcond, alpha, beta, mih, qf, f, jac, False)
                    nfev += 1
                    if not ok:
                        break
                    for i in range(n):
                        rhs[i] = c * f[i] - psi[i] - dvec[i]
                    _lu_solve_k(LU, piv, rhs, dy)
                    dyn = _rms_scaled(dy, scale)
                    rate = -1.0
                    if old > 0.0:
                        rate = dyn / old
                        if rate >= 1.0 or rate ** (MAXIT - it) / (1.0 - rate) * dyn > newton_tol:
                            break
                    for i in range(n):
                        ynew[i] += dy[i]
                        dvec[i] += dy[i]
                    if dyn == 0.0 or (rate > 0.0 and rate / (1.0 - rate) * dyn < newton_tol):
                        converged = True
                        break
                    old = dyn
                if converged or current_jac:
                    break
                rhs_k(y, pinv, rcond, alpha, beta, mih, qf, dy, jac, True)  # Jacobian at (t, y)
                njev += 1
                current_jac = True
                lu_ok = False
            if not converged:
                _change_D(D, order, 0.5)
                h *= 0.5
                n_equal = 0
                lu_ok = False
                nrej += 1
                continue
            safety = 0.9 * (2 * MAXIT + 1) / (2 * MAXIT + n_iter)
            for i in range(n):
                scale[i] = atol + rtol * abs(ynew[i])
                err[i] = errc[order] * dvec[i]
            err_norm = _rms_scaled(err, scale)
            if err_norm > 1.0:
                factor = max(0.2, safety * err_norm ** (-1.0 / (order + 1)))
                _change_D(D, order, factor)
                h *= factor
                n_equal = 0
                lu_ok = False
                nrej += 1
                continue
            step_ok = True
        if status != BDF_OK:
            break
        # accept: update the difference table
        nacc += 1
        n_equal += 1
        t = t_new
        for i in range(n):
            y[i] = ynew[i]
            D[order + 2, i] = dvec[i] - D[order + 1, i]
            D[order + 1, i] = dvec[i]
        for k in range(order, -1, -1):
            for i in range(n):
                D[k, i] += D[k + 1, i]
        # dense output: the interpolating polynomial through the last order + 1 points
        while iout < t_out.size and t_out[iout] <= t:
            to = t_out[iout]
            p = 1.0
            for i in range(n):
                y_out[i, iout] = D[0, i]
            for j in range(order):
                p *= (to - (t - h * j)) / (h * (j + 1))
                for i in range(n):
                    y_out[i, iout] += p * D[j + 1, i]
            iout += 1
        if n_equal < order + 1:
            continue
        em = np.inf
        ep = np.inf
        if order > 1:
            for i in range(n):
                err[i] = errc[order - 1] * D[order, i]
            em = _rms_scaled(err, scale)
        if order < MAXORD:
            for i in range(n):
                err[i] = errc[order + 1] * D[order + 2, i]
            ep = _rms_scaled(err, scale)
        fm = em ** (-1.0 / order) if em > 0.0 else np.inf
        f0 = err_norm ** (-1.0 / (order + 1)) if err_norm > 0.0 else np.inf
        fp = ep ** (-1.0 / (order + 2)) if ep > 0.0 else np.inf
        best = f0
        delta = 0
        if fm > best:
            best = fm
            delta = -1
        if fp > best:
            best = fp
            delta = 1
        order += delta
        factor = min(10.0, safety * best)
        _change_D(D, order, factor)
        h *= factor
        n_equal = 0
        lu_ok = False
    stats[0] = nfev
    stats[1] = njev
    stats[2] = nlu
    stats[3] = nacc
    stats[4] = nrej
    stats[5] = t
    for i in range(n):
        y_last[i] = y[i]
    return status
