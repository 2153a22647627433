"""``uk_wait_for_topics TOPIC...``: return (exit 0) once every topic has a publisher.

plot.launch.py starts rqt_plot / PlotJuggler after it: rqt_plot subscribes to
its start-up topics once and silently drops those not yet discovered, so a
plot launched before the controller showed nothing. Waits as long as it takes
(the controller may compile its kernels first); Ctrl-C ends it with exit 0.
"""
from __future__ import annotations

import sys
import time

import rclpy
from rclpy.executors import ExternalShutdownException

from .node_runner import _STATE, _install_stop_handler, _stop_under_way

#: seconds between two looks at the graph; DDS discovery fills it in the background, no spin needed
POLL_PERIOD = 0.2


def main(args=None):
    _install_stop_handler()
    argv = sys.argv[1:] if args is None else list(args)
    topics = [a for a in rclpy.utilities.remove_ros_args(['_'] + argv)[1:] if a.startswith('/')]
    if not topics:
        print('uk_wait_for_topics: give the topics to wait for, e.g. /uk_controller_node/task_error',
              file=sys.stderr)
        return 2
    node = None
    try:
        rclpy.init(args=argv)
        node = rclpy.create_node('uk_wait_for_topics')
        node.get_logger().info(f'waiting for publishers on {", ".join(topics)}')
        while rclpy.ok() and not _STATE['stop']:
            missing = [t for t in topics if node.count_publishers(t) == 0]
            if not missing:
                node.get_logger().info('all topics published: starting the plots')
                break
            time.sleep(POLL_PERIOD)
    except (KeyboardInterrupt, ExternalShutdownException):     # Ctrl-C before the topics appeared
        pass
    except Exception:
        # rclpy's SIGINT handler shuts the context down at any point of the loop: a graph query
        # made after it fails ("the given context is not valid"); that is the stop, not an error
        if not _stop_under_way():
            raise
    finally:
        if node is not None:
            try:
                node.destroy_node()
            except Exception:     # already torn down with the context
                pass
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
