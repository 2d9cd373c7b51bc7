"""Every limit of the dashboard, named once."""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"  # loopback unless told otherwise: the dashboard can change the cluster
DEFAULT_PORT = 8087  # rocketmq-dashboard's 8080 is often taken by the application next to it
SESSION_IDLE_S = 30 * 60.0  # a login lasts this long without a request
SESSIONS_MAX = 1_000  # the oldest session goes first beyond this
SESSION_COOKIE = "shoal_dashboard_session"
CSRF_FIELD = "csrf_token"
TOKEN_BYTES = 32  # session ids and CSRF tokens: secrets.token_urlsafe(TOKEN_BYTES)
SAMPLE_INTERVAL_S = 10.0  # how often the charts' figures are read from the brokers
HISTORY_SAMPLES = 360  # one hour of samples at the default interval
ADMIN_TIMEOUT_S = 5.0  # one admin request to a NameServer or broker
BODY_PREVIEW_BYTES = 4_096  # what a message page shows of a body before "download"
MESSAGE_LIST_MAX = 64  # messages one query lists
TEST_MESSAGE_MAX_BYTES = 64 * 1024  # a test message typed into the topic page
CHART_WIDTH = 640
CHART_HEIGHT = 160
JOBS_KEPT = 50  # finished jobs whose pages stay readable
JOB_REFRESH_S = 1  # how often a running job's page reloads itself
DLQ_RESEND_ALL_MAX = 1_000  # dead letters one "resend all" takes
