"""rclpy_access: the internals where rclpy has them, the public API where it does not (stand-in objects
without the attributes a future rclpy might drop), and the internals present in the installed rclpy."""

import pytest

from uk_controller.ros import rclpy_access


class PublicOnlyPublisher:
    def __init__(self):
        self.sent = []

    def publish(self, data):
        self.sent.append(data)


def test_raw_publisher_falls_back_to_publish_bytes():
    publisher = PublicOnlyPublisher()
    publish = rclpy_access.raw_publisher(publisher)
    buffer = bytearray(b'\x00\x01\x02')
    publish(buffer)
    buffer[0] = 9  # the fall-back copies: later writes do not reach the message
    assert publisher.sent == [b'\x00\x01\x02'] and isinstance(publisher.sent[0], bytes)


def test_take_and_wait_are_none_without_the_handles():
    class Subscription:
        msg_type = object

    assert rclpy_access.taker(Subscription(), raw=True) is None
    assert rclpy_access.subscription_waiter(object(), Subscription()) is None


def test_installed_rclpy_has_the_internals_it_is_tested_with():
    pytest.importorskip('rclpy')
    version = rclpy_access.rclpy_version()
    assert version and version[0] in rclpy_access.TESTED_MAJORS, version
    assert rclpy_access.can_take_and_wait()
