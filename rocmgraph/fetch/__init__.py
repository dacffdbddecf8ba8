"""What builds read from upstream, fetched and kept: sources by commit (sources), read from
git's objects or a checkout (objects), and their histories (upstream), files by sha256
(store), PyPI's and apt's indexes (pypi, apt); and ``Outside`` (world), the one object
through which a command reaches them and its engines. The task layer makes it and passes it
in; nothing below makes its own.

Builds on outside/'s seams, config/ and common/.
"""
