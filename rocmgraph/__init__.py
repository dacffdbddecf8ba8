"""verl's ROCm image as a reproducible build graph.

The pure core: pins.toml -> typed pins -> stage graph -> content keys -> plan.
Everything that touches the outside world (docker, git, HTTP) sits behind one
module each.
"""

__version__ = "0.1.0"
