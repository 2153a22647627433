"""The UK core: the Udwadia-Kalaba equation, Chen's servo control, pseudo-inverses, Baumgarte
stabilization, singular mass matrices. Plain NumPy: no Pinocchio, no robots, no ROS (DESIGN.md).
"""
