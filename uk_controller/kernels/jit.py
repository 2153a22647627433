"""The numba switch of the compiled kernels: ``AVAILABLE`` and ``njit``.

If numba is not installed, or the environment sets ``UK_CONTROLLER_NUMBA=0``, ``AVAILABLE`` is False,
``njit`` returns the plain Python function and callers keep their NumPy reference path (the kernels
then still import, so their constants and layouts stay readable).

Every kernel is compiled with ``cache=True``: the machine code is cached next to its module (in
``uk_controller/kernels/__pycache__``, or under ``NUMBA_CACHE_DIR``); the first run on a machine compiles
for up to a minute or two, later runs load in about a second. numba checks only the source file of the
function it loads, not the files of the kernels it calls (servo.py calls linalg.py, packed.py calls all
of them).
"""
from __future__ import annotations

import os

try:  # pragma: no cover - exercised only where numba is installed
    if os.environ.get('UK_CONTROLLER_NUMBA', '1').strip().lower() in ('0', 'false', 'no', 'off'):
        raise ImportError('disabled by UK_CONTROLLER_NUMBA')
    from numba import njit
    AVAILABLE = True
except ImportError:  # pragma: no cover
    AVAILABLE = False

    def njit(*args, **kwargs):
        def wrap(f):
            return f
        return wrap(args[0]) if args and callable(args[0]) else wrap
