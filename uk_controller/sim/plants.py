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

__all__ = ['PLANTS', 'INTEGRATORS', 'plant_class']

#: plant name -> (module, class); the class has ``from_setup(setup)`` (its settings from the setup).
PLANTS = {
    'uk': ('uk_controller.sim.uk_plant', 'UKPlant'),  # embedded UK forward dynamics
    'mujoco': ('uk_controller.sim.mujoco_plant', 'MujocoPlant'),  # the MuJoCo physics engine
}

#: integrators of the UK plant: fixed-step RK4 (substeps per period) or scipy's adaptive solve_ivp.
INTEGRATORS = ('rk4', 'solve_ivp')


def plant_class(name: str):
    """The plant class registered under `name`; a ValueError naming the accepted ones otherwise."""
    try:
        module, cls = PLANTS[name]
    except (KeyError, TypeError):
        raise ValueError(f'plant must be one of {", ".join(PLANTS)}, got {name!r}') from None
    return getattr(importlib.import_module(module), cls)
