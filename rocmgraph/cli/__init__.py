"""The doit wiring: variables, one task per stage and per command (tasks), and the
reporter that prints a user error as one line (reporter). dodo.py hands them to doit.

The top floor: nothing imports it.
"""
