#!/usr/bin/env bash
# The whole test suite: UK core, robots, simulation, ROS 2 node over real DDS
# (rclpy from PyPI), serial hardware over pseudo-terminals, colcon build.
# Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UK_EXTRAS="test,ros" source "$ROOT/scripts/venv.sh"
cd "$ROOT"
set +e
python -m pytest -q -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
