"""``uk_wait_for_topics TOPIC...``: return (exit 0) once every topic has a publisher.

plot.launch.py starts rqt_plot / PlotJuggler after it: rqt_plot subscribes to
its start-up topics once and silently drops those not yet discovered, so a
plot launched before the controller showed nothing. Waits as long as it takes
(the controller may compile its kernels first); Ctrl-C ends it with exit 0.
Start, spin, stop and the Ctrl-C races are :func:`.node_runner.run`'s, as for every node.
"""

from __future__ import annotations

import sys

import rclpy
from rclpy.node import Node

from .node_runner import run

#: seconds between two looks at the graph (DDS discovery fills it in the background)
POLL_PERIOD = 0.2


class TopicWait(Node):
    """Looks at the graph every POLL_PERIOD; sets ``finished`` (run() ends the spin) once all topics are published."""

    def __init__(self, topics):
        super().__init__('uk_wait_for_topics')
        self.topics = topics
        self.finished = False
        self.get_logger().info(f'waiting for publishers on {", ".join(topics)}')
        self.create_timer(POLL_PERIOD, self._look)

    def _look(self):
        if not self.finished and all(self.count_publishers(t) for t in self.topics):
            self.get_logger().info('all topics published: starting the plots')
            self.finished = True


def main(args=None):
    argv = sys.argv[1:] if args is None else list(args)
    topics = [a for a in rclpy.utilities.remove_ros_args(['_'] + argv)[1:] if a.startswith('/')]
    if not topics:
        print('uk_wait_for_topics: give the topics to wait for, e.g. /uk_controller_node/task_error', file=sys.stderr)
        return 2
    return run(lambda: TopicWait(topics), 'uk_wait_for_topics', args=argv)


if __name__ == '__main__':
    sys.exit(main())
