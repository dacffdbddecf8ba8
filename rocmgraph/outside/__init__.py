"""The seams to the world beyond this process, one module per tool: processes (proc), git,
HTTP, the docker CLI (docker) and the engine's socket (dockerapi), the registry, ports,
the scratch folders dead runs leave (leftovers), and logins (credentials).

Builds on config/ and common/. Nothing of common/, config/, dockerfile/ or graph/ imports
from here; tests/test_layers.py holds them to that.
"""
