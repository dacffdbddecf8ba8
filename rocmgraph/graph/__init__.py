"""The pure graph: the stages (dag), what each one is made of (recipe, closure), its
content key (keys, keycache), why it rebuilds (explain), what it costs (estimate), how
stages share a solve (solve), and one invocation's loaded state (invocation).

Builds on config/ and common/; reaches nothing beyond this process. It writes only
what it owns: rendered recipes, the closure lock file, and the key cache.
"""
