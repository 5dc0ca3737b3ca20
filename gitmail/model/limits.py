"""Bounds and defaults of the records that expire: seat leases and file reservations.

The coordination layer enforces them; the CLI and the MCP server offer the
defaults. They live here, free of imports, so a face can show them in its help
without loading the layers that enforce them.
"""

# Seats: how long a session drives an agent before it must renew.
DEFAULT_LEASE_S = 600
MIN_LEASE_S = 60
MAX_LEASE_S = 86400

# File reservations: how long one lasts, and how long a holder may be silent
# before another agent may force-release it.
DEFAULT_TTL = 3600
MIN_TTL = 60
MAX_TTL = 30 * 86400
DEFAULT_INACTIVITY = 30 * 60
MIN_INACTIVITY = 60
