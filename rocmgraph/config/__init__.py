"""The pins: pins.toml read once into frozen dataclasses (pins, kinds, archs), and the one
module that edits a pins file in place (pinsedit).

Builds on common/ only; reaches nothing beyond this process.
"""
