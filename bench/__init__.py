"""The benchmark tables of ``uk-controller bench``, one module per table: the project's lab, not installed.

Every figure is a median (and p99) over many calls on this machine; all comparisons are made in the
same run on the same inputs, and each table says whether the results agree. Nothing here is a test.
Each table module has ``run(args)`` (args: the options of ``uk-controller bench``, see
bench/bench_command.py, which maps table names to these modules and imports only the tables asked for).

=============  ========================  ========================================================================
table          module                    what it measures
=============  ========================  ========================================================================
step           ``step``                  ControllerCore.step per robot, the general path beside it, the parts
reference      ``reference``             fast UK force / servo solve vs the square-root reference (M^1/2, SVD)
pyudk          ``vs_pyudk``              vs pyudk (PyPI) in its own virtualenv (script ``pyudk_helper.py``)
pinocchio      ``constraint_dynamics``   five-bar closures: forward dynamics vs pinocchio.constraintDynamics
simulation     ``simulation``            closed loop on the UK plant, real-time factor
parallelogram  ``parallelogram``         seed 002 parallelogram, every pseudo-inverse method, compiled BDF
loop           ``loop``                  fixed-rate loop without ROS (sleep + spin): jitter, missed deadlines
memory         ``memory``                no new Pinocchio Data per step; allocations per step; RSS
step_ratio     ``step_ratio``            ControllerCore.step beside pin.aba / pin.constraintDynamics
ros_rate       ``ros_rate``              uk_controller_node over DDS (measurement: bench.rate_bench)
limit_ratio    ``limit_ratio``           the joint-limit stage's cost: packed step with the stage on / off, real arms
=============  ========================  ========================================================================

Shared: ``common`` (sample, table, verdict, machine header, the moving state, Pinocchio closures).
The seed 002 parallelogram: ``parallelogram_model`` (the mechanism, eq 32 in NumPy and compiled, the
reduced model), ``bdf`` (Gear's method written out for numba), ``parallelogram`` (runs and the table),
``parallelogram_paper`` (the comparison with the paper's Tables 7-12; ``bench/parallelogram_paper.py``).
Beside the tables, the commands of this folder (``python -m bench.<name>``):
``fingerprint`` (the numbers of every shipped robot, saved and compared bit for bit), ``serial_bench``
(bus throughput, serial loop, fault table), ``sweep_bench`` (sweep throughput), ``ros_rate`` (the node
over DDS, its own options; ``rate_bench`` is its measurement, ``rate_bench_legacy`` the per-executor
table), ``parallelogram_paper`` (seed 002's Tables 7-12). This folder lives beside the package in a
source checkout and is not installed; run its commands from the checkout's root. The ROS benches start
nodes through the test suite's helpers (``test/ros_nodes.py``), which this package puts on the path.

To add a table: a module here with ``run(args)`` that prints through ``common.table``, one entry in
``bench.bench_command.TABLE_MODULES`` (its name for ``--tables``), and, if it needs an option, one
``add_argument`` in ``bench.bench_command.add_bench_arguments``.
"""

import sys as _sys
from pathlib import Path as _Path

# the test suite's node helpers (test/ros_nodes.py) for the ROS benches
_TEST = str(_Path(__file__).resolve().parent.parent / 'test')
if _TEST not in _sys.path:
    _sys.path.append(_TEST)
