/* The CommitLog record's hot steps in C (optional; shoal.formats.record and shoal.formats.java_hash
 * hold the Python reference, which the same tests run against: tests/formats/test_record_speedups.py).
 *
 * Why C: these run once or more per message on the broker's event-loop thread (the append, the
 * dispatch that reads the record back, the index key hash), where each Python call is a few
 * struct calls and slice copies plus the interpreter's dispatch between them.
 *
 * java_string_hash(text: str) -> int
 *     Java's String.hashCode() (h = 31*h + c over UTF-16 code units, 32-bit wrap), signed. Code
 *     points above U+FFFF count as their surrogate pair, as in Java.
 * encode_record_into(buffer, position, body, topic, properties, queue_id, flag, queue_offset,
 *                    physical_offset, sysflag, born_timestamp, born_host, store_timestamp,
 *                    store_host, reconsume_times, prepared_transaction_offset, crc) -> int
 *     formats.record.encode_record_into: one V1 record at `position` of a writable buffer; returns
 *     its length. ValueError (nothing written) when a field does not fit its width, the SYSFLAG
 *     host bits do not match the hosts' lengths, or the record does not fit the buffer: what it
 *     writes always frames as a record of the returned length.
 * dispatch_fields(buffer, position, limit, expected_offset)
 *         -> (total, queue_id, queue_offset, physical, sysflag, store_timestamp, topic: bytes,
 *             properties: bytes) | None
 *     The fields dispatch needs from a well-formed V1 record at `position` whose record ends by
 *     `limit` and whose PHYSICALOFFSET is `expected_offset`; None for anything else (the caller's
 *     full check then names the problem). Every length is checked against `limit`.
 * find_properties(data: bytes, names: tuple[bytes, ...]) -> list[str | None]
 *     formats.properties.python_find_properties: the values of `names` in an encoded property
 *     string (name \x01 value \x02 ...), the last non-empty value of a repeated name winning,
 *     decoded as UTF-8 with replacement; None where absent.
 * dispatch_run(buffer, position, limit, expected_offset, count_max, raw_topic: bytes, queue_id,
 *              next_queue_offset, max_physical_offset, units, units_position, units_end, topic: str,
 *              request_type, keys_out: list | None, arrivals_out: list | None)
 *         -> (consumed, count, next_queue_offset, max_physical_offset, units_position, last_store_timestamp)
 *     formats.dispatch_run.python_dispatch_run: the ConsumeQueue units of consecutive records of one
 *     queue, written into `units` from `units_position`; stops at the first record that is not the
 *     queue's next plain message (see the Python reference for the exact rule).
 * dispatch_runs(buffer, position, limit, expected_offset, count_max, runs: dict, request_type,
 *               keys_out: list | None, listening) -> (consumed, count, last_store_timestamp)
 *     formats.dispatch_run.python_dispatch_runs: dispatch_run over consecutive records of several
 *     queues (senders that spread their messages over the queues interleave them), each through
 *     the open run `runs[(raw topic, queue id)]`, whose state it reads and writes back.
 * walk_records(buffer, position, limit, stop_at, count_max, size_max) -> (positions: list[int], end, stop)
 *     formats.record.python_walk_records: frame consecutive records by MAGICCODE and TOTALSIZE
 *     alone; `stop` indexes record.WALK_STOPS. ValueError when [position, limit) is not inside the
 *     buffer (the reference's struct.error).
 * index_put(buffer, hash_slots, index_count, key: str, physical_offset, time_diff) -> int
 *     formats.index_entry.python_index_put: entry `index_count` of an IndexFile for `key`, and its
 *     slot pointed at it; returns the bucket's previous newest entry (0: none). ValueError when the
 *     entry or slot would fall outside the buffer (nothing written).
 * frame_messages(buffer, position, limit, base_offset, crc32: Callable | None, topics_valid: set[bytes])
 *         -> (position after the last, count)
 *     formats.record.python_frame_messages: recovery's scan over consecutive well-formed V1 messages
 *     at their expected PHYSICALOFFSET whose topic decodes as UTF-8 (`topics_valid` caches the
 *     topics that do) and, when `crc32` (zlib.crc32) is given, whose body matches BODYCRC.
 *     ValueError when [position, limit) is not inside the buffer.
 * covered_run(buffer, position, limit, expected_offset, stop_at, indexed_end, queues: dict,
 *             topic_names: dict, count_max, keys_out: list | None)
 *         -> (consumed, count, missing (topic, queue_id) | None)
 *     formats.covered_run.python_covered_run: consecutive records re-dispatch may skip, their
 *     ConsumeQueue (`queues[(topic, queue_id)].max_physical_offset`) past them, and the index too
 *     or their unique key appended to `keys_out`.
 * index_put_unique_keys(buffer, hash_slots, entries_max, index_count, begin_physical_offset,
 *                       begin_timestamp, entries: list, start)
 *         -> (position, index_count, new_slots, begin_physical_offset, begin_timestamp)
 *     formats.index_entry.python_index_put_unique_keys: index_put for "topic#key" of each entry from
 *     `start` until the file holds `entries_max`, the header's fields handed back.
 * index_relink(buffer, hash_slots, index_count, begin_offset) -> (kept, used_slots, last_offset, last_time_diff)
 *     formats.index_entry.python_index_relink: an IndexFile's slots rebuilt from its entries
 *     1..index_count-1, up to the first entry that cannot follow the one before it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_record_layout.h"

static uint32_t java_hash_of(PyObject *text);

static PyObject *
java_string_hash(PyObject *module, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "java_string_hash takes a str");
        return NULL;
    }
    return PyLong_FromLong((long)(int32_t)java_hash_of(arg));
}

static PyObject *
encode_record_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "encode_record_into takes 17 arguments");
        return NULL;
    }
    long long position, queue_id, flag, queue_offset, physical, sysflag, born_ts, store_ts, reconsume, prepared, crc;
    if (ranged(args[1], 0, PY_SSIZE_T_MAX, "position", &position) < 0
        || ranged(args[5], INT32_LOW, INT32_HIGH, "queue_id", &queue_id) < 0
        || ranged(args[6], INT32_LOW, INT32_HIGH, "flag", &flag) < 0
        || ranged(args[7], INT64_MIN, INT64_MAX, "queue_offset", &queue_offset) < 0
        || ranged(args[8], INT64_MIN, INT64_MAX, "physical_offset", &physical) < 0
        || ranged(args[9], INT32_LOW, INT32_HIGH, "sysflag", &sysflag) < 0
        || ranged(args[10], INT64_MIN, INT64_MAX, "born_timestamp", &born_ts) < 0
        || ranged(args[12], INT64_MIN, INT64_MAX, "store_timestamp", &store_ts) < 0
        || ranged(args[14], INT32_LOW, INT32_HIGH, "reconsume_times", &reconsume) < 0
        || ranged(args[15], INT64_MIN, INT64_MAX, "prepared_transaction_offset", &prepared) < 0
        || ranged(args[16], INT32_LOW, INT32_HIGH, "crc", &crc) < 0) {
        return NULL;
    }
    Py_buffer out = {0}, body = {0}, topic = {0}, properties = {0}, born = {0}, store = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &body, PyBUF_SIMPLE) < 0 || PyObject_GetBuffer(args[3], &topic, PyBUF_SIMPLE) < 0
        || PyObject_GetBuffer(args[4], &properties, PyBUF_SIMPLE) < 0
        || PyObject_GetBuffer(args[11], &born, PyBUF_SIMPLE) < 0
        || PyObject_GetBuffer(args[13], &store, PyBUF_SIMPLE) < 0) {
        goto done;
    }
    if ((born.len != 8 && born.len != 20) || (store.len != 8 && store.len != 20)) {
        PyErr_SetString(PyExc_ValueError, "a host is 8 (IPv4) or 20 (IPv6) bytes");
        goto done;
    }
    if (((sysflag & BORNHOST_V6_FLAG) != 0) != (born.len == 20)
        || ((sysflag & STOREHOSTADDRESS_V6_FLAG) != 0) != (store.len == 20)) {
        /* A decoder places every field after the hosts by these bits: the record would not decode. */
        PyErr_SetString(PyExc_ValueError, "the SYSFLAG host bits do not match the hosts' lengths");
        goto done;
    }
    if (topic.len > 255 || properties.len > PROPERTIES_LENGTH_MAX || body.len > INT32_HIGH) {
        PyErr_SetString(PyExc_ValueError, "topic, properties or body longer than its length field");
        goto done;
    }
    long long header = HEADER_WITHOUT_HOSTS_BYTES + born.len + store.len;
    long long total = header + body.len + 1 + topic.len + 2 + properties.len;
    if (total > INT32_HIGH || position > out.len || total > out.len - position) {
        PyErr_SetString(PyExc_ValueError, "the record does not fit the buffer");
        goto done;
    }
    unsigned char *p = (unsigned char *)out.buf + position;
    put32(p, (uint32_t)total);
    put32(p + 4, (uint32_t)MESSAGE_MAGIC_CODE);
    put32(p + 8, (uint32_t)crc);
    put32(p + 12, (uint32_t)queue_id);
    put32(p + 16, (uint32_t)flag);
    put64(p + 20, (uint64_t)queue_offset);
    put64(p + 28, (uint64_t)physical);
    put32(p + 36, (uint32_t)sysflag);
    put64(p + 40, (uint64_t)born_ts);
    unsigned char *at = p + BORN_HOST_AT;
    memcpy(at, born.buf, (size_t)born.len);
    at += born.len;
    put64(at, (uint64_t)store_ts);
    at += 8;
    memcpy(at, store.buf, (size_t)store.len);
    at += store.len;
    put32(at, (uint32_t)reconsume);
    put64(at + 4, (uint64_t)prepared);
    put32(at + 12, (uint32_t)body.len);
    at += 16;
    memcpy(at, body.buf, (size_t)body.len);
    at += body.len;
    *at++ = (unsigned char)topic.len;
    memcpy(at, topic.buf, (size_t)topic.len);
    at += topic.len;
    at[0] = (unsigned char)(properties.len >> 8);
    at[1] = (unsigned char)properties.len;
    memcpy(at + 2, properties.buf, (size_t)properties.len);
    result = PyLong_FromLongLong(total);
done:
    PyBuffer_Release(&out);
    if (body.obj) PyBuffer_Release(&body);
    if (topic.obj) PyBuffer_Release(&topic);
    if (properties.obj) PyBuffer_Release(&properties);
    if (born.obj) PyBuffer_Release(&born);
    if (store.obj) PyBuffer_Release(&store);
    return result;
}

/* The dispatch fields of the well-formed V1 record at `p` (`room` bytes readable, PHYSICALOFFSET
 * `expected`); 0 when it is not one. Shared by dispatch_fields and dispatch_run. */
typedef struct {
    int32_t total, queue_id, sysflag;
    int64_t queue_offset, physical, store_ts;
    const unsigned char *body, *topic, *props;
    Py_ssize_t body_len, topic_len, props_len;
} RecordFields;

static int
parse_dispatch(const unsigned char *p, Py_ssize_t room, long long expected, RecordFields *f)
{
    if (room < FIXED_LENGTH_V4_BYTES) {
        return 0;
    }
    int32_t total = get32(p);
    int32_t sysflag = get32(p + 36);
    if (get32(p + 4) != MESSAGE_MAGIC_CODE || get64(p + 28) != expected || total < FIXED_LENGTH_V4_BYTES
        || total > room) {
        return 0;
    }
    Py_ssize_t born_len = (sysflag & BORNHOST_V6_FLAG) ? 20 : 8;
    Py_ssize_t store_len = (sysflag & STOREHOSTADDRESS_V6_FLAG) ? 20 : 8;
    Py_ssize_t body_at = HEADER_WITHOUT_HOSTS_BYTES + born_len + store_len;
    if (body_at + 3 > total) {
        return 0;
    }
    int32_t body_len = get32(p + body_at - 4);
    if (body_len < 0 || body_at + (Py_ssize_t)body_len + 3 > total) {
        return 0;
    }
    Py_ssize_t topic_at = body_at + body_len;
    Py_ssize_t topic_len = p[topic_at];
    Py_ssize_t props_at = topic_at + 1 + topic_len;
    if (topic_len > TOPIC_LENGTH_MAX || props_at + 2 > total) {
        return 0;
    }
    Py_ssize_t props_len = (Py_ssize_t)get16(p + props_at);
    if (props_len < 0 || props_at + 2 + props_len != total) {
        return 0;
    }
    f->total = total;
    f->queue_id = get32(p + 12);
    f->sysflag = sysflag;
    f->queue_offset = get64(p + 20);
    f->physical = get64(p + 28);
    f->store_ts = get64(p + BORN_HOST_AT + born_len);
    f->body = p + body_at;
    f->body_len = body_len;
    f->topic = p + topic_at + 1;
    f->topic_len = topic_len;
    f->props = p + props_at + 2;
    f->props_len = props_len;
    return 1;
}

static PyObject *
dispatch_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "dispatch_fields takes 4 arguments");
        return NULL;
    }
    Py_ssize_t position = PyLong_AsSsize_t(args[1]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[2]);
    long long expected = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (limit > view.len) {
        limit = view.len;
    }
    RecordFields f;
    if (position < 0 || position > limit
        || !parse_dispatch((const unsigned char *)view.buf + position, limit - position, expected, &f)) {
        goto none;
    }
    PyObject *result = Py_BuildValue(
        "(iiLLiLy#y#)",
        f.total,
        f.queue_id,
        (long long)f.queue_offset,
        (long long)f.physical,
        f.sysflag,
        (long long)f.store_ts,
        (const char *)f.topic,
        f.topic_len,
        (const char *)f.props,
        f.props_len);
    PyBuffer_Release(&view);
    return result;
none:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

#define UNIT_BYTES 20
#define TRANSACTION_TYPE_MASK 0xC
#define TRANSACTION_COMMIT_TYPE 0x8
#define TRANSACTION_ROLLBACK_TYPE 0xC
#define REQUEST_FIELDS 8

/* The last non-empty value of `name` in an encoded property string (as find_properties). */
static void
property_value(const unsigned char *data, Py_ssize_t length, const char *name, Py_ssize_t name_len,
               const unsigned char **value, Py_ssize_t *value_len)
{
    const unsigned char *at = data, *end = data + length;
    *value = NULL;
    *value_len = 0;
    while (at < end) {
        const unsigned char *segment_end = memchr(at, 0x02, (size_t)(end - at));
        if (segment_end == NULL) {
            segment_end = end;
        }
        const unsigned char *separator = memchr(at, 0x01, (size_t)(segment_end - at));
        if (separator != NULL && separator + 1 < segment_end && separator - at == name_len
            && memcmp(at, name, (size_t)name_len) == 0) {
            *value = separator + 1;
            *value_len = segment_end - separator - 1;
        }
        at = segment_end + 1;
    }
}

/* tagsCode of a TAGS value (UTF-8 bytes): Java's hashCode of the decoded text, widened; 0 when absent. */
static int
tags_code_of(const unsigned char *tags, Py_ssize_t length, long long *code)
{
    if (tags == NULL) {
        *code = 0;
        return 0;
    }
    uint32_t h = 0;
    Py_ssize_t i = 0;
    while (i < length && tags[i] < 0x80) {
        h = 31 * h + tags[i];
        i++;
    }
    if (i < length) {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)tags, length, "replace");
        if (text == NULL) {
            return -1;
        }
        h = java_hash_of(text);
        Py_DECREF(text);
    }
    *code = (long long)(int32_t)h;
    return 0;
}

/* Append a new object to `list`, stealing it; -1 on failure (the object is released). */
static int
append_new(PyObject *list, PyObject *item)
{
    if (item == NULL) {
        return -1;
    }
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

/* One queue's run state while units are written: where its next unit goes and what it checks. */
typedef struct {
    unsigned char *units;
    long long units_position, units_end, next_offset, max_physical;
    PyObject *topic;        /* str, borrowed */
    PyObject *arrivals_out; /* list or Py_None, borrowed */
} RunState;

/* The unit of record `f` written for the run `s` when the record is the run's next plain message:
 * 1 (taken, `s` advanced), 0 (the run stops before it), -1 (an exception is set). */
static int
run_record(const RecordFields *f, const unsigned char *want_topic, Py_ssize_t want_topic_len, long long queue_id,
           RunState *s, PyTypeObject *type, PyObject *keys_out)
{
    int transaction = f->sysflag & TRANSACTION_TYPE_MASK;
    if (s->units_position + UNIT_BYTES > s->units_end || f->queue_id != queue_id || f->queue_offset != s->next_offset
        || f->topic_len != want_topic_len || memcmp(f->topic, want_topic, (size_t)want_topic_len) != 0
        || (transaction != 0 && transaction != TRANSACTION_COMMIT_TYPE) || f->physical + f->total <= s->max_physical) {
        return 0;
    }
    const unsigned char *keys, *tags, *uniq;
    Py_ssize_t keys_len, tags_len, uniq_len;
    property_value(f->props, f->props_len, "KEYS", 4, &keys, &keys_len);
    if (keys != NULL) {
        return 0; /* messages with keys go the Python way (IndexService.build) */
    }
    property_value(f->props, f->props_len, "TAGS", 4, &tags, &tags_len);
    property_value(f->props, f->props_len, "UNIQ_KEY", 8, &uniq, &uniq_len);
    long long code;
    if (tags_code_of(tags, tags_len, &code) < 0) {
        return -1;
    }
    if (uniq != NULL && keys_out != Py_None) {
        PyObject *key = Py_BuildValue("(Os#LL)", s->topic, (const char *)uniq, uniq_len, (long long)f->physical,
                                      (long long)f->store_ts);
        if (key == NULL) {
            /* s# is strict UTF-8: decode with replacement as find_properties does */
            PyErr_Clear();
            PyObject *text = PyUnicode_DecodeUTF8((const char *)uniq, uniq_len, "replace");
            key = text == NULL ? NULL
                               : Py_BuildValue("(ONLL)", s->topic, text, (long long)f->physical, (long long)f->store_ts);
        }
        if (append_new(keys_out, key) < 0) {
            return -1;
        }
    }
    if (s->arrivals_out != Py_None) {
        PyObject *request = type->tp_alloc(type, REQUEST_FIELDS);
        if (request == NULL) {
            return -1;
        }
        Py_INCREF(s->topic);
        PyTuple_SET_ITEM(request, 0, s->topic);
        PyTuple_SET_ITEM(request, 1, PyLong_FromLong(f->queue_id));
        PyTuple_SET_ITEM(request, 2, PyLong_FromLongLong(f->physical));
        PyTuple_SET_ITEM(request, 3, PyLong_FromLong(f->total));
        PyTuple_SET_ITEM(request, 4, PyLong_FromLongLong(code));
        PyTuple_SET_ITEM(request, 5, PyLong_FromLongLong(f->store_ts));
        PyTuple_SET_ITEM(request, 6, PyLong_FromLongLong(f->queue_offset));
        PyTuple_SET_ITEM(request, 7, PyBytes_FromStringAndSize((const char *)f->props, f->props_len));
        for (int i = 1; i < REQUEST_FIELDS; i++) {
            if (PyTuple_GET_ITEM(request, i) == NULL) {
                Py_DECREF(request);
                request = NULL;
                break;
            }
        }
        if (append_new(s->arrivals_out, request) < 0) {
            return -1;
        }
    }
    unsigned char *unit = s->units + s->units_position;
    put64(unit, (uint64_t)f->physical);
    put32(unit + 8, (uint32_t)f->total);
    put64(unit + 12, (uint64_t)code);
    s->units_position += UNIT_BYTES;
    s->next_offset += 1;
    s->max_physical = f->physical + f->total;
    return 1;
}

static PyObject *
dispatch_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 16) {
        PyErr_SetString(PyExc_TypeError, "dispatch_run takes 16 arguments");
        return NULL;
    }
    long long position, limit, expected, count_max, queue_id, next_offset, max_physical, units_position, units_end;
    if (ranged(args[1], 0, PY_SSIZE_T_MAX, "position", &position) < 0
        || ranged(args[2], 0, PY_SSIZE_T_MAX, "limit", &limit) < 0
        || ranged(args[3], INT64_MIN, INT64_MAX, "expected_offset", &expected) < 0
        || ranged(args[4], 0, INT64_MAX, "count_max", &count_max) < 0
        || ranged(args[6], INT32_LOW, INT32_HIGH, "queue_id", &queue_id) < 0
        || ranged(args[7], INT64_MIN, INT64_MAX, "next_queue_offset", &next_offset) < 0
        || ranged(args[8], INT64_MIN, INT64_MAX, "max_physical_offset", &max_physical) < 0
        || ranged(args[10], 0, PY_SSIZE_T_MAX, "units_position", &units_position) < 0
        || ranged(args[11], 0, PY_SSIZE_T_MAX, "units_end", &units_end) < 0) {
        return NULL;
    }
    PyObject *raw_topic = args[5], *topic = args[12], *request_type = args[13];
    PyObject *keys_out = args[14], *arrivals_out = args[15];
    if (!PyBytes_Check(raw_topic) || !PyUnicode_Check(topic) || !PyType_Check(request_type)
        || !PyType_IsSubtype((PyTypeObject *)request_type, &PyTuple_Type)
        || (keys_out != Py_None && !PyList_Check(keys_out)) || (arrivals_out != Py_None && !PyList_Check(arrivals_out))) {
        PyErr_SetString(PyExc_TypeError,
                        "dispatch_run: raw_topic is bytes, topic a str, request_type a tuple type, the outputs lists or None");
        return NULL;
    }
    Py_buffer view, units;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[9], &units, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (limit > view.len) {
        limit = view.len;
    }
    if (units_end > units.len) {
        units_end = units.len;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    RunState state = {(unsigned char *)units.buf, units_position, units_end, next_offset, max_physical, topic, arrivals_out};
    const unsigned char *want_topic = (const unsigned char *)PyBytes_AS_STRING(raw_topic);
    Py_ssize_t want_topic_len = PyBytes_GET_SIZE(raw_topic);
    long long start = position, count = 0, last_ts = 0;
    int failed = 0;
    while (count < count_max && position <= limit) {
        RecordFields f;
        if (!parse_dispatch(base + position, limit - position, expected + (position - start), &f)) {
            break;
        }
        int taken = run_record(&f, want_topic, want_topic_len, queue_id, &state, (PyTypeObject *)request_type, keys_out);
        if (taken <= 0) {
            failed = taken < 0;
            break;
        }
        last_ts = f.store_ts;
        position += f.total;
        count += 1;
    }
    PyBuffer_Release(&units);
    PyBuffer_Release(&view);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(LLLLLL)", position - start, count, state.next_offset, state.max_physical,
                         state.units_position, last_ts);
}

/* dispatch_runs: the open runs one call has met, their state read once and written back at the end. */
#define RUNS_CACHED_MAX 64

typedef struct {
    PyObject *units_obj;  /* its `units` (a new reference) */
    PyObject *key;        /* (raw topic bytes, queue id), a new reference */
    PyObject *raw_topic;  /* its bytes, borrowed from it */
    long long queue_id;
    Py_buffer units;
    RunState state;
    PyObject *topic_ref, *arrived_ref; /* new references behind state.topic and state.arrivals_out */
} CachedRun;

static PyObject *attr_units, *attr_view, *attr_position, *attr_end, *attr_next_offset, *attr_max_physical,
    *attr_topic, *attr_arrived;

static int
intern_run_attributes(void)
{
    if (attr_units != NULL) {
        return 0;
    }
    attr_units = PyUnicode_InternFromString("units");
    attr_view = PyUnicode_InternFromString("view");
    attr_position = PyUnicode_InternFromString("position");
    attr_end = PyUnicode_InternFromString("end");
    attr_next_offset = PyUnicode_InternFromString("next_offset");
    attr_max_physical = PyUnicode_InternFromString("max_physical_offset");
    attr_topic = PyUnicode_InternFromString("topic");
    attr_arrived = PyUnicode_InternFromString("arrived");
    return attr_units && attr_view && attr_position && attr_end && attr_next_offset && attr_max_physical && attr_topic
               && attr_arrived
           ? 0
           : -1;
}

static int
long_attr(PyObject *owner, PyObject *name, long long low, long long high, long long *out)
{
    PyObject *value = PyObject_GetAttr(owner, name);
    if (value == NULL) {
        return -1;
    }
    int failed = ranged(value, low, high, PyUnicode_AsUTF8(name), out);
    Py_DECREF(value);
    return failed;
}

/* Load the state of `queue_run` (a runs dict value) into `c`, which takes the reference to `key`;
 * -1 with an exception set (store_run(c, 0) then releases what was taken). */
static int
load_run(CachedRun *c, PyObject *queue_run, PyObject *key, long long queue_id, int listening)
{
    memset(c, 0, sizeof(*c));
    c->key = key;
    c->raw_topic = PyTuple_GET_ITEM(key, 0);
    c->queue_id = queue_id;
    c->units_obj = PyObject_GetAttr(queue_run, attr_units);
    if (c->units_obj == NULL) {
        return -1;
    }
    c->topic_ref = PyObject_GetAttr(queue_run, attr_topic);
    if (c->topic_ref == NULL || !PyUnicode_Check(c->topic_ref)) {
        if (c->topic_ref != NULL) {
            PyErr_SetString(PyExc_TypeError, "dispatch_runs: a run's topic must be a str");
        }
        return -1;
    }
    if (listening) {
        c->arrived_ref = PyObject_GetAttr(queue_run, attr_arrived);
        if (c->arrived_ref == NULL || !PyList_Check(c->arrived_ref)) {
            if (c->arrived_ref != NULL) {
                PyErr_SetString(PyExc_TypeError, "dispatch_runs: a run's arrived must be a list");
            }
            return -1;
        }
    } else {
        c->arrived_ref = Py_NewRef(Py_None);
    }
    PyObject *view = PyObject_GetAttr(c->units_obj, attr_view);
    if (view == NULL) {
        return -1;
    }
    int failed = PyObject_GetBuffer(view, &c->units, PyBUF_WRITABLE);
    Py_DECREF(view);
    if (failed < 0) {
        return -1;
    }
    RunState *s = &c->state;
    if (long_attr(c->units_obj, attr_position, 0, PY_SSIZE_T_MAX, &s->units_position) < 0
        || long_attr(c->units_obj, attr_end, 0, PY_SSIZE_T_MAX, &s->units_end) < 0
        || long_attr(c->units_obj, attr_next_offset, INT64_MIN, INT64_MAX, &s->next_offset) < 0
        || long_attr(c->units_obj, attr_max_physical, INT64_MIN, INT64_MAX, &s->max_physical) < 0) {
        return -1;
    }
    if (s->units_end > c->units.len) {
        s->units_end = c->units.len;
    }
    s->units = (unsigned char *)c->units.buf;
    s->topic = c->topic_ref;
    s->arrivals_out = c->arrived_ref;
    return 0;
}

/* Write a run's state back to its `units` and release what load_run took; -1 when a write failed. */
static int
store_run(CachedRun *c, int loaded)
{
    int failed = 0;
    if (loaded) {
        PyObject *position = PyLong_FromLongLong(c->state.units_position);
        PyObject *next_offset = PyLong_FromLongLong(c->state.next_offset);
        PyObject *max_physical = PyLong_FromLongLong(c->state.max_physical);
        failed = position == NULL || next_offset == NULL || max_physical == NULL
                 || PyObject_SetAttr(c->units_obj, attr_position, position) < 0
                 || PyObject_SetAttr(c->units_obj, attr_next_offset, next_offset) < 0
                 || PyObject_SetAttr(c->units_obj, attr_max_physical, max_physical) < 0;
        Py_XDECREF(position);
        Py_XDECREF(next_offset);
        Py_XDECREF(max_physical);
    }
    if (c->units.obj != NULL) {
        PyBuffer_Release(&c->units);
    }
    Py_XDECREF(c->units_obj);
    Py_XDECREF(c->key);
    Py_XDECREF(c->topic_ref);
    Py_XDECREF(c->arrived_ref);
    return failed ? -1 : 0;
}

static PyObject *
dispatch_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "dispatch_runs takes 9 arguments");
        return NULL;
    }
    long long position, limit, expected, count_max;
    if (ranged(args[1], 0, PY_SSIZE_T_MAX, "position", &position) < 0
        || ranged(args[2], 0, PY_SSIZE_T_MAX, "limit", &limit) < 0
        || ranged(args[3], INT64_MIN, INT64_MAX, "expected_offset", &expected) < 0
        || ranged(args[4], 0, INT64_MAX, "count_max", &count_max) < 0) {
        return NULL;
    }
    PyObject *runs = args[5], *request_type = args[6], *keys_out = args[7];
    int listening = PyObject_IsTrue(args[8]);
    if (listening < 0) {
        return NULL;
    }
    if (!PyDict_Check(runs) || !PyType_Check(request_type) || !PyType_IsSubtype((PyTypeObject *)request_type, &PyTuple_Type)
        || (keys_out != Py_None && !PyList_Check(keys_out))) {
        PyErr_SetString(PyExc_TypeError, "dispatch_runs: runs is a dict, request_type a tuple type, keys_out a list or None");
        return NULL;
    }
    if (intern_run_attributes() < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (limit > view.len) {
        limit = view.len;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    CachedRun cached[RUNS_CACHED_MAX];
    int cached_count = 0, failed = 0;
    long long start = position, count = 0, last_ts = 0;
    while (count < count_max && position <= limit) {
        RecordFields f;
        if (!parse_dispatch(base + position, limit - position, expected + (position - start), &f)) {
            break;
        }
        CachedRun *run = NULL;
        for (int i = 0; i < cached_count; i++) {
            CachedRun *c = &cached[i];
            if (c->queue_id == f.queue_id && PyBytes_GET_SIZE(c->raw_topic) == f.topic_len
                && memcmp(PyBytes_AS_STRING(c->raw_topic), f.topic, (size_t)f.topic_len) == 0) {
                run = c;
                break;
            }
        }
        if (run == NULL) {
            if (cached_count == RUNS_CACHED_MAX) {
                break; /* the caller calls again: this call's runs are written back first */
            }
            PyObject *key = Py_BuildValue("(y#i)", (const char *)f.topic, f.topic_len, f.queue_id);
            if (key == NULL) {
                failed = 1;
                break;
            }
            PyObject *queue_run = PyDict_GetItemWithError(runs, key); /* borrowed: the dict keeps it */
            if (queue_run == NULL) {
                Py_DECREF(key);
                failed = PyErr_Occurred() != NULL;
                break; /* a queue with no open run: the caller opens one or dispatches the record */
            }
            run = &cached[cached_count];
            if (load_run(run, queue_run, key, f.queue_id, listening) < 0) { /* takes `key` */
                store_run(run, 0);
                failed = 1;
                break;
            }
            cached_count++;
        }
        int taken = run_record(&f, (const unsigned char *)PyBytes_AS_STRING(run->raw_topic),
                               PyBytes_GET_SIZE(run->raw_topic), run->queue_id, &run->state,
                               (PyTypeObject *)request_type, keys_out);
        if (taken <= 0) {
            failed = taken < 0;
            break;
        }
        last_ts = f.store_ts;
        position += f.total;
        count += 1;
    }
    PyObject *error_type = NULL, *error_value = NULL, *error_traceback = NULL;
    if (failed) {
        PyErr_Fetch(&error_type, &error_value, &error_traceback);
    }
    for (int i = 0; i < cached_count; i++) { /* what was written stays written, failure or not */
        if (store_run(&cached[i], 1) < 0 && !failed) {
            failed = 1;
            PyErr_Fetch(&error_type, &error_value, &error_traceback);
        } else if (PyErr_Occurred()) {
            PyErr_Clear();
        }
    }
    PyBuffer_Release(&view);
    if (failed) {
        PyErr_Restore(error_type, error_value, error_traceback);
        return NULL;
    }
    return Py_BuildValue("(LLL)", position - start, count, last_ts);
}

#define INDEX_HEADER_BYTES 40
#define INDEX_SLOT_BYTES 4
#define INDEX_ENTRY_BYTES 20

/* h = 31*h + c over the UTF-16 code units of `text` (a str), 32-bit wrap, from `h`. */
static uint32_t
java_hash_extend(uint32_t h, PyObject *text)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            h = 31 * h + (0xDC00 + (c & 0x3FF));
        } else {
            h = 31 * h + c;
        }
    }
    return h;
}

static uint32_t
java_hash_of(PyObject *text)
{
    return java_hash_extend(0, text);
}

/* IndexFile's keyHash: Math.abs(hashCode), Integer.MIN_VALUE read as 0 (formats.java_hash). */
static int32_t
index_key_hash_of(uint32_t h)
{
    int32_t signed_hash = (int32_t)h;
    return signed_hash == INT32_MIN ? 0 : (signed_hash < 0 ? -signed_hash : signed_hash);
}

static PyObject *
index_put(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "index_put takes 6 arguments");
        return NULL;
    }
    if (!PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "index_put's key is a str");
        return NULL;
    }
    long long hash_slots, index_count, physical, time_diff;
    if (ranged(args[1], 1, INT32_HIGH, "hash_slots", &hash_slots) < 0
        || ranged(args[2], 0, INT32_HIGH, "index_count", &index_count) < 0
        || ranged(args[4], INT64_MIN, INT64_MAX, "physical_offset", &physical) < 0
        || ranged(args[5], INT32_LOW, INT32_HIGH, "time_diff", &time_diff) < 0) {
        return NULL;
    }
    int32_t key_hash = index_key_hash_of(java_hash_of(args[3]));
    long long slot_position = INDEX_HEADER_BYTES + (key_hash % hash_slots) * INDEX_SLOT_BYTES;
    long long entry_position = INDEX_HEADER_BYTES + hash_slots * INDEX_SLOT_BYTES + index_count * INDEX_ENTRY_BYTES;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (slot_position + INDEX_SLOT_BYTES > view.len || entry_position + INDEX_ENTRY_BYTES > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "the index entry or slot is outside the buffer");
        return NULL;
    }
    unsigned char *base = (unsigned char *)view.buf;
    int32_t previous = get32(base + slot_position);
    if (previous <= 0 || previous > index_count) {
        previous = 0;
    }
    unsigned char *entry = base + entry_position;
    put32(entry, (uint32_t)key_hash);
    put64(entry + 4, (uint64_t)physical);
    put32(entry + 12, (uint32_t)time_diff);
    put32(entry + 16, (uint32_t)previous);
    put32(base + slot_position, (uint32_t)index_count);
    PyBuffer_Release(&view);
    return PyLong_FromLong(previous);
}

/* An IndexFile's writable buffer holding `count` entries after its `hash_slots` slots: where the
 * entries start, or -1 with ValueError (naming `who`) or the buffer's error set. */
static long long
index_buffer(PyObject *buffer, Py_buffer *view, long long hash_slots, long long count, const char *who)
{
    if (PyObject_GetBuffer(buffer, view, PyBUF_WRITABLE) < 0) {
        return -1;
    }
    long long entries_at = INDEX_HEADER_BYTES + hash_slots * INDEX_SLOT_BYTES;
    if (entries_at + count * INDEX_ENTRY_BYTES > (long long)view->len) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: the entries are outside the buffer", who);
        return -1;
    }
    return entries_at;
}

static PyObject *
index_put_unique_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "index_put_unique_keys takes 8 arguments");
        return NULL;
    }
    long long hash_slots, entries_max, index_count, begin_offset, begin_ts, start;
    if (ranged(args[1], 1, INT32_HIGH, "hash_slots", &hash_slots) < 0
        || ranged(args[2], 1, INT32_HIGH, "entries_max", &entries_max) < 0
        || ranged(args[3], 0, INT32_HIGH, "index_count", &index_count) < 0
        || ranged(args[4], INT64_MIN, INT64_MAX, "begin_physical_offset", &begin_offset) < 0
        || ranged(args[5], INT64_MIN, INT64_MAX, "begin_timestamp", &begin_ts) < 0
        || ranged(args[7], 0, PY_SSIZE_T_MAX, "start", &start) < 0) {
        return NULL;
    }
    PyObject *entries = args[6];
    if (!PyList_Check(entries)) {
        PyErr_SetString(PyExc_TypeError, "index_put_unique_keys' entries is a list");
        return NULL;
    }
    Py_buffer view;
    long long entries_at = index_buffer(args[0], &view, hash_slots, entries_max, "index_put_unique_keys");
    if (entries_at < 0) {
        return NULL;
    }
    unsigned char *base = (unsigned char *)view.buf;
    long long position = start, new_slots = 0;
    int failed = 0;
    while (position < PyList_GET_SIZE(entries) && index_count < entries_max) {
        PyObject *entry = PyList_GET_ITEM(entries, position);
        long long physical, store_ts;
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 4 || !PyUnicode_Check(PyTuple_GET_ITEM(entry, 0))
            || !PyUnicode_Check(PyTuple_GET_ITEM(entry, 1))) {
            PyErr_SetString(PyExc_TypeError, "index_put_unique_keys: an entry is (topic, key, offset, store time)");
            failed = 1;
            break;
        }
        if (ranged(PyTuple_GET_ITEM(entry, 2), INT64_MIN, INT64_MAX, "physical_offset", &physical) < 0
            || ranged(PyTuple_GET_ITEM(entry, 3), INT64_MIN, INT64_MAX, "store_timestamp", &store_ts) < 0) {
            failed = 1;
            break;
        }
        long long time_diff = 0;
        if (begin_ts > 0) {
            long long diff = store_ts - begin_ts;
            time_diff = diff < 0 ? 0 : diff / 1000;
            if (time_diff > INT32_HIGH) {
                time_diff = INT32_HIGH;
            }
        }
        /* the key is "topic#key" */
        uint32_t h = java_hash_extend(java_hash_extend(0, PyTuple_GET_ITEM(entry, 0)) * 31 + '#', PyTuple_GET_ITEM(entry, 1));
        int32_t key_hash = index_key_hash_of(h);
        unsigned char *slot = base + INDEX_HEADER_BYTES + (key_hash % hash_slots) * INDEX_SLOT_BYTES;
        int32_t previous = get32(slot);
        if (previous <= 0 || previous > index_count) {
            previous = 0;
        }
        unsigned char *at = base + entries_at + index_count * INDEX_ENTRY_BYTES;
        put32(at, (uint32_t)key_hash);
        put64(at + 4, (uint64_t)physical);
        put32(at + 12, (uint32_t)time_diff);
        put32(at + 16, (uint32_t)previous);
        put32(slot, (uint32_t)index_count);
        if (previous == 0) {
            new_slots++;
        }
        if (index_count <= 1) {
            begin_offset = physical;
            begin_ts = store_ts;
        }
        index_count++;
        position++;
    }
    PyBuffer_Release(&view);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(LLLLL)", position, index_count, new_slots, begin_offset, begin_ts);
}

static PyObject *
find_properties(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "find_properties takes the data and a tuple of names");
        return NULL;
    }
    PyObject *names = args[1];
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "find_properties' names are bytes");
            return NULL;
        }
    }
    Py_buffer data;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *values = PyList_New(count);
    if (values == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(values, i, Py_None);
    }
    const char *at = (const char *)data.buf;
    const char *end = at + data.len;
    while (at < end) {
        const char *segment_end = memchr(at, 0x02, (size_t)(end - at));
        if (segment_end == NULL) {
            segment_end = end;
        }
        const char *separator = memchr(at, 0x01, (size_t)(segment_end - at));
        if (separator != NULL && separator + 1 < segment_end) {
            Py_ssize_t name_len = separator - at;
            for (Py_ssize_t i = 0; i < count; i++) {
                PyObject *name = PyTuple_GET_ITEM(names, i);
                if (PyBytes_GET_SIZE(name) == name_len && memcmp(PyBytes_AS_STRING(name), at, (size_t)name_len) == 0) {
                    PyObject *value = PyUnicode_DecodeUTF8(separator + 1, segment_end - separator - 1, "replace");
                    if (value == NULL) {
                        Py_DECREF(values);
                        PyBuffer_Release(&data);
                        return NULL;
                    }
                    PyList_SetItem(values, i, value); /* steals the new value, drops the old */
                    break; /* the first equal name, as names.index() finds it */
                }
            }
        }
        at = segment_end + 1;
    }
    PyBuffer_Release(&data);
    return values;
}

/* The order of formats.record.WALK_STOPS. */
enum { WALK_COUNT = 0, WALK_STOP_AT = 1, WALK_LIMIT = 2, WALK_END_OF_FILE = 3, WALK_INVALID = 4 };
#define TAIL_BYTES 8

static PyObject *
walk_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "walk_records takes 6 arguments");
        return NULL;
    }
    long long position, limit, stop_at, count_max, size_max;
    if (ranged(args[1], 0, INT64_MAX, "position", &position) < 0
        || ranged(args[2], INT64_MIN, INT64_MAX, "limit", &limit) < 0
        || ranged(args[3], INT64_MIN, INT64_MAX, "stop_at", &stop_at) < 0
        || ranged(args[4], INT64_MIN, INT64_MAX, "count_max", &count_max) < 0
        || ranged(args[5], 0, INT32_HIGH, "size_max", &size_max) < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    long long edge = limit - TAIL_BYTES + 1; /* one comparison per record for both bounds */
    if (stop_at < edge) {
        edge = stop_at;
    }
    /* The reference reads TAIL at every position below `edge`: it must be inside the buffer. */
    if (position < edge && (limit > (long long)view.len)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk_records: limit is past the end of the buffer");
        return NULL;
    }
    PyObject *positions = PyList_New(0);
    if (positions == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    long long count = 0;
    int stop = WALK_COUNT;
    while (count < count_max) {
        if (position >= edge) {
            stop = position >= stop_at ? WALK_STOP_AT : WALK_LIMIT;
            break;
        }
        int32_t total = get32(base + position);
        int32_t magic = get32(base + position + 4);
        if (magic != MESSAGE_MAGIC_CODE && magic != MESSAGE_MAGIC_CODE_V2) {
            stop = magic == BLANK_MAGIC_CODE ? WALK_END_OF_FILE : WALK_INVALID;
            break;
        }
        if (total < FIXED_LENGTH_V4_BYTES || total > size_max) {
            stop = WALK_INVALID;
            break;
        }
        if (total > limit - position) {
            stop = WALK_LIMIT;
            break;
        }
        PyObject *at = PyLong_FromLongLong(position);
        if (at == NULL || PyList_Append(positions, at) < 0) {
            Py_XDECREF(at);
            Py_DECREF(positions);
            PyBuffer_Release(&view);
            return NULL;
        }
        Py_DECREF(at);
        position += total;
        count++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NLi)", positions, position, stop);
}

/* [position, limit) is inside the buffer (or empty); ValueError naming `who` otherwise. */
static int
inside(const Py_buffer *view, long long position, long long limit, const char *who)
{
    if (position < 0 || (position < limit && limit > (long long)view->len)) {
        PyErr_Format(PyExc_ValueError, "%s: [position, limit) is not inside the buffer", who);
        return 0;
    }
    return 1;
}

/* 1 when the topic decodes as UTF-8 (cached in `valid`, a set of bytes), 0 when not, -1 on error. */
static int
topic_is_utf8(const unsigned char *topic, Py_ssize_t length, PyObject *valid)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)topic, length);
    if (raw == NULL) {
        return -1;
    }
    int known = PySet_Contains(valid, raw);
    if (known != 0) {
        Py_DECREF(raw);
        return known;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)topic, length, "strict");
    if (text == NULL) {
        Py_DECREF(raw);
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    Py_DECREF(text);
    int added = PySet_Add(valid, raw);
    Py_DECREF(raw);
    return added < 0 ? -1 : 1;
}

/* 1 when zlib.crc32 (`crc32`) of the body, as Java's CRC32 masked to 31 bits, is `expected`; 0 when
 * not; -1 on error. */
static int
body_crc_matches(PyObject *crc32, const unsigned char *body, Py_ssize_t length, int32_t expected)
{
    PyObject *slice = PyMemoryView_FromMemory((char *)body, length, PyBUF_READ);
    if (slice == NULL) {
        return -1;
    }
    PyObject *value = PyObject_CallOneArg(crc32, slice);
    Py_DECREF(slice);
    if (value == NULL) {
        return -1;
    }
    unsigned long long crc = PyLong_AsUnsignedLongLongMask(value);
    Py_DECREF(value);
    if (crc == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    return (int32_t)(crc & 0x7FFFFFFF) == expected;
}

static PyObject *
frame_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "frame_messages takes 6 arguments");
        return NULL;
    }
    long long position, limit, base_offset;
    if (ranged(args[1], 0, INT64_MAX / 2, "position", &position) < 0
        || ranged(args[2], INT64_MIN, INT64_MAX / 2, "limit", &limit) < 0
        || ranged(args[3], 0, INT64_MAX / 2, "base_offset", &base_offset) < 0) {
        return NULL;
    }
    PyObject *crc32 = args[4] == Py_None ? NULL : args[4];
    PyObject *valid = args[5];
    if (!PySet_Check(valid)) {
        PyErr_SetString(PyExc_TypeError, "frame_messages' topics_valid is a set");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (!inside(&view, position, limit, "frame_messages")) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    /* The last topic found valid: consecutive records mostly share a few, so the set is seldom asked. */
    unsigned char last_topic[TOPIC_LENGTH_MAX];
    Py_ssize_t last_topic_len = -1;
    long long count = 0;
    int failed = 0;
    RecordFields f;
    while (limit - position >= FIXED_LENGTH_V4_BYTES
           && parse_dispatch(base + position, (Py_ssize_t)(limit - position), base_offset + position, &f)) {
        if (f.topic_len != last_topic_len || memcmp(f.topic, last_topic, (size_t)f.topic_len) != 0) {
            int valid_topic = topic_is_utf8(f.topic, f.topic_len, valid);
            if (valid_topic <= 0) {
                failed = valid_topic < 0;
                break;
            }
            memcpy(last_topic, f.topic, (size_t)f.topic_len);
            last_topic_len = f.topic_len;
        }
        if (crc32 != NULL && f.body_len > 0) {
            int matches = body_crc_matches(crc32, f.body, f.body_len, get32(base + position + 8));
            if (matches <= 0) {
                failed = matches < 0;
                break;
            }
        }
        position += f.total;
        count++;
    }
    PyBuffer_Release(&view);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(LL)", position, count);
}

/* The unique key entry (topic, UNIQ_KEY, offset, store time) of a covered record, as dispatch_run
 * makes it: the key decoded with replacement where it is not UTF-8. */
static PyObject *
unique_key_entry(PyObject *topic, const unsigned char *uniq, Py_ssize_t uniq_len, const RecordFields *f)
{
    PyObject *text = PyUnicode_DecodeUTF8((const char *)uniq, uniq_len, "replace");
    if (text == NULL) {
        return NULL;
    }
    return Py_BuildValue("(ONLL)", topic, text, (long long)f->physical, (long long)f->store_ts);
}

static PyObject *
covered_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "covered_run takes 10 arguments");
        return NULL;
    }
    long long position, limit, expected, stop_at, indexed_end, count_max;
    if (ranged(args[1], 0, INT64_MAX / 2, "position", &position) < 0
        || ranged(args[2], INT64_MIN, INT64_MAX / 2, "limit", &limit) < 0
        || ranged(args[3], 0, INT64_MAX / 2, "expected_offset", &expected) < 0
        || ranged(args[4], INT64_MIN, INT64_MAX, "stop_at", &stop_at) < 0
        || ranged(args[5], INT64_MIN, INT64_MAX, "indexed_end", &indexed_end) < 0
        || ranged(args[8], INT64_MIN, INT64_MAX, "count_max", &count_max) < 0) {
        return NULL;
    }
    PyObject *queues = args[6], *topic_names = args[7], *keys_out = args[9];
    if (!PyDict_Check(queues) || !PyDict_Check(topic_names) || (keys_out != Py_None && !PyList_Check(keys_out))) {
        PyErr_SetString(PyExc_TypeError, "covered_run: queues and topic_names are dicts, keys_out a list or None");
        return NULL;
    }
    static PyObject *max_name = NULL;
    if (max_name == NULL && (max_name = PyUnicode_InternFromString("max_physical_offset")) == NULL) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (!inside(&view, position, limit, "covered_run")) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    long long start = position;
    long long count = 0;
    PyObject *missing = NULL;
    int failed = 0;
    RecordFields f;
    while (count < count_max && position < stop_at
           && parse_dispatch(base + position, (Py_ssize_t)(limit - position), expected + position - start, &f)) {
        int kind = f.sysflag & TRANSACTION_TYPE_MASK;
        int unindexed = f.physical >= indexed_end && kind != TRANSACTION_ROLLBACK_TYPE;
        const unsigned char *uniq = NULL;
        Py_ssize_t uniq_len = 0;
        if (unindexed) {
            if (keys_out == Py_None) {
                break;
            }
            const unsigned char *keys;
            Py_ssize_t keys_len;
            property_value(f.props, f.props_len, "KEYS", 4, &keys, &keys_len);
            if (keys != NULL) {
                break; /* messages with keys go the Python way (IndexService.build) */
            }
            property_value(f.props, f.props_len, "UNIQ_KEY", 8, &uniq, &uniq_len);
        }
        int has_unit = kind == 0 || kind == TRANSACTION_COMMIT_TYPE;
        if (!has_unit && uniq == NULL) {
            position += f.total;
            count++;
            continue;
        }
        PyObject *raw_topic = PyBytes_FromStringAndSize((const char *)f.topic, f.topic_len);
        PyObject *key = raw_topic == NULL ? NULL : Py_BuildValue("(Oi)", raw_topic, (int)f.queue_id);
        if (key == NULL) {
            Py_XDECREF(raw_topic);
            failed = 1;
            break;
        }
        PyObject *topic = NULL;
        int stop = 0;
        if (has_unit) {
            PyObject *queue = PyDict_GetItemWithError(queues, key); /* borrowed */
            long long max_physical = -1;
            if (queue != NULL) {
                PyObject *max_value = PyObject_GetAttr(queue, max_name);
                max_physical = max_value == NULL ? -1 : PyLong_AsLongLong(max_value);
                Py_XDECREF(max_value);
            }
            if (PyErr_Occurred()) {
                failed = 1;
            } else if (queue == NULL) {
                missing = key;
                key = NULL;
            } else if (f.physical + f.total > max_physical) {
                stop = 1;
            }
        }
        if (!failed && missing == NULL && !stop && uniq != NULL) {
            topic = PyDict_GetItemWithError(topic_names, raw_topic); /* borrowed */
            if (topic == NULL) {
                if (PyErr_Occurred()) {
                    failed = 1;
                } else {
                    missing = key;
                    key = NULL;
                }
            } else if (append_new(keys_out, unique_key_entry(topic, uniq, uniq_len, &f)) < 0) {
                failed = 1;
            }
        }
        Py_XDECREF(key);
        Py_DECREF(raw_topic);
        if (failed || missing != NULL || stop) {
            break;
        }
        position += f.total;
        count++;
    }
    PyBuffer_Release(&view);
    if (failed) {
        Py_XDECREF(missing);
        return NULL;
    }
    if (missing == NULL) {
        Py_INCREF(Py_None);
        missing = Py_None;
    }
    return Py_BuildValue("(LLN)", position - start, count, missing);
}

static PyObject *
index_relink(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "index_relink takes 4 arguments");
        return NULL;
    }
    long long hash_slots, index_count, last_offset;
    if (ranged(args[1], 1, INT32_HIGH, "hash_slots", &hash_slots) < 0
        || ranged(args[2], 1, INT32_HIGH, "index_count", &index_count) < 0
        || ranged(args[3], INT64_MIN, INT64_MAX, "begin_offset", &last_offset) < 0) {
        return NULL;
    }
    Py_buffer view;
    long long entries_at = index_buffer(args[0], &view, hash_slots, index_count, "index_relink");
    if (entries_at < 0) {
        return NULL;
    }
    unsigned char *slots = (unsigned char *)view.buf + INDEX_HEADER_BYTES;
    const unsigned char *entries = (const unsigned char *)view.buf + entries_at;
    memset(slots, 0, (size_t)(hash_slots * INDEX_SLOT_BYTES));
    long long used_slots = 0, kept = 1, last_time_diff = 0;
    for (long long number = 1; number < index_count; number++) {
        const unsigned char *entry = entries + number * INDEX_ENTRY_BYTES;
        int32_t key_hash = get32(entry);
        int64_t offset = get64(entry + 4);
        int32_t time_diff = get32(entry + 12);
        if (offset < last_offset || time_diff < 0 || key_hash < 0) {
            break;
        }
        unsigned char *slot = slots + (key_hash % hash_slots) * INDEX_SLOT_BYTES;
        if (get32(slot) == 0) {
            used_slots++;
        }
        put32(slot, (uint32_t)number);
        last_offset = offset;
        last_time_diff = time_diff;
        kept = number + 1;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(LLLL)", kept, used_slots, last_offset, last_time_diff);
}

static PyMethodDef methods[] = {
    {"java_string_hash", java_string_hash, METH_O, "Java's String.hashCode() of a str, signed."},
    {"encode_record_into", (PyCFunction)(void (*)(void))encode_record_into, METH_FASTCALL,
     "Write one V1 CommitLog record into a writable buffer; returns its length."},
    {"dispatch_fields", (PyCFunction)(void (*)(void))dispatch_fields, METH_FASTCALL,
     "The dispatch fields of a well-formed V1 record, or None."},
    {"find_properties", (PyCFunction)(void (*)(void))find_properties, METH_FASTCALL,
     "The values of a few names in an encoded property string (None where absent)."},
    {"dispatch_run", (PyCFunction)(void (*)(void))dispatch_run, METH_FASTCALL,
     "Write the ConsumeQueue units of consecutive records of one queue; returns where it stopped."},
    {"dispatch_runs", (PyCFunction)(void (*)(void))dispatch_runs, METH_FASTCALL,
     "dispatch_run over records of several queues' open runs, interleaved; returns where it stopped."},
    {"walk_records", (PyCFunction)(void (*)(void))walk_records, METH_FASTCALL,
     "Frame consecutive records by MAGICCODE and TOTALSIZE: (positions, end, stop index)."},
    {"index_put_unique_keys", (PyCFunction)(void (*)(void))index_put_unique_keys, METH_FASTCALL,
     "Write the IndexFile entries of (topic, key, offset, store time) entries until the file is full."},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL,
     "Write one IndexFile entry for a key and point its slot at it; returns the previous entry number."},
    {"frame_messages", (PyCFunction)(void (*)(void))frame_messages, METH_FASTCALL,
     "Recovery's scan of consecutive intact V1 messages: (position after the last, count)."},
    {"covered_run", (PyCFunction)(void (*)(void))covered_run, METH_FASTCALL,
     "Consecutive records re-dispatch may skip: (consumed, count, missing queue key or None)."},
    {"index_relink", (PyCFunction)(void (*)(void))index_relink, METH_FASTCALL,
     "Rebuild an IndexFile's slots from its entries: (kept, used slots, last offset, last time diff)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_record_speedups",
    .m_doc = "The CommitLog record's hot steps in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__record_speedups(void)
{
    return PyModule_Create(&module);
}
