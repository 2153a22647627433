"""Moore–Penrose pseudo-inverse methods (seed 002), each with an explicit rank tolerance.

``reference``  the NumPy/LAPACK methods (SVD, damped least squares, Varga, Greville, least squares
               with Householder or modified Gram–Schmidt QR), `PINV_METHODS` and `get_pinv`: what the
               controller and the UK reference forms call (``control.pinv``);
``compiled``   their compiled twins (explicit loops for numba, `compiled_pinv`), which the seed 002
               parallelogram benchmark runs; test/test_pinv.py keeps each twin equal to its reference.
               Loaded on first use of `compiled_pinv` (it imports the numba kernels of
               kernels/linalg.py, which the reference methods and the settings schema do not need).
"""

from .reference import (
    DEFAULT_RCOND,
    PINV_METHODS,
    get_pinv,
    pinv_damped,
    pinv_greville,
    pinv_householder,
    pinv_mgs,
    pinv_svd,
    pinv_varga,
)

__all__ = [
    'DEFAULT_RCOND',
    'PINV_METHODS',
    'compiled_pinv',
    'get_pinv',
    'pinv_damped',
    'pinv_greville',
    'pinv_householder',
    'pinv_mgs',
    'pinv_svd',
    'pinv_varga',
]


def __getattr__(name):
    if name == 'compiled_pinv':
        from .compiled import compiled_pinv

        return compiled_pinv
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
