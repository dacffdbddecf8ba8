"""The offline demo profiles: miniatures of the real graph that build here.

Same stage recipes, source fetcher, patch step and wheel store as the real
profiles; only the pins differ (demo/pins.toml, like verl's 7.14 recipe on a
rocm/primus-like base; demo/pins-rocm702.toml, like its 7.0.2 recipe on a plain
OS), and they point at servers on 127.0.0.1 that this package fills and runs:
git repositories whose sources build like the real ones where builds break, an
apt repository signed with a generated key, a repo.radeon.com-style wheel
index, a package index, and a registry holding the demo's base images.
"""
