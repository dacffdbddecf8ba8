"""The offline demo profile: a miniature of the real graph that builds here.

Same stage recipes, source fetcher, patch step and wheel store as the real
profile; only the pins differ (demo/pins.toml), and they point at servers on
127.0.0.1 that this package fills and runs: git repositories, an apt
repository signed with a generated key, a repo.radeon.com-style wheel index,
a package index, and a registry holding the demo base image.
"""
