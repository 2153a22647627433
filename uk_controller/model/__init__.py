"""The robot model over Pinocchio (M, C, G, frames, Jacobians), its validity checks at load, passive
joint dynamics and the packed records of the compiled tree pass.
"""
