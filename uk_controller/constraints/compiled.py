"""The compiled program of a passive and a servo ConstraintStack (:class:`CompiledRows`)."""

from __future__ import annotations

import math

import numpy as np

from ..kernels import codes as C
from ..kernels import jit
from ..kernels import rows as row_kernels
from .terms import CallableTerm, FrameOrientation, FramePosition, JointLinear, JointPolynomial, LoopClosure


def _traj_spec(traj):
    """``(kind, dim, floats, components)`` of a trajectory's compiled form, or None."""
    from .trajectories import Components

    comps = None
    if isinstance(traj, Components):
        comps = [int(c) for c in traj.components]
        traj = traj.inner
    spec = traj.spec() if hasattr(traj, 'spec') else None
    if spec is None:
        return None
    kind, dim, floats = spec
    if comps is not None and len(comps) > C.MAX_COMPONENTS:
        return None
    return kind, dim, np.asarray(floats, dtype=float), comps


def _offset(view, base):
    """Element offset of `view` inside the contiguous float64 array `base`, or None."""
    if not isinstance(view, np.ndarray) or view.dtype != base.dtype or not np.shares_memory(view, base):
        return None
    return (view.__array_interface__['data'][0] - base.__array_interface__['data'][0]) // base.itemsize


class CompiledRows:
    """The rows of a passive and a servo :class:`ConstraintStack` (and `between` actuator columns) as
    ONE compiled program: :func:`uk_controller.kernels.rows.fused_step` evaluates frame Jacobians and
    drifts from Pinocchio's joint Jacobian, the trajectories, every row, Baumgarte and the servo solve
    in one call after ``pinocchio.computeAllTerms`` (the same equations as :meth:`ConstraintStack.evaluate`
    and :class:`uk_controller.core.uk.ServoSolver`, which stay the reference; test/test_uk_fast.py).

    Build with :meth:`build`, which returns None when numba is not available (callers then keep the
    reference path), when the model permutes Pinocchio's joint order unless ``any_order=True`` (then
    :meth:`run` runs ``model.compute``, which gives M and h in our order, and hands the kernel Pinocchio's
    joint Jacobian with its columns in our order; the frame chains are in our indices), and for a callable
    term (user Python)
    unless ``external_rows=True``: then its rows are ``external`` and :meth:`run` fills them by calling the
    function after ``model.compute`` (Pinocchio's pass, which the kernel then reads), before the one compiled
    call, which leaves them as they are (OP_EXTERNAL). Such a program is for :meth:`run` only: the compiled
    plant and the compiled closed loop, which call the kernel themselves, decline it (``external``).

    After :meth:`run` (q, q', t): ``phi``, ``phidot``, ``A``, ``b`` (passive rows first),
    ``outputs`` (phi | phi' | effort: the three adjacent in one view),
    ``B`` (n, p), ``u``, ``effort``, ``saturated`` (bool, where clipped), ``qdd``, ``passive_force``,
    ``info`` (``kernels.codes.INFO_*``; info[INFO_STATUS] a :class:`uk_controller.control.status.Status` code) are views
    of
    one workspace, overwritten by the next call; ``tau`` (n,) is the applied generalized force
    input (zero for a controller; ``B u`` for a plant).
    """

    def __init__(self):
        raise TypeError('use CompiledRows.build(...)')

    @classmethod
    def build(
        cls,
        model,
        passive,
        servo,
        *,
        p=0,
        B=None,
        between=(),
        gains=None,
        rcond=1e-10,
        gram_floor=1e-14,
        consistency_tol=1e-8,
        max_sweeps=60,
        limits=None,
        secondary=0,
        one_sided=0,
        internal_effort=None,
        null_rcond=None,
        external_rows=False,
        any_order=False,
        task_speed=np.inf,
        posture_speed=np.inf,
        joint_metric=False,
        joint_limits=None,
        dissipation=None,
        warm_up=True,
    ):
        """Compile; `between` lists ``(column, frame_a or None, frame_b or None, axis)``; `B` the
        constant columns (n, p); `gains` (2, mp + ms) from :func:`uk_controller.core.uk.row_gains`; `secondary`,
        `one_sided`, `internal_effort`, `null_rcond`: the redundancy resolution
        (:class:`uk_controller.core.uk.ServoSolver`;
        the last `secondary` servo rows are posture rows). None when the internal-force target is longer than
        the program holds (kernels.codes.MAX_INTERNAL_TARGET). `task_speed`, `posture_speed`, `joint_metric`:
        the saturated Baumgarte term and the null-space metric (:func:`uk_controller.core.uk.solver_params`);
        `joint_limits`: a :class:`uk_controller.core.joint_limits.JointLimitStage` (None: effort clipping
        only); its table follows the effort limits in the program's limits block, then `dissipation`, the
        :class:`uk_controller.core.implicit_dissipation.PeriodDissipation` of the controller (None: the joints'
        damping and friction as sampled, one solve).
        `external_rows`: accept callable terms,
        `any_order`: a permuted joint order (class docstring). `warm_up` False: the kernel is not run here
        (:meth:`warm_up` compiles or loads it; a caller that runs the program through another kernel, as
        :class:`uk_controller.kernels.packed.PackedStep`, skips compiling one it never calls)."""
        from ..core.uk import NULL_RCOND, solver_params

        if internal_effort is not None and p > C.MAX_INTERNAL_TARGET:
            return None
        # continuous joints are fine (their angle is q; make_runner hands Pinocchio (cos, sin)); a permuted
        # joint order only for run() (the compiled plant and loop pass Pinocchio's arrays themselves)
        if not jit.AVAILABLE or (model.order_permuted and not any_order):
            return None
        self = object.__new__(cls)
        n = model.n
        pm = model.model
        frames, frame_index = [], {}

        def frame_slot(name):
            if name not in frame_index:
                frame_index[name] = len(frames)
                frames.append(name)
            return frame_index[name]

        terms, trajs, floats = [], [], [0.0]  # floats[0] unused: offsets are > 0
        traj_dim = [1]  # the largest trajectory dimension (scratch P, V, Acc)

        def add_floats(values):
            start = len(floats)
            floats.extend(float(v) for v in np.ravel(values))
            return start

        def add_traj(traj):
            spec = _traj_spec(traj)
            if spec is None:
                return None
            kind, dim, fl, comps = spec
            traj_dim[0] = max(traj_dim[0], dim)
            row = [0] * C.TRAJ_WIDTH
            row[C.TR_KIND], row[C.TR_DIM], row[C.TR_FOFS] = kind, dim, add_floats(fl)
            row[C.TR_NCOMP] = 0 if comps is None else len(comps)
            for i, c in enumerate(comps or ()):
                row[C.TR_COMPS + i] = c
            trajs.append(row)
            return len(trajs) - 1

        row0 = 0
        external = []  # (term, first row) of callable terms
        for term in list(passive.terms) + list(servo.terms):
            rec = [0] * C.TERM_WIDTH
            rec[C.TERM_ROW0], rec[C.TERM_M], rec[C.TERM_TRAJ] = row0, term.m, -1
            if type(term) is FramePosition:
                tr = add_traj(term.traj)
                if tr is None:
                    return None
                rec[C.TERM_OP], rec[C.TERM_FRAME_A], rec[C.TERM_TRAJ], rec[C.TERM_NAX] = (
                    C.OP_FRAME_POSITION,
                    frame_slot(term.frame),
                    tr,
                    term.m,
                )
                rec[C.TERM_AXES : C.TERM_AXES + term.m] = [int(i) for i in term.idx]
            elif type(term) is FrameOrientation and term.mode == 'planar':
                tr = add_traj(term.traj)
                if tr is None:
                    return None
                rec[C.TERM_OP], rec[C.TERM_FRAME_A], rec[C.TERM_TRAJ] = C.OP_PLANAR, frame_slot(term.frame), tr
                # floats at PLANAR_AXIS, PLANAR_E1, PLANAR_REFERENCE
                rec[C.TERM_FOFS] = add_floats(np.concatenate((term.axis, term.e1, term.reference)))
            elif type(term) is FrameOrientation and term.mode == 'so3':
                tr = add_traj(term.traj)
                if tr is None:
                    return None
                rec[C.TERM_OP], rec[C.TERM_FRAME_A], rec[C.TERM_TRAJ] = C.OP_SO3, frame_slot(term.frame), tr
            elif type(term) is LoopClosure and term.mode == 'weld':
                rec[C.TERM_OP] = C.OP_WELD
                rec[C.TERM_FRAME_A], rec[C.TERM_FRAME_B] = frame_slot(term.frames[0]), frame_slot(term.frames[1])
                rec[C.TERM_NAX] = 3
                rec[C.TERM_AXES : C.TERM_AXES + 3] = [0, 1, 2]
            elif type(term) is JointLinear:
                tr = add_traj(term.traj)
                if tr is None:
                    return None
                rec[C.TERM_OP], rec[C.TERM_TRAJ] = C.OP_JOINT_LINEAR, tr
                rec[C.TERM_FOFS] = add_floats(term.c)
            elif type(term) is JointPolynomial:
                rec[C.TERM_OP] = C.OP_JOINT_POLY
                rec[C.TERM_AXES], rec[C.TERM_AXES + 1] = term.index
                rec[C.TERM_FOFS] = add_floats(np.concatenate((term.c, term.reference)))
            elif type(term) is LoopClosure and term.mode == 'position':
                rec[C.TERM_OP] = C.OP_CLOSURE
                rec[C.TERM_FRAME_A], rec[C.TERM_FRAME_B] = frame_slot(term.frames[0]), frame_slot(term.frames[1])
                rec[C.TERM_NAX] = term.idx.size
                rec[C.TERM_AXES : C.TERM_AXES + term.idx.size] = [int(i) for i in term.idx]
                if term.planar is not None:
                    rec[C.TERM_PLANAR] = 1
                    rec[C.TERM_FOFS] = add_floats(np.concatenate(term.planar))
            elif type(term) is CallableTerm and external_rows:
                rec[C.TERM_OP] = C.OP_EXTERNAL
                external.append((term, row0))
            else:
                return None
            terms.append(rec)
            row0 += term.m
        betw = []
        for col, fa, fb, axis in between:
            rec = [0] * C.BETWEEN_WIDTH
            rec[C.BETWEEN_COL] = int(col)
            rec[C.BETWEEN_FRAME_A] = -1 if fa is None else frame_slot(fa)
            rec[C.BETWEEN_FRAME_B] = -1 if fb is None else frame_slot(fb)
            rec[C.BETWEEN_FOFS] = add_floats(axis)
            betw.append(rec)
        mp, ms = passive.m, servo.m
        m = mp + ms
        gains = np.zeros((2, m)) if gains is None else np.asarray(gains, dtype=float).reshape(2, m)
        limits = np.full(p, np.inf) if limits is None else np.broadcast_to(np.asarray(limits, float), (p,))
        g_ofs = add_floats(gains)
        par_ofs = add_floats(
            solver_params(
                rcond,
                gram_floor,
                consistency_tol,
                max_sweeps,
                secondary=secondary,
                one_sided=one_sided,
                internal_effort=internal_effort,
                p=p,
                null_rcond=NULL_RCOND if null_rcond is None else null_rcond,
                task_speed=task_speed,
                posture_speed=posture_speed,
                joint_metric=joint_metric,
                limits=joint_limits,
            )
        )
        table = np.full((3, n), np.inf) if joint_limits is None else np.asarray(joint_limits.table, dtype=float)
        if joint_limits is None:
            table[0] = -np.inf
        if dissipation is None:  # dt = 0: no dissipation step; v_s = 0: no friction (fused_step_ws)
            period = np.zeros(2 + 2 * n)
        else:
            period = np.concatenate(
                (
                    [dissipation.dt, dissipation.friction_velocity if dissipation.has_friction else 0.0],
                    np.asarray(dissipation.dt_damping, dtype=float),
                    np.asarray(dissipation.friction, dtype=float),
                )
            )
        lim_ofs = add_floats(np.concatenate((limits, table.ravel(), period)))
        nf = len(frames)
        # workspace layout
        # phi, phi', effort first and adjacent: ControllerCore.step copies the three in one go (`outputs`)
        sizes = [
            ('phi', m),
            ('phidot', m),
            ('effort', p),
            ('info', C.INFO_SIZE),
            ('A', m * n),
            ('b', m),
            ('FJ', nf * 6 * n),
            ('FD', nf * 6),
            ('B', n * p),
            ('tau', n),
            ('u', p),
            ('qdd', n),
            ('pforce', n),
            ('sat', p),
            ('scratch', 3 * traj_dim[0] + 2 * n + C.ROWS_SCRATCH),
        ]
        offsets, total = {}, 0
        for key, size in sizes:
            offsets[key] = total
            total += size
        ws = np.zeros(total)
        # integer program
        ip = [0] * C.HEADER
        ip[C.IH_N], ip[C.IH_P], ip[C.IH_MP], ip[C.IH_MS], ip[C.IH_F] = n, p, mp, ms, nf
        ip[C.IH_NT], ip[C.IH_NTR], ip[C.IH_NB] = len(terms), len(trajs), len(betw)
        ip[C.IH_TERMS] = len(ip)
        for rec in terms:
            ip += rec
        ip[C.IH_TRAJ] = len(ip)
        for rec in trajs:
            ip += rec
        ip[C.IH_CHAIN] = len(ip)
        ours = np.argsort(model.pinocchio_columns)  # our index of each Pinocchio velocity index
        for name in frames:
            joint = pm.frames[model.frame_id(name)].parentJoint
            cols = [int(ours[pm.idx_vs[j]]) for j in pm.supports[joint] if j > 0]
            ip += [len(cols)] + cols + [0] * (n - len(cols))
        ip[C.IH_BETW] = len(ip)
        for rec in betw:
            ip += rec
        for key, slot in (
            ('phi', C.IH_PHI),
            ('phidot', C.IH_PHID),
            ('A', C.IH_A),
            ('b', C.IH_BV),
            ('FJ', C.IH_FJ),
            ('FD', C.IH_FD),
            ('B', C.IH_BMAT),
            ('tau', C.IH_TAU),
            ('u', C.IH_U),
            ('qdd', C.IH_QDD),
            ('pforce', C.IH_PF),
            ('effort', C.IH_EFF),
            ('sat', C.IH_SAT),
            ('info', C.IH_INFO),
            ('scratch', C.IH_SCR),
        ):
            ip[slot] = offsets[key]
        ip[C.IH_GAINS], ip[C.IH_PARAMS], ip[C.IH_LIMITS] = g_ofs, par_ofs, lim_ofs
        ip[C.IH_TDIM] = traj_dim[0]
        self.ip = np.asarray(ip, dtype=np.int64)
        self.fp = np.asarray(floats, dtype=float)
        self.ws = ws

        def view(key, shape=None):
            size = dict(sizes)[key]
            v = ws[offsets[key] : offsets[key] + size]
            return v if shape is None else v.reshape(shape)

        self.phi, self.phidot, self.A, self.b = view('phi'), view('phidot'), view('A', (m, n)), view('b')
        self.B, self.tau, self.u, self.qdd = view('B', (n, p)), view('tau'), view('u'), view('qdd')
        self.passive_force, self.effort = view('pforce'), view('effort')
        self.outputs = ws[: 2 * m + p]  # phi | phi' | effort, one block
        self.saturated = np.zeros(p, dtype=bool)
        self.info = view('info')
        self.frame_jacobians, self.frame_drifts = view('FJ', (nf, 6, n)), view('FD', (nf, 6))
        if B is not None:
            self.B[...] = B
        self.n, self.p, self.mp, self.ms, self.frames = n, p, mp, ms, frames
        self.model = model
        # the frames' world placements: live views of Pinocchio's Data, copied before each kernel call into
        # one (nf, 3) and one (nf, 3, 3) array (row_kernels.gather_frames: the kernel's argument types then do
        # not depend on the number of frames, and numba compiles it once for every robot)
        views = [model.frame(name) for name in frames]
        self.frame_translations = tuple(v.translation for v in views)
        self.frame_rotations = tuple(v.rotation for v in views)
        self.trans, self.rots = np.zeros((max(nf, 1), 3)), np.zeros((max(nf, 1), 3, 3))
        self.rots[:] = np.eye(3)
        # live views of Pinocchio's Data (its buffers live as long as the Data); with a permuted order the
        # model's own M and h (our order, filled by model.compute) and Pinocchio's J copied in our column order.
        # With one coordinate eigenpy hands J (6 x 1) over as a vector: the (6, 1) view of the same buffer
        self.permuted = bool(model.order_permuted)
        if self.permuted:
            self.M_lower, self.h, self.J = model.M_lower, model.h, np.zeros((6, n), order='F')  # data.J's layout
        else:
            self.M_lower, self.h, self.J = model.data.M.T, model.data.nle, model.data.J.reshape(6, n)
        self.external = external
        self.kernel = row_kernels.fused_step
        self._rows_kernel = row_kernels.fused_rows
        self._run = self.make_runner()
        if warm_up:
            self.warm_up()
        return self

    def warm_up(self):
        """Run the program once at the model's neutral configuration: compiles the kernel (or loads it from
        numba's cache) now, so the first control period does not."""
        model = self.model
        q0, qd0 = model.neutral(), np.zeros(model.n)
        try:
            self.run(q0, qd0, 0.0)  # compile or load the cache now
        except ValueError:  # a callable row failed here (its step will say so): load the kernel
            model.compute(q0, qd0)  # on the rows as they are, so the first control period does not compile
            self.gather_frames()
            self.kernel(
                self.M_lower,
                self.h,
                self.J,
                self.trans,
                self.rots,
                q0,
                qd0,
                0.0,
                self.ip,
                self.fp,
                self.ws,
                self.saturated,
            )
        return self

    def relocate(self, fp, ws):
        """Move the float program and the workspace into `fp` and `ws` (arrays of the same sizes already
        holding the same values, e.g. slices of one packed array: :class:`uk_controller.kernels.packed.PackedStep`);
        every view of the workspace is re-pointed and the runner rebuilt, so every user of this program reads
        and writes the new arrays."""
        old_ws = self.ws
        if fp.shape != self.fp.shape or ws.shape != old_ws.shape:
            raise ValueError('relocate needs arrays of the same sizes as fp and ws')
        for name, value in list(vars(self).items()):
            off = _offset(value, old_ws)
            if off is not None and name != 'ws':
                setattr(self, name, ws[off : off + value.size].reshape(value.shape))
        self.fp, self.ws = fp, ws
        self._run = self.make_runner()

    def set_gains(self, gains):
        """Replace the per-row Baumgarte gains (2, mp + ms)."""
        o = int(self.ip[C.IH_GAINS])
        self.fp[o : o + 2 * (self.mp + self.ms)] = np.asarray(gains, dtype=float).ravel()

    def set_limits(self, limits):
        """Replace the effort limits (p,) the kernel clips to (ControllerCore.set_effort_limits)."""
        o = int(self.ip[C.IH_LIMITS])
        self.fp[o : o + self.p] = limits

    def run(self, q, qd, t):
        """The model's Pinocchio pass (:meth:`RobotModel.pinocchio_pass`) and the fused kernel at (q, q', t).

        q and q' must be C-contiguous float64 arrays of length n, t a float."""
        self._run(q, qd, t)
        return self

    def make_runner(self):
        """:meth:`run` as a closure over its arguments (no attribute look-ups per call; returns None)."""
        kernel = self.kernel
        Ml, h, J, trans, rots, ip, fp, ws, sat = (
            self.M_lower,
            self.h,
            self.J,
            self.trans,
            self.rots,
            self.ip,
            self.fp,
            self.ws,
            self.saturated,
        )
        if self.external or self.permuted:
            return self._python_pass_runner(kernel, Ml, h, J, trans, rots, ip, fp, ws, sat)
        pin_pass = self.model.pinocchio_pass()  # continuous joints: Pinocchio gets (cos q, sin q)
        gather, placements = self._gather_runner()

        def run(q, qd, t):
            pin_pass(q, qd)
            gather(*placements)
            kernel(Ml, h, J, trans, rots, q, qd, t, ip, fp, ws, sat)

        return run

    def gather_frames(self):
        """Copy the frames' world placements from Pinocchio's Data (updated by the last pass) into
        :attr:`trans` and :attr:`rots`, the arrays the kernel reads."""
        gather, placements = self._gather_runner()
        gather(*placements)

    def _gather_runner(self):
        """``(function, arguments)`` that copies the frames' placements (a no-op without frames)."""
        if not self.frame_translations:
            return (lambda: None), ()
        return row_kernels.gather_frames, (self.frame_translations, self.frame_rotations, self.trans, self.rots)

    def _python_pass_runner(self, kernel, Ml, h, J, trans, rots, ip, fp, ws, sat):
        """The runner with callable rows or a permuted joint order: ``model.compute`` (the pass the functions
        expect, as ConstraintStack.evaluate after it; M and h in our order), Pinocchio's J in our column order,
        each function into its rows, then the kernel. A non-finite state skips the functions (the kernel
        reports NOT_FINITE_STATE, as the reference backend does)."""
        model = self.model
        compute = model.compute
        views = [
            (
                term,
                self.phi[r : r + term.m],
                self.phidot[r : r + term.m],
                self.A[r : r + term.m],
                self.b[r : r + term.m],
            )
            for term, r in self.external
        ]
        isfinite, take = np.isfinite, np.take
        Jp, cols = model.data.J, model.pinocchio_columns
        permuted = self.permuted
        gather, placements = self._gather_runner()

        def run(q, qd, t):
            if math.isfinite(q @ q + qd @ qd + t) or (isfinite(q).all() and isfinite(qd).all() and math.isfinite(t)):
                compute(q, qd)
                if permuted:
                    take(Jp, cols, axis=1, out=J)
                for term, phi, phidot, A, b in views:
                    term.fill(model, q, qd, t, phi, phidot, A, b, None)
                gather(*placements)
            kernel(Ml, h, J, trans, rots, q, qd, t, ip, fp, ws, sat)

        return run

    def rows(self, q, qd, t):
        """Only the rows (and B) at (q, q', t), for tests; ``model.compute`` must have been called."""
        if self.permuted:
            np.take(self.model.data.J, self.model.pinocchio_columns, axis=1, out=self.J)
        self.gather_frames()
        self._rows_kernel(
            self.J,
            self.trans,
            self.rots,
            np.asarray(q, float),
            np.asarray(qd, float),
            float(t),
            self.ip,
            self.fp,
            self.ws,
        )
        return self
