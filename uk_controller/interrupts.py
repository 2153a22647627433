"""The first-SIGINT-only guard the console scripts install first thing (plain Python: :mod:`signal` only).

:func:`guard_interrupts` turns the first SIGINT into one ``KeyboardInterrupt`` and ignores those that
follow (uk_controller.entry_points explains why); :func:`interrupt_requested` tells a command whose
interrupt was swallowed during its imports that it should stop. The commands (uk_controller.cli) and the
ROS nodes' spin loop (uk_controller.ros.node_runner) both read it, so it sits below both layers
(docs/architecture.md, "Module map by layer"); uk_controller.entry_points installs it.
"""

from __future__ import annotations

import os
import signal
import sys


class _Interrupt:
    """Whether a stop signal (SIGINT or SIGTERM) has arrived, and which. The KeyboardInterrupt it raised
    may have been swallowed where it landed (a bare ``except:`` or a ``__del__``): the command reads this
    to stop all the same, instead of running on with the interrupt lost."""

    requested = False
    signal = signal.SIGINT


#: the signals that stop a command: Ctrl-C, and SIGTERM (``ros2 launch``'s escalation, ``kill``)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _first_interrupt_only(signum, frame):
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, signal.SIG_IGN)
    record_interrupt(signum)
    raise_in_own_code(frame)


#: where our code lives: frames from files under it are ours, the others a library's or the interpreter's
OWN_CODE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _is_own(frame):
    return frame.f_code.co_filename.startswith(OWN_CODE)


def _outermost_own_frame(frame):
    """The innermost frame of ours that only our own code called: walking the stack from its bottom (the
    interpreter's script, ``-c`` or runpy frames, a test runner), past the first frame of ours, as long
    as the frames stay ours. None when no frame of ours is on the stack."""
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    safe = None
    for candidate in reversed(stack):
        if _is_own(candidate):
            safe = candidate
        elif safe is not None:
            break
    return safe


def _ignore_new_frames(frame, event, arg):
    """The thread's trace function while a stop waits for our code: no frame but the marked one is traced."""
    return None


def raise_in_own_code(frame):
    """Raise ``KeyboardInterrupt`` now if the signal handler interrupted `frame` in our own code, else at
    the next line our code runs once the library it called returns.

    Python raises a signal's exception wherever the main thread happens to be. Inside a library that
    exception can do what no ``except KeyboardInterrupt`` of ours can undo: NumPy's ``import_array`` in
    an extension's initialization prints it as a bare traceback and reports "failed to import"; a ctypes
    callback of a JIT compiler's cache drops it half-way; a C++ extension's state is left half-built.
    So the exception is raised only in a frame of ours whose callers are all ours too (found by
    :func:`_outermost_own_frame`): at once if the handler interrupted that frame, else through a trace
    function set on it alone (what ``pdb.set_trace`` does), which raises at its next line or return and
    is removed by Python as it raises. A library that runs for long (a first-time kernel compilation)
    delays the stop until it returns. With a debugger or coverage tracer installed, or no frame of ours
    on the stack, the exception is raised at once, as Python itself would."""
    safe = _outermost_own_frame(frame) if frame is not None else None
    if safe is None or safe is frame or sys.gettrace() is not None:
        if safe is None and frame is None:
            return  # the interpreter's own finalization: nothing of ours left to stop; the record holds it
        raise KeyboardInterrupt

    def stop_here(traced, event, arg):
        raise KeyboardInterrupt

    safe.f_trace = stop_here
    safe.f_trace_lines = True
    sys.settrace(_ignore_new_frames)


def record_interrupt(signum=signal.SIGINT):
    """Note that a stop signal `signum` arrived (a handler calls this before it raises KeyboardInterrupt, so that
    :func:`interrupt_requested` holds it and the unraisable hook keeps quiet where Python drops it)."""
    if not _Interrupt.requested:
        _Interrupt.signal = signal.Signals(signum)
    _Interrupt.requested = True


#: what CPython writes as unraisable when a stop signal arrived while a handler was setting it to SIG_IGN
#: (signalmodule.c, bpo-43406): a second Ctrl-C or SIGTERM our handlers ignore on purpose, not an error
_STOP_SIGNAL_RACES = {f'Signal {int(s)} ignored due to race condition' for s in STOP_SIGNALS}


def _quiet_about_recorded_interrupts(previous_hook):
    """A ``sys.unraisablehook`` that says nothing of the KeyboardInterrupt our handler raised where Python
    cannot propagate it (a ``__del__`` or a weakref callback: matplotlib's figure teardown is one) and
    passes everything else to `previous_hook`. That interrupt is not lost: :func:`interrupt_requested`
    holds it, and the command ends on it at its next check instead of printing "Exception ignored"
    with a traceback and running on. Quiet too about CPython's "Signal 2 ignored due to race condition":
    a second SIGINT that arrived while the first one's handler set SIGINT to ignored (two Ctrl-Cs 0 ms
    apart: a terminal's and ``ros2 launch``'s), which is what the handlers mean to do with it."""

    def hook(unraisable):
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt) and _Interrupt.requested:
            return
        if isinstance(exc, OSError) and len(exc.args) == 1 and exc.args[0] in _STOP_SIGNAL_RACES:
            return
        previous_hook(unraisable)

    hook.uk_controller_guard = True
    return hook


def quiet_about_recorded_interrupts():
    """Install the unraisable hook of :func:`_quiet_about_recorded_interrupts` once (idempotent)."""
    if not getattr(sys.unraisablehook, 'uk_controller_guard', False):
        sys.unraisablehook = _quiet_about_recorded_interrupts(sys.unraisablehook)


def interrupt_requested():
    """True once the guard of :func:`guard_interrupts` (or a command's own handler) has seen a stop signal."""
    return _Interrupt.requested


def interrupt_signal():
    """The first stop signal seen (SIGINT when none was): a command's exit status is 128 + its number."""
    return _Interrupt.signal


def guard_interrupts():
    """Install the one-KeyboardInterrupt handler for SIGINT and SIGTERM (main thread; a signal the process
    inherited as ignored, as a background job's SIGINT, stays ignored, as Python itself does)."""
    try:
        for stop_signal in STOP_SIGNALS:
            if signal.getsignal(stop_signal) is not signal.SIG_IGN:
                signal.signal(stop_signal, _first_interrupt_only)
        quiet_about_recorded_interrupts()
    except ValueError:  # not the main thread: the caller's handlers stay
        pass
