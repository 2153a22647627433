"""The first-SIGINT-only guard the console scripts install first thing (plain Python: :mod:`signal` only).

:func:`guard_interrupts` turns the first SIGINT into one ``KeyboardInterrupt`` and ignores those that
follow (uk_controller.entry_points explains why); :func:`interrupt_requested` tells a command whose
interrupt was swallowed during its imports that it should stop. The commands (uk_controller.cli) and the
ROS nodes' spin loop (uk_controller.ros.node_runner) both read it, so it sits below both layers
(docs/architecture.md, "Module map by layer"); uk_controller.entry_points installs it.
"""

from __future__ import annotations

import signal
import sys


class _Interrupt:
    """Whether a SIGINT has arrived. The KeyboardInterrupt it raised may have been swallowed where it
    landed (a bare ``except:`` or a ``__del__`` in some library's import): the command reads this to
    stop all the same, instead of running on with the interrupt lost."""

    requested = False


def _first_interrupt_only(signum, frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    record_interrupt()
    raise KeyboardInterrupt


def record_interrupt():
    """Note that a SIGINT arrived (a handler calls this before it raises KeyboardInterrupt, so that
    :func:`interrupt_requested` holds it and the unraisable hook keeps quiet where Python drops it)."""
    _Interrupt.requested = True


#: what CPython writes as unraisable when a SIGINT arrived while its handler was being set to SIG_IGN
#: (signalmodule.c, bpo-43406): the second Ctrl-C our handlers ignore on purpose, not an error
_SIGINT_RACE = f'Signal {int(signal.SIGINT)} ignored due to race condition'


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
        if isinstance(exc, OSError) and exc.args == (_SIGINT_RACE,):
            return
        previous_hook(unraisable)

    hook.uk_controller_guard = True
    return hook


def quiet_about_recorded_interrupts():
    """Install the unraisable hook of :func:`_quiet_about_recorded_interrupts` once (idempotent)."""
    if not getattr(sys.unraisablehook, 'uk_controller_guard', False):
        sys.unraisablehook = _quiet_about_recorded_interrupts(sys.unraisablehook)


def interrupt_requested():
    """True once the guard of :func:`guard_interrupts` has seen a SIGINT."""
    return _Interrupt.requested


def guard_interrupts():
    """Install the one-KeyboardInterrupt handler (main thread, SIGINT not inherited as ignored)."""
    try:
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, _first_interrupt_only)
            quiet_about_recorded_interrupts()
    except ValueError:  # not the main thread: the caller's handlers stay
        pass
