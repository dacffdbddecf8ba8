"""The doit wiring: one task per stage and per command (tasks), the command line's
variables and their checks (variables), doit's own database, which a checkout's commands
share (doitdb), and the reporter that prints a user error as one line (reporter). dodo.py
hands them to doit.

The top floor: nothing imports it.
"""
