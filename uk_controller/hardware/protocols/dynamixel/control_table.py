"""ROBOTIS Dynamixel Protocol 2.0 constants shared by the bus and the emulator.

Control-table addresses are those of the X series (e.g. XM430-W350, emanual.robotis.com
"Control Table of RAM/EEPROM Area"); the wire units (defaults: the XM430-W350's) are ``codec.OPTIONS``.
"""

ADDR_MODEL_NUMBER = 0  # 2 bytes
ADDR_FIRMWARE = 6  # 1
ADDR_ID = 7  # 1
ADDR_RETURN_DELAY_TIME = 9  # 1, EEPROM, 2 us units (factory value 250 = 500 us)
ADDR_OPERATING_MODE = 11  # 1 (0 = current control)
ADDR_CURRENT_LIMIT = 38  # 2, current units
ADDR_TORQUE_ENABLE = 64  # 1
ADDR_HW_ERROR = 70  # 1, bit flags
ADDR_BUS_WATCHDOG = 98  # 1, signed, 20 ms units; -1 after it expired
ADDR_GOAL_CURRENT = 102  # 2, signed
ADDR_PRESENT_CURRENT = 126  # 2, signed
ADDR_PRESENT_VELOCITY = 128  # 4, signed
ADDR_PRESENT_POSITION = 132  # 4, signed
ADDR_PRESENT_TEMPERATURE = 146

FEEDBACK_START, FEEDBACK_LEN = 126, 10  # current, velocity, position in one sync read
MODE_CURRENT = 0
BUS_WATCHDOG_UNIT = 0.020

INST_PING, INST_READ, INST_WRITE = 0x01, 0x02, 0x03
INST_REBOOT = 0x08
INST_STATUS = 0x55
INST_SYNC_READ, INST_SYNC_WRITE = 0x82, 0x83
ERR_RESULT_FAIL, ERR_INSTRUCTION, ERR_CRC, ERR_DATA_RANGE = 1, 2, 3, 4
ERR_DATA_LENGTH, ERR_DATA_LIMIT, ERR_ACCESS = 5, 6, 7
ERR_ALERT = 0x80
BROADCAST = 0xFE
