"""A second, independent plant: the MuJoCo physics engine loading the same URDF (or MJCF).

Nothing of our dynamics is used here: MuJoCo builds its own model from the
URDF, closes the mechanism's loops with its own equality constraints
(``connect`` for a revolute closure, ``weld`` for a full-pose closure, between
sites placed at the closure frames) and integrates with RK4. Only the
kinematic placement of the closure frames on their bodies is read from
Pinocchio, because MuJoCo's URDF import fuses fixed links (the tip frames).

Joint position limits of the URDF are enforced by MuJoCo (``joint_limits``,
default True); the UK plant has none, so compare the two inside the limits.

Efforts: a tree-joint actuator adds its effort to ``qfrc_applied`` at its
DOF; a ``between: [A, B]`` actuator applies a pure torque ``u * axis`` on body
A and ``-u * axis`` on body B through ``xfrc_applied`` (world frame).

Every passive row of the setup becomes a MuJoCo equality: a loop closure a ``connect`` or ``weld``, a
``joint_linear`` row on one or two joints (URDF ``<mimic>``, MJCF linear joint couplings) and a
``joint_polynomial`` row a joint equality (``polycoef``). MuJoCo keeps them soft (solref time constant), so
closure and coupling residuals of order 1e-5 are physics of this engine, not controller errors; the
embedded plant keeps them exact. Passive joint dynamics: see :meth:`MujocoPlant._set_joint_dynamics`.
MuJoCo's load and compile errors are ConfigErrors naming the file and the element (exit 2).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class MujocoPlant:
    """MuJoCo model of a robot setup with the interface of :class:`UKPlant`."""

    def __init__(self, setup, *, solref_time=None, joint_limits=True):
        import mujoco

        # the setup's resolved settings; MuJoCo reads the description file, so the mismatch factor
        # (simulation.mass_scale) is applied here (whatever model the setup holds). solref_time (the
        # closures' constraint time, default 8 steps) and joint_limits (false: the URDF limits off, as the
        # UK plant has none) choose how the MuJoCo model is built, not a setting of the run
        sim = setup.settings.simulation
        timestep, mass_scale = sim.mujoco_timestep, sim.mass_scale

        self._mj = mujoco
        self.setup = setup
        self.joint_names = list(setup.joint_names)
        self.n = len(self.joint_names)
        urdf = setup.model.source
        kind = getattr(setup.model, 'source_kind', 'urdf')
        if urdf is None:
            raise ValueError('the MuJoCo plant needs the robot loaded from a URDF, xacro or MJCF file')
        if kind == 'sdf':
            from ..files.parameter_file import ConfigError

            raise ConfigError(
                f'the MuJoCo plant cannot load SDF ({urdf}); describe the robot by robot.mjcf or '
                'robot.urdf for it, or use the UK plant',
                file=setup.config_path,
                key='robot.sdf',
            )
        self.urdf_path = urdf
        try:
            if kind == 'xacro':  # the expanded URDF the model was built from
                spec = mujoco.MjSpec.from_string(setup.model.source_text)
            else:
                spec = mujoco.MjSpec.from_file(str(urdf))
        except ValueError as exc:
            raise self._load_error(exc) from None
        # the file's own equalities (MJCF closures and couplings, URDF mimic) are the setup's passive rows
        # (description.py), which _add_closures adds back from the setup, with this plant's solref, like any
        # other passive row; the file's actuators (MJCF servos with their own gains and bias) are replaced by
        # the setup's effort sources (_apply)
        for eq in list(spec.equalities):
            spec.delete(eq)
        for actuator in list(spec.actuators):
            spec.delete(actuator)
        spec.option.timestep = float(timestep)
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_RK4
        spec.option.gravity = np.asarray(setup.model.gravity, dtype=float)
        self._closure_sites = []
        self._joint_equalities = []
        self._add_closures(spec, solref_time or max(8.0 * timestep, 2e-3))
        try:
            self.model = spec.compile()
        except ValueError as exc:
            raise self._load_error(exc) from None
        self._set_joint_dynamics()
        if not joint_limits:
            self.model.jnt_limited[:] = 0
        if mass_scale != 1.0:
            self.model.body_mass[:] *= mass_scale
            self.model.body_inertia[:] *= mass_scale
        self.data = mujoco.MjData(self.model)
        jid = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name) for name in self.joint_names]
        if min(jid) < 0:
            missing = [n for n, j in zip(self.joint_names, jid) if j < 0]
            raise ValueError(f'MuJoCo model of {self.urdf_path} lacks joints {missing}')
        self._qadr = np.array([self.model.jnt_qposadr[j] for j in jid])
        self._vadr = np.array([self.model.jnt_dofadr[j] for j in jid])
        self._actuators = self._actuator_targets(setup)
        self.timestep = float(timestep)
        self.reset(setup.q0, setup.qd0)

    def _load_error(self, exc):
        """A MuJoCo parse/compile error as a ConfigError (exit 2) naming the file and the element."""
        import re
        import xml.etree.ElementTree as ET

        from ..files.parameter_file import ConfigError

        message = ' '.join(str(exc).split())
        element = ''
        if 'Element' not in message:  # e.g. "Error opening file 'x.stl'": find who names that file
            match = re.search(r"file '([^']+)'", message)
            if match and self.setup.model.source_kind != 'xacro':
                try:
                    root = ET.parse(self.urdf_path).getroot()
                except ET.ParseError:
                    root = None
                wanted = Path(match.group(1)).name
                for el in root.iter() if root is not None else ():
                    if Path(el.get('file') or el.get('filename') or '.').name == wanted:
                        attrs = ' '.join(f'{k}="{v}"' for k, v in el.attrib.items())
                        element = f' (element <{el.tag} {attrs}>)'
                        break
        key = f'robot.{self.setup.model.source_kind if self.setup.model.source_kind != "xacro" else "urdf"}'
        return ConfigError(
            f'MuJoCo cannot load {self.urdf_path}: {message}{element}', file=self.setup.config_path, key=key
        )

    def _set_joint_dynamics(self):
        """Passive joint dynamics in MuJoCo: an MJCF keeps the file's (MuJoCo reads them itself; the embedded
        plant's come from the same attributes, uk_controller.files.description_extras, and must equal them: a
        difference is an error naming the joint), a URDF gets the model's;
        ``robot.joint_dynamics: none`` removes them in both plants. Coulomb friction stays MuJoCo's
        ``frictionloss`` (a soft dry-friction constraint, not our tanh)."""
        m, jd = self.model, self.setup.model.joint_dynamics
        kind = getattr(self.setup.model, 'source_kind', 'urdf')
        jid = [self._mj.mj_name2id(m, self._mj.mjtObj.mjOBJ_JOINT, name) for name in self.joint_names]
        for i, j in enumerate(jid):
            if j < 0:
                continue
            dof, qadr = m.jnt_dofadr[j], m.jnt_qposadr[j]
            ours = jd.per_joint(i) if jd is not None else (0.0, 0.0, 0.0, 0.0, 0.0)
            if kind == 'mjcf' and jd is not None:
                # MuJoCo read the file itself: the embedded plant must have read the same values
                mine = (
                    m.dof_damping[dof],
                    m.jnt_stiffness[j],
                    m.qpos_spring[qadr] if m.jnt_stiffness[j] else ours[2],
                    m.dof_armature[dof],
                    m.dof_frictionloss[dof],
                )
                if not np.allclose(ours, mine, rtol=1e-9, atol=1e-12):
                    from ..files.parameter_file import ConfigError

                    raise ConfigError(
                        f'{self.urdf_path}: joint {self.joint_names[i]!r}: uk_controller read damping, '
                        f'stiffness, springref, armature, frictionloss {list(ours)} but MuJoCo compiled '
                        f'{[float(x) for x in mine]} (a reader limitation; please report it with the '
                        'file)',
                        file=self.setup.config_path,
                        key='robot.mjcf',
                    )
                continue
            d, k, ref, arm, f = ours
            m.dof_damping[dof], m.jnt_stiffness[j], m.qpos_spring[qadr] = d, k, ref
            m.dof_armature[dof], m.dof_frictionloss[dof] = arm, f

    @classmethod
    def from_setup(cls, setup, *, joint_limits=True):
        """The plant of `setup` as its resolved settings say (``simulation.mujoco_timestep``,
        ``simulation.mass_scale``); the UK plant's integrator settings do not apply."""
        return cls(setup, joint_limits=joint_limits)

    # -------------------------------------------------------------- building

    def _body_of_frame(self, frame):
        """(MuJoCo body name, position of the frame in that body) for a Pinocchio frame."""
        pm = self.setup.model.model
        fid = pm.getFrameId(frame)
        if fid >= pm.nframes:
            raise ValueError(f'closure frame {frame!r} is not in {self.urdf_path}')
        f = pm.frames[fid]
        joint = f.parentJoint
        body = 'world' if joint == 0 else self._joint_child_body[pm.names[joint]]
        return body, f.placement

    def _add_closures(self, spec, solref_time):
        mj = self._mj
        try:
            urdf_tree = spec.compile()  # to find which body carries each joint
        except ValueError as exc:
            raise self._load_error(exc) from None
        self._joint_child_body = {
            urdf_tree.joint(i).name: urdf_tree.body(urdf_tree.jnt_bodyid[i]).name for i in range(urdf_tree.njnt)
        }
        cfg = self.setup.constraints
        for name in self.setup.passive.names:
            spec_c = cfg.get(name)
            if spec_c is None or spec_c.type != 'loop_closure':
                self._add_joint_equality(spec, urdf_tree, name, self.setup.passive[name], solref_time)
                continue
            sites = []
            for k, frame in enumerate(spec_c.frames):
                body, placement = self._body_of_frame(frame)
                site = spec.body(body).add_site(name=f'closure_{name}_{k}')
                site.pos = np.asarray(placement.translation, dtype=float)
                quat = np.zeros(4)
                mj.mju_mat2Quat(quat, np.asarray(placement.rotation, dtype=float).reshape(-1))
                site.quat = quat
                sites.append(site.name)
            weld = spec_c.mode == 'weld'
            eq = spec.add_equality(
                type=mj.mjtEq.mjEQ_WELD if weld else mj.mjtEq.mjEQ_CONNECT,
                objtype=mj.mjtObj.mjOBJ_SITE,
                name1=sites[0],
                name2=sites[1],
            )
            eq.solref = [solref_time, 1.0]
            self._closure_sites.append(sites)

    def _add_joint_equality(self, spec, tree, name, term, solref_time):
        """A passive joint_linear row with one or two joints, or a joint_polynomial row, as MuJoCo's joint
        equality ``q1 - q1_0 = sum c_k (q2 - q2_0)^k`` (q_0: MuJoCo's qpos0)."""
        from ..constraints import JointLinear, JointPolynomial
        from ..files.parameter_file import ConfigError

        mj = self._mj

        def qpos0(index):
            j = mj.mj_name2id(tree, mj.mjtObj.mjOBJ_JOINT, self.joint_names[index])
            return float(tree.qpos0[tree.jnt_qposadr[j]])

        def refuse(why):
            return ConfigError(
                f'the MuJoCo plant cannot express the passive constraint {name!r}: {why}',
                file=self.setup.config_path,
                key=f'constraints.{name}',
            )

        if isinstance(term, JointPolynomial):
            i1, i2 = term.index
            if abs(term.reference[0] - qpos0(i1)) > 1e-12 or abs(term.reference[1] - qpos0(i2)) > 1e-12:
                raise refuse('its reference differs from the joints\' reference positions (MJCF ref)')
            coef = term.c
        elif isinstance(term, JointLinear) and term.constant_value is not None:
            nz = np.flatnonzero(term.c)
            if not 1 <= nz.size <= 2:
                raise refuse(
                    f'a joint equality couples one or two joints, this row has {nz.size} non-zero coefficients'
                )
            i1 = int(nz[0])
            c1, value = term.c[i1], term.constant_value
            if nz.size == 1:  # q1 = value / c1
                i2, coef = None, [value / c1 - qpos0(i1), 0.0, 0.0, 0.0, 0.0]
            else:  # q1 = value / c1 + k q2,  k = -c2 / c1
                i2 = int(nz[1])
                k = -term.c[i2] / c1
                coef = [value / c1 - qpos0(i1) + k * qpos0(i2), k, 0.0, 0.0, 0.0]
        else:
            raise refuse(f'{type(term).__name__} rows (time-varying or of other types) have no MuJoCo equality')
        eq = spec.add_equality(
            type=mj.mjtEq.mjEQ_JOINT,
            objtype=mj.mjtObj.mjOBJ_JOINT,
            name=f'uk_{name}',
            name1=self.joint_names[i1],
            name2='' if i2 is None else self.joint_names[i2],
        )
        eq.data[:5] = np.asarray(coef, dtype=float)
        eq.solref = [solref_time, 1.0]
        self._joint_equalities.append(f'uk_{name}')

    def coupling_residual(self):
        """MuJoCo's own violation of each joint equality (``efc_pos`` of its row), in setup order."""
        mj, m, d = self._mj, self.model, self.data
        out = []
        for eq_name in self._joint_equalities:
            eid = mj.mj_name2id(m, mj.mjtObj.mjOBJ_EQUALITY, eq_name)
            rows = np.flatnonzero(
                (d.efc_type[: d.nefc] == mj.mjtConstraint.mjCNSTR_EQUALITY) & (d.efc_id[: d.nefc] == eid)
            )
            out.append(float(d.efc_pos[rows[0]]) if rows.size else float('nan'))
        return np.array(out)

    def _actuator_targets(self, setup):
        """From the setup's actuator map (not the raw YAML: a setup without an `actuators` section
        has one motor per joint)."""
        mj = self._mj
        targets = []
        for act in setup.actuators.actuators:
            if act.joint is not None:
                jid = mj.mj_name2id(self.model, mj.mjtObj.mjOBJ_JOINT, self.joint_names[act.joint])
                targets.append(('joint', int(self.model.jnt_dofadr[jid]), None, None))
            elif act.column is not None:  # a fixed tendon: generalized force column * u
                nz = np.flatnonzero(act.column)
                dofs = np.array(
                    [
                        self.model.jnt_dofadr[mj.mj_name2id(self.model, mj.mjtObj.mjOBJ_JOINT, self.joint_names[i])]
                        for i in nz
                    ]
                )
                targets.append(('column', dofs, None, np.asarray(act.column)[nz]))
            else:
                ids = [
                    mj.mj_name2id(self.model, mj.mjtObj.mjOBJ_BODY, self._fused('world' if x is None else x))
                    for x in act.bodies
                ]
                axis = np.asarray(act.axis, dtype=float)
                targets.append(('between', ids[0], ids[1], axis / np.linalg.norm(axis)))
        return targets

    def _fused(self, link):
        """MuJoCo body that carries URDF link `link` (fixed links are fused into their parent)."""
        if link == 'world':
            return 'world'
        pm = self.setup.model.model
        fid = pm.getFrameId(link)
        joint = pm.frames[fid].parentJoint
        return 'world' if joint == 0 else self._joint_child_body[pm.names[joint]]

    # -------------------------------------------------------------- plant interface

    def reset(self, q, qd, t=0.0):
        mj = self._mj
        mj.mj_resetData(self.model, self.data)
        self.data.qpos[self._qadr] = q
        self.data.qvel[self._vadr] = qd
        self.data.time = float(t)
        mj.mj_forward(self.model, self.data)

    @property
    def q(self):
        return self.data.qpos[self._qadr].copy()

    @property
    def qd(self):
        return self.data.qvel[self._vadr].copy()

    @property
    def t(self):
        return float(self.data.time)

    def _apply(self, u):
        d = self.data
        d.qfrc_applied[:] = 0.0
        d.xfrc_applied[:] = 0.0
        for value, (kind, a, b, axis) in zip(u, self._actuators):
            if kind == 'joint':
                d.qfrc_applied[a] += value
            elif kind == 'column':
                d.qfrc_applied[a] += value * axis
            else:
                d.xfrc_applied[a, 3:] += value * axis
                if b != 0:
                    d.xfrc_applied[b, 3:] -= value * axis

    def step(self, u, dt):
        """Advance by dt with efforts u held (an integer number of MuJoCo steps)."""
        self._apply(np.asarray(u, dtype=float))
        steps = max(1, int(round(dt / self.timestep)))
        t_end = self.data.time + dt
        for _ in range(steps):
            self._mj.mj_step(self.model, self.data)
        self.data.time = t_end
        return self.q, self.qd

    def closure_residual(self):
        """Distances between the paired closure sites (m)."""
        out = []
        for s1, s2 in self._closure_sites:
            p1 = self.data.site(s1).xpos
            p2 = self.data.site(s2).xpos
            out.append(float(np.linalg.norm(p1 - p2)))
        return np.array(out)
