"""The simulated plants and the UK plant's integrators: one table each.

:data:`PLANTS` maps a plant name (``simulation.plant``, ``--plant``) to the module and class that
implement it; :func:`plant_class` imports the class when it is asked for, so this module (and the
settings schema, which reads its names) needs neither MuJoCo nor numba. :data:`INTEGRATORS` are the
integrators of :class:`~uk_controller.sim.uk_plant.UKPlant` (``simulation.integrator``,
``--integrator``). ``make_plant`` (sim/closed_loop.py), ``uk_sim_node``, ``uk-controller simulate /
emulate / sweep`` and the settings schema all read these tables; adding a plant is a class with
``from_setup(setup)`` (reading its ``simulation.*`` settings) and one line in :data:`PLANTS`.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

__all__ = ['PLANTS', 'INTEGRATORS', 'Plant', 'plant_class', 'describe']


class Plant(NamedTuple):
    """One plant: the module and class that implement it, and what it is in a few words (the help of
    ``--plant`` and of the launch argument ``plant:=`` read it)."""

    module: str
    cls: str
    doc: str = ''


#: plant name -> :class:`Plant`; the class has ``from_setup(setup)`` (its settings from the setup).
PLANTS = {
    'uk': Plant('uk_controller.sim.uk_plant', 'UKPlant', 'embedded UK forward dynamics'),
    'mujoco': Plant('uk_controller.sim.mujoco_plant', 'MujocoPlant', 'the MuJoCo physics engine (pip install mujoco)'),
}

#: integrators of the UK plant: 'auto' (RK4, or ROS2 where RK4 would need more than the configured substeps),
#: fixed-step RK4, the linearly-implicit ROS2 for stiff passive dissipation (trees; substeps per period) or
#: scipy's adaptive solve_ivp.
INTEGRATORS = ('auto', 'rk4', 'rosenbrock', 'solve_ivp')


def plant_class(name: str):
    """The plant class registered under `name`; a ValueError naming the accepted ones otherwise."""
    try:
        entry = PLANTS[name]
    except (KeyError, TypeError):
        raise ValueError(f'plant must be one of {", ".join(PLANTS)}, got {name!r}') from None
    return getattr(importlib.import_module(entry.module), entry.cls)


def describe() -> str:
    """The plants in words, ``uk: embedded UK forward dynamics; mujoco: ...`` (for help texts)."""
    return '; '.join(f'{name}: {entry.doc}' if entry.doc else name for name, entry in PLANTS.items())
