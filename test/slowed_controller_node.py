"""The controller node with chosen control steps deliberately slowed, for the overrun-policy tests:
``SLOWED_STEPS="first,count,seconds"`` makes steps first .. first+count-1 sleep `seconds` after they are
computed. Run as ``python -m slowed_controller_node --ros-args ...`` with this folder on PYTHONPATH."""

import os
import time

from uk_controller.control.controller import ControllerCore
from uk_controller.ros import controller_node


def slow_down(spec):
    first, count, seconds = spec.split(',')
    first, count, seconds = int(first), int(count), float(seconds)
    step_view = ControllerCore.step_view
    calls = [0]

    def slowed_step_view(self, q, qd, t):
        k = calls[0]
        calls[0] = k + 1
        result = step_view(self, q, qd, t)
        if first <= k < first + count:
            time.sleep(seconds)
        return result

    ControllerCore.step_view = slowed_step_view


if __name__ == '__main__':
    slow_down(os.environ['SLOWED_STEPS'])
    controller_node.main()
