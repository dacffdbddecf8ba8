"""Building stages on an engine: what is built and what is not (execute), each stage's
context (context), the one Dockerfile for `docker build` (dockerfiles), what each build
was made of (records, provenance, compilecache) and what a failed one's output says the host
can fix (failure), what the console shows (ledger, progress), one run's shared state
(session), and the turns two runs take on shared state (turns).

Builds on graph/ and trees/; reaches the world through outside/ and fetch/ only.
"""
