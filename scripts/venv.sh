#!/usr/bin/env bash
# Source me: creates ./.venv once and (re)installs uk_controller into it with the
# extras in $UK_EXTRAS whenever setup.py or the extras change. Needs only python3.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${UK_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
UK_EXTRAS="${UK_EXTRAS:-mujoco}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
want="$(cat "$ROOT/setup.py" | sha256sum | cut -c1-16)-$UK_EXTRAS"
if [ "$(cat "$VENV/.uk_installed" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing uk_controller[$UK_EXTRAS] (first run takes a few minutes)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[$UK_EXTRAS]"
  echo "$want" > "$VENV/.uk_installed"
fi
export PATH="$VENV/bin:$PATH"
