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

MuJoCo closures are soft (solref time constant), so closure residuals of order
1e-5 m are physics of this engine, not controller errors.
"""
from __future__ import annotations

import numpy as np

from .. import settings as S


class MujocoPlant:
    """MuJoCo model of a robot setup with the interface of :class:`UKPlant`."""

    def __init__(self, setup, *, timestep=2.5e-4, mass_scale=1.0, solref_time=None, joint_limits=True):
        import mujoco

        self._mj = mujoco
        self.setup = setup
        self.joint_names = list(setup.joint_names)
        self.n = len(self.joint_names)
        urdf = setup.model.source
        kind = getattr(setup.model, 'source_kind', 'urdf')
        if urdf is None:
            raise ValueError('the MuJoCo plant needs the robot loaded from a URDF, xacro or MJCF file')
        if kind == 'sdf':
            from ..config import ConfigError
            raise ConfigError(f'the MuJoCo plant cannot load SDF ({urdf}); describe the robot by robot.mjcf or '
                              'robot.urdf for it, or use the UK plant', file=setup.config_path, key='robot.sdf')
        self.urdf_path = urdf
        if kind == 'xacro':                 # the expanded URDF the model was built from
            spec = mujoco.MjSpec.from_string(setup.model.source_text)
        else:
            spec = mujoco.MjSpec.from_file(str(urdf))
        if kind == 'mjcf':
            # the file's own equalities are the setup's passive closures (description.py), which
            # _add_closures adds back from the setup, with this plant's solref, like any other closure
            for eq in list(spec.equalities):
                spec.delete(eq)
        spec.option.timestep = float(timestep)
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_RK4
        spec.option.gravity = np.asarray(setup.model.gravity, dtype=float)
        self._closure_sites = []
        self._add_closures(spec, solref_time or max(8.0 * timestep, 2e-3))
        self.model = spec.compile()
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

    @classmethod
    def from_setup(cls, setup, *, mass_scale=1.0, **options):
        sim = dict(setup.config.get('simulation', {}) or {})
        options.setdefault('timestep', float(sim.get('mujoco_timestep', S.default('simulation.mujoco_timestep'))))
        options.pop('integrator', None)
        options.pop('substeps', None)
        return cls(setup, mass_scale=mass_scale, **options)

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
        urdf_tree = spec.compile()  # to find which body carries each joint
        self._joint_child_body = {urdf_tree.joint(i).name: urdf_tree.body(urdf_tree.jnt_bodyid[i]).name
                                  for i in range(urdf_tree.njnt)}
        cfg = self.setup.config.get('constraints', {}) or {}
        for name in self.setup.passive.names:
            spec_c = cfg.get(name, {}) or {}
            if spec_c.get('type') != 'loop_closure':
                raise ValueError(f'MuJoCo plant supports loop_closure passive constraints only, not {name!r}')
            sites = []
            for k, frame in enumerate(spec_c['frames']):
                body, placement = self._body_of_frame(frame)
                site = spec.body(body).add_site(name=f'closure_{name}_{k}')
                site.pos = np.asarray(placement.translation, dtype=float)
                quat = np.zeros(4)
                mj.mju_mat2Quat(quat, np.asarray(placement.rotation, dtype=float).reshape(-1))
                site.quat = quat
                sites.append(site.name)
            weld = spec_c.get('mode', 'position') == 'weld'
            eq = spec.add_equality(type=mj.mjtEq.mjEQ_WELD if weld else mj.mjtEq.mjEQ_CONNECT,
                                   objtype=mj.mjtObj.mjOBJ_SITE, name1=sites[0], name2=sites[1])
            eq.solref = [solref_time, 1.0]
            self._closure_sites.append(sites)

    def _actuator_targets(self, setup):
        """From the setup's actuator map (not the raw YAML: a setup without an `actuators` section
        has one motor per joint)."""
        mj = self._mj
        targets = []
        for act in setup.actuators.actuators:
            if act.joint is not None:
                jid = mj.mj_name2id(self.model, mj.mjtObj.mjOBJ_JOINT, self.joint_names[act.joint])
                targets.append(('joint', int(self.model.jnt_dofadr[jid]), None, None))
            else:
                ids = [mj.mj_name2id(self.model, mj.mjtObj.mjOBJ_BODY, self._fused('world' if x is None else x))
                       for x in act.bodies]
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
