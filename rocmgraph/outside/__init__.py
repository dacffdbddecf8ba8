"""The outside world, in one place: processes, git, HTTP, the container engine, the
registry, the source cache and upstream histories, the wheel store, PyPI and apt
indexes, logins, and the builders of a pool. Nothing of common/, config/, dockerfile/ or
graph/ imports from here; tests/test_layers.py holds them to that.

``Outside`` (world.py) is what one command reaches beyond its process. The task layer
makes it and passes it in; nothing below makes its own.
"""
