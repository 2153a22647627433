#!/usr/bin/env bash
# The main job: closed-loop UK simulation of the SCARA on the helix (seed 000),
# on the embedded simulator, with plots. Extra arguments go to `uk-controller simulate`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UK_EXTRAS="mujoco,fast" source "$ROOT/scripts/venv.sh"
cd "$ROOT"
exec uk-controller simulate scara --out results/scara "$@"
