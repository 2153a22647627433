"""UK controller: Udwadia-Kalaba constrained dynamics control of robots (docs/architecture.md).

Importing the package registers the motor protocols' table with the settings
(uk_controller/settings/protocols.py), so the settings schema knows every protocol and its
``hardware.<section>.*`` keys without importing the hardware layer.
"""

from .hardware import registry as _registry  # noqa: F401 - registers the protocols
