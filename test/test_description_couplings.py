"""Robot descriptions kept whole: couplings become exact passive rows, passive joint dynamics reach
the model and both plants, tendon actuators, MuJoCo load errors for people.

References are independent of the code under test: MuJoCo's own compiled model (its reading of the MJCF's
default classes, tendon Jacobian, joint-equality violation ``efc_pos``), finite differences, Pinocchio's CRBA
and RNEA, and the other plant."""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from variants import variant

from uk_controller import cli
from uk_controller.constraints import ConstraintStack, JointPolynomial
from uk_controller.control.controller import ControllerCore
from uk_controller.files import description
from uk_controller.files.parameter_file import ConfigError
from uk_controller.kernels import jit
from uk_controller.robots import load_robot, setup_from_settings
from uk_controller.settings.resolve import resolve
from uk_controller.sim.closed_loop import simulate
from uk_controller.sim.uk_plant import UKPlant

mujoco = pytest.importorskip('mujoco')

ROOT = Path(__file__).resolve().parent.parent
GRIPPER_XML = ROOT / 'mjcf' / 'gripper_2f85_like.xml'
GRIPPER = ROOT / 'test' / 'data' / 'gripper_mjcf.yaml'
MIMIC = ROOT / 'test' / 'data' / 'mimic_gripper.yaml'


def mj_joint_values(model, name):
    """MuJoCo's compiled passive values of joint `name`: damping, stiffness, springref, armature, frictionloss."""
    j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
    dof, qadr = model.jnt_dofadr[j], model.jnt_qposadr[j]
    return (
        model.dof_damping[dof],
        model.jnt_stiffness[j],
        model.qpos_spring[qadr],
        model.dof_armature[dof],
        model.dof_frictionloss[dof],
    )


def with_params(setup, change, overrides=None):
    """A setup rebuilt from `setup`'s parameters after `change(params)`, with dotted `overrides`."""
    from uk_controller.files.parameter_file import load_config

    params = load_config(setup.config_path)[0]
    change(params)
    return setup_from_settings(resolve(setup.config_path, overrides, params=params))


# ----------------------------------------------------------------------------- reading the files


def test_mjcf_joint_dynamics_read_as_mujoco_compiles_them(tmp_path):
    """Default classes (nested, childclass), compiler angle (degrees by default) and every passive attribute,
    against MuJoCo's compiled model of the same file."""
    setup = load_robot(GRIPPER)
    mj = mujoco.MjModel.from_xml_path(str(GRIPPER_XML))
    jd = setup.model.joint_dynamics
    for i, name in enumerate(setup.joint_names):
        np.testing.assert_allclose(jd.per_joint(i), mj_joint_values(mj, name), rtol=0, atol=1e-15)
    # degrees (no <compiler angle>), a joint's own attributes over its class, frictionloss
    text = GRIPPER_XML.read_text().replace(
        '<compiler angle="radian" autolimits="true"/>', '<compiler autolimits="true"/>'
    )
    text = text.replace('range="-0.3 1.0"', 'range="-20 60"').replace('range="-1.6 1.6"', 'range="-90 90"')
    text = text.replace('range="-1.2 1.2"', 'range="-70 70"').replace('springref="0.1"', 'springref="6"')
    text = text.replace(
        '<joint name="left_driver_joint" class="driver"/>',
        '<joint name="left_driver_joint" class="driver" damping="0.3" frictionloss="0.02"/>',
    )
    (tmp_path / 'deg.xml').write_text(text)
    _, _, extras = description.read_mjcf(tmp_path / 'deg.xml')
    mj = mujoco.MjModel.from_xml_path(str(tmp_path / 'deg.xml'))
    fields = ('damping', 'stiffness', 'spring_reference', 'armature', 'friction')
    for name in setup.joint_names:
        ours = extras.joint_dynamics.get(name, {})
        np.testing.assert_allclose(
            [ours.get(f, 0.0) for f in fields], mj_joint_values(mj, name), rtol=1e-12, atol=1e-15
        )


def test_gripper_couplings_and_tendon_from_the_file():
    """The unedited gripper: two closures and the driver coupling are passive rows (the coupling a joint_linear
    row, not an independent joint); the tendon actuator's column is MuJoCo's tendon Jacobian."""
    setup = load_robot(GRIPPER)
    assert setup.passive.names == ['right_closure', 'left_closure', 'drivers_equal']
    coupling = setup.passive['drivers_equal']
    assert coupling.kind == 'joint_linear' and setup.passive.m == 7
    expected = np.zeros(setup.n)
    expected[setup.joint_names.index('right_driver_joint')] = 1.0
    expected[setup.joint_names.index('left_driver_joint')] = -1.0
    np.testing.assert_array_equal(coupling.c, expected)
    mj = mujoco.MjModel.from_xml_path(str(GRIPPER_XML))
    data = mujoco.MjData(mj)
    tid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_TENDON, 'split')
    adr = [mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in setup.joint_names]

    def length(q):
        data.qpos[adr] = q
        mujoco.mj_forward(mj, data)
        return data.ten_length[tid]

    q = np.random.default_rng(3).normal(size=setup.n) * 0.2
    column = [(length(q + 1e-6 * e) - length(q - 1e-6 * e)) / 2e-6 for e in np.eye(setup.n)]  # dL/dq
    np.testing.assert_allclose(setup.actuators.matrix(setup.model)[:, 0], column, atol=1e-9)


def test_mimic_joints_become_rows_and_dynamics_reach_the_model():
    setup = load_robot(MIMIC)
    assert setup.joint_names == ['wrist_joint', 'left_finger_joint', 'right_finger_joint']  # still coordinates
    assert setup.passive.names == ['mimic_right_finger_joint']
    np.testing.assert_array_equal(setup.passive['mimic_right_finger_joint'].c, [0.0, 1.0, 1.0])  # q_r = -q_l
    jd = setup.model.joint_dynamics
    np.testing.assert_array_equal(jd.damping, [0.05, 0.01, 0.01])
    np.testing.assert_array_equal(jd.friction, [0.0, 0.002, 0.002])
    # MuJoCo's URDF importer reads the same <dynamics>
    mj = mujoco.MjModel.from_xml_path(str(ROOT / 'test' / 'data' / 'mimic_gripper.urdf'))
    for i, name in enumerate(setup.joint_names):
        d, _, _, _, f = mj_joint_values(mj, name)
        assert (d, f) == (jd.damping[i], jd.friction[i])


def test_yaml_may_not_duplicate_or_change_a_description_coupling(tmp_path):
    setup = load_robot(GRIPPER)

    def duplicate(params):
        params['constraints'] = {
            'names': ['mine', 'right_driver_angle'],
            'right_driver_angle': params['constraints']['right_driver_angle'],
            'mine': {
                'role': 'passive',
                'type': 'joint_linear',
                'joints': ['left_driver_joint', 'right_driver_joint'],
                'coefficients': [2.0, -2.0],
                'value': 0.0,
            },
        }

    with pytest.raises(ConfigError, match="constraints.mine.*repeats.*drivers_equal"):
        with_params(setup, duplicate)

    def change(params):
        params['constraints']['drivers_equal'] = {'coefficients': [1.0, -0.5]}

    with pytest.raises(ConfigError, match='constraints.drivers_equal.coefficients'):
        with_params(setup, change)


# ----------------------------------------------------------------------------- the polynomial row


def poly_setup(tmp_path, polycoef='0.1 0.8 -0.3 0.2 0.05', ref='0.2'):
    text = GRIPPER_XML.read_text().replace('polycoef="0 1 0 0 0"', f'polycoef="{polycoef}"')
    if ref is not None:
        text = text.replace(
            '<joint name="left_driver_joint" class="driver"/>',
            f'<joint name="left_driver_joint" class="driver" ref="{ref}"/>',
        )
    (tmp_path / 'poly.xml').write_text(text)
    yaml_text = GRIPPER.read_text().replace('../../mjcf/gripper_2f85_like.xml', str(tmp_path / 'poly.xml'))
    (tmp_path / 'poly.yaml').write_text(yaml_text)
    return load_robot(tmp_path / 'poly.yaml')


@pytest.mark.slow
def test_nonlinear_polycoef_row_against_finite_differences_and_mujoco(tmp_path):
    setup = poly_setup(tmp_path)
    term = setup.passive['drivers_equal']
    assert isinstance(term, JointPolynomial)
    model = setup.model
    rng = np.random.default_rng(7)
    stack = ConstraintStack([term], setup.n, backend='numpy')
    for _ in range(5):
        q, qd, qdd = rng.normal(size=(3, setup.n)) * 0.4
        model.compute(q, qd)
        rows = stack.evaluate(model, q, qd, 0.0)
        phi = lambda x: ConstraintStack([term], setup.n, 'numpy').evaluate(model, x, qd, 0.0).phi[0]  # noqa: E731
        h = 1e-6
        grad = np.array([(phi(q + h * e) - phi(q - h * e)) / (2 * h) for e in np.eye(setup.n)])
        np.testing.assert_allclose(rows.A[0], grad, atol=1e-8)
        np.testing.assert_allclose(rows.phidot[0], grad @ qd, atol=1e-8)
        # phi'' along q(t) = q + qd t + qdd t^2 / 2 equals A qdd - b (b = P'' q2'^2)
        s = 1e-4
        path = [phi(q + qd * t + 0.5 * qdd * t * t) for t in (-s, 0.0, s)]
        second = (path[0] - 2 * path[1] + path[2]) / (s * s)
        assert abs(second - (rows.A[0] @ qdd - rows.b[0])) < 1e-5 * max(1.0, abs(rows.b[0]))
        if jit.AVAILABLE:  # the compiled twin
            compiled = ConstraintStack([term], setup.n, backend='compiled').evaluate(model, q, qd, 0.0)
            for key in ('phi', 'phidot', 'A', 'b'):
                np.testing.assert_allclose(getattr(compiled, key), getattr(rows, key), rtol=0, atol=1e-15)
    if jit.AVAILABLE:  # the row inside the fused compiled program, and the backends
        program = setup.passive.create_data(model, setup.servo)
        assert program is not None and ControllerCore(setup).backend.name == 'compiled'
        q, qd = rng.normal(size=(2, setup.n)) * 0.4
        model.compute(q, qd)
        program.run(q, qd, 0.3)
        rows = setup.passive.with_backend('numpy').evaluate(model, q, qd, 0.3)
        mp = setup.passive.m
        np.testing.assert_allclose(program.phi[:mp], rows.phi, atol=1e-14)
        np.testing.assert_allclose(program.A[:mp], rows.A, atol=1e-13)
        np.testing.assert_allclose(program.b[:mp], rows.b, atol=1e-12)
    # MuJoCo's own equality: a state on our row has zero violation in MuJoCo's constraint (same polynomial)
    mj = mujoco.MjModel.from_xml_path(str(tmp_path / 'poly.xml'))
    data = mujoco.MjData(mj)
    qr = 0.3
    i1, i2 = term.index
    q = np.zeros(setup.n)
    q[i2] = qr
    q[i1] = term.reference[0] + term.polynomial(qr - term.reference[1])[0]
    adr = [mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in setup.joint_names]
    data.qpos[adr] = q
    mujoco.mj_forward(mj, data)
    eid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_EQUALITY, 'drivers_equal')
    row = np.flatnonzero((data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY) & (data.efc_id == eid))
    assert abs(data.efc_pos[row[0]]) < 1e-14
    q[i1] += 0.01  # and off the row, MuJoCo sees the same violation
    data.qpos[adr] = q
    mujoco.mj_forward(mj, data)
    assert abs(abs(data.efc_pos[row[0]]) - 0.01) < 1e-14


@pytest.mark.slow
def test_nonlinear_coupling_held_by_both_plants(tmp_path):
    setup = poly_setup(tmp_path, '0 0.9 0.3 0 0', ref=None)  # q = 0 is on the row
    mp = setup.passive.m
    for plant, bound in (('uk', 1e-11), ('mujoco', 1e-3)):
        res = simulate(variant(setup, {'simulation.duration': 1.0, 'simulation.plant': plant}))
        coupling = np.abs(res.phi[:, mp - 1]).max()
        print(f'{plant}: polynomial coupling residual max {coupling:.3e}')
        assert coupling < bound and res.ok.all()


# ----------------------------------------------------------------------------- passive dynamics in the model


@pytest.mark.slow
def test_model_and_compiled_tree_carry_armature_and_joint_forces():
    """M = CRBA + diag(armature), h = RNEA(q, q', 0) + d q' + k (q - q_ref) + f tanh(q'/v): RobotModel (NumPy
    path) and the kernels' tree pass against Pinocchio with the terms added by hand."""
    for path in (GRIPPER, MIMIC):
        setup = load_robot(path)
        model, jd = setup.model, setup.model.joint_dynamics
        pm = model.model.copy()
        pm.armature[:] = 0.0
        pdata = pm.createData()
        rng = np.random.default_rng(11)
        tree = model.compiled_tree()
        for _ in range(4):
            q, qd = rng.normal(size=(2, setup.n)) * 0.5
            M_ref = pin.crba(pm, pdata, q)
            M_ref = np.triu(M_ref) + np.triu(M_ref, 1).T + np.diag(jd.armature)
            h_ref = (
                pin.rnea(pm, pdata, q, qd, np.zeros(setup.n))
                + jd.damping * qd
                + jd.stiffness * (q - jd.spring_reference)
                + jd.friction * np.tanh(qd / jd.friction_velocity)
            )
            model.compute(q, qd)
            np.testing.assert_allclose(model.M, M_ref, rtol=1e-13, atol=1e-16)
            np.testing.assert_allclose(model.h, h_ref, rtol=1e-12, atol=1e-15)
            # forward and inverse dynamics agree with M and h
            tau = rng.normal(size=setup.n) * 0.1
            np.testing.assert_allclose(
                model.forward_dynamics(q, qd, tau), np.linalg.solve(M_ref, tau - h_ref), rtol=1e-9
            )
            np.testing.assert_allclose(
                model.inverse_dynamics(q, qd, np.ones(setup.n)), M_ref.sum(axis=1) + h_ref, rtol=1e-12, atol=1e-15
            )
            if jit.AVAILABLE and tree is not None:
                from uk_controller.kernels.codes import TREE_SCRATCH_PER_JOINT
                from uk_controller.kernels.dynamics import tree_terms

                parents, jtype, mf, grav = tree
                nj = parents.size
                oR, opos = np.zeros((nj, 3, 3)), np.zeros((nj, 3))
                S, M, h = np.zeros((6, setup.n)), np.zeros((setup.n, setup.n)), np.zeros(setup.n)
                tree_terms(
                    q, qd, parents, jtype, mf, grav, oR, opos, S, M, h, np.zeros(TREE_SCRATCH_PER_JOINT * nj + 12)
                )
                np.testing.assert_allclose(M, M_ref, rtol=1e-12, atol=1e-15)
                np.testing.assert_allclose(h, h_ref, rtol=1e-11, atol=1e-14)


@pytest.mark.slow
@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
def test_compiled_plant_equals_numpy_plant_with_joint_dynamics():
    """The embedded plant's compiled period (kernels/plant.py + dynamics.py) against its NumPy reference on
    the gripper (closures, coupling, springs, damping, armature) and the mimic URDF (friction)."""
    for path in (GRIPPER, MIMIC):
        setup = load_robot(path)
        runs = {}
        for backend in ('compiled', 'numpy'):
            plant = UKPlant(setup, backend=backend)
            u = np.full(setup.actuators.p, 0.05)
            for _ in range(200):
                plant.step(u, 1e-3)
            runs[backend] = np.concatenate((plant.q, plant.qd))
        assert UKPlant(setup, backend='compiled').backend.name == 'compiled'
        np.testing.assert_allclose(runs['compiled'], runs['numpy'], rtol=0, atol=1e-10)


@pytest.mark.slow
def test_friction_compensation_setting():
    setup = load_robot(MIMIC)
    assert ControllerCore(setup).model is setup.model  # default: compensate (same model)
    off = with_params(setup, lambda p: p.setdefault('control', {}).update(friction_compensation=False))
    ctrl = ControllerCore(off)
    assert ctrl.model is not off.model and not ctrl.model.joint_dynamics.has_friction
    assert off.model.joint_dynamics.has_friction  # the plant keeps it
    np.testing.assert_array_equal(ctrl.model.joint_dynamics.damping, off.model.joint_dynamics.damping)
    none = with_params(setup, lambda p: p['robot'].update(joint_dynamics='none'))
    assert none.model.joint_dynamics is None and not none.model.model.armature.any()


# ----------------------------------------------------------------------------- both plants


def free_response(setup, plant_name, duration=1.0, dt=1e-3):
    """q(t) with zero effort, every dt for `duration` seconds."""
    from uk_controller.sim.mujoco_plant import MujocoPlant

    plant = UKPlant.from_setup(setup) if plant_name == 'uk' else MujocoPlant.from_setup(setup, joint_limits=False)
    u = np.zeros(setup.actuators.p)
    out = [plant.q.copy()]
    for _ in range(int(round(duration / dt))):
        plant.step(u, dt)
        out.append(plant.q.copy())
    return np.array(out)


@pytest.mark.slow
def test_free_response_of_the_gripper_agrees_between_plants():
    """Zero effort for 1 s from rest (the gripper hangs, fingers down): gravity and the springs (springref
    0.1 rad), damping and armature move the linkage; the embedded and the MuJoCo plant agree, with the passive
    dynamics and with them off in both."""
    setup = load_robot(GRIPPER)
    off = with_params(setup, lambda p: p['robot'].update(joint_dynamics='none'))
    traj = {
        (name, kind): free_response(s, kind) for name, s in (('on', setup), ('off', off)) for kind in ('uk', 'mujoco')
    }
    diff_on = np.abs(traj['on', 'uk'] - traj['on', 'mujoco']).max()
    diff_off = np.abs(traj['off', 'uk'] - traj['off', 'mujoco']).max()
    effect = np.abs(traj['on', 'uk'] - traj['off', 'uk']).max()
    print(
        f'free response 1 s: |q_uk - q_mujoco| max {diff_on:.3e} rad with joint dynamics, {diff_off:.3e} '
        f'without; the joint dynamics move q by up to {effect:.3e} rad'
    )
    assert effect > 0.05  # the dynamics matter, so agreement is not trivial
    assert diff_on < 2e-3 and diff_off < 2e-3


@pytest.mark.slow
def test_gripper_runs_unedited_on_both_plants():
    """Closure and coupling residuals exact on the embedded plant, soft but small on MuJoCo; the task tracked."""
    setup = load_robot(GRIPPER)
    mp = setup.passive.m
    for plant, bound in (('uk', 1e-11), ('mujoco', 1e-4)):
        res = simulate(load_robot(GRIPPER, {'simulation.duration': 2.0, 'simulation.plant': plant}))
        closures = np.abs(res.phi[:, : mp - 1]).max()
        coupling = np.abs(res.phi[:, mp - 1]).max()
        task = np.abs(res.task_error[400:]).max()
        print(
            f'{plant}: closure residual {closures:.3e} m, coupling residual {coupling:.3e} rad, task error after '
            f'0.4 s {task:.3e} rad, peak effort {np.abs(res.effort).max():.3f} N'
        )
        assert res.ok.all() and closures < bound and coupling < bound and task < 1e-3


@pytest.mark.slow
def test_mimic_urdf_on_both_plants():
    for plant, bound in (('uk', 1e-12), ('mujoco', 1e-3)):
        res = simulate(load_robot(MIMIC, {'simulation.duration': 1.5, 'simulation.plant': plant}))
        mimic = np.abs(res.q[:, 1] + res.q[:, 2]).max()  # q_right = -q_left
        print(
            f'{plant}: mimic residual {mimic:.3e} rad, task error after 0.3 s '
            f'{np.abs(res.task_error[300:]).max():.3e} rad'
        )
        assert mimic < bound and res.ok.all()
        assert np.abs(res.q[:, 1]).max() > 0.3  # the fingers did move


# ----------------------------------------------------------------------------- MuJoCo load errors

MESH = '<asset><mesh name="link_mesh" file="meshes/link_a1.stl"/></asset>\n  <worldbody>'


@pytest.mark.parametrize(
    'edits, element',
    [
        (
            (
                ('<worldbody>', MESH),
                ('<geom type="box" pos="0.122 0 0"', '<geom type="mesh" mesh="link_mesh" pos="0.122 0 0"'),
            ),
            '<mesh name="link_mesh" file="meshes/link_a1.stl">',
        ),  # a mesh MuJoCo cannot open
        ((('<inertial pos="0.115 0 0"', '<inertial undecodable="1" pos="0.115 0 0"'),), "Element 'inertial'"),
    ],
)
@pytest.mark.slow
def test_mujoco_compile_error_is_exit_2_naming_file_and_element(tmp_path, capsys, edits, element):
    text = (ROOT / 'mjcf' / 'five_bar.xml').read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    (tmp_path / 'five_bar.xml').write_text(text)
    yaml_text = (
        (ROOT / 'config' / 'five_bar_mjcf.yaml')
        .read_text()
        .replace('package://uk_controller/mjcf/five_bar.xml', 'five_bar.xml')
    )
    (tmp_path / 'setup.yaml').write_text(yaml_text)
    code = cli.main(
        [
            'simulate',
            str(tmp_path / 'setup.yaml'),
            '--plant',
            'mujoco',
            '--duration',
            '0.01',
            '--out',
            str(tmp_path / 'out'),
            '--no-plots',
        ]
    )
    err = capsys.readouterr().err
    print(err)
    assert code == 2, err
    assert 'Traceback' not in err and str(tmp_path / 'five_bar.xml') in err and element in err


def test_mujoco_plant_expresses_joint_rows_and_refuses_what_it_cannot(tmp_path):
    """A YAML passive joint_linear row on one joint (a pin) and on two (a coupling) become MuJoCo joint
    equalities that hold the joints (softly); a row on three joints is refused naming the constraint."""
    from uk_controller.sim.mujoco_plant import MujocoPlant

    setup = load_robot('five_bar_mjcf')

    def add(rows):
        def change(params):
            names = params['constraints']['names']
            params['constraints']['names'] = list(rows) + [n for n in names if n not in rows]
            params['constraints'].update(rows)

        return change

    q0 = setup.q0
    pin_b1 = {
        'role': 'passive',
        'type': 'joint_linear',
        'joints': ['joint_b1'],
        'coefficients': [1.0],
        'value': float(q0[1]),
    }
    pinned = with_params(setup, add({'pin_b1': pin_b1}))
    plant = MujocoPlant.from_setup(pinned)
    for _ in range(200):
        plant.step(np.array([2.0, -1.0]), 1e-3)
    assert abs(plant.q[1] - q0[1]) < 1e-3 and abs(plant.coupling_residual()[0]) < 1e-3
    free = MujocoPlant.from_setup(setup)
    for _ in range(200):
        free.step(np.array([2.0, -1.0]), 1e-3)
    assert abs(free.q[1] - q0[1]) > 1e-2  # without the row joint_b1 moves
    three = {
        'role': 'passive',
        'type': 'joint_linear',
        'joints': ['joint_a1', 'joint_b1', 'joint_a2'],
        'coefficients': [1.0, 1.0, 1.0],
        'value': float(q0[0] + q0[1] + q0[2]),
    }
    with pytest.raises(ConfigError, match='constraints.three.*one or two joints'):
        MujocoPlant.from_setup(with_params(setup, add({'three': three})))


def test_tendon_equality_is_a_joint_linear_row_with_mujocos_violation(tmp_path):
    """``<equality><tendon tendon1="split" polycoef="0.05 ...">`` (the fixed tendon's length held 0.05 above its
    reference): our joint_linear row has MuJoCo's own violation ``efc_pos`` at random states."""
    text = GRIPPER_XML.read_text().replace(
        '</equality>', '  <tendon name="hold_split" tendon1="split" polycoef="0.05 0 0 0 0"/>\n  </equality>'
    )
    (tmp_path / 'tendon_eq.xml').write_text(text)
    model, constraints, _ = description.read_mjcf(tmp_path / 'tendon_eq.xml')
    row = constraints['hold_split']
    assert row['type'] == 'joint_linear' and row['role'] == 'passive'
    mj = mujoco.MjModel.from_xml_path(str(tmp_path / 'tendon_eq.xml'))
    data = mujoco.MjData(mj)
    eid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_EQUALITY, 'hold_split')
    rng = np.random.default_rng(5)
    for _ in range(3):
        q = {j: v for j, v in zip(row['joints'], rng.normal(size=len(row['joints'])))}
        data.qpos[:] = 0.0
        for j, v in q.items():
            data.qpos[mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)]] = v
        mujoco.mj_forward(mj, data)
        k = np.flatnonzero((data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY) & (data.efc_id == eid))
        ours = sum(c * q[j] for j, c in zip(row['joints'], row['coefficients'])) - row['value']
        assert abs(ours - data.efc_pos[k[0]]) < 1e-14


@pytest.mark.slow
def test_friction_compensation_tracks_better_than_feedback_alone():
    """The plant has the URDF's Coulomb friction either way; the controller that knows it (default) tracks the
    finger an order of magnitude better than the one whose model has none (Baumgarte feedback only)."""
    setup = load_robot(MIMIC, {'simulation.duration': 3.0})
    off = with_params(
        setup, lambda p: p.setdefault('control', {}).update(friction_compensation=False), {'simulation.duration': 3.0}
    )
    errors = {}
    for name, s in (('compensated', setup), ('not compensated', off)):
        res = simulate(s)
        errors[name] = np.abs(res.task_error[600:, 1]).max()
    print('finger task error after 0.6 s: ' + ', '.join(f'{k} {v:.3e} rad' for k, v in errors.items()))
    assert errors['compensated'] < 0.1 * errors['not compensated']
