"""The one settings schema: every key of a robot setup declared once, one setting's check, the
``ros`` section.
"""
