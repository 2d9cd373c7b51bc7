"""The dashboard's pages: each handler asks the cluster through `Admin` (as the logged-in account),
shapes the answer with the pure modules beside it and renders a template. Changes are POSTs that
admin accounts only may make; the riskier ones (delete a topic, reset offsets) go through a page
that asks the person to type the name again."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping
from typing import Any

import aiohttp_jinja2
from aiohttp import web

from shoal.client import Admin, Message, MessageExt, MQBrokerError, MQClientError, Producer
from shoal.client.admin import Connection, QueueProgress
from shoal.dashboard.accounts import account_rows, authenticate
from shoal.dashboard.app import (
    DASHBOARD,
    LOGIN_COOKIE,
    Dashboard,
    admin_only,
    login_token,
    session_of,
    set_session_cookie,
)
from shoal.dashboard.body_preview import preview_body
from shoal.dashboard.charts import line_chart
from shoal.dashboard.cluster_view import (
    MASTER_ID,
    BrokerRow,
    GroupFigures,
    broker_addresses,
    broker_row,
    group_figures,
    unreachable_row,
)
from shoal.dashboard.history import get_series, lag_series, put_series
from shoal.dashboard.limits import (
    CSRF_FIELD,
    DLQ_RESEND_ALL_MAX,
    JOB_REFRESH_S,
    MESSAGE_LIST_MAX,
    SESSION_COOKIE,
    TEST_MESSAGE_MAX_BYTES,
)
from shoal.formats.errors import TraceDataError
from shoal.formats.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, TRACE_TOPIC, is_system_topic
from shoal.formats.trace import TraceRecord, decode_trace_data
from shoal.protocol import ResponseCode

TEST_MESSAGE_PRODUCER_GROUP = "SHOAL_DASHBOARD_TEST_PRODUCER"
TIME_FORMAT = "%Y-%m-%dT%H:%M"  # <input type="datetime-local">


# --- helpers ---


def _dashboard(request: web.Request) -> Dashboard:
    return request.app[DASHBOARD]


async def _admin(request: web.Request) -> Admin:
    return await _dashboard(request).admin_for(session_of(request).user)


def _context(request: web.Request, **values: Any) -> dict[str, Any]:
    """What every template gets: the session (user, CSRF token) and the messages to show once."""
    session = session_of(request)
    flash, session.flash = session.flash, []
    return {"session": session, "csrf_field": CSRF_FIELD, "flash": flash, **values}


def _redirect(request: web.Request, location: str, message: str) -> web.HTTPSeeOther:
    session_of(request).flash.append(message)
    return web.HTTPSeeOther(location)


def _field(form: Mapping[str, Any], name: str, default: str = "") -> str:
    value = form.get(name, default)
    return value.strip() if isinstance(value, str) else default


def _int_field(form: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    text = _field(form, name, str(default))
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {text!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], not {value}")
    return value


def _time_ms(text: str, what: str) -> int:
    """A `datetime-local` value (the dashboard's local time) in epoch milliseconds."""
    try:
        return int(datetime.datetime.strptime(text, TIME_FORMAT).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a time like 2026-11-29T14:05") from None


def _time_text(epoch_ms: int) -> str:
    if epoch_ms <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(epoch_ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def topic_kind(topic: str) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "DLQ"
    if is_system_topic(topic):
        return "system"
    return "normal"


# --- login ---


async def login_page(request: web.Request) -> web.StreamResponse:
    dashboard = _dashboard(request)
    if dashboard.settings.acl_file is None:
        raise web.HTTPSeeOther("/")
    token = login_token(request)
    context = {"token": token, "next": request.query.get("next", "/"), "error": "", "csrf_field": CSRF_FIELD}
    response = aiohttp_jinja2.render_template("login.html", request, context)
    response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="Strict", path="/login")
    return response


async def login(request: web.Request) -> web.StreamResponse:
    dashboard = _dashboard(request)
    form = await request.post()
    cookie_token = request.cookies.get(LOGIN_COOKIE, "")
    next_path = _field(form, "next", "/")
    if not next_path.startswith("/") or next_path.startswith("//"):
        next_path = "/"  # never redirect off this site
    if not cookie_token or _field(form, CSRF_FIELD) != cookie_token:
        raise web.HTTPForbidden(text="the login form is stale: reload it and try again")
    rules = dashboard.rules()
    user = authenticate(rules, _field(form, "access_key"), _field(form, "secret_key")) if rules else None
    if user is None:
        context = {"token": cookie_token, "next": next_path, "error": "Unknown access key or wrong secret key."}
        return aiohttp_jinja2.render_template("login.html", request, {**context, "csrf_field": CSRF_FIELD}, status=401)
    session = dashboard.sessions.open(user)
    response = web.HTTPSeeOther(next_path)
    set_session_cookie(response, session)
    response.del_cookie(LOGIN_COOKIE, path="/login")
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    _dashboard(request).sessions.close(session_of(request).session_id)
    response = web.HTTPSeeOther("/login" if _dashboard(request).settings.acl_file else "/")
    response.del_cookie(SESSION_COOKIE, path="/")
    return response


async def healthz(request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok\n")


# --- cluster ---


async def _broker_rows(admin: Admin) -> list[BrokerRow]:
    info = await admin.cluster_info()
    brokers = broker_addresses(info)

    async def row(cluster: str, name: str, broker_id: int, address: str) -> BrokerRow:
        try:
            return broker_row(cluster, name, broker_id, address, await admin.runtime_info(address))
        except MQClientError as error:
            return unreachable_row(cluster, name, broker_id, address, str(error))

    return list(await asyncio.gather(*(row(*broker) for broker in brokers)))


async def cluster_page(request: web.Request) -> web.StreamResponse:
    rows = await _broker_rows(await _admin(request))
    history = _dashboard(request).history
    masters = [row.broker_name for row in rows if row.broker_id == MASTER_ID]
    put_chart = line_chart("Put TPS by broker", [history.line(put_series(name), name) for name in masters])
    get_chart = line_chart("Get TPS by broker", [history.line(get_series(name), name) for name in masters])
    context = _context(request, title="Cluster", rows=rows, put_chart=put_chart, get_chart=get_chart)
    return aiohttp_jinja2.render_template("cluster.html", request, context)


# --- topics ---


async def topics_page(request: web.Request) -> web.StreamResponse:
    admin = await _admin(request)
    show_system = request.query.get("system") == "1"
    topics = [(topic, topic_kind(topic)) for topic in await admin.topic_list()]
    if not show_system:
        topics = [(topic, kind) for topic, kind in topics if kind == "normal"]
    clusters = sorted((await admin.cluster_info()).cluster_addr_table)
    context = _context(request, title="Topics", topics=topics, show_system=show_system, clusters=clusters)
    return aiohttp_jinja2.render_template("topics.html", request, context)


@admin_only
async def create_topic(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    topic, cluster = _field(form, "topic"), _field(form, "cluster")
    queues = _int_field(form, "queues", 8, 1, 1024)
    order = _field(form, "order") == "on"
    addresses = await (await _admin(request)).create_topic(
        topic, cluster=cluster, read_queue_nums=queues, write_queue_nums=queues, order=order
    )
    raise _redirect(request, f"/topics/{topic}", f"Topic {topic} created or updated on {', '.join(addresses)}.")


async def topic_page(request: web.Request) -> web.StreamResponse:
    topic = request.match_info["topic"]
    admin = await _admin(request)
    route = await admin.topic_route(topic)
    stats = await admin.topic_stats(topic)
    queues = [
        (
            mq.broker_name,
            mq.queue_id,
            offsets.min_offset,
            offsets.max_offset,
            _time_text(offsets.last_update_timestamp_ms),
        )
        for mq, offsets in sorted(stats.offset_table.items(), key=lambda item: (item[0].broker_name, item[0].queue_id))
    ]
    total = sum(max_offset - min_offset for _b, _q, min_offset, max_offset, _t in queues)
    context = _context(request, title=f"Topic {topic}", topic=topic, route=route, queues=queues, total=total)
    return aiohttp_jinja2.render_template("topic.html", request, context)


@admin_only
async def send_test_message(request: web.Request) -> web.StreamResponse:
    topic = request.match_info["topic"]
    form = await request.post()
    body = _field(form, "body").encode("utf-8")
    if len(body) > TEST_MESSAGE_MAX_BYTES:
        raise ValueError(f"a test message holds at most {TEST_MESSAGE_MAX_BYTES} bytes")
    message = Message(topic, body, tags=_field(form, "tags") or None, keys=_field(form, "keys"))
    dashboard = _dashboard(request)
    admin = await dashboard.admin_for(session_of(request).user)
    async with Producer(
        TEST_MESSAGE_PRODUCER_GROUP, dashboard.settings.namesrv, client_settings=admin.client_settings
    ) as producer:
        result = await producer.send(message)
    raise _redirect(
        request,
        f"/topics/{topic}",
        f"Sent: {result.status.name}, msgId {result.msg_id}, offsetMsgId {result.offset_msg_id}, "
        f"queue {result.message_queue.broker_name}:{result.message_queue.queue_id} offset {result.queue_offset}.",
    )


async def confirm_delete_topic(request: web.Request) -> web.StreamResponse:
    topic = request.match_info["topic"]
    context = _context(
        request,
        title=f"Delete topic {topic}?",
        action=f"/topics/{topic}/delete",
        name=topic,
        warning=f"Every broker deletes {topic}'s queues and the NameServers forget its route. "
        "Its messages stay in the CommitLog until retention removes them, but no consumer can reach them.",
        extra={},
        cancel=f"/topics/{topic}",
    )
    return aiohttp_jinja2.render_template("confirm.html", request, context)


@admin_only
async def delete_topic(request: web.Request) -> web.StreamResponse:
    topic = request.match_info["topic"]
    form = await request.post()
    if _field(form, "confirm") != topic:
        raise _redirect(request, f"/topics/{topic}/delete", f"Not deleted: type {topic} to confirm.")
    await (await _admin(request)).delete_topic(topic)
    raise _redirect(request, "/topics", f"Topic {topic} deleted.")


# --- consumer groups ---


async def groups_page(request: web.Request) -> web.StreamResponse:
    admin = await _admin(request)
    rows = [row for row in await _broker_rows(admin) if row.broker_id == MASTER_ID and not row.error]
    by_group: dict[str, GroupFigures] = {}
    names: set[str] = set()
    for row in rows:
        names.update(await admin.subscription_groups(row.address))
        group_figures(await admin.broker_consume_stats(row.address), by_group)
    names.update(by_group)
    show_system = request.query.get("system") == "1"
    groups = [
        (name, by_group.get(name))
        for name in sorted(names)
        if show_system or not (name.startswith("CID_RMQ_SYS") or name in SYSTEM_GROUPS)
    ]
    history = _dashboard(request).history
    lagging = sorted(
        (name for name, figures in groups if figures and figures.lag), key=lambda name: -by_group[name].lag
    )[:6]
    chart = line_chart("Lag by group (the six behind most)", [history.line(lag_series(name), name) for name in lagging])
    context = _context(request, title="Consumer groups", groups=groups, show_system=show_system, chart=chart)
    return aiohttp_jinja2.render_template("groups.html", request, context)


SYSTEM_GROUPS = frozenset(
    {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        "CID_RMQ_SYS_TRANS",
        "SCHEDULE_CONSUMER",
    }
)


async def group_page(request: web.Request) -> web.StreamResponse:
    group = request.match_info["group"]
    admin = await _admin(request)
    try:
        progress: list[QueueProgress] = await admin.consumer_progress(group)
    except MQBrokerError as error:
        if error.code not in (ResponseCode.CONSUMER_NOT_ONLINE, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST):
            raise
        progress = []
    progress.sort(key=lambda item: (item.mq.topic, item.mq.broker_name, item.mq.queue_id))
    try:
        connection = await admin.consumer_connections(group)
    except MQBrokerError as error:
        if error.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        connection = None
    dead = await admin.dlq_messages(group, MESSAGE_LIST_MAX)
    topics = sorted({item.mq.topic for item in progress if not item.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)})
    chart = line_chart(f"Lag of {group}", [_dashboard(request).history.line(lag_series(group), group)])
    context = _context(
        request,
        title=f"Consumer group {group}",
        group=group,
        progress=progress,
        total_lag=sum(item.lag for item in progress),
        connection=connection,
        dead=dead,
        topics=topics,
        chart=chart,
        now=datetime.datetime.now().strftime(TIME_FORMAT),
        time_text=_time_text,
    )
    return aiohttp_jinja2.render_template("group.html", request, context)


async def consumer_page(request: web.Request) -> web.StreamResponse:
    """One consumer's running info (mqadmin consumerStatus): asked of the client through a broker."""
    group, client_id = request.match_info["group"], request.match_info["client_id"]
    info = await (await _admin(request)).consumer_running_info(group, client_id)
    queues = sorted(info.queues.items(), key=lambda item: (item[0].topic, item[0].broker_name, item[0].queue_id))
    columns = sorted({name for _mq, figures in queues for name in figures})
    context = _context(
        request,
        title=f"Consumer {client_id}",
        group=group,
        info=info,
        queues=queues,
        columns=columns,
        status_columns=sorted({name for figures in info.status.values() for name in figures}),
    )
    return aiohttp_jinja2.render_template("consumer.html", request, context)


async def confirm_reset(request: web.Request) -> web.StreamResponse:
    group = request.match_info["group"]
    topic, when = request.query.get("topic", ""), request.query.get("time", "")
    timestamp_ms = _time_ms(when, "the time")
    context = _context(
        request,
        title=f"Reset {group}'s offsets on {topic}?",
        action=f"/groups/{group}/reset",
        name=group,
        warning=f"Every queue of {topic} moves to the first message stored at or after {_time_text(timestamp_ms)}; "
        f"the group's live consumers take the new offsets at once and consume again from there (or skip ahead). "
        "The group must have consumers online.",
        extra={"topic": topic, "time": when},
        cancel=f"/groups/{group}",
    )
    return aiohttp_jinja2.render_template("confirm.html", request, context)


@admin_only
async def reset_offsets(request: web.Request) -> web.StreamResponse:
    group = request.match_info["group"]
    form = await request.post()
    topic = _field(form, "topic")
    if _field(form, "confirm") != group:
        raise _redirect(request, f"/groups/{group}", f"Offsets not reset: type {group} to confirm.")
    timestamp_ms = _time_ms(_field(form, "time"), "the time")
    table = await (await _admin(request)).reset_offset_by_time(topic, group, timestamp_ms, force=True)
    moved = ", ".join(f"{mq.broker_name}:{mq.queue_id}→{offset}" for mq, offset in sorted(table.items()))
    raise _redirect(request, f"/groups/{group}", f"Reset {len(table)} queues of {topic}: {moved or 'none'}.")


@admin_only
async def resend_dead_letter(request: web.Request) -> web.StreamResponse:
    group = request.match_info["group"]
    form = await request.post()
    offset_msg_id = _field(form, "offset_msg_id")
    result = await (await _admin(request)).resend_dlq_message(group, offset_msg_id, to_retry_topic=True)
    raise _redirect(
        request,
        f"/groups/{group}",
        f"Dead letter {offset_msg_id} resent to {group}'s retry topic: {result.status.name}, msgId {result.msg_id}.",
    )


@admin_only
async def resend_all_dead_letters(request: web.Request) -> web.StreamResponse:
    """Every dead letter of the group (up to DLQ_RESEND_ALL_MAX) to its retry topic, as a job."""
    group = request.match_info["group"]
    admin = await _admin(request)
    dead = await admin.dlq_messages(group, DLQ_RESEND_ALL_MAX)
    if not dead:
        raise _redirect(request, f"/groups/{group}", f"{group} has no dead letters.")

    async def resend(message: MessageExt) -> str:
        result = await admin.resend_dlq_message(group, message.offset_msg_id, to_retry_topic=True)
        return f"{result.status.name}, msgId {result.msg_id}"

    job = _dashboard(request).jobs.start(
        f"Resend {len(dead)} dead letters of {group}",
        session_of(request).user.access_key,
        dead,
        resend,
        lambda message: f"{message.msg_id} ({' '.join(message.keys) or 'no keys'})",
    )
    raise web.HTTPSeeOther(f"/jobs/{job.job_id}?back=/groups/{group}")


async def job_page(request: web.Request) -> web.StreamResponse:
    try:
        job_id = int(request.match_info["job_id"])
    except ValueError:
        raise web.HTTPNotFound(text="no such job") from None
    job = _dashboard(request).jobs.find(job_id, session_of(request).user.access_key)
    if job is None:
        raise web.HTTPNotFound(text="no such job (jobs are kept while the dashboard runs, the newest 50)")
    back = request.query.get("back", "")
    if not back.startswith("/") or back.startswith("//"):
        back = ""
    context = _context(request, title=job.title, job=job, refresh_s=JOB_REFRESH_S, back=back)
    return aiohttp_jinja2.render_template("job.html", request, context)


# --- messages ---


async def messages_page(request: web.Request) -> web.StreamResponse:
    """By topic and time range, by topic and key, or by message id (offset id, or unique key + topic)."""
    query = request.query
    mode = query.get("mode", "")
    topic = query.get("topic", "").strip()
    found: list[MessageExt] = []
    if mode:
        admin = await _admin(request)
        if mode == "id":
            message_id = query.get("id", "").strip()
            if len(message_id) == 32 and not topic:
                found = [await admin.view_message(message_id)]
            elif topic:
                found = await admin.query_message_by_unique_key(topic, message_id)
                if not found and len(message_id) == 32:
                    found = [await admin.view_message(message_id)]
            else:
                raise ValueError("a unique key (msgId) needs its topic; an offset message id is 32 hex digits")
        elif mode == "key":
            found = await admin.query_message(topic, query.get("key", "").strip(), max_num=MESSAGE_LIST_MAX)
        elif mode == "time":
            begin = _time_ms(query.get("begin", ""), "the begin time")
            end = _time_ms(query.get("end", ""), "the end time")
            found = await admin.messages_between(topic, begin, end, max_count=MESSAGE_LIST_MAX)
        else:
            raise ValueError(f"unknown query mode {mode!r}")
    now = datetime.datetime.now()
    context = _context(
        request,
        title="Messages",
        mode=mode,
        query=query,
        found=found,
        time_text=_time_text,
        default_begin=(now - datetime.timedelta(hours=1)).strftime(TIME_FORMAT),
        default_end=(now + datetime.timedelta(minutes=1)).strftime(TIME_FORMAT),
    )
    return aiohttp_jinja2.render_template("messages.html", request, context)


async def _trace_of(admin: Admin, msg_id: str) -> list[TraceRecord]:
    """The trace records of one message (keyed by its msgId in the trace topic), oldest first."""
    try:
        carriers = await admin.query_message(TRACE_TOPIC, msg_id, max_num=MESSAGE_LIST_MAX)
    except MQBrokerError as error:
        if error.code == ResponseCode.TOPIC_NOT_EXIST:
            return []
        raise
    records: list[TraceRecord] = []
    for carrier in carriers:
        try:
            records.extend(record for record in decode_trace_data(carrier.body) if record.msg_id == msg_id)
        except TraceDataError:
            continue
    return sorted(records, key=lambda record: record.timestamp_ms or 0)


def trace_rows(records: list[TraceRecord]) -> list[dict[str, Any]]:
    """The timeline: each record's offset from the first and its cost as a bar (percent of the span)."""
    if not records:
        return []
    start = min(record.timestamp_ms or 0 for record in records)
    end = max((record.timestamp_ms or 0) + (record.cost_time_ms or 0) for record in records)
    span = max(end - start, 1)
    rows = []
    for record in records:
        at = (record.timestamp_ms or start) - start
        rows.append(
            {
                "record": record,
                "at_ms": at,
                "left": round(100 * at / span, 1),
                "width": max(round(100 * (record.cost_time_ms or 0) / span, 1), 0.5),
                "time": _time_text(record.timestamp_ms or 0),
            }
        )
    return rows


async def message_page(request: web.Request) -> web.StreamResponse:
    offset_msg_id = request.match_info["offset_msg_id"]
    admin = await _admin(request)
    message = await admin.view_message(offset_msg_id)
    trace = trace_rows(await _trace_of(admin, message.msg_id))
    dlq_group = message.topic[len(DLQ_GROUP_TOPIC_PREFIX) :] if message.topic.startswith(DLQ_GROUP_TOPIC_PREFIX) else ""
    context = _context(
        request,
        title=f"Message {message.msg_id}",
        message=message,
        preview=preview_body(message.body),
        trace=trace,
        dlq_group=dlq_group,
        time_text=_time_text,
    )
    return aiohttp_jinja2.render_template("message.html", request, context)


# --- producers, config, ACL ---


async def producers_page(request: web.Request) -> web.StreamResponse:
    topic, group = request.query.get("topic", "").strip(), request.query.get("group", "").strip()
    connections: list[tuple[str, Connection]] = []
    if topic and group:
        admin = await _admin(request)
        route = await admin.topic_route(topic)
        for broker in route.broker_datas:
            address = broker.broker_addrs.get(MASTER_ID)
            if address is not None:
                connections.extend(
                    (broker.broker_name, item) for item in await admin.producer_connections(address, group)
                )
    context = _context(request, title="Producers", topic=topic, group=group, connections=connections)
    return aiohttp_jinja2.render_template("producers.html", request, context)


async def config_page(request: web.Request) -> web.StreamResponse:
    admin = await _admin(request)
    rows = await _broker_rows(admin)
    addresses = [row.address for row in rows]
    address = request.query.get("broker") or (addresses[0] if addresses else "")
    if address and address not in addresses:
        raise ValueError(f"{address} is not a broker of this cluster")
    config = await admin.broker_config(address) if address else {}
    context = _context(request, title="Broker configuration", rows=rows, address=address, config=sorted(config.items()))
    return aiohttp_jinja2.render_template("config.html", request, context)


@admin_only
async def update_config(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    address, key, value = _field(form, "broker"), _field(form, "key"), _field(form, "value")
    admin = await _admin(request)
    if address not in {row.address for row in await _broker_rows(admin)}:
        raise ValueError(f"{address} is not a broker of this cluster")
    if not key:
        raise ValueError("which setting? the key is empty")
    await admin.update_broker_config(address, {key: value})
    raise _redirect(request, f"/config?broker={address}", f"{key} set to {value!r} on {address}.")


async def acl_page(request: web.Request) -> web.StreamResponse:
    rules = _dashboard(request).rules()
    context = _context(request, title="ACL accounts", rows=account_rows(rules) if rules else None)
    return aiohttp_jinja2.render_template("acl.html", request, context)


def add_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/login", login_page),
            web.post("/login", login),
            web.post("/logout", logout),
            web.get("/", cluster_page),
            web.get("/topics", topics_page),
            web.post("/topics", create_topic),
            web.get("/topics/{topic}", topic_page),
            web.post("/topics/{topic}/send", send_test_message),
            web.get("/topics/{topic}/delete", confirm_delete_topic),
            web.post("/topics/{topic}/delete", delete_topic),
            web.get("/groups", groups_page),
            web.get("/groups/{group}", group_page),
            web.get("/groups/{group}/consumers/{client_id}", consumer_page),
            web.get("/groups/{group}/reset", confirm_reset),
            web.post("/groups/{group}/reset", reset_offsets),
            web.post("/groups/{group}/resend", resend_dead_letter),
            web.post("/groups/{group}/resend-all", resend_all_dead_letters),
            web.get("/jobs/{job_id}", job_page),
            web.get("/messages", messages_page),
            web.get("/messages/{offset_msg_id}", message_page),
            web.get("/producers", producers_page),
            web.get("/config", config_page),
            web.post("/config", update_config),
            web.get("/acl", acl_page),
        ]
    )
