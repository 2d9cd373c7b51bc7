/* The client's record decoder in C (optional; shoal.client.message.decode_messages is the Python
 * reference, and tests/client/test_decode_speedups.py holds the two to each other).
 *
 * Why C: a consumer decodes every message it receives; in Python that is a header unpack, a
 * property-string split into a dict and two dozen attribute stores per record, and it was about
 * 60 % of a pull consumer's CPU (docs/performance.md, "The consumer's decode").
 *
 * decode_records(data, cls, slots, hosts, broker_name, extra_properties) -> list | None
 *     Every record of `data` (concatenated V1 records, as a pull or a query answers) as a new `cls`
 *     instance, its fields filled in the order of shoal.client.message.DECODED_FIELDS: `slots` are
 *     those fields' member descriptors (each an object slot of `cls` or a base). `hosts` maps a
 *     BORNHOST/STOREHOST's bytes to ("ip:port", the offset message id's hex prefix); `extra_properties`
 *     (a dict or None) is added to each message's properties.
 *     None when the Python reference must decide: a record that is not a well-formed V1 record
 *     (the reference names the problem), a compressed body, text that is not UTF-8, or a host
 *     missing from `hosts` (the reference adds it). Nothing is returned in part.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "../formats/_record_layout.h"

#define COMPRESSED_FLAG 0x1
#define FIELD_COUNT 23
#define PROPERTY_CACHE_MAX 32 /* names and values remembered from the previous record of a body */
#define DELAY_DIGITS_MAX 9    /* client.message._delay_level: a longer DELAY reads as 0 */
#define MESSAGE_ID_OFFSET_DIGITS 16

/* DECODED_FIELDS' order. */
enum {
    F_TOPIC, F_BODY, F_TAGS, F_KEYS, F_PROPERTIES, F_DELAY_TIME_LEVEL, F_FLAG, F_WAIT_STORE_MSG_OK,
    F_QUEUE_ID, F_QUEUE_OFFSET, F_COMMITLOG_OFFSET, F_SYSFLAG, F_BORN_TIMESTAMP, F_BORN_HOST,
    F_STORE_TIMESTAMP, F_STORE_HOST, F_MSG_ID, F_OFFSET_MSG_ID, F_RECONSUME_TIMES,
    F_PREPARED_TRANSACTION_OFFSET, F_BODY_CRC, F_STORE_SIZE, F_BROKER_NAME,
};

static PyObject *s_tags, *s_keys, *s_delay, *s_wait, *s_uniq_key, *s_space;

/* One remembered piece of text: its bytes in the previous record and its str. */
typedef struct {
    const unsigned char *at;
    Py_ssize_t length;
    PyObject *text; /* a reference of its own: a later name of the same record may replace it in the dict */
} Remembered;

/* A host (BORNHOST or STOREHOST) of the previous record and its `hosts` entry. */
typedef struct {
    unsigned char bytes[20];
    Py_ssize_t length;
    PyObject *entry; /* a reference of its own (a collection during the call could run code that edits `hosts`) */
} RememberedHost;

/* The str of `length` UTF-8 bytes (already checked valid), shared with `memo` when the bytes match. */
static PyObject *
text_of(const unsigned char *at, Py_ssize_t length, Remembered *memo)
{
    if (memo != NULL && memo->text != NULL && memo->length == length && memcmp(memo->at, at, (size_t)length) == 0) {
        memo->at = at;
        Py_INCREF(memo->text);
        return memo->text;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)at, length, "strict");
    if (text != NULL && memo != NULL) {
        memo->at = at;
        memo->length = length;
        Py_INCREF(text);
        Py_XSETREF(memo->text, text);
    }
    return text;
}

/* 1 when every byte is ASCII, else 1 if the bytes are valid UTF-8, 0 if not, -1 on error. */
static int
valid_utf8(const unsigned char *at, Py_ssize_t length)
{
    for (Py_ssize_t i = 0; i < length; i++) {
        if (at[i] >= 0x80) {
            PyObject *text = PyUnicode_DecodeUTF8((const char *)at, length, "strict");
            if (text == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    return -1;
                }
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(text);
            return 1;
        }
    }
    return 1;
}

/* formats.properties.decode_properties of valid UTF-8 bytes: segments split on \x02, each name
 * \x01 value with both non-empty (the value may hold \x01), later names winning. */
static PyObject *
properties_of(const unsigned char *data, Py_ssize_t length, Remembered *names, Remembered *values)
{
    PyObject *result = PyDict_New();
    if (result == NULL) {
        return NULL;
    }
    const unsigned char *at = data, *end = data + length;
    int index = 0;
    while (at < end) {
        const unsigned char *segment_end = memchr(at, 0x02, (size_t)(end - at));
        if (segment_end == NULL) {
            segment_end = end;
        }
        const unsigned char *separator = memchr(at, 0x01, (size_t)(segment_end - at));
        if (separator != NULL && separator > at && separator + 1 < segment_end) {
            int cached = index < PROPERTY_CACHE_MAX;
            PyObject *name = text_of(at, separator - at, cached ? &names[index] : NULL);
            PyObject *value = name == NULL ? NULL
                                           : text_of(separator + 1, segment_end - separator - 1,
                                                     cached ? &values[index] : NULL);
            int failed = value == NULL || PyDict_SetItem(result, name, value) < 0;
            Py_XDECREF(name);
            Py_XDECREF(value);
            if (failed) {
                Py_DECREF(result);
                return NULL;
            }
            index++;
        }
        at = segment_end + 1;
    }
    return result;
}

/* The entry of `hosts` for the host bytes at `at`: reused from `memo` when they match; NULL
 * without an error set when the host is not known yet. */
static PyObject *
host_entry(PyObject *hosts, const unsigned char *at, Py_ssize_t length, RememberedHost *memo)
{
    if (memo->entry != NULL && memo->length == length && memcmp(memo->bytes, at, (size_t)length) == 0) {
        return memo->entry;
    }
    PyObject *key = PyBytes_FromStringAndSize((const char *)at, length);
    if (key == NULL) {
        return NULL;
    }
    PyObject *entry = PyDict_GetItemWithError(hosts, key);
    Py_DECREF(key);
    if (entry == NULL) {
        return NULL;
    }
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(entry, 0))
        || !PyUnicode_Check(PyTuple_GET_ITEM(entry, 1)) || !PyUnicode_IS_ASCII(PyTuple_GET_ITEM(entry, 1))) {
        PyErr_SetString(PyExc_TypeError, "hosts entries must be (host: str, ASCII id prefix: str)");
        return NULL;
    }
    memcpy(memo->bytes, at, (size_t)length);
    memo->length = length;
    Py_INCREF(entry);
    Py_XSETREF(memo->entry, entry);
    return entry;
}

/* The offset message id: the store host's hex prefix and the CommitLog offset in 16 hex digits. */
static PyObject *
offset_message_id(PyObject *prefix, int64_t offset)
{
    static const char hex[] = "0123456789ABCDEF";
    Py_ssize_t prefix_length = PyUnicode_GET_LENGTH(prefix);
    PyObject *id = PyUnicode_New(prefix_length + MESSAGE_ID_OFFSET_DIGITS, 127);
    if (id == NULL) {
        return NULL;
    }
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(id);
    memcpy(out, PyUnicode_1BYTE_DATA(prefix), (size_t)prefix_length);
    uint64_t value = (uint64_t)offset;
    for (int i = MESSAGE_ID_OFFSET_DIGITS - 1; i >= 0; i--) {
        out[prefix_length + i] = (Py_UCS1)hex[value & 0xF];
        value >>= 4;
    }
    return id;
}

/* KEYS split on spaces, empty parts dropped (Message.__post_init__). */
static PyObject *
keys_of(PyObject *keys)
{
    if (keys == NULL) {
        return PyTuple_New(0);
    }
    PyObject *parts = PyUnicode_Split(keys, s_space, -1);
    if (parts == NULL) {
        return NULL;
    }
    Py_ssize_t kept = 0, count = PyList_GET_SIZE(parts);
    for (Py_ssize_t i = 0; i < count; i++) {
        kept += PyUnicode_GET_LENGTH(PyList_GET_ITEM(parts, i)) > 0;
    }
    PyObject *result = PyTuple_New(kept);
    if (result != NULL) {
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *part = PyList_GET_ITEM(parts, i);
            if (PyUnicode_GET_LENGTH(part) > 0) {
                Py_INCREF(part);
                PyTuple_SET_ITEM(result, at++, part);
            }
        }
    }
    Py_DECREF(parts);
    return result;
}

/* client.message._delay_level: DELAY as a number of at most 9 ASCII digits, else 0. */
static long
delay_level_of(PyObject *text)
{
    if (text == NULL || !PyUnicode_IS_ASCII(text)) {
        return 0;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    const Py_UCS1 *digits = PyUnicode_1BYTE_DATA(text);
    if (length == 0 || length > DELAY_DIGITS_MAX) {
        return 0;
    }
    long level = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        if (digits[i] < '0' || digits[i] > '9') {
            return 0;
        }
        level = level * 10 + (digits[i] - '0');
    }
    return level;
}

/* The member offsets of `slots` in `cls`; -1 with TypeError unless each is a writable object slot. */
static int
slot_offsets(PyTypeObject *cls, PyObject *slots, Py_ssize_t *offsets)
{
    if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != FIELD_COUNT) {
        PyErr_Format(PyExc_TypeError, "slots must be a tuple of %d member descriptors", FIELD_COUNT);
        return -1;
    }
    for (Py_ssize_t i = 0; i < FIELD_COUNT; i++) {
        PyObject *slot = PyTuple_GET_ITEM(slots, i);
        if (Py_TYPE(slot) != &PyMemberDescr_Type) {
            PyErr_SetString(PyExc_TypeError, "slots must be member descriptors");
            return -1;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)slot)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY)
            || !PyType_IsSubtype(cls, PyDescr_TYPE(slot))) {
            PyErr_SetString(PyExc_TypeError, "each slot must be a writable object slot of the class");
            return -1;
        }
        offsets[i] = member->offset;
    }
    return 0;
}

#define SET(field, value)                                                                      \
    do {                                                                                       \
        PyObject *set_value_ = (value);                                                        \
        if (set_value_ == NULL) {                                                              \
            goto error;                                                                        \
        }                                                                                      \
        *(PyObject **)((char *)message + offsets[field]) = set_value_;                         \
    } while (0)

#define SET_BORROWED(field, value)                                                             \
    do {                                                                                       \
        PyObject *set_borrowed_ = (value);                                                     \
        Py_INCREF(set_borrowed_);                                                              \
        *(PyObject **)((char *)message + offsets[field]) = set_borrowed_;                      \
    } while (0)

static PyObject *
decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "decode_records takes 6 arguments");
        return NULL;
    }
    if (!PyType_Check(args[1]) || !PyDict_Check(args[3]) || !PyUnicode_Check(args[4])
        || (args[5] != Py_None && !PyDict_Check(args[5]))) {
        PyErr_SetString(PyExc_TypeError, "decode_records(data, cls: type, slots, hosts: dict, broker_name: str, "
                                         "extra_properties: dict | None)");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[1];
    PyObject *hosts = args[3], *broker_name = args[4], *extra = args[5] == Py_None ? NULL : args[5];
    Py_ssize_t offsets[FIELD_COUNT];
    if (slot_offsets(cls, args[2], offsets) < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *messages = PyList_New(0);
    if (messages == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Remembered topic_memo = {0}, names[PROPERTY_CACHE_MAX] = {{0}}, values[PROPERTY_CACHE_MAX] = {{0}};
    RememberedHost born_memo = {{0}, 0, NULL}, store_memo = {{0}, 0, NULL};
    const unsigned char *data = view.buf;
    Py_ssize_t position = 0, end = view.len;
    PyObject *message = NULL;
    while (position < end) {
        const unsigned char *p = data + position;
        Py_ssize_t room = end - position;
        if (room < FIXED_LENGTH_V4_BYTES) {
            goto refuse;
        }
        int32_t total = get32(p);
        int32_t sysflag = get32(p + 36);
        if (get32(p + 4) != MESSAGE_MAGIC_CODE || total < FIXED_LENGTH_V4_BYTES || total > room
            || (sysflag & COMPRESSED_FLAG)) {
            goto refuse;
        }
        Py_ssize_t born_length = (sysflag & BORNHOST_V6_FLAG) ? 20 : 8;
        Py_ssize_t store_length = (sysflag & STOREHOSTADDRESS_V6_FLAG) ? 20 : 8;
        Py_ssize_t store_at = BORN_HOST_AT + born_length + 8;
        Py_ssize_t body_at = HEADER_WITHOUT_HOSTS_BYTES + born_length + store_length;
        if (body_at + 3 > total) {
            goto refuse;
        }
        int32_t body_length = get32(p + body_at - 4);
        if (body_length < 0 || body_at + (Py_ssize_t)body_length + 3 > total) {
            goto refuse;
        }
        Py_ssize_t topic_at = body_at + body_length + 1;
        Py_ssize_t topic_length = p[topic_at - 1];
        Py_ssize_t properties_at = topic_at + topic_length + 2;
        if (topic_length > TOPIC_LENGTH_MAX || properties_at > total
            || properties_at + (Py_ssize_t)get16(p + properties_at - 2) != total) {
            goto refuse;
        }
        int valid = valid_utf8(p + properties_at, total - properties_at);
        if (valid <= 0) {
            goto stop; /* refused, or an error set */
        }
        PyObject *born = host_entry(hosts, p + BORN_HOST_AT, born_length, &born_memo);
        PyObject *store = born == NULL ? NULL : host_entry(hosts, p + store_at, store_length, &store_memo);
        if (store == NULL) {
            goto stop; /* an unknown host (the reference adds it), or an error set */
        }
        PyObject *topic = text_of(p + topic_at, topic_length, &topic_memo);
        if (topic == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                goto fail;
            }
            PyErr_Clear();
            goto refuse;
        }
        message = cls->tp_alloc(cls, 0);
        if (message == NULL) {
            Py_DECREF(topic);
            goto fail;
        }
        SET(F_TOPIC, topic);
        SET(F_BODY, PyBytes_FromStringAndSize((const char *)p + body_at, body_length));
        PyObject *properties = properties_of(p + properties_at, total - properties_at, names, values);
        SET(F_PROPERTIES, properties);
        PyObject *tags = PyDict_GetItemWithError(properties, s_tags);
        if (tags == NULL && PyErr_Occurred()) {
            goto error;
        }
        SET_BORROWED(F_TAGS, tags == NULL ? Py_None : tags);
        PyObject *keys = PyDict_GetItemWithError(properties, s_keys);
        if (keys == NULL && PyErr_Occurred()) {
            goto error;
        }
        SET(F_KEYS, keys_of(keys));
        PyObject *delay = PyDict_GetItemWithError(properties, s_delay);
        PyObject *wait = delay == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(properties, s_wait);
        PyObject *uniq = PyErr_Occurred() ? NULL : PyDict_GetItemWithError(properties, s_uniq_key);
        if (PyErr_Occurred()) {
            goto error;
        }
        SET(F_DELAY_TIME_LEVEL, PyLong_FromLong(delay_level_of(delay)));
        SET(F_FLAG, PyLong_FromLong(get32(p + 16)));
        SET_BORROWED(F_WAIT_STORE_MSG_OK,
                     wait != NULL && PyUnicode_CompareWithASCIIString(wait, "false") == 0 ? Py_False : Py_True);
        SET(F_QUEUE_ID, PyLong_FromLong(get32(p + 12)));
        SET(F_QUEUE_OFFSET, PyLong_FromLongLong(get64(p + 20)));
        int64_t commitlog_offset = get64(p + 28);
        SET(F_COMMITLOG_OFFSET, PyLong_FromLongLong(commitlog_offset));
        SET(F_SYSFLAG, PyLong_FromLong(sysflag));
        SET(F_BORN_TIMESTAMP, PyLong_FromLongLong(get64(p + 40)));
        SET_BORROWED(F_BORN_HOST, PyTuple_GET_ITEM(born, 0));
        SET(F_STORE_TIMESTAMP, PyLong_FromLongLong(get64(p + BORN_HOST_AT + born_length)));
        SET_BORROWED(F_STORE_HOST, PyTuple_GET_ITEM(store, 0));
        PyObject *own_id = offset_message_id(PyTuple_GET_ITEM(store, 1), commitlog_offset);
        SET(F_OFFSET_MSG_ID, own_id);
        SET_BORROWED(F_MSG_ID, uniq != NULL ? uniq : own_id);
        SET(F_RECONSUME_TIMES, PyLong_FromLong(get32(p + store_at + store_length)));
        SET(F_PREPARED_TRANSACTION_OFFSET, PyLong_FromLongLong(get64(p + store_at + store_length + 4)));
        SET(F_BODY_CRC, PyLong_FromLong(get32(p + 8)));
        SET(F_STORE_SIZE, PyLong_FromLong(total));
        SET_BORROWED(F_BROKER_NAME, broker_name);
        if (extra != NULL && PyDict_Update(properties, extra) < 0) { /* after the fields, as the reference */
            goto error;
        }
        int failed = PyList_Append(messages, message);
        Py_CLEAR(message);
        if (failed) {
            goto fail;
        }
        position += total;
    }
    goto done;
error:
    Py_CLEAR(message);
fail:
    Py_CLEAR(messages);
    goto done;
stop:
    if (PyErr_Occurred()) {
        goto fail;
    }
refuse:
    Py_DECREF(messages);
    Py_INCREF(Py_None);
    messages = Py_None;
done:
    Py_XDECREF(topic_memo.text);
    for (int i = 0; i < PROPERTY_CACHE_MAX; i++) {
        Py_XDECREF(names[i].text);
        Py_XDECREF(values[i].text);
    }
    Py_XDECREF(born_memo.entry);
    Py_XDECREF(store_memo.entry);
    PyBuffer_Release(&view);
    return messages;
}

static PyMethodDef methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "Every V1 record of a pull or query body as a message object, or None for the Python reference."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_decode_speedups",
    .m_doc = "The client's record decoder in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__decode_speedups(void)
{
    s_tags = PyUnicode_InternFromString("TAGS");
    s_keys = PyUnicode_InternFromString("KEYS");
    s_delay = PyUnicode_InternFromString("DELAY");
    s_wait = PyUnicode_InternFromString("WAIT");
    s_uniq_key = PyUnicode_InternFromString("UNIQ_KEY");
    s_space = PyUnicode_InternFromString(" ");
    if (s_tags == NULL || s_keys == NULL || s_delay == NULL || s_wait == NULL || s_uniq_key == NULL
        || s_space == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
