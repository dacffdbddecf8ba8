"""One module per command that is more than a build: lock, bump, audit, audit image=
(imageaudit), verify, compare, patches (patch_status), docs, and the plan.

Builds on build/ and everything below it.
"""
