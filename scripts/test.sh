#!/usr/bin/env bash
# The whole test suite: UK core, robots, simulation, ROS 2 node over real DDS
# (rclpy from PyPI), serial hardware over pseudo-terminals, colcon build.
# Extra arguments go to pytest:
#   ./scripts/test.sh                                           # whole suite: 8-11 min in a fresh clone
#   ./scripts/test.sh -m "not ros and not serial and not slow"  # quick selection: under a minute
# (2 cores shared with other jobs; README.md, Tests). The quick selection starts no process and compiles
# no robot's kernels: test/conftest.py fails a test without the slow marker that does either.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UK_EXTRAS="test,ros" source "$ROOT/scripts/venv.sh"
cd "$ROOT"
# libsdformat's URDF converter (test/test_gazebo_conversion.py: what gz sim spawns). Installed here
# when missing and we may (root on Debian); otherwise the test skips naming the command, and fails in CI.
if ! pkg-config --list-all 2>/dev/null | grep -q '^sdformat[0-9]' && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "[setup] installing libsdformat-dev g++ pkg-config (apt-get) for the Gazebo conversion test"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq libsdformat-dev g++ pkg-config || { apt-get update -qq && apt-get install -y -qq libsdformat-dev g++ pkg-config; }; } \
    > "${TMPDIR:-/tmp}/uk_controller-apt.log" 2>&1 || echo "[setup] apt-get failed (see ${TMPDIR:-/tmp}/uk_controller-apt.log)"
fi
# Small dense matrices: threaded BLAS only adds contention on a shared 2-core machine.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# The package's bytecode, written once: the tests start hundreds of Python processes, and where
# PYTHONDONTWRITEBYTECODE is set (as in many containers) each would compile every module it imports.
PYTHONDONTWRITEBYTECODE= python -m compileall -q uk_controller bench > /dev/null || true
# pytest-xdist workers: one per core, at most 2 (test/parallel.py gives each its own ROS domain ids and
# lets numba compile each kernel once for all of them). UK_TEST_WORKERS=0 runs in this process (pdb).
# (nproc without the OMP_* limits just set: nproc obeys them)
workers="${UK_TEST_WORKERS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 1)}"
[ "$workers" -gt 2 ] && workers=2
parallel=()
[ "$workers" -ge 2 ] && parallel=(-n "$workers" --dist worksteal)
set +e
python -m pytest -q -p no:cacheprovider --durations=25 ${parallel[@]+"${parallel[@]}"} "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
