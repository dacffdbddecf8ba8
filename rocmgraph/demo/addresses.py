"""Where the demo's servers listen, on 127.0.0.1.

Below Linux's ephemeral range (32768-60999): a client socket of any build can hold a
port in that range, and the server then cannot bind it.
"""

from __future__ import annotations

HTTP_PORT = 28470
REGISTRY_PORT = 28471
REGISTRY = f"127.0.0.1:{REGISTRY_PORT}"
