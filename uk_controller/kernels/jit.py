"""The numba switch of the compiled kernels: ``AVAILABLE``, ``njit``, ``borrowed`` and ``contiguous``.

If numba is not installed, or the environment sets ``UK_CONTROLLER_NUMBA=0``, ``AVAILABLE`` is False,
``njit`` returns the plain Python function and callers keep their NumPy reference path (the kernels
then still import, so their constants and layouts stay readable).

Every kernel is compiled with ``cache=True``: the machine code is cached next to its module (in
``uk_controller/kernels/__pycache__``, or under ``NUMBA_CACHE_DIR``); the first run on a machine compiles
for up to a minute or two, later runs load in about a second. numba checks only the source file of the
function it loads, not the files of the kernels it calls (servo.py calls linalg.py, packed.py and
sim/compiled_loop.py call all of them, core/pinv/compiled.py calls linalg.py, the seed 002 benchmark's
parallelogram_model.py and bdf.py call the pinv twins; numba's known caching limitation):
:func:`drop_stale_caches` clears the in-tree caches of the kernels and of those callers (``_CALLERS``)
whenever any of their sources changed, so an edit to one kernel recompiles every kernel that may have
inlined it. (With ``NUMBA_CACHE_DIR`` set, clear
that directory by hand after editing a kernel.)

:func:`borrowed` gives a kernel a view of an argument array that numba does not reference-count: every slice,
view or array argument passed on inside a kernel otherwise costs an atomic increment and decrement of the
array's reference count (``lock xadd``); perf on the JIT code of the packed step showed those two instructions
as its hottest, and borrowing its arguments took the SCARA step from 3.2 to 1.75 us in a compiled loop.
"""

from __future__ import annotations

import os
from pathlib import Path

try:  # pragma: no cover - exercised only where numba is installed
    if os.environ.get('UK_CONTROLLER_NUMBA', '1').strip().lower() in ('0', 'false', 'no', 'off'):
        raise ImportError('disabled by UK_CONTROLLER_NUMBA')
    from numba import njit
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    AVAILABLE = True
except ImportError:  # pragma: no cover
    AVAILABLE = False

    def njit(*args, **kwargs):
        def wrap(f):
            return f

        return wrap(args[0]) if args and callable(args[0]) else wrap


if AVAILABLE:

    @intrinsic
    def borrowed(typingctx, arr):
        """Inside a kernel: the array `arr` (same data, shape, strides and type) without its NRT memory-info
        and parent pointers. numba's reference counting skips arrays whose memory-info is null, so neither this
        view nor any slice or view taken from it, nor the arrays passed on to the kernels it calls, costs the
        atomic increments and decrements of a counted array. Anything but an array (a tuple of arrays) is
        returned as it is. Borrow only the ARGUMENTS of the kernel (its caller holds them for the whole call),
        never an array the kernel allocates: numba frees a local array after its last use, which may be the
        borrow itself, and the view would then point into freed memory. A borrowed view must not outlive the
        call (never returned or stored).
        """

        def codegen(context, builder, sig, args):
            if not isinstance(sig.args[0], types.Array):  # anything else (a tuple of arrays): itself
                context.nrt.incref(builder, sig.args[0], args[0])
                return args[0]
            view = context.make_array(sig.args[0])(context, builder, value=args[0])
            view.meminfo = cgutils.get_null_value(view.meminfo.type)
            view.parent = cgutils.get_null_value(view.parent.type)
            return view._getvalue()

        return arr(arr), codegen

    @intrinsic
    def contiguous(typingctx, arr):
        """Inside a kernel: the array `arr`, which the caller knows to be row-major contiguous, typed as
        such (layout ``'C'``; same data, shape and strides). A view built by ``as_strided`` is typed
        layout ``'A'`` (any strides): passed on to a kernel that is also called with ``'C'`` arrays, it
        makes numba compile a second machine-code version of that kernel and of every kernel it calls
        (same arithmetic, same results). Cast only arrays whose strides are those of row-major order."""
        if not isinstance(arr, types.Array):
            return None

        def codegen(context, builder, sig, args):
            context.nrt.incref(builder, sig.args[0], args[0])  # the same array struct: one more reference
            return args[0]

        return arr.copy(layout='C')(arr), codegen
else:  # pragma: no cover

    def borrowed(arr):
        """Without numba: the array itself (see the numba version)."""
        return arr

    def contiguous(arr):
        """Without numba: the array itself (see the numba version)."""
        return arr


def entry_point(kernel, *args):
    """The compiled function of `kernel` (a numba dispatcher, already compiled for these arguments' types) for
    exactly those types: calling it skips the dispatcher's matching of argument types (~0.15 us of a 6-argument
    call), so the caller must pass arguments of the same types every time. Returns `kernel` itself when numba is
    not there or no such overload exists."""
    if not AVAILABLE:
        return kernel
    try:
        from numba import typeof

        return kernel.get_overload(tuple(typeof(a) for a in args))
    except Exception:  # noqa: BLE001 - no overload of these types (or another numba): the dispatcher is correct
        return kernel


_HERE = Path(__file__).resolve().parent
#: every source whose compiled code may be inlined into another's cache, and the cache files derived from it
_PKG = _HERE.parent
#: compiled callers outside kernels/ (module, under the package), whose caches may inline a kernel
_CALLERS = (
    ('sim', 'compiled_loop'),
    ('core/pinv', 'compiled'),
    ('benchmarks', 'parallelogram_model'),
    ('benchmarks', 'bdf'),
)
_SOURCES = (*sorted(_HERE.glob('*.py')), *(_PKG / folder / f'{name}.py' for folder, name in _CALLERS))
_CACHES = (
    (_HERE / '__pycache__', '*.nb[ic]'),
    *((_PKG / folder / '__pycache__', f'{name}.*.nb[ic]') for folder, name in _CALLERS),
)


def drop_stale_caches():
    """Delete the kernels' in-tree numba caches when any kernel source changed since they were written.

    The record is ``__pycache__/kernel-sources.txt`` (name, mtime, size of each source). Errors (a
    read-only install, where numba caches elsewhere) are ignored; numba tolerates cache files that vanish.
    """
    try:
        stamp = '\n'.join(
            f'{p.name} {st.st_mtime_ns} {st.st_size}' for p in _SOURCES if p.exists() for st in (p.stat(),)
        )
        mark = _HERE / '__pycache__' / 'kernel-sources.txt'
        if mark.exists() and mark.read_text() == stamp:
            return
        for folder, pattern in _CACHES:
            for f in folder.glob(pattern):
                f.unlink(missing_ok=True)
        mark.parent.mkdir(exist_ok=True)
        mark.write_text(stamp)
    except OSError:  # pragma: no cover
        pass


if AVAILABLE:
    drop_stale_caches()
