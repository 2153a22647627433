"""``python -m uk_controller.settings [--write-docs] [--write-types]``: the settings table, docs/config.md and
uk_controller/settings/types.py (:func:`.generate.main`)."""

from .generate import main

main()
