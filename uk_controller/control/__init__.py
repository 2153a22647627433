"""The controller: ControllerCore (one control step from a measured state to efforts), redundancy
resolution, named statuses, re-arming without a jolt, fixed-rate loop timing.
"""
