"""A robot model over Pinocchio: M, C, G, frames, Jacobians and drift terms.

Equations of motion (seed 000 eq 11, seed 004 eq 1)::

    M(q) q'' + C(q, q') q' + G(q) = tau          h := C q' + G

:class:`RobotModel` wraps one immutable ``pinocchio.Model`` and ONE
preallocated ``pinocchio.Data`` (Pinocchio's Model/Data split): a control
step calls :meth:`RobotModel.compute` once, which runs
``pinocchio.computeAllTerms`` (CRBA for M, RNEA with zero acceleration for
h, generalized gravity, joint Jacobians, forward kinematics with velocity)
and updates frame placements. Frame Jacobians and drift terms are then read
from that Data on demand and cached until the next ``compute``.

Joint order. Pinocchio orders joints depth first in URDF order. An explicit
``joint_names`` list fixes the order of q used by every public array of this
class (q, q', M, h, g, Jacobian columns, effort limits); the permutation to
Pinocchio's order is applied internally. :meth:`indices_from` and
:meth:`indices_to` map between q and any message's name order.

Joints: revolute, prismatic (and their unaligned-axis variants) and URDF
'continuous' joints. Pinocchio writes a continuous joint's configuration as
(cos theta, sin theta) (nq = 2, nv = 1); OUR generalized coordinates keep ONE
unwrapped angle theta per continuous joint, so q, q', q'' all have size n = nv
and a joint-linear constraint row on a continuous joint means its unwrapped
angle. The angle is converted to (cos theta, sin theta) only when handed to
Pinocchio (:meth:`RobotModel.to_pinocchio_q`); M, C, G, frames and Jacobians
depend on the configuration only, so they equal those of the same robot
written with a revolute joint at angle theta. Floating and planar joints are
rejected with a clear error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin

LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


class ModelError(ValueError):
    """The URDF or the requested joint/frame names cannot be used."""


def _scale_inertias(model, scale):
    """Multiply every body's mass and rotational inertia by `scale` (centre of mass kept)."""
    for i in range(1, model.njoints):
        inertia = model.inertias[i]
        model.inertias[i] = pin.Inertia(inertia.mass * scale, inertia.lever.copy(), inertia.inertia * scale)


def _is_continuous(joint):
    """A 1-DOF rotation stored by Pinocchio as (cos, sin): URDF 'continuous' (JointModelRUB*)."""
    name = joint.shortname()
    return joint.nq == 2 and joint.nv == 1 and ('RUB' in name or 'RevoluteUnbounded' in name)


class RobotModel:
    """Pinocchio model plus one preallocated Data; see module docstring.

    After :meth:`compute` (q, q'):

    - ``M`` (n, n) symmetric mass matrix,
    - ``h`` (n,) nonlinear effects ``C(q, q') q' + G(q)``,
    - ``g`` (n,) generalized gravity ``G(q)``,
    - :meth:`frame_position`, :meth:`frame_rotation`, :meth:`frame_jacobian`
      (6 x n, LOCAL_WORLD_ALIGNED: linear rows 0..2 = d p/dt of the frame
      origin in world axes, angular rows 3..5 = world angular velocity),
      :meth:`frame_drift` (6,) = ``J'(q, q') q'``.
    """

    def __init__(self, pin_model, joint_names=None, *, name=None, source=None):
        self.model = pin_model
        self.name = name or pin_model.name
        self.source = source
        #: names of the free base's coordinates (robot.base: free; unactuated), empty for a fixed base
        self.free_base = ()
        self._check_joints()
        self.urdf_joint_names = [pin_model.names[j] for j in range(1, pin_model.njoints)]
        n = pin_model.nv
        self.n = n
        if joint_names is None:
            joint_names = list(self.urdf_joint_names)
        joint_names = list(joint_names)
        missing = [j for j in joint_names if j not in self.urdf_joint_names]
        if missing:
            raise ModelError(
                f'joints {missing} are not movable joints of the URDF (movable joints: {self.urdf_joint_names})'
            )
        if len(set(joint_names)) != len(joint_names) or len(joint_names) != n:
            raise ModelError(
                f'joint list must name every movable joint exactly once; got {joint_names}, '
                f'URDF has {self.urdf_joint_names}'
            )
        self.joint_names = joint_names
        # perm[i] = Pinocchio velocity index of our coordinate i
        ids = [pin_model.getJointId(j) for j in joint_names]
        perm = np.array([pin_model.idx_vs[j] for j in ids], dtype=np.intp)
        self.nq_pinocchio = pin_model.nq
        continuous = [_is_continuous(pin_model.joints[j]) for j in ids]
        #: our coordinates that are continuous joints (one unwrapped angle each)
        self.continuous = np.flatnonzero(continuous).astype(np.intp)
        self.continuous_names = [joint_names[i] for i in self.continuous]
        # Pinocchio configuration index of each coordinate: plain joints copy q[i] to qp[_q_plain_at],
        # continuous joints write (cos q[i], sin q[i]) to qp[_q_cont_at], qp[_q_cont_at + 1].
        plain = np.flatnonzero(~np.asarray(continuous, dtype=bool)).astype(np.intp)
        self._q_plain = plain
        self._q_plain_at = np.array([pin_model.idx_qs[ids[i]] for i in plain], dtype=np.intp)
        self._q_cont_at = np.array([pin_model.idx_qs[ids[i]] for i in self.continuous], dtype=np.intp)
        #: True when q's order differs from Pinocchio's depth-first joint order (no compiled program then)
        self.order_permuted = not np.array_equal(perm, np.arange(n))
        # _perm is None exactly when our arrays ARE Pinocchio's (same order, q of size nq == nv):
        # every fast path that hands q to Pinocchio or to the compiled kernels directly checks it
        # (public: native_coordinates).
        self._perm = perm if (self.order_permuted or self.continuous.size) else None
        self.data = pin_model.createData()
        #: a second Data for computations that must leave the state of :meth:`compute` intact
        #: (coriolis_matrix, energies, forward_dynamics)
        self.aux_data = pin_model.createData()
        self._qp = np.zeros(pin_model.nq)
        self._vp = np.zeros(n)
        self._Mp = np.zeros((n, n))
        self._M = np.zeros((n, n))
        self._M_at = 0
        self._h = np.zeros(n)
        self._g = np.zeros(n)
        self.q = np.zeros(n)
        self.qd = np.zeros(n)
        self._stamp = 0
        self._frame_ids = {}
        self._frames = {}
        # Views into the one Data (Pinocchio keeps these buffers for the life of the Data): reading
        # them after computeAllTerms costs no Python-level property access or copy.
        self._data_M = self.data.M
        self._data_nle = self.data.nle
        self._data_g = self.data.g
        self._upper_only = np.tri(n, n, -1, dtype=bool)  # strict lower triangle, filled from M^T
        #: passive joint dynamics (:class:`uk_controller.model.joint_dynamics.JointDynamics`) or None
        self.joint_dynamics = None
        self._passive = np.zeros(n)

    # ------------------------------------------------------------ construction
    @classmethod
    def from_urdf(cls, path, joint_names=None, gravity=None, mass_scale=1.0):
        """Load a URDF with a fixed base.

        `gravity` (3,) overrides Pinocchio's default (0, 0, -9.81);
        `mass_scale` multiplies every link's mass and inertia (a model-mismatch
        plant uses a different scale than the controller's model).
        """
        path = Path(path)
        if not path.is_file():
            raise ModelError(f'URDF not found: {path}')
        try:
            pin_model = pin.buildModelFromUrdf(str(path))
        except Exception as exc:  # Pinocchio raises ValueError/RuntimeError with a parser message
            raise ModelError(f'cannot parse URDF {path}: {exc}') from None
        return cls.from_pinocchio_model(pin_model, joint_names, gravity, mass_scale, source=path)

    @classmethod
    def from_urdf_string(cls, text, joint_names=None, gravity=None, mass_scale=1.0):
        """Like :meth:`from_urdf` from the URDF text (e.g. a robot_description parameter)."""
        try:
            pin_model = pin.buildModelFromXML(text)
        except Exception as exc:
            raise ModelError(f'cannot parse URDF text: {exc}') from None
        return cls.from_pinocchio_model(pin_model, joint_names, gravity, mass_scale, source=None)

    @classmethod
    def from_pinocchio_model(cls, pin_model, joint_names=None, gravity=None, mass_scale=1.0, source=None):
        """A RobotModel over an already built Pinocchio model (from a URDF, MJCF or SDFormat reader): `gravity`
        (3,) replaces the model's, `mass_scale` scales every inertia (as in :meth:`from_urdf`); `source` is the
        file it came from (or None). Modifies `pin_model`."""
        if gravity is not None:
            gravity = np.asarray(gravity, dtype=float).reshape(3)
            pin_model.gravity = pin.Motion(np.concatenate([gravity, np.zeros(3)]))
        mass_scale = float(mass_scale)
        if not mass_scale > 0.0:
            raise ModelError(f'mass_scale must be > 0, got {mass_scale}')
        if mass_scale != 1.0:
            _scale_inertias(pin_model, mass_scale)
        return cls(pin_model, joint_names, source=source)

    def set_joint_dynamics(self, dynamics):
        """Give the model passive joint dynamics (a :class:`~uk_controller.model.joint_dynamics.JointDynamics` in q
        order, or None): the armature goes to Pinocchio's ``model.armature`` (its CRBA and ABA add it to the
        diagonal of M), and :meth:`compute`, :meth:`pinocchio_pass`, :meth:`forward_dynamics` and
        :meth:`inverse_dynamics` add ``dynamics.force(q, q')`` to h (module
        :mod:`uk_controller.model.joint_dynamics`)."""
        if dynamics is not None and not dynamics.active:
            dynamics = None
        armature = np.zeros(self.n) if dynamics is None else np.asarray(dynamics.armature, dtype=float)
        self.model.armature = self._to_pin(armature, np.zeros(self.n))
        self.joint_dynamics = dynamics
        self._stamp += 1

    def with_joint_dynamics(self, dynamics):
        """A new RobotModel over a copy of this Pinocchio model (frames included) with `dynamics` instead
        (e.g. the controller's model without the friction it does not compensate)."""
        other = type(self)(self.model.copy(), self.joint_names, name=self.name, source=self.source)
        for key in ('source_kind', 'source_text', 'free_base'):
            if hasattr(self, key):
                setattr(other, key, getattr(self, key))
        other.set_joint_dynamics(dynamics)
        return other

    def _add_passive(self, q, qd):
        """h += passive joint force at (q, q') in Pinocchio's ``data.nle`` (our q order permuted to Pinocchio's)."""
        f = self.joint_dynamics.force(q, qd, self._passive)
        if self._perm is None:
            self._data_nle += f
        else:
            self._data_nle[self._perm] += f

    def _check_joints(self):
        m = self.model
        bad = []
        for j in range(1, m.njoints):
            joint = m.joints[j]
            if joint.nv != 1 or (joint.nq != 1 and not _is_continuous(joint)):
                bad.append(f'{m.names[j]} ({joint.shortname()}, nq={joint.nq}, nv={joint.nv})')
        if bad:
            raise ModelError(
                'only 1-DOF joints (revolute, continuous, prismatic) are supported; unsupported: ' + ', '.join(bad)
            )

    # ------------------------------------------------------------ joint order
    def _q_to_pin(self, q, out):
        """Our q (n,) -> Pinocchio's configuration (nq,): order, and (cos, sin) of continuous joints."""
        out[self._q_plain_at] = q[self._q_plain]
        if self.continuous.size:
            theta = q[self.continuous]
            out[self._q_cont_at] = np.cos(theta)
            out[self._q_cont_at + 1] = np.sin(theta)
        return out

    @property
    def pinocchio_columns(self):
        """Pinocchio's velocity index of each of our coordinates (n,): column ``pinocchio_columns[i]`` of
        Pinocchio's Jacobians (``data.J``) is our coordinate i's."""
        return np.arange(self.n) if self._perm is None else self._perm.copy()

    @property
    def native_coordinates(self):
        """True when q, q', M, h, Jacobian columns ARE Pinocchio's arrays (same joint order, no continuous
        joint): fast paths may hand q straight to Pinocchio or read its Data without permuting."""
        return self._perm is None

    def to_pinocchio_q(self, q, out=None):
        """Pinocchio's configuration vector (nq,) of our q (n,): a new array, or written into `out`."""
        if out is not None:
            if self._perm is None:
                out[:] = q
                return out
            return self._q_to_pin(q, out)
        if self._perm is None:
            return np.array(q, dtype=float)
        return self._q_to_pin(np.asarray(q, dtype=float), np.zeros(self.nq_pinocchio))

    def pinocchio_pass(self):
        """``run(q, qd)``: the Pinocchio pass of the compiled programs, which read the Data's buffers directly
        (``data.M``'s upper triangle, ``data.nle``, ``data.J``, frame placements): ``crba`` in the WORLD
        convention (M, the joint placements and the joint Jacobians), ``rnea`` at q'' = 0 (h = C q' + G, copied
        into ``data.nle``) and ``updateFramePlacements``, without :meth:`compute`'s copies and permutations.

        Bit for bit the M, h, J, joint and frame placements and joint velocities of :meth:`compute`'s
        ``computeAllTerms`` (``test/test_model.py::test_pinocchio_pass_gives_the_bits_of_compute``), in two
        passes over the tree instead of its one that also forms the centre of mass, its Jacobian and the
        centroidal terms, which the programs do not read; springs and dampers without friction are added by one
        compiled call (Cassie: 6.3 us instead of 8.6). Not filled:
        ``data.g`` and the joint accelerations of ``computeAllTerms`` (read them after :meth:`compute`).
        Needs Pinocchio's joint order (not :attr:`order_permuted`); continuous joints get (cos q, sin q).
        Marks the frame caches stale as :meth:`compute` does."""
        if self.order_permuted:
            raise ModelError('pinocchio_pass needs Pinocchio\'s joint order (this model permutes it)')
        pm, data = self.model, self.data
        crba, rnea, ufp, world = pin.crba, pin.rnea, pin.updateFramePlacements, pin.Convention.WORLD
        nle, tau, zero, copyto = self._data_nle, data.tau, np.zeros(pm.nv), np.copyto
        if self.joint_dynamics is not None and self.continuous.size:
            q_pin, to_pin, add = np.zeros(pm.nq), self.to_pinocchio_q, self._add_passive

            def run(q, qd):
                qp = to_pin(q, q_pin)
                crba(pm, data, qp, world)
                rnea(pm, data, qp, qd, zero)
                copyto(nle, tau)
                add(q, qd)
                ufp(pm, data)
                self._stamp += 1

            return run
        if self.joint_dynamics is not None:  # Pinocchio's q is ours: no copy
            from ..kernels.dynamics import add_spring_damper
            from ..kernels.jit import AVAILABLE

            jd, add = self.joint_dynamics, self._add_passive
            if AVAILABLE and not jd.has_friction:  # the same sums compiled: one call instead of five
                d, k, ref = jd.damping, jd.stiffness, jd.spring_reference

                def add(q, qd):
                    add_spring_damper(nle, q, qd, d, k, ref)

            def run(q, qd):
                crba(pm, data, q, world)
                rnea(pm, data, q, qd, zero)
                copyto(nle, tau)
                add(q, qd)
                ufp(pm, data)
                self._stamp += 1

            return run
        if self.continuous.size:
            q_pin, to_pin = np.zeros(pm.nq), self._q_to_pin

            def run(q, qd):
                qp = to_pin(q, q_pin)
                crba(pm, data, qp, world)
                rnea(pm, data, qp, qd, zero)
                copyto(nle, tau)
                ufp(pm, data)
                self._stamp += 1

            return run

        def run(q, qd):
            crba(pm, data, q, world)
            rnea(pm, data, q, qd, zero)
            copyto(nle, tau)
            ufp(pm, data)
            self._stamp += 1  # frame caches of the model are stale now

        return run

    def from_pinocchio_q(self, qp):
        """Our q (n,) of a Pinocchio configuration (nq,); continuous joints give atan2(sin, cos) in (-pi, pi]."""
        qp = np.asarray(qp, dtype=float)
        q = np.empty(self.n)
        q[self._q_plain] = qp[self._q_plain_at]
        if self.continuous.size:
            q[self.continuous] = np.arctan2(qp[self._q_cont_at + 1], qp[self._q_cont_at])
        return q

    def _to_pin(self, x, out):
        if self._perm is None:
            out[:] = x
        else:
            out[self._perm] = x
        return out

    def _from_pin_vec(self, xp, out):
        if self._perm is None:
            out[:] = xp
        else:
            np.take(xp, self._perm, out=out)
        return out

    def indices_from(self, names):
        """Index array ``idx`` with ``q = values[idx]`` for values given in `names` order.

        Every joint of q must appear in `names` (extra names are ignored).
        """
        where = {name: i for i, name in enumerate(names)}
        missing = [j for j in self.joint_names if j not in where]
        if missing:
            raise ModelError(f'joints {missing} missing from {list(names)}')
        return np.array([where[j] for j in self.joint_names], dtype=np.intp)

    def indices_to(self, names):
        """Index array ``idx`` with ``values = q[idx]`` for values wanted in `names` order."""
        where = {name: i for i, name in enumerate(self.joint_names)}
        missing = [j for j in names if j not in where]
        if missing:
            raise ModelError(f'unknown joints {missing}; model joints: {self.joint_names}')
        return np.array([where[j] for j in names], dtype=np.intp)

    def joint_index(self, name):
        """Position of joint `name` in q."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ModelError(f'unknown joint {name!r}; model joints: {self.joint_names}') from None

    # ------------------------------------------------------------ limits
    def _per_joint(self, values):
        out = np.empty(self.n)
        return self._from_pin_vec(np.asarray(values, dtype=float), out)

    @property
    def effort_limits(self):
        """URDF ``<limit effort>`` per coordinate (inf where absent or zero)."""
        e = self._per_joint(self.model.effortLimit)
        e[~(e > 0.0)] = np.inf
        return e

    @property
    def velocity_limits(self):
        """URDF ``<limit velocity>`` per coordinate (inf where absent or zero)."""
        v = self._per_joint(self.model.velocityLimit)
        v[~(v > 0.0)] = np.inf
        return v

    @property
    def position_limits(self):
        """(lower, upper) per coordinate from the URDF (-inf, inf for continuous joints)."""
        limits = []
        for values, fill in ((self.model.lowerPositionLimit, -np.inf), (self.model.upperPositionLimit, np.inf)):
            values = np.asarray(values, dtype=float)
            out = np.full(self.n, fill)
            out[self._q_plain] = values[self._q_plain_at]
            limits.append(out)
        return tuple(limits)

    @property
    def gravity(self):
        return np.array(self.model.gravity.linear)

    def neutral(self):
        return self.from_pinocchio_q(pin.neutral(self.model))

    # ------------------------------------------------------------ frames
    def has_frame(self, name):
        return self.model.existFrame(name)

    def frame_names(self):
        return [f.name for f in self.model.frames]

    def body_names(self):
        """Names of links (BODY frames), plus 'world' for the fixed base."""
        return ['world'] + [f.name for f in self.model.frames if f.type == pin.FrameType.BODY]

    def frame_id(self, name):
        """Frame index of `name` (a link is preferred over a joint of the same name)."""
        if isinstance(name, (int, np.integer)):
            return int(name)
        fid = self._frame_ids.get(name)
        if fid is None:
            m = self.model
            if m.existFrame(name, pin.FrameType.BODY):
                fid = m.getFrameId(name, pin.FrameType.BODY)
            elif m.existFrame(name):
                fid = m.getFrameId(name)
            else:
                raise ModelError(f'unknown frame {name!r}; frames: {self.frame_names()}')
            self._frame_ids[name] = fid
        return fid

    # ------------------------------------------------------------ the step
    def compute(self, q, qd):
        """ONE Pinocchio pass at (q, q'): M, h = C q' + G, G, kinematics, Jacobians.

        ``pinocchio.computeAllTerms`` (M by CRBA, upper triangle, symmetrised
        here; h by RNEA with q'' = 0; G; joint Jacobians; joint placements,
        velocities and zero-acceleration bias accelerations) plus
        ``updateFramePlacements``.
        """
        self.q[:] = q
        self.qd[:] = qd
        if self._perm is None:
            pin.computeAllTerms(self.model, self.data, self.q, self.qd)
            if self.joint_dynamics is not None:
                self._add_passive(self.q, self.qd)
            pin.updateFramePlacements(self.model, self.data)
            self._stamp += 1  # M symmetrised on first access (see M)
            return self
        qp = self._q_to_pin(self.q, self._qp)
        vp = self._to_pin(self.qd, self._vp)
        pin.computeAllTerms(self.model, self.data, qp, vp)
        if self.joint_dynamics is not None:
            self._add_passive(self.q, self.qd)
        pin.updateFramePlacements(self.model, self.data)
        Mp = self._Mp
        np.copyto(Mp, self._data_M)
        np.copyto(Mp, self._data_M.T, where=self._upper_only)
        self._M[...] = Mp[np.ix_(self._perm, self._perm)]
        self._from_pin_vec(self._data_nle, self._h)
        self._from_pin_vec(self._data_g, self._g)
        self._stamp += 1
        self._M_at = self._stamp
        return self

    @property
    def M(self):
        """Mass matrix (n, n), symmetric, at the state of the last :meth:`compute` (do not modify)."""
        if self._M_at != self._stamp:
            np.copyto(self._M, self._data_M)
            np.copyto(self._M, self._data_M.T, where=self._upper_only)
            self._M_at = self._stamp
        return self._M

    @property
    def M_lower(self):
        """A C-contiguous (n, n) array whose LOWER triangle is M (the hot path reads only that).

        Without a joint permutation this is a view of Pinocchio's ``data.M``
        (CRBA fills its upper triangle; the transposed view has it below the
        diagonal): no copy, no symmetrisation.
        """
        return self._data_M.T if self._perm is None else self.M

    @property
    def h(self):
        """Nonlinear effects ``C(q, q') q' + G(q)`` (n,) at the last :meth:`compute` (do not modify)."""
        return self._data_nle if self._perm is None else self._h

    @property
    def g(self):
        """Generalized gravity G(q) (n,) at the last :meth:`compute` (do not modify)."""
        return self._data_g if self._perm is None else self._g

    def frame(self, name):
        """Per-frame cache (:class:`FrameView`) of `name`: id, live placement views, J and drift buffers."""
        view = self._frames.get(name)
        if view is None:
            view = self._frames[name] = FrameView(self, self.frame_id(name))
        return view

    def frame_position(self, name):
        """Origin of frame `name` in world coordinates (3,)."""
        return np.array(self.data.oMf[self.frame_id(name)].translation)

    def frame_rotation(self, name):
        """Rotation matrix world <- frame (3, 3)."""
        return np.array(self.data.oMf[self.frame_id(name)].rotation)

    def frame_jacobian(self, name):
        """Frame Jacobian (6, n), LOCAL_WORLD_ALIGNED, columns in q order.

        Rows 0..2: velocity of the frame origin in world axes; rows 3..5:
        angular velocity in world axes. Cached until the next :meth:`compute`
        (the returned array is the cache: do not modify it).
        """
        return self.frame(name).jacobian()

    def frame_velocity(self, name):
        """Spatial velocity (6,) of frame `name`, LOCAL_WORLD_ALIGNED: ``J q'``."""
        return np.array(pin.getFrameVelocity(self.model, self.data, self.frame_id(name), LWA).vector)

    def frame_drift(self, name):
        """Acceleration drift ``J'(q, q') q'`` (6,) of frame `name`.

        The classical acceleration of the frame origin at q'' = 0,
        LOCAL_WORLD_ALIGNED (``pinocchio.getFrameClassicalAcceleration`` on the
        zero-acceleration pass of :meth:`compute`), so that
        ``d^2/dt^2 p = J_lin q'' + drift[:3]`` and
        ``d/dt omega = J_ang q'' + drift[3:]``.
        """
        return self.frame(name).drift()

    # ------------------------------------------------------------ extras
    def coriolis_matrix(self, q, qd):
        """C(q, q') with ``M' - 2 C`` skew-symmetric (Pinocchio's computeCoriolisMatrix).

        Uses a second Data, so the state of the last :meth:`compute` is kept.
        """
        qp = self.to_pinocchio_q(q)
        vp = self._to_pin(np.asarray(qd, dtype=float), np.empty(self.n))
        Cp = pin.computeCoriolisMatrix(self.model, self.aux_data, qp, vp)
        if self._perm is None:
            return np.array(Cp)
        return Cp[np.ix_(self._perm, self._perm)]

    def mass_matrix(self, q):
        """M(q) (n, n), symmetric, from a second Data (does not disturb compute state)."""
        qp = self.to_pinocchio_q(q)
        Mp = np.array(pin.crba(self.model, self.aux_data, qp))
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        return Mp if self._perm is None else Mp[np.ix_(self._perm, self._perm)]

    def gravity_vector(self, q):
        """G(q) (n,), from a second Data."""
        qp = self.to_pinocchio_q(q)
        gp = pin.computeGeneralizedGravity(self.model, self.aux_data, qp)
        return self._from_pin_vec(gp, np.empty(self.n))

    def energy(self, q, qd):
        """(kinetic, potential) energy at (q, q'), from a second Data."""
        qp = self.to_pinocchio_q(q)
        vp = self._to_pin(np.asarray(qd, dtype=float), np.empty(self.n))
        kinetic = pin.computeKineticEnergy(self.model, self.aux_data, qp, vp)
        potential = pin.computePotentialEnergy(self.model, self.aux_data, qp)
        return float(kinetic), float(potential)

    def forward_dynamics(self, q, qd, tau, out=None):
        """q'' = M^{-1} (tau - C q' - G) of the open tree by Pinocchio's ABA (one C++ call).

        Uses the second Data, so the state of the last :meth:`compute` is kept. With joint dynamics,
        ``tau - force(q, q')`` (:meth:`set_joint_dynamics`; Pinocchio's ABA adds the armature).
        """
        if self.joint_dynamics is not None:
            tau = np.asarray(tau, dtype=float) - self.joint_dynamics.force(np.asarray(q, float), np.asarray(qd, float))
        if self._perm is None:
            qdd = pin.aba(self.model, self.aux_data, q, qd, tau)
            if out is None:
                return np.array(qdd)
            out[:] = qdd
            return out
        qp = self.to_pinocchio_q(q)
        vp = self._to_pin(np.asarray(qd, dtype=float), np.empty(self.n))
        tp = self._to_pin(np.asarray(tau, dtype=float), np.empty(self.n))
        qdd = pin.aba(self.model, self.aux_data, qp, vp, tp)
        return self._from_pin_vec(qdd, np.empty(self.n) if out is None else out)

    def inverse_dynamics(self, q, qd, qdd):
        """tau = M q'' + C q' + G by RNEA (second Data)."""
        qp = self.to_pinocchio_q(q)
        vp = self._to_pin(np.asarray(qd, dtype=float), np.empty(self.n))
        ap = self._to_pin(np.asarray(qdd, dtype=float), np.empty(self.n))
        tau = self._from_pin_vec(pin.rnea(self.model, self.aux_data, qp, vp, ap), np.empty(self.n))
        if self.joint_dynamics is not None:  # Pinocchio's RNEA adds the armature, not the joint forces
            tau += self.joint_dynamics.force(np.asarray(q, float), np.asarray(qd, float))
        return tau

    def compiled_tree(self):
        """``(parents, jtype, mf, gravity)`` for :func:`uk_controller.kernels.dynamics.tree_terms`, or None
        (a permuted order, joints other than revolute/prismatic):
        :func:`uk_controller.model.tree_records.tree_records`."""
        from .tree_records import tree_records

        return tree_records(self)

    def compiled_frames(self, names):
        """``(parent joints, placements)`` of frames for :func:`uk_controller.kernels.dynamics.frame_placements`
        (:func:`uk_controller.model.tree_records.frame_records`)."""
        from .tree_records import frame_records

        return frame_records(self, names)

    def __repr__(self):
        return f'RobotModel({self.name!r}, n={self.n}, joints={self.joint_names})'


class FrameView:
    """One frame of a :class:`RobotModel`, resolved once for the hot path.

    ``translation`` (3,) and ``rotation`` (3, 3) are live views of the
    frame placement in the model's Data (they change with every
    :meth:`RobotModel.compute`; copy to keep). :meth:`jacobian` and
    :meth:`drift` are computed at most once per ``compute`` and cached.
    """

    __slots__ = ('robot', 'fid', 'translation', 'rotation', '_J', '_J_at', '_drift', '_drift_at')

    def __init__(self, robot, fid):
        self.robot = robot
        self.fid = fid
        placement = robot.data.oMf[fid]
        self.translation = placement.translation
        self.rotation = placement.rotation
        self._J = np.zeros((6, robot.n))
        self._J_at = -1
        self._drift = np.zeros(6)
        self._drift_at = -1

    def jacobian(self):
        """Frame Jacobian (6, n), LOCAL_WORLD_ALIGNED, q order (see :meth:`RobotModel.frame_jacobian`)."""
        r = self.robot
        if self._J_at != r._stamp:
            Jp = pin.getFrameJacobian(r.model, r.data, self.fid, LWA)
            if r._perm is None:
                self._J = Jp
            else:
                np.take(Jp, r._perm, axis=1, out=self._J)
            self._J_at = r._stamp
        return self._J

    def drift(self):
        """``J'(q, q') q'`` (6,) of the frame origin, LOCAL_WORLD_ALIGNED (see :meth:`RobotModel.frame_drift`)."""
        r = self.robot
        if self._drift_at != r._stamp:
            self._drift[:] = pin.getFrameClassicalAcceleration(r.model, r.data, self.fid, LWA).vector
            self._drift_at = r._stamp
        return self._drift
