/* A SEND_BATCH_MESSAGE body written as CommitLog records, in C (optional; shoal.formats.batch_records
 * holds the Python reference, which the same tests run against: tests/formats/test_batch_records.py).
 *
 * Why C: a batch of 64 messages cost the broker's event loop about 5 us per message in Python
 * (decoding each block into objects, joining its properties, checking and encoding its record,
 * re-reading what was written), as much as a whole pipelined single send costs the C lane.
 * Separate from _record_speedups because it links zlib (the body CRC): without zlib's headers only
 * this module is missing, and the broker takes the Python path for batches alone.
 *
 * batch_record_sizes(body, shared_properties, topic_len, hosts_len, count_max)
 *         -> (sizes: list[int], bodies_total: int, properties_max: int)
 *     formats.batch_records.python_batch_record_sizes: the length of the record each block becomes
 *     (its properties joined with the batch's shared ones, `hosts_len` the born and store host
 *     fields together), the sum of the bodies and the longest joined property string. ValueError
 *     with formats.batch's message for a body that is not a run of 1..count_max blocks.
 * encode_batch_into(buffer, position, body, shared_properties, topic, queue_id, first_queue_offset,
 *                   first_physical_offset, sysflag, born_timestamp, born_host, store_timestamp,
 *                   store_host, reconsume_times) -> int
 *     formats.batch_records.python_encode_batch_into: every block as one V1 record, one after the
 *     other from `position`, with consecutive queue offsets; returns the bytes written. Nothing is
 *     written (ValueError) unless every record fits its fields and all of them fit the buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "_record_layout.h"

#define BLOCK_HEADER_BYTES 20             /* TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLENGTH */
#define BLOCK_FIXED_BYTES 22              /* ... and PROPERTIESLENGTH */
#define PROPERTY_SEPARATOR 0x02

/* One block of a batch body, framed and checked as formats.batch.decode_batch_body checks it. */
typedef struct {
    Py_ssize_t body_at, body_len, props_at, props_len, end;
    int32_t flag;
} Block;

/* The block at `position` (index `index`, for the message); -1 with ValueError set when it does not frame. */
static int
read_block(const unsigned char *data, Py_ssize_t len, Py_ssize_t position, Py_ssize_t index, Block *block)
{
    if (len - position < BLOCK_FIXED_BYTES) {
        PyErr_Format(PyExc_ValueError, "batch block %zd is truncated at byte %zd", index, position);
        return -1;
    }
    int32_t total = get32(data + position);
    int32_t body_len = get32(data + position + 16);
    Py_ssize_t body_at = position + BLOCK_HEADER_BYTES;
    if (body_len < 0 || body_at + (Py_ssize_t)body_len + 2 > len) {
        PyErr_Format(PyExc_ValueError, "batch block %zd has a bad BODYLENGTH %d", index, (int)body_len);
        return -1;
    }
    Py_ssize_t props_at = body_at + body_len;
    int16_t props_len = get16(data + props_at);
    Py_ssize_t end = props_at + 2 + props_len;
    if (props_len < 0 || end > len || (Py_ssize_t)total != end - position) {
        PyErr_Format(PyExc_ValueError, "batch block %zd has TOTALSIZE %d but spans %zd", index, (int)total,
                     end - position);
        return -1;
    }
    block->body_at = body_at;
    block->body_len = body_len;
    block->props_at = props_at + 2;
    block->props_len = props_len;
    block->end = end;
    block->flag = get32(data + position + 12);
    return 0;
}

/* The length of a block's properties joined with `shared_len` bytes of shared ones (formats.properties
 * join_properties: a separator between unless the block's already ends with one; an empty side gives the other). */
static Py_ssize_t
joined_length(const unsigned char *data, const Block *block, Py_ssize_t shared_len)
{
    if (block->props_len == 0 || shared_len == 0) {
        return block->props_len + shared_len;
    }
    int separator = data[block->props_at + block->props_len - 1] != PROPERTY_SEPARATOR;
    return block->props_len + separator + shared_len;
}

static int
get_ssize(PyObject *value, Py_ssize_t low, Py_ssize_t high, const char *name, Py_ssize_t *out)
{
    Py_ssize_t v = PyLong_AsSsize_t(value);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < low || v > high) {
        PyErr_Format(PyExc_ValueError, "%s out of range", name);
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *
batch_record_sizes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "batch_record_sizes takes 5 arguments");
        return NULL;
    }
    Py_ssize_t topic_len, hosts_len, count_max;
    if (get_ssize(args[2], 0, 255, "topic_len", &topic_len) < 0
        || get_ssize(args[3], 16, 40, "hosts_len", &hosts_len) < 0
        || get_ssize(args[4], 1, PY_SSIZE_T_MAX, "count_max", &count_max) < 0) {
        return NULL;
    }
    Py_buffer body = {0}, shared = {0};
    if (PyObject_GetBuffer(args[1], &shared, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Py_ssize_t shared_len = shared.len;
    PyBuffer_Release(&shared);
    if (PyObject_GetBuffer(args[0], &body, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *data = body.buf;
    PyObject *sizes = PyList_New(0);
    PyObject *result = NULL;
    if (sizes == NULL) {
        goto done;
    }
    Py_ssize_t position = 0, count = 0, props_max = 0;
    long long bodies_total = 0;
    while (position < body.len) {
        if (count >= count_max) {
            PyErr_Format(PyExc_ValueError, "batch holds more than %zd messages", count_max);
            goto done;
        }
        Block block;
        if (read_block(data, body.len, position, count, &block) < 0) {
            goto done;
        }
        Py_ssize_t props = joined_length(data, &block, shared_len);
        if (props > props_max) {
            props_max = props;
        }
        bodies_total += block.body_len;
        PyObject *size = PyLong_FromSsize_t(FIXED_LENGTH_V4_BYTES + block.body_len + topic_len + props + hosts_len - 16);
        if (size == NULL || PyList_Append(sizes, size) < 0) {
            Py_XDECREF(size);
            goto done;
        }
        Py_DECREF(size);
        position = block.end;
        count++;
    }
    if (count == 0) {
        PyErr_SetString(PyExc_ValueError, "batch body holds no message");
        goto done;
    }
    result = Py_BuildValue("(OLn)", sizes, bodies_total, props_max);
done:
    Py_XDECREF(sizes);
    PyBuffer_Release(&body);
    return result;
}

static PyObject *
encode_batch_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "encode_batch_into takes 14 arguments");
        return NULL;
    }
    long long position, queue_id, first_queue_offset, first_physical, sysflag, born_ts, store_ts, reconsume;
    if (ranged(args[1], 0, PY_SSIZE_T_MAX, "position", &position) < 0
        || ranged(args[5], INT32_LOW, INT32_HIGH, "queue_id", &queue_id) < 0
        || ranged(args[6], 0, INT64_MAX / 2, "first_queue_offset", &first_queue_offset) < 0
        || ranged(args[7], 0, INT64_MAX / 2, "first_physical_offset", &first_physical) < 0
        || ranged(args[8], INT32_LOW, INT32_HIGH, "sysflag", &sysflag) < 0
        || ranged(args[9], INT64_MIN, INT64_MAX, "born_timestamp", &born_ts) < 0
        || ranged(args[11], INT64_MIN, INT64_MAX, "store_timestamp", &store_ts) < 0
        || ranged(args[13], INT32_LOW, INT32_HIGH, "reconsume_times", &reconsume) < 0) {
        return NULL;
    }
    Py_buffer out = {0}, body = {0}, shared = {0}, topic = {0}, born = {0}, store = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &body, PyBUF_SIMPLE) < 0 || PyObject_GetBuffer(args[3], &shared, PyBUF_SIMPLE) < 0
        || PyObject_GetBuffer(args[4], &topic, PyBUF_SIMPLE) < 0 || PyObject_GetBuffer(args[10], &born, PyBUF_SIMPLE) < 0
        || PyObject_GetBuffer(args[12], &store, PyBUF_SIMPLE) < 0) {
        goto done;
    }
    if ((born.len != 8 && born.len != 20) || (store.len != 8 && store.len != 20)) {
        PyErr_SetString(PyExc_ValueError, "a host is 8 (IPv4) or 20 (IPv6) bytes");
        goto done;
    }
    if (((sysflag & BORNHOST_V6_FLAG) != 0) != (born.len == 20)
        || ((sysflag & STOREHOSTADDRESS_V6_FLAG) != 0) != (store.len == 20)) {
        /* A decoder places every field after the hosts by these bits: the records would not decode. */
        PyErr_SetString(PyExc_ValueError, "the SYSFLAG host bits do not match the hosts' lengths");
        goto done;
    }
    if (topic.len < 1 || topic.len > TOPIC_LENGTH_MAX) {
        PyErr_SetString(PyExc_ValueError, "topic longer than its length field");
        goto done;
    }
    const unsigned char *data = body.buf;
    const unsigned char *shared_data = shared.buf;
    /* First pass: every block frames, every record fits its fields, all of them fit the buffer. */
    long long total = 0;
    Py_ssize_t at = 0, count = 0;
    while (at < body.len) {
        Block block;
        if (read_block(data, body.len, at, count, &block) < 0) {
            goto done;
        }
        Py_ssize_t props = joined_length(data, &block, shared.len);
        if (props > PROPERTIES_LENGTH_MAX) {
            PyErr_Format(PyExc_ValueError, "batch record %zd: properties longer than their length field", count);
            goto done;
        }
        total += HEADER_WITHOUT_HOSTS_BYTES + born.len + store.len + block.body_len + 1 + topic.len + 2 + props;
        if (total > INT32_HIGH) {
            PyErr_SetString(PyExc_ValueError, "the batch's records are longer than a segment can be");
            goto done;
        }
        at = block.end;
        count++;
    }
    if (count == 0) {
        PyErr_SetString(PyExc_ValueError, "batch body holds no message");
        goto done;
    }
    if (position > out.len || total > out.len - position) {
        PyErr_SetString(PyExc_ValueError, "the records do not fit the buffer");
        goto done;
    }
    /* Second pass: write them. */
    unsigned char *p = (unsigned char *)out.buf + position;
    at = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        Block block;
        if (read_block(data, body.len, at, index, &block) < 0) { /* the buffer is ours: cannot change */
            goto done;
        }
        Py_ssize_t props = joined_length(data, &block, shared.len);
        Py_ssize_t length = HEADER_WITHOUT_HOSTS_BYTES + born.len + store.len + block.body_len + 1 + topic.len + 2 + props;
        const unsigned char *record_body = data + block.body_at;
        uint32_t crc = (uint32_t)crc32(0L, record_body, (uInt)block.body_len) & 0x7FFFFFFFu;
        put32(p, (uint32_t)length);
        put32(p + 4, (uint32_t)MESSAGE_MAGIC_CODE);
        put32(p + 8, crc);
        put32(p + 12, (uint32_t)queue_id);
        put32(p + 16, (uint32_t)block.flag);
        put64(p + 20, (uint64_t)(first_queue_offset + index));
        put64(p + 28, (uint64_t)(first_physical + (p - ((unsigned char *)out.buf + position))));
        put32(p + 36, (uint32_t)sysflag);
        put64(p + 40, (uint64_t)born_ts);
        unsigned char *w = p + BORN_HOST_AT;
        memcpy(w, born.buf, (size_t)born.len);
        w += born.len;
        put64(w, (uint64_t)store_ts);
        w += 8;
        memcpy(w, store.buf, (size_t)store.len);
        w += store.len;
        put32(w, (uint32_t)reconsume);
        put64(w + 4, 0);  /* PREPAREDTRANSACTIONOFFSET: a batch is never transactional */
        put32(w + 12, (uint32_t)block.body_len);
        w += 16;
        memcpy(w, record_body, (size_t)block.body_len);
        w += block.body_len;
        *w++ = (unsigned char)topic.len;
        memcpy(w, topic.buf, (size_t)topic.len);
        w += topic.len;
        w[0] = (unsigned char)(props >> 8);
        w[1] = (unsigned char)props;
        w += 2;
        if (block.props_len > 0) {
            memcpy(w, data + block.props_at, (size_t)block.props_len);
            w += block.props_len;
            if (shared.len > 0 && data[block.props_at + block.props_len - 1] != PROPERTY_SEPARATOR) {
                *w++ = PROPERTY_SEPARATOR;
            }
        }
        memcpy(w, shared_data, (size_t)shared.len);
        p += length;
        at = block.end;
    }
    result = PyLong_FromLongLong(total);
done:
    PyBuffer_Release(&out);
    if (body.obj) PyBuffer_Release(&body);
    if (shared.obj) PyBuffer_Release(&shared);
    if (topic.obj) PyBuffer_Release(&topic);
    if (born.obj) PyBuffer_Release(&born);
    if (store.obj) PyBuffer_Release(&store);
    return result;
}

static PyMethodDef methods[] = {
    {"batch_record_sizes", (PyCFunction)(void (*)(void))batch_record_sizes, METH_FASTCALL,
     "The record length of each block of a batch body, the bodies' sum and the longest properties."},
    {"encode_batch_into", (PyCFunction)(void (*)(void))encode_batch_into, METH_FASTCALL,
     "Write every block of a batch body as a V1 CommitLog record; returns the bytes written."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_batch_speedups",
    .m_doc = "A batch body written as CommitLog records, in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__batch_speedups(void)
{
    return PyModule_Create(&module);
}
