"""``can_mit``: "MIT mode" CAN motors (mini-cheetah, CubeMars AK, Damiao DM-J) through python-can."""
