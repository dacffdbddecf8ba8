"""The outside world, in one place: processes, git, HTTP, the container engine, the
registry, the source cache and upstream histories, the wheel store, PyPI and apt
indexes, logins. The pure core (pins, kinds, graph, keys, plan, explain, recipe)
never imports from here; tests/test_layers.py holds it to that.
"""
