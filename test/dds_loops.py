"""uk_controller_node + uk_sim_node over DDS, recorded by a Probe: the loop runs of the ROS tests.

Used by test_ros_end_to_end.py (embedded plant) and test_ros_mujoco.py (MuJoCo plant).
"""

from ros_nodes import NodeProcess
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

CONTROLLER = 'uk_controller.ros.controller_node'
SIM = 'uk_controller.ros.sim_node'
STATES = '/joint_states'
TASK_ERROR = '/uk_controller_node/task_error'


def stamp(msg):
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def record_loop(probe):
    """Record (stamp, positions) of /joint_states and the controller's task errors, from now on."""
    probe.record(JointState, STATES, convert=lambda m: (stamp(m), list(m.position)))
    probe.record(Float64MultiArray, TASK_ERROR, convert=lambda m: list(m.data))
    probe.clear(STATES)
    probe.clear(TASK_ERROR)


def _finish(done, codes, controller, sim):
    out = controller.output()[-3000:] if controller is not None else ''
    assert done, f'loop did not run:\n{out}\n{sim.output()[-2000:]}'
    assert codes == (0, 0), f'unclean exit {codes}:\n{out}\n{sim.output()[-2000:]}'


def run_controller_first(probe, tmp_path, domain_id, controller_params, sim_params, until, timeout=60.0):
    """Start the controller, then (once it is built and the probe sees it, so the probe records the loop
    from its start) the plant; run until ``until(states, task_errors)``; stop both (exit 0 required).
    Returns (states, task errors, the plant's output). Generous start-up waits: a busy machine delays the
    start, not the result."""
    record_loop(probe)
    controller = NodeProcess(CONTROLLER, controller_params, domain_id, str(tmp_path))
    assert controller.wait_for_output('control loop', 300.0), controller.output()[-3000:]
    probe.wait_for(lambda: probe.publishers(TASK_ERROR) > 0, 60.0)
    sim = NodeProcess(SIM, sim_params, domain_id, str(tmp_path))
    try:
        done = probe.wait_for(lambda: until(probe.snapshot(STATES), probe.snapshot(TASK_ERROR)), timeout)
    finally:
        codes = sim.stop(), controller.stop()
    _finish(done, codes, controller, sim)
    return probe.snapshot(STATES), probe.snapshot(TASK_ERROR), sim.output()


def run_plant_first(probe, tmp_path, domain_id, controller_params, sim_params, until, timeout=60.0):
    """Like :func:`run_controller_first`, but independent of when discovery happens: the lockstep plant
    starts first and waits for two matched subscribers of /joint_states (simulation.wait_for_subscribers:
    the probe and the controller, counted on the plant's side); the controller starts only once the
    probe's own subscription has matched the plant (reader side). Both sides of the probe's match exist
    before the first state goes out, so the probe receives every state of the run (reliable QoS)."""
    record_loop(probe)
    sim = NodeProcess(SIM, sim_params, domain_id, str(tmp_path))
    controller = None
    try:
        assert probe.wait_for(lambda: probe.matched_publishers(STATES) >= 1, 60.0), sim.output()[-2000:]
        assert not probe.snapshot(STATES)  # the plant waits for its second subscriber
        controller = NodeProcess(CONTROLLER, controller_params, domain_id, str(tmp_path))
        done = probe.wait_for(lambda: until(probe.snapshot(STATES), probe.snapshot(TASK_ERROR)), timeout)
    finally:
        codes = sim.stop(), controller.stop() if controller is not None else None
    _finish(done, codes, controller, sim)
    return probe.snapshot(STATES), probe.snapshot(TASK_ERROR), sim.output()
