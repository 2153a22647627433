"""``python -m uk_controller.settings [--write-docs]``: the settings table (:func:`.schema.main`)."""

from .schema import main

main()
