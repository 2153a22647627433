"""Our SDF reader places every link, joint frame, joint axis and loop-closure point where libsdformat does.

The judge is libsdformat itself (``test/sdformat/sdf_frames.cc``, compiled against ``libsdformat-dev`` by
``sdformat_converter.compile_program``): ``sdf::Root::Load`` parses the file (converting SDF 1.4-1.6 to the
current specification, ``<use_parent_model_frame>`` included), ``Link::SemanticPose``,
``Joint::SemanticPose`` and ``JointAxis::ResolveXyz`` resolve every pose and axis in the model frame. Our
side is the Pinocchio model of :func:`uk_controller.files.description.read_sdf` at q = 0: ``oMf`` of the
link frames, ``oMi`` of the joints, the angular rows of the joint Jacobians (the axes, negated for a joint
the tree reaches from its child) and the two frames of each loop closure.

Then the fact the Cassie limits rest on (docs/limits.md): in ``cassie_v2.sdf`` each achilles rod meets the
heel spring at a revolute joint whose axis libsdformat puts 4.5 degrees off the knee axis, so the rod's
3-row hip closure has full rank over the knee, shin-tarsus and rod-hinge coordinates: with the springs
undeflected the knee cannot move.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from sdformat_converter import compile_program

from uk_controller.files.description import read_sdf
from uk_controller.robots.example_robot_data import description

pytestmark = pytest.mark.slow  # compiles a C++ program and runs it
PROGRAM = Path(__file__).resolve().parent / 'sdformat' / 'sdf_frames.cc'
CASSIE = description('cassie_description/robots/cassie_v2.sdf')
needs_cassie = pytest.mark.skipif(CASSIE is None, reason='example-robot-data (test extra) is not installed')


def libsdformat_frames(path):
    """({link: SE3}, {joint: dict(type, parent, child, pose SE3, axis, axis2)}) in the model frame."""
    result = subprocess.run([str(compile_program(PROGRAM)), str(path)], capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stdout.splitlines() if line.startswith('error: ')]
    assert result.returncode == 0 and not errors, result.stdout + result.stderr

    def se3(numbers):
        x, y, z, w, qx, qy, qz = (float(v) for v in numbers)
        return pin.SE3(pin.Quaternion(w, qx, qy, qz).matrix(), np.array([x, y, z]))

    links, joints = {}, {}
    for line in result.stdout.splitlines():
        kind, _, rest = line.partition(': ')
        if kind == 'link':
            name, pose = rest.split(' pose=')
            links[name] = se3(pose.split())
        elif kind == 'joint':
            name, *tokens = rest.split()
            fields, key = {}, None
            for token in tokens:
                if '=' in token:
                    key, token = token.split('=', 1)
                    fields[key] = [token]
                else:
                    fields[key].append(token)
            joint = {k: fields[k][0] for k in ('type', 'parent', 'child')}
            joint['pose'] = se3(fields['pose'])
            for k in ('axis', 'axis2'):
                if k in fields:
                    joint[k] = np.array(fields[k], float)
            joints[name] = joint
    return links, joints


def our_frames(path, base='fixed'):
    model, closures, _ = read_sdf(path, base=base)
    data = model.createData()
    q = pin.neutral(model)
    pin.framesForwardKinematics(model, data, q)
    pin.computeJointJacobians(model, data, q)
    return model, data, closures


def assert_same_placements(path):
    links, joints = libsdformat_frames(path)
    model, data, closures = our_frames(path)
    for name, pose in links.items():
        ours = data.oMf[model.getFrameId(name)]
        np.testing.assert_allclose(ours.translation, pose.translation, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(ours.rotation, pose.rotation, atol=1e-12, err_msg=name)
    for name, joint in joints.items():
        pose = joint['pose']
        if name in closures:  # both frames of the closure sit at the joint's point
            for frame in closures[name]['frames']:
                np.testing.assert_allclose(
                    data.oMf[model.getFrameId(frame)].translation, pose.translation, atol=1e-12, err_msg=name
                )
            continue
        coordinates = {'universal': [(f'{name}_1', 'axis'), (f'{name}_2', 'axis2')], 'fixed': []}.get(
            joint['type'], [(name, 'axis')]
        )
        for coordinate, tag in coordinates:
            jid = model.getJointId(coordinate)
            np.testing.assert_allclose(data.oMi[jid].translation, pose.translation, atol=1e-12, err_msg=name)
            np.testing.assert_allclose(data.oMi[jid].rotation, pose.rotation, atol=1e-12, err_msg=name)
            # a joint the tree reaches from its child turns its parent link about the negated axis
            reached_from_child = model.frames[model.getFrameId(joint['child'])].parentJoint not in (
                jid,
                model.getJointId(f'{name}_2'),
            )
            rows = slice(0, 3) if joint['type'] == 'prismatic' else slice(3, 6)  # a slide or a turn
            axis = pin.getJointJacobian(model, data, jid, pin.LOCAL_WORLD_ALIGNED)[rows, model.idx_vs[jid]]
            np.testing.assert_allclose(
                axis, (-1.0 if reached_from_child else 1.0) * joint[tag], atol=1e-12, err_msg=coordinate
            )
    return links, joints


@needs_cassie
@pytest.mark.parametrize('file', ['cassie_v2.sdf', 'cassie_wo_gearbox_spring.sdf'])
def test_cassie_links_joints_and_axes_are_where_libsdformat_puts_them(file):
    links, joints = assert_same_placements(CASSIE.parent / file)
    assert len(links) == 23 and len(joints) >= 26  # every link and joint compared


SDF16 = """<sdf version="1.6"><model name="m">
<link name="a"><pose>0.1 0.2 1 0.3 -0.2 0.5</pose><inertial><mass>1</mass><inertia><ixx>0.01</ixx>
<iyy>0.01</iyy><izz>0.01</izz></inertia></inertial></link>
<link name="b"><pose>0.3 -0.1 0.6 -0.4 0.7 0.1</pose><inertial><mass>1</mass><inertia><ixx>0.01</ixx>
<iyy>0.01</iyy><izz>0.01</izz></inertia></inertial></link>
<link name="c"><pose>0.2 0.1 0.2 1.1 0.2 -0.6</pose><inertial><mass>1</mass><inertia><ixx>0.01</ixx>
<iyy>0.01</iyy><izz>0.01</izz></inertia></inertial></link>
<joint name="ja" type="revolute"><pose>0.05 0 0.02 0.2 0.1 0</pose><parent>world</parent><child>a</child>
<axis><xyz>0 1 1</xyz><use_parent_model_frame>true</use_parent_model_frame></axis></joint>
<joint name="jb" type="universal"><pose>0 0.1 0 0 0.3 0.2</pose><parent>a</parent><child>b</child>
<axis><xyz>1 0 0</xyz></axis><axis2><xyz>0 1 0</xyz><use_parent_model_frame>1</use_parent_model_frame></axis2>
</joint>
<joint name="jc" type="prismatic"><pose>0 0 0.1 0.5 0 0</pose><parent>b</parent><child>c</child>
<axis><xyz>0.3 0 1</xyz></axis></joint>
</model></sdf>"""


def test_sdf16_joint_poses_in_the_child_and_axes_in_the_parent_model_frame(tmp_path):
    """SDF 1.6: a joint's <pose> is in its child link, its <xyz> in the joint frame or, with
    <use_parent_model_frame>, in the model frame; a universal joint's two axes each follow their own flag."""
    path = tmp_path / 'm.sdf'
    path.write_text(SDF16)
    links, joints = assert_same_placements(path)
    assert set(joints) == {'ja', 'jb', 'jc'}
    np.testing.assert_allclose(joints['ja']['axis'], np.array([0, 1, 1]) / np.sqrt(2), atol=1e-12)


@needs_cassie
def test_cassie_achilles_hinge_is_off_the_knee_axis_so_the_knee_is_locked():
    _, joints = libsdformat_frames(CASSIE)
    model, data, closures = our_frames(CASSIE)
    for side in ('left', 'right'):
        knee = joints[f'{side}-knee-op']['axis']
        hinge = joints[f'{side}-achilles-spring-joint']['axis']
        heel = joints[f'{side}-tarsus-spring-joint']['axis']
        angle = np.degrees(np.arccos(abs(knee @ hinge)))
        assert 4.0 < angle < 5.0  # libsdformat's numbers: 4.48 degrees
        assert abs(hinge @ heel) > 1 - 1e-9  # the rod hinge is parallel to the heel spring's
        # the rod's hip closure (3 rows) over the coordinates that move without deflecting a spring
        a, b = closures[f'{side}-pitch-rod-joint']['frames']
        rows = (
            pin.getFrameJacobian(model, data, model.getFrameId(a), pin.LOCAL_WORLD_ALIGNED)[:3]
            - pin.getFrameJacobian(model, data, model.getFrameId(b), pin.LOCAL_WORLD_ALIGNED)[:3]
        )

        def columns(*names):
            return rows[:, [model.idx_vs[model.getJointId(f'{side}-{n}')] for n in names]]

        rigid = np.linalg.svd(columns('knee-op', 'shin-tarsus-joint', 'achilles-spring-joint'), compute_uv=False)
        assert rigid[-1] > 1e-2 * rigid[0]  # full rank, far above the 1e-6 rank cut: no motion without the springs
        # with the springs the loop has two degrees of freedom, and the knee moves in them
        sprung = columns(
            'knee-op', 'shin-tarsus-joint', 'achilles-spring-joint', 'knee-shin-joint', 'tarsus-spring-joint'
        )
        null = np.linalg.svd(sprung)[2][3:]
        assert np.linalg.matrix_rank(sprung, tol=1e-6) == 3 and np.abs(null[:, 0]).max() > 0.1
