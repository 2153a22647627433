"""The set-up against a connected motor bus, checked before torque is ever on (one set of rules for the
CLI's ``uk-controller run`` and the ROS serial bridge): the cycle budget against the requested rate, and
the motors' effort limits against the static load at the start pose."""

from __future__ import annotations

from . import bus_timing, registry, static_load


def check_setup(setup, hw, bus, protocol, port, rate):
    """What a connected bus can do against what the set-up asks, before torque is ever on:
    ``(lines, errors)``. The lines are the cycle budget (:func:`.bus_timing.budget`: bytes per cycle,
    device delays, USB latency timer, the highest rate the bus carries), the requested rate and the
    motors' effort limits against the static load at the start pose (:mod:`.static_load`); each error
    names what to change (a rate above the bus's, a motor that cannot hold the start pose). One set of
    rules for ``uk-controller run`` (:mod:`.run_command`) and the ROS serial bridge
    (uk_controller/ros/serial_bridge_node.py), which both import it from here.
    """
    lines, errors = [], []
    entry = registry.get(protocol)
    budget = bus_timing.budget(
        entry,
        hw.p,
        int(hw.baud),
        options=hw.options.get(entry.section_name),
        facts=bus.timing_facts(),
        port=port,
        motors=hw.motors,
    )
    lines.append(budget.report())
    lines.append(f'  requested rate {rate:g} Hz')
    problem = budget.check_rate(rate)
    if problem:
        errors.append(problem)
    u_static = static_load.static_effort(setup)
    sources = bus.torque_limit_sources()
    lines.append(static_load.report(setup, hw, u_static, sources))
    errors += static_load.problems(setup, hw, u_static, sources)
    return lines, errors
