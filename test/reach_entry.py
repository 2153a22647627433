"""Every key of the schema through the entry points a user runs: the CLI and the ROS nodes.

test/test_settings_reach.py proves, key by key, that a value set in the resolved settings changes the
object built from them (:data:`test_settings_reach.PROBES`). This module carries those probes through
the entry points. Its tables say, for each key, whether a running object of an entry point proves it or
why the key does not matter there:

- :data:`NOT_APPLICABLE`: ``{entry point: {key pattern: reason}}``;
- every other key is proven: :func:`batches` merges the probes of one robot into a few setup files
  (each key set away from its default, probes that would conflict or mask each other in separate
  files), the entry point runs each file once, and for every probe in it the test reads back

  1. the value set, from the settings of the running object (what it reads its values from),
  2. the probe's own reading of the running objects (controller, plant, bus, loop), which must equal
     the same reading of the objects resolved from the file (``resolve(file)``),
  3. for a ROS node: the node's parameter of that key (the params file as rcl parsed it), and for the
     keys only a node reads (:data:`NODE_READS`), the node's own object (its timers, merger, publishers).

A key added to the schema is neither proven nor listed until someone says where it goes
(test_settings_reach_cli.py::test_entry_tables_cover_the_schema).
"""

from __future__ import annotations

import array
import dataclasses
import fnmatch
import functools
from pathlib import Path

import numpy as np
from test_settings_reach import PROBES, Built, _equal, _overrides

from uk_controller.files import rcl_yaml
from uk_controller.files.parameter_file import load_config
from uk_controller.paths import resolve_config
from uk_controller.robots import setup_from_settings
from uk_controller.settings import schema as S
from uk_controller.settings.resolve import apply_overrides, resolve

ENTRY_POINTS = ('cli', 'ros')

_CLI_ONLY_RUN = 'read by `uk-controller simulate` only (the length and the records of an offline run)'
_SIM_NODE_TIMING = 'how uk_sim_node paces and stamps its plant; the CLI runs the plant in-process, unpaced'
_NODE_LOOP = (
    "the ROS controller node's start, trigger and control loop: the CLI runs its controller in its own loop "
    '(a simulate --mcap recording holds only the topics, effort order, message type and timing window)'
)
NOT_APPLICABLE = {
    'cli': {
        'ros.autostart': _NODE_LOOP,
        'ros.trigger': _NODE_LOOP,
        'ros.transport': _NODE_LOOP,
        'ros.trajectory_start': _NODE_LOOP,
        'ros.diagnostics_period': _NODE_LOOP,
        'ros.executor': _NODE_LOOP,
        'ros.loop.mode': _NODE_LOOP,
        'ros.loop.priority': _NODE_LOOP,
        'ros.loop.cpus': _NODE_LOOP,
        'ros.loop.mlockall': _NODE_LOOP,
        'ros.loop.spin_us': _NODE_LOOP,
        'ros.loop.fallback_periods': _NODE_LOOP,
        'ros.overrun.*': _NODE_LOOP,
        'control.state_timeout': "judges the age of /joint_states messages: the CLI's states are never late",
        'control.clock_skew': 'judges the stamps of /joint_states messages: the CLI has no messages',
        'control.soft_start': (
            'simulate never re-arms; `uk-controller run` re-arms with it only once its bus is open '
            '(serial_loop.run_loop, run on an emulated bus by test/test_rearm_serial.py)'
        ),
        'simulation.rate': _SIM_NODE_TIMING,
        'simulation.publish_clock': _SIM_NODE_TIMING,
        'simulation.lockstep': _SIM_NODE_TIMING,
        'simulation.real_time_factor': _SIM_NODE_TIMING,
        'simulation.lockstep_resend': _SIM_NODE_TIMING,
        'simulation.clock_start': _SIM_NODE_TIMING,
        'simulation.wait_for_subscribers': _SIM_NODE_TIMING,
        'simulation.max_command_lag': _SIM_NODE_TIMING,
    },
    'ros': {
        'simulation.duration': _CLI_ONLY_RUN + '; uk_sim_node runs until it is stopped',
        'simulation.log_every': _CLI_ONLY_RUN + ' (log.csv)',
        'simulation.transient': _CLI_ONLY_RUN + ' (summary.json)',
        'simulation.measurement_delay': _CLI_ONLY_RUN + "; over DDS the delay is the transport's own",
    },
}


def not_applicable(entry, key):
    """The reason `key` does not matter to `entry`, or None."""
    return next((why for pattern, why in NOT_APPLICABLE[entry].items() if fnmatch.fnmatchcase(key, pattern)), None)


#: probes never merged with others: each masks what the others would change (no rows stabilized, no
#: limits, no posture, no joint dynamics), needs a robot state the others change, or runs a plant (MuJoCo) that cannot
#: express some of the others' rows
ALONE = {
    'stabilization.convention',
    'limits.enabled',
    'posture.enabled',
    'robot.base',
    'actuators.names',
    'simulation.plant',
    'simulation.mujoco_timestep',
    'robot.joint_dynamics',
}


#: keys that change what other keys do (lockstep: the plant's timer resends instead of ticking): probes
#: that set one merge only with probes that set the same ones
APART = ('simulation.lockstep',)


def _apart(values):
    return tuple(k for k in APART if k in values)


@dataclasses.dataclass
class Batch:
    """One setup file: `robot` with `values` (dotted overrides) written into it; the probes it proves."""

    robot: str
    values: dict
    keys: list
    path: Path | None = None

    @functools.cached_property
    def resolved(self):
        """The objects resolved from the file (the reference each entry point's objects must equal)."""
        return Built(str(self.path), {})


class View:
    """The objects an entry point built, read as test_settings_reach.Built reads its own; an object the
    entry point does not build raises AttributeError (never built here instead)."""

    step = Built.step
    period = Built.period

    def __init__(self, **objects):
        self.__dict__.update(objects)


def _conflict(a, b):
    for k, v in a.items():
        for k2, v2 in b.items():
            if k == k2 and not _equal(v, v2):
                return True
            if k != k2 and (k2.startswith(k + '.') or k.startswith(k2 + '.')):
                return True
    return False


def _source_tree(robot):
    path = resolve_config(robot)
    tree, path = load_config(path)
    robot_section = tree.get('robot') or {}
    for key in ('urdf', 'mjcf', 'sdf'):  # the copy lies elsewhere: its description named absolutely
        value = robot_section.get(key)
        if isinstance(value, str) and '://' not in value and not Path(value).is_absolute():
            robot_section[key] = str((Path(path).parent / value).resolve())
    return tree, Path(path)


def batches(tmp_path, entry):
    """The probes of the keys `entry` runs, merged greedily into setup files written under `tmp_path`."""
    out = []
    trees = {}
    for key in sorted(PROBES):
        if not_applicable(entry, key):
            continue
        probe = PROBES[key]
        want = {**_overrides(probe.base, tmp_path), **_overrides(probe.change, tmp_path)}
        if probe.robot not in trees:
            trees[probe.robot] = _source_tree(probe.robot)
        tree, path = trees[probe.robot]
        for batch in out:
            if key in ALONE or batch.robot != probe.robot or any(k in ALONE for k in batch.keys):
                continue
            if _conflict(batch.values, want) or _apart(batch.values) != _apart(want):
                continue
            merged = {**batch.values, **want}
            try:
                setup_from_settings(resolve(path, merged, params=tree))
            except ValueError:
                continue
            batch.values, batch.keys = merged, [*batch.keys, key]
            break
        else:
            out.append(Batch(probe.robot, want, [key]))
    for index, batch in enumerate(out):
        tree, _ = trees[batch.robot]
        params = apply_overrides(tree, batch.values)
        batch.path = tmp_path / f'{entry}_{index:02d}_{Path(batch.robot).stem}.yaml'
        batch.path.write_text(rcl_yaml.dump({'/**': {'ros__parameters': params}}))
    return out


# ----------------------------------------------------------------------------- reading values back


def plain(value):
    """A settings value as plain Python (frozen sections and maps -> dicts, tuples -> lists)."""
    if dataclasses.is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, 'items') and callable(value.items):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, array.array)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def setting_at(settings, dotted):
    """The value of a concrete dotted key (``constraints.tool_path.trajectory.radius``) in `settings`,
    None when absent."""
    node = settings
    for part in dotted.split('.'):
        if dataclasses.is_dataclass(node):
            names = {f.name for f in dataclasses.fields(node)}
            if part in names:
                node = getattr(node, part)
            elif 'items' in names and part in (node.items or {}):
                node = node.items[part]
            elif 'options' in names and part in (node.options or {}):
                node = node.options[part]
            else:
                return None
        elif hasattr(node, 'get'):
            node = node.get(part)
        else:
            return None
        if node is None:
            return None
    return plain(node)


def same_value(written, read):
    """`read` (from settings) holds what was `written`: equal, a map holding every written item."""
    if isinstance(written, dict):
        return isinstance(read, dict) and all(same_value(v, read.get(k)) for k, v in written.items())
    if isinstance(written, (list, tuple)):
        return isinstance(read, list) and len(read) == len(written) and all(map(same_value, written, read))
    if isinstance(written, (int, float)) and isinstance(read, list) and read:  # a gain held per row
        return all(same_value(written, r) for r in read)
    if isinstance(written, float) or isinstance(read, float):
        return isinstance(read, (int, float)) and not isinstance(read, bool) and float(read) == float(written)
    return written == read


def written_values(batch, key, tmp_path):
    """{concrete dotted key: value} that probe `key` changes (its base excluded), without removals."""
    change = _overrides(PROBES[key].change, tmp_path)
    return {k: v for k, v in change.items() if v is not None}


def default_of(dotted):
    """The schema default of a concrete dotted key (None when the schema has none)."""
    setting = S.lookup(dotted)
    return None if setting is None else plain(getattr(setting, 'default', None))


def check_batch(batch, views, tmp_path, where):
    """For each probe of `batch`: the value set in the file is in the settings of the running object
    (`views`: {name: objects with ``settings`` and what the probes read}; `where(key)`: the names of the
    views that run the key, first found first), and the probe's reading of the running objects equals
    its reading of the objects resolved from the file. Returns {key: name of the view that proved it}."""
    proven = {}
    for key in batch.keys:
        probe = PROBES[key]
        failures = []
        for name in where(key):
            view = views[name]
            values = written_values(batch, key, tmp_path)
            wrong = {k: (v, setting_at(view.settings, k)) for k, v in values.items()}
            wrong = {k: pair for k, pair in wrong.items() if not same_value(*pair)}
            if wrong:
                failures.append((name, 'settings', wrong))
                continue
            try:
                read = probe.read(view)
            except AttributeError as exc:  # this view has no such object (a node without a plant)
                failures.append((name, 'no object', str(exc)))
                continue
            reference = probe.read(batch.resolved)
            if not _equal(read, reference):
                failures.append((name, 'differs from resolve(file)', read, reference))
                continue
            proven[key] = name
            break
        assert key in proven, (key, batch.path.name, failures)
    return proven


def removed_keys_absent(batch, view, tmp_path):
    """Keys a probe removes (value None) are absent from the running object's settings (or their default)."""
    for key in batch.keys:
        for k, v in _overrides(PROBES[key].change, tmp_path).items():
            if v is None:
                got = setting_at(view.settings, k)
                assert got in (None, default_of(k)) or got == [], (key, k, got)


# ----------------------------------------------------------------------------- the ROS nodes

#: keys whose probe reads the plant (uk_sim_node's); the other keys that are not simulation.* or
#: hardware.* are read off uk_controller_node
SIM_READS = {
    'robot.name',
    'robot.xacro_args',
    'robot.initial_position',
    'robot.initial_velocity',
    'robot.joint_dynamics',
    'robot.friction_velocity',
}


def ros_nodes(key):
    """The node that runs `key` (the one its probe is read off)."""
    if key in NODE_READS:
        return [NODE_READS[key][0]]
    if key == 'hardware.<name>.position_limit':  # the controller's joint limits
        return ['uk_controller_node']
    if key.startswith('hardware.'):
        return ['serial_bridge_node']
    if key.startswith('simulation.') or key in SIM_READS:
        return ['uk_sim_node']
    return ['uk_controller_node']


def _stamp_s(node):
    stamp = node.stamp()
    return stamp.sec + 1e-9 * stamp.nanosec - node.plant.t


def _published_state(node):
    """The positions uk_sim_node publishes for its plant's state (its publisher replaced by a list)."""
    sent = []
    publisher, node.state_pub = node.state_pub, type('Sent', (), {'publish': staticmethod(sent.append)})()
    try:
        node.publish_state()
    finally:
        node.state_pub = publisher
    return np.asarray(sent[0].position) - node.plant.q


def _topics(node, kind):
    get = getattr(node, f'get_{kind}_names_and_types_by_node')
    return dict(get(node.get_name(), node.get_namespace()))


#: keys only a node reads: (node, what the node does with it, what that must be for the value set)
NODE_READS = {
    'control.state_timeout': ('uk_controller_node', lambda n: n.merger.state_timeout, lambda v: v),
    'control.clock_skew': ('uk_controller_node', lambda n: n.merger.clock_skew, lambda v: v),
    'control.soft_start': ('uk_controller_node', lambda n: n.rearm.soft_start, lambda v: v),
    'ros.effort_topic': ('uk_controller_node', lambda n: v_in(_topics(n, 'publisher')), None),
    'ros.joint_states_topic': ('uk_sim_node', lambda n: v_in(_topics(n, 'publisher')), None),
    'ros.output_type': (
        'uk_controller_node',
        lambda n: _topics(n, 'publisher')[n.settings.ros.effort_topic],
        lambda v: [OUTPUT_TYPES()[v]],
    ),
    'ros.effort_joints': ('uk_controller_node', lambda n: list(n.effort_names), lambda v: v),
    'ros.trajectory_start': ('uk_controller_node', lambda n: n.trajectory_time(n.start_ns), lambda v: v),
    'ros.diagnostics_period': (
        'uk_controller_node',
        lambda n: n.diag_timer.timer_period_ns,
        lambda v: round(v * 1e9),
    ),
    'ros.loop.mode': ('uk_controller_node', lambda n: n.loop.mode, lambda v: v),
    'ros.loop.window': ('uk_controller_node', lambda n: n.loop.timing.window_ns, lambda v: round(v * 1e9)),
    'simulation.rate': ('uk_sim_node', lambda n: 1.0 / n.dt, lambda v: v),
    'simulation.publish_clock': ('uk_sim_node', lambda n: n.clock_pub is not None, lambda v: v),
    'simulation.lockstep': ('uk_sim_node', lambda n: n.waiting, lambda v: v),
    'simulation.lockstep_resend': ('uk_sim_node', lambda n: n.timer.timer_period_ns, lambda v: round(v * 1e9)),
    'simulation.real_time_factor': (
        'uk_sim_node',
        lambda n: n.timer.timer_period_ns,
        None,  # one plant period of wall time divided by the factor: checked in check_node_reads
    ),
    'simulation.clock_start': ('uk_sim_node', _stamp_s, lambda v: v),
    'simulation.sensor_noise': ('uk_sim_node', lambda n: bool(np.any(_published_state(n))), lambda v: v > 0),
}


class v_in:
    """A reading that holds the topics of a node: equal to a value when the value is one of them."""

    def __init__(self, topics):
        self.topics = topics

    def __eq__(self, value):
        return value in self.topics


def OUTPUT_TYPES():
    from uk_controller.settings.ros_section import OUTPUT_TYPES as types

    return types


#: the keys of the ros section that ``simulate --mcap`` records with: (the run, what its McapLog holds, what
#: that must be for the value set)
MCAP_READS = {
    'ros.joint_states_topic': ('simulate', lambda log: log.topics['joint_states'], lambda v: v),
    'ros.effort_topic': ('simulate', lambda log: log.topics['command'], lambda v: v),
    'ros.effort_joints': ('simulate', lambda log: list(log.effort_names), lambda v: v),
    'ros.output_type': ('simulate', lambda log: log.command_type, lambda v: OUTPUT_TYPES()[v]),
    'ros.loop.window': ('simulate', lambda log: log.window, lambda v: v),
}


def check_node_reads(batch, nodes, tmp_path, table=None):
    """The keys of `batch` in `table` (:data:`NODE_READS`, or :data:`MCAP_READS` with the McapLog of a
    run): the running object did with the value what it should."""
    table = NODE_READS if table is None else table
    for key in batch.keys:
        if key not in table:
            continue
        name, read, expected = table[key]
        node = nodes[name]
        checked = 0
        for dotted, value in written_values(batch, key, tmp_path).items():
            if S.lookup(dotted) is None or dotted != key:
                continue  # the probe's companions (max_command_lag's publish_clock) are checked by theirs
            checked += 1
            got = read(node)
            if key == 'simulation.real_time_factor':
                want = round(node.dt / value * 1e9)
                assert abs(got - want) <= 1, (key, got, want)  # rclpy keeps whole nanoseconds
                continue
            want = value if expected is None else expected(value)
            assert (want == got) if isinstance(got, v_in) else _equal(got, want), (key, got, want)
        assert checked, (key, 'its probe sets no value of the key itself')


def check_parameters(batch, key, node, tmp_path):
    """The node's parameters hold the values the params file set for probe `key` (as rcl parsed them)."""
    for dotted, value in written_values(batch, key, tmp_path).items():
        leaves = {dotted: value}
        if isinstance(value, dict):
            leaves = {f'{dotted}.{k}': v for k, v in _flat(value).items()}
        for name, leaf in leaves.items():
            assert node.has_parameter(name), (key, name)
            got = plain(node.get_parameter(name).value)
            assert same_value(leaf, got), (key, name, leaf, got)


def _flat(tree, prefix=''):
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flat(v, f'{prefix}{k}.'))
        else:
            out[f'{prefix}{k}'] = v
    return out
