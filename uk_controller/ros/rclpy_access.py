"""The rclpy internals the control loop uses, in one place, each with the public API as its fall-back.

A 1 kHz loop thread pays for every allocation and copy of every period. Three things rclpy's executors do
internally are cheaper than the public calls that wrap them:

- ``Subscription.handle.take_message(msg_type, raw)`` takes one message (or None) from a subscription no
  executor waits on: no executor wake-up and no Python callback per message;
- ``rclpy_implementation.WaitSet`` waits (GIL released) for the next message on that subscription, so the
  loop can run phase-locked to the joint states;
- ``Publisher.handle.publish_raw(buffer)`` publishes a reused ``bytearray`` of CDR bytes, where
  ``Publisher.publish`` takes only ``bytes`` (a copy per period).

They exist in the rclpy releases this package is tested with (:data:`TESTED_MAJORS`: 7 in Jazzy, 9 in
Kilted). Each function here checks the attributes it needs and returns None (or the public path) when they
are missing, so a future rclpy that moves them degrades to the executor's callback, the timer loop and
``publish(bytes(...))`` instead of failing.
"""

from __future__ import annotations

import importlib.metadata

#: rclpy major versions whose internals above are known to work
TESTED_MAJORS = (7, 8, 9)


def rclpy_version():
    """rclpy's version as a tuple of ints, or () when unknown."""
    for dist in ('rclpy', 'ros-rclpy'):
        try:
            text = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        parts = []
        for piece in text.split('.'):
            if not piece.isdigit():
                break
            parts.append(int(piece))
        return tuple(parts)
    return ()


def _implementation():
    try:
        from rclpy.impl.implementation_singleton import rclpy_implementation
    except ImportError:
        return None
    return rclpy_implementation


def can_take_and_wait():
    """True when a loop thread can take messages from a subscription and wait on it itself."""
    from rclpy.subscription import Subscription

    impl = _implementation()
    return hasattr(getattr(Subscription, 'handle', None), 'fget') and impl is not None and hasattr(impl, 'WaitSet')


def taker(subscription, raw):
    """``take()`` -> ``(message or bytes, info)`` or None: one message from `subscription` (None when
    the internals are missing)."""
    handle = getattr(subscription, 'handle', None)
    take_message = getattr(handle, 'take_message', None)
    if take_message is None:
        return None
    msg_type = subscription.msg_type

    def take():
        return take_message(msg_type, raw)

    return take


def subscription_waiter(context, subscription):
    """``wait(timeout_ns)``: block (GIL released) until `subscription` has a message or the timeout; None
    when the internals are missing."""
    impl = _implementation()
    handle = getattr(subscription, 'handle', None)
    if impl is None or handle is None or not hasattr(impl, 'WaitSet'):
        return None
    waitset = impl.WaitSet(1, 0, 0, 0, 0, 0, context.handle)  # one subscription

    def wait(timeout_ns):
        waitset.clear_entities()
        waitset.add_subscription(handle)
        waitset.wait(timeout_ns)

    return wait


def raw_publisher(publisher):
    """``publish(buffer)`` of serialized CDR bytes (a reused bytearray) on `publisher`: the handle's
    ``publish_raw`` without a copy, else ``publisher.publish(bytes(buffer))``."""
    handle = getattr(publisher, 'handle', None)
    publish_raw = getattr(handle, 'publish_raw', None)
    if publish_raw is None:

        def publish(buffer):
            publisher.publish(bytes(buffer))

        return publish

    def publish(buffer):
        with handle:
            publish_raw(buffer)

    return publish
