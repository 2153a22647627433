"""Compiled twins (numba) of the NumPy reference code, one module per layer.

======================  ====================================================  ==========================
module                  compiled kernels                                      NumPy reference
======================  ====================================================  ==========================
:mod:`.codes`           integer codes and record layouts (no code)            shared by both sides
:mod:`.jit`             ``AVAILABLE``, ``njit`` (the numba switch)
:mod:`.linalg`          Cholesky, one-sided Jacobi SVD, scratch views         numpy.linalg / LAPACK
:mod:`.qrls`            pivoted Householder QR, minimum-norm solve            numpy.linalg.lstsq / svd
:mod:`.servo`           servo_solve, null_space_step, closure_accel            uk.servo_control, uk.ServoSolver,
                        (seed 004 eq 35; DESIGN.md "Redundancy")              uk.redundancy_effort
:mod:`.limits`          joint acceleration bounds, bounded least squares       core.joint_limits
:mod:`.trajectory`      trajectory_eval                                       trajectories.*._eval
:mod:`.rows`            frame kinematics, constraint rows, fused step          constraints.ConstraintStack
:mod:`.dynamics`        tree_terms (RNEA + CRBA), frame_placements            Pinocchio via model.RobotModel
:mod:`.plant`           plant_accel, RK4 and ROS2 (plant_period)              sim.uk_plant.UKPlant, sim.rk4,
                                                                              sim.ros2
:mod:`.packed`          packed_step, PackedStep (one call per control step)   constraints.CompiledRows.run
======================  ====================================================  ==========================

Each module's docstring names its references and the tests that keep them equal. Nothing is imported
here: import the layer you need (``from uk_controller.kernels import servo``); ``kernels.jit.AVAILABLE``
says whether numba is there.
"""
