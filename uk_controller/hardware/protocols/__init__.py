"""One subpackage per motor protocol (codec, bus, device); listed in ``uk_controller.hardware.registry``."""
