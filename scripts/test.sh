#!/usr/bin/env bash
# The whole test suite: UK core, robots, simulation, ROS 2 node over real DDS
# (rclpy from PyPI), serial hardware over pseudo-terminals, colcon build.
# Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UK_EXTRAS="test,ros" source "$ROOT/scripts/venv.sh"
cd "$ROOT"
# Small dense matrices: threaded BLAS only adds contention on a shared 2-core machine.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
set +e
python -m pytest -q -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
