"""Bounds of the plain ACL, with units, in one place."""

from __future__ import annotations

ACL_KEY_LENGTH_MIN_EXCLUSIVE = 6  # AclConstants: accessKey and secretKey must be longer than 6 characters
ACL_KEY_LENGTH_MAX = 1024  # an accessKey/secretKey in plain_acl.yml; real ones are 8..64
ACL_REQUEST_FIELD_LENGTH_MAX = 4096  # AccessKey/Signature/SecurityToken in a request: longer is refused unhashed
ACL_FILE_SIZE_MAX_BYTES = 4 * 1024 * 1024  # plain_acl.yml; ~40k accounts of 100 bytes
ACL_ACCOUNTS_MAX_COUNT = 10_000
ACL_RELOAD_INTERVAL_S = 0.5  # RocketMQ's AclFileWatchService polls every 500 ms
ACL_REFUSALS_LOGGED_PER_WINDOW_COUNT = 20  # refusals logged per window; the rest are counted in one line
ACL_REFUSAL_LOG_WINDOW_S = 10.0
ACL_HOST_CACHE_MAX_COUNT = 10_000  # peer hosts whose global-white decision is cached (cleared beyond / on reload)
ACL_DECISIONS_CACHED_MAX_COUNT = 10_000  # send/pull verdicts per (key, code, topic, group) (cleared beyond / on reload)
ACL_REPLAY_WINDOW_S = 300.0  # an admin account's signature stays bound to its request code this long after last use
ACL_REPLAY_SIGNATURES_MAX_COUNT = 16_384  # (accessKey, signature) -> code entries (~250 bytes each); oldest go first

assert ACL_KEY_LENGTH_MIN_EXCLUSIVE < ACL_KEY_LENGTH_MAX <= ACL_REQUEST_FIELD_LENGTH_MAX
assert ACL_REPLAY_WINDOW_S > 0 and ACL_REPLAY_SIGNATURES_MAX_COUNT > 0
