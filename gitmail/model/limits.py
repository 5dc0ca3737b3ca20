"""Bounds and defaults the domain enforces and the faces show: leases, reservations, feed reads.

The coordination layer enforces them; the CLI and the MCP server offer the
defaults. They live here, free of imports, so a face can show them in its help
without loading the layers that enforce them.
"""

# Attachments: the largest file one may hold. A sender may lower it (GITMAIL_ATTACHMENT_MAX_BYTES), never
# raise it: every door of every archive (a push, a sync's fetch) refuses a larger one.
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
# Files: the largest upload or download carried inside an MCP call (base64 in the JSON-RPC message, which the
# HTTP transport caps at 4 MiB); larger files go through the server's HTTP file endpoint, up to the attachment
# limit. A message names at most MAX_ATTACHMENT_IDS uploaded files.
FILE_INLINE_MAX_BYTES = 2 * 1024 * 1024
MAX_ATTACHMENT_IDS = 20

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

# Feed reads (an agent's inbox in arrival order): how many of the newest
# arrivals a catch-up shows, how many a cursor read returns, and how long a
# cursor read may wait for the next arrival.
CATCH_UP_DEFAULT = 8
CATCH_UP_MAX = 12
FEED_DEFAULT_LIMIT = 100
FEED_MAX_LIMIT = 200
FEED_MAX_WAIT = 25
# Reads that wait at once on one server: per agent, and in all (GITMAIL_MAX_WAITS_PER_AGENT and
# GITMAIL_MAX_WAITS change them). A waiting read holds no worker thread, only its request.
FEED_MAX_WAITS_PER_AGENT = 4
FEED_MAX_WAITS = 128

# Resource subscriptions (pushed mail): per MCP session or listen stream, and on one server in all.
SUBSCRIPTIONS_PER_SESSION = 64
SUBSCRIPTIONS_MAX = 4096

# Wake-ups (capability cards' wake channels): a webhook's delivery attempts before it is dropped (backoff doubles
# from GITMAIL_WAKE_RETRY_S between them), the deliveries waiting at once, one POST's timeout, and the wake
# streams (server-sent events) one server holds open.
WAKE_ATTEMPTS = 6
WAKE_RETRY_S = 1.0
WAKE_QUEUE = 1000
WAKE_TIMEOUT_S = 5.0
WAKE_STREAMS_MAX = 64

# Build slots: how long a holding lasts unless renewed, and how many may share one slot.
DEFAULT_SLOT_TTL = 3600
DEFAULT_SLOT_EXTEND = 1800

# Reads that carry message bodies (an inbox, outbox or topic with bodies, a
# thread, a summary's examples, the web view's thread page): how many bytes of
# messages one page holds. The default fits a message of the largest size
# (1 MiB of body) with room for its escaping.
READ_BUDGET_DEFAULT = 2 * 1024 * 1024
READ_BUDGET_MIN = 1024
READ_BUDGET_MAX = 8 * 1024 * 1024
