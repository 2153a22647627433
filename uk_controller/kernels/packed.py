"""The controller's fused step as ONE compiled call on two packed arrays.

:class:`uk_controller.constraints.CompiledRows` runs Pinocchio's pass (``crba``, ``rnea`` at q'' = 0,
``updateFramePlacements``: :meth:`~uk_controller.model.robot_model.RobotModel.pinocchio_pass`) from
Python, then :func:`.rows.fused_step` with twelve arguments (two of them tuples of arrays): numba's
dispatcher types and unboxes every argument on every call (~4.7 us of a 15 us SCARA step on the reference
VM). Here the same arithmetic runs in one call with six arguments::

    M, h, S, oMi = tree(q, q')                    dynamics.tree_terms: RNEA + CRBA (Featherstone ch. 5-6),
                                                  the dynamics source of sim.compiled_loop too
    oMf = oMi[parent] * placement                 dynamics.frame_placements
    rows, Baumgarte, servo solve, clipping        rows.fused_step_ws (seed 000 eq 52; seed 004 eq 35)

``I`` (int64) = header | the program's integers | parents | joint types | frame parents, and
``F`` (float64) = the program's floats | its workspace | model floats | gravity | frame placements |
tree outputs and scratch. The CompiledRows' ``fp``/``ws`` and every view of them are re-pointed into
``F`` (same values, same layout), so its users (ControllerCore.step, sim.compiled_loop, set_gains) read
and write the packed arrays. Only the dynamics source differs from CompiledRows.run (own RNEA/CRBA
instead of Pinocchio's), so efforts agree to round-off.

Reference: ``CompiledRows.run`` (Pinocchio's pass + :func:`.rows.fused_step`, module
:mod:`uk_controller.constraints`). Tests: ``test/test_packed_step.py`` (both tests) and, through
ControllerCore.step, ``test/test_fused_step.py::test_fused_controller_equals_servo_solver_path``.
"""

from __future__ import annotations

import numpy as np

from .codes import TREE_SCRATCH_PER_JOINT
from .dynamics import frame_placements, tree_terms
from .jit import AVAILABLE, borrowed, entry_point, njit
from .linalg import view2, view3
from .rows import fused_step_ws, program_scratch_shape

# header of I: offsets (into I) of ip, parents, jtype, fparents; offsets (into F) of fp, ws, mf, grav, fm,
# oR, opos, S, M, h, tw, trans, rots, sc; then sizes nip, nfp, nws, nj, nf, n, nmf, nfm, ntw and the scratch shape
H_IP, H_PAR, H_JT, H_FPAR = 0, 1, 2, 3
H_FP, H_WS, H_MF, H_GRAV, H_FM, H_OR, H_OPOS, H_S, H_M, H_H, H_TW, H_TR, H_ROT, H_SC = range(4, 18)
H_NIP, H_NFP, H_NWS, H_NJ, H_NF, H_N, H_NMF, H_NFM, H_NTW, H_NSC, H_SCC = range(18, 29)
HEADER = 29


@njit(cache=True)
def packed_step(q, qd, t, I, F, sat):
    """Tree pass, frame placements and the fused program at (q, q', t); results in F's workspace views.

    The arrays are used through :func:`.jit.borrowed` views (not reference-counted: the ~200 views and
    array arguments of one step then cost no atomic operations; the caller holds the arrays)."""
    q = borrowed(q)
    qd = borrowed(qd)
    I = borrowed(I)
    F = borrowed(F)
    sat = borrowed(sat)
    n = I[H_N]
    nj = I[H_NJ]
    nf = I[H_NF]
    ip = I[I[H_IP] : I[H_IP] + I[H_NIP]]
    parents = I[I[H_PAR] : I[H_PAR] + nj]
    jtype = I[I[H_JT] : I[H_JT] + nj]
    fparents = I[I[H_FPAR] : I[H_FPAR] + nf]
    fp = F[I[H_FP] : I[H_FP] + I[H_NFP]]
    ws = F[I[H_WS] : I[H_WS] + I[H_NWS]]
    mf = F[I[H_MF] : I[H_MF] + I[H_NMF]]
    grav = F[I[H_GRAV] : I[H_GRAV] + 3]
    fm = F[I[H_FM] : I[H_FM] + I[H_NFM]]
    oR = view3(F, I[H_OR], nj, 3, 3)
    opos = view2(F, I[H_OPOS], nj, 3)
    S = view2(F, I[H_S], 6, n)
    M = view2(F, I[H_M], n, n)
    h = F[I[H_H] : I[H_H] + n]
    tw = F[I[H_TW] : I[H_TW] + I[H_NTW]]
    nfa = max(nf, 1)
    trans = view2(F, I[H_TR], nfa, 3)
    rots = view3(F, I[H_ROT], nfa, 3, 3)
    sc = view2(F, I[H_SC], I[H_NSC], I[H_SCC])
    tree_terms(q, qd, parents, jtype, mf, grav, oR, opos, S, M, h, tw)
    frame_placements(oR, opos, fparents, fm, trans, rots)
    fused_step_ws(M, h, S, trans, rots, q, qd, t, ip, fp, ws, sat, sc)


class PackedStep:
    """The packed form of a ControllerCore's CompiledRows (see the module docstring); None when unavailable."""

    def __init__(self):
        raise TypeError('use PackedStep.build(model, fused)')

    @classmethod
    def build(cls, model, fz):
        """Pack `fz` (a CompiledRows) for `model` (RobotModel); None without numba or a compiled tree."""
        if not AVAILABLE or fz is None or fz.external:  # callable rows need Pinocchio's pass (CompiledRows.run)
            return None
        tree = model.compiled_tree()
        if tree is None:
            return None
        parents, jtype, mf, grav = tree
        fparents, fm = model.compiled_frames(fz.frames)
        n, nj, nf = model.n, parents.size, len(fz.frames)
        nfa = max(nf, 1)
        old_fp, old_ws = fz.fp, fz.ws
        parts = [
            ('fp', old_fp),
            ('ws', old_ws),
            ('mf', mf),
            ('grav', np.asarray(grav, float)),
            ('fm', fm),
            ('oR', np.zeros(9 * nj)),
            ('opos', np.zeros(3 * nj)),
            ('S', np.zeros(6 * n)),
            ('M', np.zeros(n * n)),
            ('h', np.zeros(n)),
            ('tw', np.zeros(TREE_SCRATCH_PER_JOINT * nj + 12)),
            ('trans', np.zeros(3 * nfa)),
            ('rots', np.zeros(9 * nfa)),
            ('sc', np.zeros(program_scratch_shape(fz.ip))),
        ]
        sc_shape = parts[-1][1].shape
        offsets, total = {}, 0
        for key, arr in parts:
            offsets[key] = total
            total += arr.size
        F = np.zeros(total)
        for key, arr in parts:
            F[offsets[key] : offsets[key] + arr.size] = np.ravel(arr)
        ints = [('ip', fz.ip), ('par', parents), ('jt', jtype), ('fpar', fparents[:nf])]
        ioffs, itotal = {}, HEADER
        for key, arr in ints:
            ioffs[key] = itotal
            itotal += arr.size
        I = np.zeros(itotal, dtype=np.int64)
        for key, arr in ints:
            I[ioffs[key] : ioffs[key] + arr.size] = arr
        I[H_IP], I[H_PAR], I[H_JT], I[H_FPAR] = ioffs['ip'], ioffs['par'], ioffs['jt'], ioffs['fpar']
        for slot, key in (
            (H_FP, 'fp'),
            (H_WS, 'ws'),
            (H_MF, 'mf'),
            (H_GRAV, 'grav'),
            (H_FM, 'fm'),
            (H_OR, 'oR'),
            (H_OPOS, 'opos'),
            (H_S, 'S'),
            (H_M, 'M'),
            (H_H, 'h'),
            (H_TW, 'tw'),
            (H_TR, 'trans'),
            (H_ROT, 'rots'),
            (H_SC, 'sc'),
        ):
            I[slot] = offsets[key]
        sizes = dict((k, a.size) for k, a in parts)
        I[H_NIP], I[H_NFP], I[H_NWS], I[H_NJ], I[H_NF], I[H_N] = fz.ip.size, sizes['fp'], sizes['ws'], nj, nf, n
        I[H_NMF], I[H_NFM], I[H_NTW], I[H_NSC], I[H_SCC] = sizes['mf'], sizes['fm'], sizes['tw'], *sc_shape
        # re-point the CompiledRows' float arrays and every view of its workspace into F
        fz.relocate(F[offsets['fp'] : offsets['fp'] + old_fp.size], F[offsets['ws'] : offsets['ws'] + old_ws.size])
        self = object.__new__(cls)
        self.I, self.F, self.fz = I, F, fz
        self.M = F[offsets['M'] : offsets['M'] + n * n].reshape(n, n)
        self.h = F[offsets['h'] : offsets['h'] + n]
        self.kernel = packed_step
        args = (np.asarray(model.neutral(), float), np.zeros(n), 0.0, I, F, fz.saturated)
        self.kernel(*args)  # compile / load
        # the compiled function for these types (q, q' C-contiguous float64 vectors, t a float, I, F, sat)
        self.entry = entry_point(self.kernel, *args)
        return self

    def make_runner(self):
        """``run(q, qd, t)`` as a closure over the two arrays. q, q' MUST be C-contiguous float64 vectors of
        length n and t a float (ControllerCore.step checks them): the runner calls the compiled function of
        exactly those types (:func:`uk_controller.kernels.jit.entry_point`), not the type-matching dispatcher."""
        kernel, I, F, sat = self.entry, self.I, self.F, self.fz.saturated

        def run(q, qd, t):
            kernel(q, qd, t, I, F, sat)

        return run
