"""``uk_binary``: our COBS-framed binary protocol with CRC-16 and sequence numbers (docs/serial_protocol.md)."""
