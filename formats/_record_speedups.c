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
 * index_put(buffer, hash_slots, index_count, key: str, physical_offset, time_diff) -> int
 *     formats.index_entry.python_index_put: entry `index_count` of an IndexFile for `key`, and its
 *     slot pointed at it; returns the bucket's previous newest entry (0: none). ValueError when the
 *     entry or slot would fall outside the buffer (nothing written).
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
    PyObject *result = NULL;
    if (limit > view.len) {
        limit = view.len;
    }
    if (position < 0 || limit - position < FIXED_LENGTH_V4_BYTES) {
        goto none;
    }
    const unsigned char *p = (const unsigned char *)view.buf + position;
    Py_ssize_t room = limit - position;
    int32_t total = get32(p);
    int32_t sysflag = get32(p + 36);
    if (get32(p + 4) != MESSAGE_MAGIC_CODE || get64(p + 28) != expected || total < FIXED_LENGTH_V4_BYTES
        || total > room) {
        goto none;
    }
    Py_ssize_t born_len = (sysflag & BORNHOST_V6_FLAG) ? 20 : 8;
    Py_ssize_t store_len = (sysflag & STOREHOSTADDRESS_V6_FLAG) ? 20 : 8;
    Py_ssize_t body_at = HEADER_WITHOUT_HOSTS_BYTES + born_len + store_len;
    if (body_at + 3 > total) {
        goto none;
    }
    int64_t store_ts = get64(p + BORN_HOST_AT + born_len);
    int32_t body_len = get32(p + body_at - 4);
    if (body_len < 0 || body_at + (Py_ssize_t)body_len + 3 > total) {
        goto none;
    }
    Py_ssize_t topic_at = body_at + body_len;
    Py_ssize_t topic_len = p[topic_at];
    Py_ssize_t props_at = topic_at + 1 + topic_len;
    if (topic_len > TOPIC_LENGTH_MAX || props_at + 2 > total) {
        goto none;
    }
    Py_ssize_t props_len = (Py_ssize_t)(int16_t)(((uint16_t)p[props_at] << 8) | p[props_at + 1]);
    if (props_len < 0 || props_at + 2 + props_len != total) {
        goto none;
    }
    result = Py_BuildValue(
        "(iiLLiLy#y#)",
        total,
        get32(p + 12),
        (long long)get64(p + 20),
        (long long)get64(p + 28),
        sysflag,
        (long long)store_ts,
        (const char *)p + topic_at + 1,
        topic_len,
        (const char *)p + props_at + 2,
        props_len);
    PyBuffer_Release(&view);
    return result;
none:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

#define INDEX_HEADER_BYTES 40
#define INDEX_SLOT_BYTES 4
#define INDEX_ENTRY_BYTES 20

/* h = 31*h + c over the UTF-16 code units of `text` (a str), 32-bit wrap. */
static uint32_t
java_hash_of(PyObject *text)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    uint32_t h = 0;
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
    /* IndexFile's keyHash: Math.abs(hashCode), Integer.MIN_VALUE read as 0 (formats.java_hash). */
    int32_t signed_hash = (int32_t)java_hash_of(args[3]);
    int32_t key_hash = signed_hash == INT32_MIN ? 0 : (signed_hash < 0 ? -signed_hash : signed_hash);
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

static PyMethodDef methods[] = {
    {"java_string_hash", java_string_hash, METH_O, "Java's String.hashCode() of a str, signed."},
    {"encode_record_into", (PyCFunction)(void (*)(void))encode_record_into, METH_FASTCALL,
     "Write one V1 CommitLog record into a writable buffer; returns its length."},
    {"dispatch_fields", (PyCFunction)(void (*)(void))dispatch_fields, METH_FASTCALL,
     "The dispatch fields of a well-formed V1 record, or None."},
    {"find_properties", (PyCFunction)(void (*)(void))find_properties, METH_FASTCALL,
     "The values of a few names in an encoded property string (None where absent)."},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL,
     "Write one IndexFile entry for a key and point its slot at it; returns the previous entry number."},
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
