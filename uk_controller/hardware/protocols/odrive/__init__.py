"""``odrive``: the ODrive ASCII protocol (firmware 0.5.x), axes in torque control."""
